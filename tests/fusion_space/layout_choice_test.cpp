// HarmonizeLayouts (search/layout_choice.h): conv groups take the measured
// tiling whose time plus the transforms it causes is least, readers adapting
// to their producers' layouts; the result is a valid plan.
#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "fusion_space/layout_choice.h"
#include "fusion_space/space.h"
#include "fusion_space/tiling_space.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

using kernels::ActivationLayout;
constexpr auto kNCHW = ActivationLayout::kNCHW;
constexpr auto kBlocked = ActivationLayout::kNCHWc;

Tiling Direct(const TilingSpace& tilings, ActivationLayout in, ActivationLayout out) {
  for (const Tiling& t : tilings.Enumerate()) {
    const auto& c = std::get<kernels::ConvTiling>(t);
    if (c.algorithm == kernels::ConvAlgorithm::kDirect && c.in_layout == in && c.out_layout == out)
      return t;
  }
  ADD_FAILURE() << "no direct tiling";
  return tilings.Default();
}

ActivationLayout In(const Tiling& t) { return std::get<kernels::ConvTiling>(t).in_layout; }
ActivationLayout Out(const Tiling& t) { return std::get<kernels::ConvTiling>(t).out_layout; }

using Options = std::vector<std::pair<Tiling, double>>;
// The measured options of the n-th conv group (plan order) from its tilings.
using OptionsOf = std::function<Options(size_t n, const TilingSpace& tilings)>;

// kLayoutCnn's greedy plan (three conv groups) harmonized with each conv
// group's options from `options_of` and transforms of 1 us each; the plan
// and its conv groups' indices.
std::pair<Plan, std::vector<size_t>> Harmonized(const OptionsOf& options_of) {
  graph::Graph g = fusetune::testing::Parse(fusetune::testing::kLayoutCnn);
  kernels::KernelConfig config;
  config.local_buffer_bytes = 256 * 1024;
  FusionSpace space(g, config);
  const Plan greedy = space.Greedy();
  std::vector<Options> measured;
  std::vector<size_t> conv_groups;
  for (size_t i = 0; i < greedy.groups.size(); ++i) {
    const KernelInstance k = space.Match(greedy.groups[i].nodes).instance;
    if (k.kind != KernelTemplate::kConv) continue;
    measured.push_back(options_of(conv_groups.size(), TilingSpace(k, config)));
    conv_groups.push_back(i);
  }
  EXPECT_EQ(conv_groups.size(), 3u);
  auto measured_of = [&](const PlanGroup& group) {
    for (size_t n = 0; n < conv_groups.size(); ++n)
      if (greedy.groups[conv_groups[n]].nodes == group.nodes) return measured[n];
    return Options{};
  };
  TransformCost cost;
  cost.launch_seconds = 1e-6;
  cost.seconds_per_byte = 0;
  Plan plan = HarmonizeLayouts(space, greedy, measured_of, cost);
  EXPECT_TRUE(space.Validate(plan).allowed());
  return {std::move(plan), conv_groups};
}

TEST(HarmonizeLayouts, ReadersAdaptToTheirProducersAndTransformsAreCounted) {
  // Times per conv group (in plan order).
  const auto [plan, conv_groups] = Harmonized([](size_t n, const TilingSpace& tilings) -> Options {
    if (n == 0)  // c0: NCHW16c out is faster
      return {{Direct(tilings, kNCHW, kNCHW), 11e-6}, {Direct(tilings, kNCHW, kBlocked), 10e-6}};
    if (n == 1)  // c1: all NCHW a little slower than NCHW16c through
      return {{Direct(tilings, kNCHW, kNCHW), 10.5e-6}, {Direct(tilings, kBlocked, kBlocked), 10e-6}};
    // c2: writes an output; NCHW16c throughout fastest alone
    return {{Direct(tilings, kNCHW, kNCHW), 6e-6},
            {Direct(tilings, kBlocked, kNCHW), 5.5e-6},
            {Direct(tilings, kBlocked, kBlocked), 5e-6}};
  });
  ASSERT_EQ(conv_groups.size(), 3u);
  // c0 writes NCHW16c (r0 is read by c1 alone, as X and residual); c1 reads
  // it as it is and writes r1 in NCHW16c although the pool needs NCHW (10 +
  // 1 < 10.5 + 2); c2 reads r1 in NCHW16c and writes its output in NCHW.
  const auto& c0 = plan.groups[conv_groups[0]].tiling;
  const auto& c1 = plan.groups[conv_groups[1]].tiling;
  const auto& c2 = plan.groups[conv_groups[2]].tiling;
  EXPECT_EQ(Out(c0), kBlocked);
  EXPECT_EQ(In(c1), kBlocked);
  EXPECT_EQ(Out(c1), kBlocked);
  EXPECT_EQ(In(c2), kBlocked);
  EXPECT_EQ(Out(c2), kNCHW);
}

// A producer looks one step ahead: c0 is a little faster writing NCHW, but
// its reader c1 much faster on NCHW16c (as a depthwise conv after a 1x1):
// c0 writes NCHW16c (10.5 + 12 against 10 + 13: c1 reads r0 as X and as
// residual, both in NCHW16c, from one copy), and c1 needs no transform.
TEST(HarmonizeLayouts, AProducerWritesTheLayoutItsReadersAreFastIn) {
  const auto [plan, conv_groups] = Harmonized([](size_t n, const TilingSpace& tilings) -> Options {
    if (n == 0)
      return {{Direct(tilings, kNCHW, kNCHW), 10e-6}, {Direct(tilings, kNCHW, kBlocked), 10.5e-6}};
    if (n == 1)
      return {{Direct(tilings, kNCHW, kNCHW), 20e-6}, {Direct(tilings, kBlocked, kBlocked), 12e-6}};
    return {{Direct(tilings, kNCHW, kNCHW), 6e-6}};
  });
  ASSERT_EQ(conv_groups.size(), 3u);
  EXPECT_EQ(Out(plan.groups[conv_groups[0]].tiling), kBlocked);
  EXPECT_EQ(In(plan.groups[conv_groups[1]].tiling), kBlocked);
  EXPECT_EQ(Out(plan.groups[conv_groups[1]].tiling), kBlocked);
}

// A reader that reads a value twice (c1: r0 as X and as residual) is one
// reader, and one copy serves both reads: c0 writes NCHW (10 + min(13.5, 12
// + 1) = 23 against 11.6 + 12 = 23.6), where counting each read as a reader
// of its own (10 + 13 + 13 against 11.6 + 12 + 12) wrote NCHW16c.
TEST(HarmonizeLayouts, AReaderOfAValueTwiceCountsOnceAndOneCopyServesBoth) {
  const auto [plan, conv_groups] = Harmonized([](size_t n, const TilingSpace& tilings) -> Options {
    if (n == 0)
      return {{Direct(tilings, kNCHW, kNCHW), 10e-6}, {Direct(tilings, kNCHW, kBlocked), 11.6e-6}};
    if (n == 1)
      return {{Direct(tilings, kNCHW, kNCHW), 13.5e-6},
              {Direct(tilings, kBlocked, kBlocked), 12e-6}};
    return {{Direct(tilings, kNCHW, kNCHW), 6e-6}};
  });
  ASSERT_EQ(conv_groups.size(), 3u);
  EXPECT_EQ(Out(plan.groups[conv_groups[0]].tiling), kNCHW);
}

}  // namespace
}  // namespace fusetune::fusion_space
