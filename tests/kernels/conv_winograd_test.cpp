// Winograd F(2x2,3x3) and F(4x4,3x3) against the double reference, within
// conv_winograd.h's tolerances; the shapes it refuses; its estimate against
// the traffic it counts.
#include "kernels/conv_winograd.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/conv.h"
#include "kernels/estimate.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RunAgainstReference;
using testing::Tiling;
using testing::ToleranceOf;

class WinogradTest : public ::testing::TestWithParam<ConvAlgorithm> {};

TEST_P(WinogradTest, MatchesReferenceOnShapesAndTilings) {
  const ConvAlgorithm a = GetParam();
  const ConvShape shapes[] = {
      MakeShape(1, 16, 14, 14, 32, 3, 1, 1),  // ResNet-like, padded
      MakeShape(1, 8, 7, 9, 24, 3, 1, 1),     // odd extents: cut edge tiles
      MakeShape(1, 8, 9, 11, 16, 3, 1, 0),    // no padding
      MakeShape(2, 12, 10, 6, 16, 3, 1, 1),   // batch 2
      MakeShape(1, 5, 6, 5, 13, 3, 1, 1),     // channels not multiples of nr
      MakeShape(1, 3, 3, 3, 4, 3, 1, 1),      // smaller than one tile
  };
  const ConvTiling tilings[] = {
      Tiling(a, 64, 256, 256),        // everything in one block and slice
      Tiling(a, 8, 1, 4),             // one tile row per band, slices of 4 channels
      Tiling(a, 16, 40, 5, 8, 32),    // slices not dividing the channels
      Tiling(a, 6, 64, 3, 6, 32),     // mr 6
      Tiling(a, 14, 100, 8, 14, 16),  // nr 16
      Tiling(a, 32, 100, 8, 7, 32),   // mr 7: a 14x14 map's 7 x 7 tiles in whole slivers
      Tiling(a, 8, 40, 64),           // one slice, several channel blocks: V kept
  };
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : tilings) {
      SCOPED_TRACE(s.ToString() + " " + t.ToString());
      EXPECT_LT(RunAgainstReference(s, t).max_rel_error, ToleranceOf(a));
    }
}

TEST_P(WinogradTest, BiasEpilogueWeightsAndThreads) {
  const ConvAlgorithm a = GetParam();
  const ConvShape s = MakeShape(2, 16, 11, 13, 24, 3, 1, 1);
  const ConvTiling t = Tiling(a, 16, 30, 8);
  for (bool bias : {false, true})
    for (bool residual_relu : {false, true})
      for (bool prepack : {false, true})
        for (int threads : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << "bias " << bias << " residual+relu " << residual_relu
                                            << " prepack " << prepack << " threads " << threads);
          EXPECT_LT(RunAgainstReference(s, t, bias, residual_relu, prepack, threads).max_rel_error,
                    ToleranceOf(a));
        }
}

TEST_P(WinogradTest, EstimateMatchesCountedTraffic) {
  const ConvAlgorithm a = GetParam();
  const ConvShape shapes[] = {MakeShape(1, 16, 14, 14, 32, 3, 1, 1),
                              MakeShape(2, 12, 7, 9, 13, 3, 1, 0)};
  // Several slices; one block and slice (U kept); one slice, several
  // channel blocks (V kept); one tile row per band.
  const ConvTiling tilings[] = {Tiling(a, 16, 30, 5), Tiling(a, 64, 1000, 64), Tiling(a, 8, 30, 64),
                                Tiling(a, 8, 1, 4, 8, 32)};
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : tilings)
      for (bool prepack : {false, true})
        for (bool residual : {false, true})
          for (int threads : {1, 2}) {
            SCOPED_TRACE(s.ToString() + " " + t.ToString());
            std::vector<float> x(s.batch * s.in_channels * s.in_h * s.in_w, 0.5f);
            std::vector<float> w(s.out_channels * s.in_channels * 9, 0.25f), b(s.out_channels);
            std::vector<float> y(s.batch * s.out_channels * s.pixels()), r(y.size(), 1.0f);
            ConvDesc d;
            d.shape = s;
            d.x = x.data();
            d.w = w.data();
            d.bias = b.data();
            d.y = y.data();
            if (residual)
              d.epilogue.push_back(
                  EpilogueOp::Residual(r.data(), s.pixels(), s.out_channels * s.pixels()));
            std::vector<float> packed(PrePackedConvWeightFloats(d, t));
            if (prepack) {
              PrePackConvWeights(d, t, packed.data());
              d.w_packed = packed.data();
            }
            KernelConfig config;
            config.threads = threads;
            Result<KernelStats> stats = RunConv(d, t, config);
            ASSERT_TRUE(stats.ok()) << stats.error().message();
            const TilingEstimate e = EstimateConv(d, t, threads);
            EXPECT_EQ(e.bytes_in, static_cast<double>(stats->bytes_global_to_local));
            EXPECT_EQ(e.bytes_out, static_cast<double>(stats->bytes_local_to_global));
            EXPECT_EQ(e.tiles, stats->tiles);
            EXPECT_EQ(e.local_bytes, ConvLocalBytes(d, t));
            EXPECT_GT(e.lane_utilisation, 0.0);
            EXPECT_LE(e.lane_utilisation, 1.0);
            EXPECT_GE(e.max_thread_work, 1.0 / threads - 1e-9);
            EXPECT_GE(e.steps, 1);
            // Each mode counts its own half: copies only, or nothing copied.
            Result<KernelStats> copy = RunConv(d, t, config, RunMode::kCopyOnly);
            ASSERT_TRUE(copy.ok());
            EXPECT_EQ(copy->bytes_global_to_local, stats->bytes_global_to_local);
            Result<KernelStats> compute = RunConv(d, t, config, RunMode::kComputeOnly);
            ASSERT_TRUE(compute.ok());
            EXPECT_EQ(compute->bytes_global_to_local, 0);
            EXPECT_EQ(compute->tiles, stats->tiles);
          }
}

