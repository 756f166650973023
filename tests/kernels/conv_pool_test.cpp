// A global pool fused into the convolution template (ConvDesc::global_pool):
// every algorithm with an average or max pool after its epilogue against
// the double reference conv pooled in double, on tilings that hold whole
// images (1 and 2 threads, with and without pre-packed weights); only the
// pooled values are written and the estimate counts what a run does; run
// modes; a tiling that cuts an image's positions is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_winograd.h"
#include "kernels/estimate.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RunPooledAgainstReference;
using testing::Tiling;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Tilings of `a` whose tiles hold whole images of `s`: channel blocks of
// several sizes, one or several reduction slices, other micro-tiles.
std::vector<ConvTiling> WholeImageTilings(ConvAlgorithm a, const ConvShape& s) {
  const int64_t px = a == ConvAlgorithm::kIm2colGemm ? RoundUp(s.pixels(), 96) : s.pixels();
  std::vector<ConvTiling> v = {Tiling(a, 16, px, 256), Tiling(a, 48, px, 8),
                               Tiling(a, 64, 4032, 4)};
  if (ConvAlgorithmUsesMicroTile(a)) v.push_back(Tiling(a, 14, px, 16, 14, 16));
  return v;
}

// ResNet's and MobileNet's last convs scaled down (7x7 maps), a stride-2
// conv, a 1-D conv, a batch of 2 and a depthwise conv.
const ConvShape kShapes[] = {
    MakeShape(2, 32, 7, 7, 64, 1),        MakeShape(1, 16, 7, 7, 48, 3, 1, 1),
    MakeShape(1, 8, 14, 14, 40, 3, 2, 1), MakeShape(1, 6, 1, 20, 24, 3, 1, 1),
    MakeShape(2, 12, 6, 9, 20, 3, 1, 1),  MakeShape(2, 32, 7, 7, 32, 3, 1, 1, 1, 32),
};

class ConvPoolTest : public ::testing::TestWithParam<ConvAlgorithm> {};

TEST_P(ConvPoolTest, PooledOutputMatchesTheReference) {
  const ConvAlgorithm a = GetParam();
  int runs = 0;
  for (const ConvShape& s : kShapes) {
    if (!ConvAlgorithmApplies(s, a).ok()) continue;
    for (const ConvTiling& t : WholeImageTilings(a, s))
      for (ConvGlobalPool pool : {ConvGlobalPool::kAverage, ConvGlobalPool::kMax})
        for (bool residual_relu : {false, true})
          for (int threads : {1, 2}) {
            SCOPED_TRACE(s.ToString() + " " + t.ToString() + " " + ConvGlobalPoolName(pool) +
                         (residual_relu ? " +residual+relu" : "") + " threads " +
                         std::to_string(threads));
            const testing::ConvRun run =
                RunPooledAgainstReference(s, t, pool, residual_relu, threads, threads == 2);
            EXPECT_LT(run.max_rel_error, testing::ToleranceOf(a));
            // Only the pooled values leave the local buffer.
            EXPECT_EQ(run.stats.bytes_local_to_global, 4 * s.batch * s.out_channels);
            ++runs;
          }
  }
  EXPECT_GT(runs, 0);
}

TEST_P(ConvPoolTest, EstimateMatchesCountedTraffic) {
  const ConvAlgorithm a = GetParam();
  for (const ConvShape& s : kShapes) {
    if (!ConvAlgorithmApplies(s, a).ok()) continue;
    for (const ConvTiling& t : WholeImageTilings(a, s)) {
      SCOPED_TRACE(s.ToString() + " " + t.ToString());
      const testing::ConvRun run =
          RunPooledAgainstReference(s, t, ConvGlobalPool::kAverage, true, 2, true);
      std::vector<float> dummy(1);
      ConvDesc d;
      d.shape = s;
      d.x = d.w = d.bias = d.y = dummy.data();
      if (PrePackedConvWeightFloats(d, t) > 0) d.w_packed = dummy.data();
      d.epilogue.push_back(
          EpilogueOp::Residual(dummy.data(), s.pixels(), s.out_channels * s.pixels()));
      d.epilogue.push_back(EpilogueOp::Act(EpilogueKind::kRelu));
      d.global_pool = ConvGlobalPool::kAverage;
      const TilingEstimate e = EstimateConv(d, t, 2);
      EXPECT_EQ(e.bytes_in, run.stats.bytes_global_to_local);
      EXPECT_EQ(e.bytes_out, run.stats.bytes_local_to_global);
      EXPECT_EQ(e.tiles, run.stats.tiles);
    }
  }
}

TEST_P(ConvPoolTest, RunModes) {
  const ConvAlgorithm a = GetParam();
  for (const ConvShape& s : kShapes)
    if (ConvAlgorithmApplies(s, a).ok())
      for (ConvGlobalPool pool : {ConvGlobalPool::kAverage, ConvGlobalPool::kMax})
        testing::ExpectRunModesCountAlike(s, WholeImageTilings(a, s)[0], pool);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ConvPoolTest,
                         ::testing::Values(ConvAlgorithm::kIm2colGemm, ConvAlgorithm::kDirect,
                                           ConvAlgorithm::kWinograd2, ConvAlgorithm::kWinograd4,
                                           ConvAlgorithm::kDepthwise),
                         [](const ::testing::TestParamInfo<ConvAlgorithm>& i) {
                           return std::string(ConvAlgorithmName(i.param));
                         });

TEST(ConvPool, TilingsThatCutAnImageAreRefused) {
  const ConvShape s = MakeShape(1, 16, 7, 7, 32, 3, 1, 1);
  std::vector<float> dummy(1);
  ConvDesc d;
  d.shape = s;
  d.x = d.w = d.y = dummy.data();
  d.global_pool = ConvGlobalPool::kAverage;
  KernelConfig config;
  const Status cut = ValidateConv(d, Tiling(ConvAlgorithm::kDirect, 16, 21, 16), config);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("pixel_block"), std::string::npos) << cut.error().message();
  EXPECT_FALSE(ValidateConv(d, Tiling(ConvAlgorithm::kIm2colGemm, 16, 32, 16), config).ok());
  EXPECT_TRUE(ValidateConv(d, Tiling(ConvAlgorithm::kIm2colGemm, 16, 64, 16), config).ok());
  // F(4x4) bands are whole Winograd tiles: 6 rows round up to 8, all 7 of them.
  EXPECT_TRUE(ValidateConv(d, Tiling(ConvAlgorithm::kWinograd4, 16, 42, 16), config).ok());
  EXPECT_LT(RunPooledAgainstReference(s, Tiling(ConvAlgorithm::kWinograd4, 16, 42, 16),
                                      ConvGlobalPool::kMax)
                .max_rel_error,
            kWinograd4Tolerance);
  // The same tilings cut nothing without a pool.
  d.global_pool = ConvGlobalPool::kNone;
  EXPECT_TRUE(ValidateConv(d, Tiling(ConvAlgorithm::kDirect, 16, 21, 16), config).ok());
}

}  // namespace
}  // namespace fusetune::kernels
