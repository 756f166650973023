// Conv-chain kernels in compiled programs against the reference executor:
// an inverted residual (expand, ReLU6, depthwise stride 1 and 2, ReLU6,
// project, residual Add) and a depthwise -> pointwise pair, each as one
// conv-chain group at many tilings of its space, the rest of the graph
// unfused; run twice (the second run on the pre-packed weights).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusion_space/space.h"
#include "graph/reference_executor.h"
#include "runtime/executor.h"
#include "tests/graph/test_util.h"

namespace fusetune::runtime {
namespace {

constexpr double kChainProgramTolerance = 1e-4;

constexpr const char* kMobileBlocks = R"(graph mobile opset 17 {
  input x: f32[1, 8, 14, 14]
  const we: f32[48, 8, 1, 1]
  const be: f32[48]
  const wd: f32[48, 1, 3, 3]
  const bd: f32[48]
  const wp: f32[8, 48, 1, 1]
  const bp: f32[8]
  const we2: f32[40, 8, 1, 1]
  const wd2: f32[40, 1, 3, 3]
  const wp2: f32[12, 40, 1, 1]
  const wd3: f32[12, 1, 5, 5]
  const wq: f32[20, 12, 1, 1]
  const zero: f32[] = [0]
  const six: f32[] = [6]
  e = Conv(x, we, be)
  re = Clip(e, zero, six)
  d = Conv(re, wd, bd) {group=48, pads=[1, 1, 1, 1]}
  rd = Clip(d, zero, six)
  p = Conv(rd, wp, bp)
  a = Add(p, x)
  e2 = Conv(a, we2)
  r2 = Relu(e2)
  d2 = Conv(r2, wd2) {group=40, pads=[1, 1, 1, 1], strides=[2, 2]}
  s2 = Relu(d2)
  p2 = Conv(s2, wp2)
  d3 = Conv(p2, wd3) {group=12, pads=[2, 2, 2, 2]}
  h3 = HardSwish(d3)
  q = Conv(h3, wq)
  output q
})";

// One group of `chain`, single nodes elsewhere, default tilings but the chain's.
fusion_space::Plan PlanWith(fusion_space::FusionSpace& space, const std::vector<int32_t>& chain,
                            const fusion_space::Tiling& tiling) {
  fusion_space::Plan plan;
  plan.groups.push_back({chain, tiling});
  for (int32_t n = 0; n < static_cast<int32_t>(space.graph().nodes.size()); ++n) {
    if (std::find(chain.begin(), chain.end(), n) != chain.end()) continue;
    const std::vector<int32_t> one = {n};
    plan.groups.push_back({one, space.Tilings(one).Default()});
  }
  EXPECT_TRUE(space.Order(&plan));
  return plan;
}

TEST(ConvChainProgram, ChainsMatchTheReferenceAtManyTilings) {
  graph::Graph g = testing::Parse(kMobileBlocks);
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  fusion_space::FusionSpace space(g, config);
  const graph::TensorMap feeds = graph::RandomFeeds(g, 11);
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok()) << want.error().message();
  const std::vector<std::vector<int32_t>> chains = {
      {0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11, 12, 13}};
  for (const auto& chain : chains) {
    const fusion_space::GroupMatch& m = space.Match(chain);
    ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
    ASSERT_EQ(m.instance.kind, fusion_space::KernelTemplate::kConvChain);
    const std::vector<fusion_space::Tiling>& tilings = space.Tilings(chain).Enumerate();
    ASSERT_FALSE(tilings.empty());
    const size_t step = std::max<size_t>(1, tilings.size() / 12);
    for (size_t i = 0; i < tilings.size(); i += step) {
      const fusion_space::Plan plan = PlanWith(space, chain, tilings[i]);
      ASSERT_TRUE(space.Validate(plan).allowed()) << space.Validate(plan).reason();
      auto exe = KernelProgram::Compile(space, plan);
      ASSERT_TRUE(exe.ok()) << exe.error().message();
      for (int run = 0; run < 2; ++run) {
        auto got = (*exe)->Run(feeds);
        ASSERT_TRUE(got.ok()) << got.error().message();
        EXPECT_LE(testing::ScaledError(got->at("q"), want->outputs.at("q")), kChainProgramTolerance)
            << m.instance.summary << " " << fusion_space::TilingToString(tilings[i]) << " run "
            << run;
      }
    }
  }
}

}  // namespace
}  // namespace fusetune::runtime