INSTANTIATE_TEST_SUITE_P(Winograd, WinogradTest,
                         ::testing::Values(ConvAlgorithm::kWinograd2, ConvAlgorithm::kWinograd4),
                         [](const auto& info) {
                           return std::string(ConvAlgorithmName(info.param));
                         });

TEST(WinogradRefuses, OtherKernelsStridesGroupsAnd1D) {
  const ConvShape refused[] = {
      MakeShape(1, 8, 12, 12, 8, 5, 1, 2),        // 5x5
      MakeShape(1, 8, 12, 12, 8, 3, 2, 1),        // stride 2
      MakeShape(1, 8, 12, 12, 8, 3, 1, 1, 1, 2),  // groups 2
      MakeShape(1, 8, 12, 12, 8, 3, 1, 2, 2),     // dilation 2
      MakeShape(1, 8, 1, 32, 8, 3, 1, 1),         // 1-D: a 1x3 kernel
  };
  for (ConvAlgorithm a : {ConvAlgorithm::kWinograd2, ConvAlgorithm::kWinograd4})
    for (const ConvShape& s : refused) {
      const Status st = ConvAlgorithmApplies(s, a);
      ASSERT_FALSE(st.ok()) << s.ToString();
      EXPECT_NE(st.error().message().find("3x3 kernels with stride 1"), std::string::npos)
          << st.error().message();
    }
}

TEST(WinogradRefuses, BadTilings) {
  const ConvShape s = MakeShape(1, 8, 8, 8, 16, 3, 1, 1);
  std::vector<float> x(8 * 64), w(16 * 8 * 9), y(16 * 64);
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.y = y.data();
  KernelConfig config;
  const Status micro = ValidateConv(d, Tiling(ConvAlgorithm::kWinograd2, 16, 64, 8, 5, 32), config);
  ASSERT_FALSE(micro.ok());
  EXPECT_NE(micro.error().message().find("tiling.mr x tiling.nr"), std::string::npos);
  // Channel blocks need not fill the weights' panels: the last one is padded.
  EXPECT_TRUE(ValidateConv(d, Tiling(ConvAlgorithm::kWinograd4, 12, 64, 8), config).ok());
  config.local_buffer_bytes = 4096;
  const Status local = ValidateConv(d, Tiling(ConvAlgorithm::kWinograd4, 16, 64, 8), config);
  ASSERT_FALSE(local.ok());
  EXPECT_NE(local.error().message().find("bytes of local buffer"), std::string::npos);
}

// The figures conv_winograd.h states: the error on ResNet-like channel
// counts (normal data, 3x3 p1), printed and held to the tolerances.
TEST(WinogradAccuracy, ResNetLikeChannels) {
  for (ConvAlgorithm a : {ConvAlgorithm::kWinograd2, ConvAlgorithm::kWinograd4})
    for (int64_t c : {64, 128, 256, 512}) {
      const ConvShape s = MakeShape(1, c, 14, 14, 32, 3, 1, 1);
      const double err =
          RunAgainstReference(s, Tiling(a, 32, 256, 128), true, false, true, 2, 4 << 20)
              .max_rel_error;
      std::printf("%s %s: max relative error %.3g\n", ConvAlgorithmName(a), s.ToString().c_str(),
                  err);
      EXPECT_LT(err, ToleranceOf(a));
    }
}

}  // namespace
}  // namespace fusetune::kernels
