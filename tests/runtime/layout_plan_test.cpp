// Layouts in a program (runtime/layout_plan.h): conv groups that read and
// write NHWC or NCHW16c between them, against the reference executor; the
// transforms placed are those where a reader wants another layout than its
// writer wrote (the graph's input and outputs, a pool, a disagreeing
// neighbour), none between groups that agree; a tiling whose layout cannot
// hold its tensor is an invalid plan.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusion_space/space.h"
#include "fusion_space/tiling_space.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::runtime {
namespace {

using kernels::ActivationLayout;

class LayoutPlanTest : public ::testing::Test {
 protected:
  LayoutPlanTest()
      : g_(testing::Parse(testing::kLayoutCnn)),
        space_(g_, Config()),
        feeds_(graph::RandomFeeds(g_, 5)) {
    auto want = graph::RunReference(g_, feeds_);
    EXPECT_TRUE(want.ok());
    if (want.ok()) want_ = want->outputs;
  }
  static kernels::KernelConfig Config() {
    kernels::KernelConfig c;
    c.local_buffer_bytes = 256 * 1024;
    return c;
  }

  // The greedy plan with each conv group's tiling the first direct one of
  // its space in the layouts `layouts[i]` (conv groups in plan order).
  fusion_space::Plan WithLayouts(
      const std::vector<std::pair<ActivationLayout, ActivationLayout>>& layouts) {
    fusion_space::Plan plan = space_.Greedy();
    size_t conv = 0;
    for (fusion_space::PlanGroup& group : plan.groups) {
      const fusion_space::KernelInstance k = space_.Match(group.nodes).instance;
      if (k.kind != fusion_space::KernelTemplate::kConv) continue;
      const auto [in, out] = layouts.at(conv++);
      const fusion_space::TilingSpace tilings(k, Config());
      for (const fusion_space::Tiling& t : tilings.Enumerate()) {
        const auto& c = std::get<kernels::ConvTiling>(t);
        if (c.algorithm == kernels::ConvAlgorithm::kDirect && c.in_layout == in &&
            c.out_layout == out) {
          group.tiling = t;
          break;
        }
      }
      EXPECT_EQ(std::get<kernels::ConvTiling>(group.tiling).in_layout, in) << k.summary;
    }
    EXPECT_EQ(conv, 3u);
    return plan;
  }

  // Compiles and runs `plan` against the reference; returns its transforms.
  int64_t RunAgainstReference(const fusion_space::Plan& plan) {
    auto exe = KernelProgram::Compile(space_, plan);
    EXPECT_TRUE(exe.ok()) << exe.error().message();
    if (!exe.ok()) return -1;
    RunReport report;
    auto got = (*exe)->Run(feeds_, &report);
    EXPECT_TRUE(got.ok()) << got.error().message();
    if (!got.ok()) return -1;
    for (const auto& [name, w] : want_)
      EXPECT_LE(testing::ScaledError(got->at(name), w), 1e-4) << name;
    int64_t reported = 0;
    for (const StepReport& s : report.steps) reported += s.layout_transform;
    EXPECT_EQ(reported, (*exe)->layout_transforms());
    return (*exe)->layout_transforms();
  }

  graph::Graph g_;
  fusion_space::FusionSpace space_;
  graph::TensorMap feeds_, want_;
};

constexpr auto kNCHW = ActivationLayout::kNCHW;
constexpr auto kNHWC = ActivationLayout::kNHWC;
constexpr auto kBlocked = ActivationLayout::kNCHWc;

TEST_F(LayoutPlanTest, NchwEverywherePlacesNoTransform) {
  EXPECT_EQ(RunAgainstReference(WithLayouts({{kNCHW, kNCHW}, {kNCHW, kNCHW}, {kNCHW, kNCHW}})), 0);
}

TEST_F(LayoutPlanTest, AgreeingConvsShareTheirLayout) {
  // x into NCHW16c once; c0 -> c1 (and c1's residual r0) -> c2 in NCHW16c;
  // the pool reads r1 in NCHW (one transform); c2 (an output) back to NCHW.
  EXPECT_EQ(RunAgainstReference(
                WithLayouts({{kBlocked, kBlocked}, {kBlocked, kBlocked}, {kBlocked, kBlocked}})),
            3);
}

TEST_F(LayoutPlanTest, DisagreeingNeighboursGetATransformEach) {
  // c0 writes r0 in NHWC; c1 reads it in NCHW16c (one transform) and as
  // its residual in NHWC (none), and writes r1 in NHWC; the pool and c2
  // read r1 in NCHW (one transform, one copy both read); c2, an output,
  // writes NHWC (one transform back).
  EXPECT_EQ(RunAgainstReference(WithLayouts({{kNCHW, kNHWC}, {kBlocked, kNHWC}, {kNCHW, kNHWC}})),
            3);
}

TEST_F(LayoutPlanTest, ALayoutThatCannotHoldTheTensorIsAnInvalidPlan) {
  fusion_space::Plan plan = WithLayouts({{kNCHW, kNCHW}, {kNCHW, kNCHW}, {kNCHW, kNCHW}});
  for (fusion_space::PlanGroup& group : plan.groups)
    if (auto* t = std::get_if<kernels::ConvTiling>(&group.tiling)) {
      t->algorithm = kernels::ConvAlgorithm::kIm2colGemm;
      t->in_layout = kNHWC;  // im2col reads NCHW only
      break;
    }
  auto exe = KernelProgram::Compile(space_, plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(exe.error().message().find("invalid plan"), std::string::npos) << exe.error().message();
}

}  // namespace
}  // namespace fusetune::runtime
