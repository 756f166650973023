// Winograd F(2x2,3x3) in bf16 (ConvTiling::precision): every output
// within conv_winograd.h's bf16 tolerance of the exact
// convolution on the shapes the f32 form is checked on (cut edge tiles,
// odd channel counts and slices, several micro-tiles), outputs that really
// differ from f32's, pre-packed U identical to transforming W per tile at
// half the bytes, the estimate and the run modes counting what runs count,
// the stated accuracy on ResNet-like channel counts, and F(4x4,3x3) refused
// in bf16 because its error is past the tolerance.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_algorithm.h"
#include "kernels/conv_winograd.h"
#include "kernels/microkernel_bf16.h"
#include "kernels/precision.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RandomConv;
using testing::RunAgainstReference;

ConvTiling WinogradBf16(ConvAlgorithm a, int64_t oc, int64_t px, int64_t k, int mr = 8,
                        int nr = 32) {
  ConvTiling t = testing::Tiling(a, oc, px, k, mr, nr);
  t.precision = Precision::kBf16;
  return t;
}

constexpr ConvAlgorithm kF2 = ConvAlgorithm::kWinograd2;

TEST(WinogradBf16, WithinTheToleranceOnShapesAndTilings) {
  const ConvAlgorithm a = kF2;
  const ConvShape shapes[] = {
      MakeShape(1, 16, 14, 14, 32, 3, 1, 1),  // ResNet-like, padded
      MakeShape(1, 8, 7, 9, 24, 3, 1, 1),     // odd extents: cut edge tiles
      MakeShape(2, 12, 10, 6, 16, 3, 1, 0),   // batch 2, no padding
      MakeShape(1, 5, 6, 5, 13, 3, 1, 1),     // odd channels: a slice's last pair half zero
      MakeShape(1, 3, 3, 3, 4, 3, 1, 1),      // smaller than one tile
  };
  const ConvTiling tilings[] = {
      WinogradBf16(a, 64, 256, 256),        // one block and slice
      WinogradBf16(a, 8, 1, 3),             // one tile row per band, odd slices
      WinogradBf16(a, 16, 40, 5, 6, 32),    // mr 6, slices not dividing the channels
      WinogradBf16(a, 14, 100, 8, 14, 16),  // nr 16
      WinogradBf16(a, 32, 100, 8, 7, 32),   // mr 7
      WinogradBf16(a, 8, 40, 64),           // one slice, several channel blocks: V kept
  };
  for (const ConvShape& s : shapes)
    for (const ConvTiling& t : tilings)
      for (bool prepack : {true, false}) {
        SCOPED_TRACE(fmt::format("{} {} prepack={}", s.ToString(), t.ToString(), prepack));
        EXPECT_LT(RunAgainstReference(s, t, true, false, prepack).max_rel_error,
                  kWinograd2Bf16Tolerance);
      }
}

TEST(WinogradBf16, EpilogueAndThreadsWithinTheToleranceAndNotF32sResults) {
  const ConvAlgorithm a = kF2;
  const ConvShape s = MakeShape(2, 16, 11, 13, 24, 3, 1, 1);
  const ConvTiling t = WinogradBf16(a, 16, 30, 7);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    EXPECT_LT(RunAgainstReference(s, t, true, true, true, threads).max_rel_error,
              kWinograd2Bf16Tolerance);
  }
  testing::ExpectBf16DiffersFromF32(s, t);
}

TEST(WinogradBf16, PrePackedUGivesTheSameBitsAtHalfTheBytes) {
  const ConvAlgorithm a = kF2;
  const ConvShape s = MakeShape(1, 19, 10, 10, 36, 3, 1, 1);
  for (const ConvTiling& t : {WinogradBf16(a, 16, 20, 5), WinogradBf16(a, 48, 4096, 4096, 7, 32)}) {
    RandomConv per_tile(s, true, false, 3, s.batch * s.out_channels * s.pixels());
    RandomConv packed(s, true, false, 3, s.batch * s.out_channels * s.pixels());
    packed.PrePack(t);
    testing::ConvRun ra, rb;
    ASSERT_TRUE(per_tile.Run(t, 2, 1 << 20, &ra));
    ASSERT_TRUE(packed.Run(t, 2, 1 << 20, &rb));
    EXPECT_EQ(per_tile.y, packed.y) << t.ToString();
    ConvTiling f32 = t;
    f32.precision = Precision::kF32;
    EXPECT_LT(PrePackedConvWeightFloats(packed.d, t), PrePackedConvWeightFloats(packed.d, f32))
        << "bf16 U takes half the bytes";
    EXPECT_LT(ConvLocalBytes(packed.d, t), ConvLocalBytes(packed.d, f32));
  }
}

// Several slices, odd ones, V kept across channel blocks, one tile row per
// band; pre-packed and transformed per tile.
TEST(WinogradBf16, EstimateAndRunModesCountWhatRunsCount) {
  const ConvAlgorithm a = kF2;
  for (const ConvShape& s : {MakeShape(1, 16, 14, 14, 32, 3, 1, 1), MakeShape(2, 7, 7, 9, 13, 3)})
    for (const ConvTiling& t : {WinogradBf16(a, 16, 30, 5), WinogradBf16(a, 8, 30, 64),
                                WinogradBf16(a, 64, 1000, 64), WinogradBf16(a, 8, 1, 4)})
      for (bool prepack : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {} prepack={}", s.ToString(), t.ToString(), prepack));
        testing::ExpectRunModesCountAlike(s, t, ConvGlobalPool::kNone, prepack);
        testing::ExpectEstimateCountsWhatRunsCount(s, t, prepack);
      }
}

TEST(WinogradBf16Refuses, F4x4AndAMicroTileWithoutABf16Kernel) {
  const ConvShape s = MakeShape(1, 8, 8, 8, 16, 3, 1, 1);
  RandomConv c(s, false, false, 1, s.batch * s.out_channels * s.pixels());
  const Status st = ValidateConv(c.d, WinogradBf16(kF2, 16, 64, 8, 12, 16), KernelConfig{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("12x16 has no bf16 micro-kernel"), std::string::npos)
      << st.error().message();
  const Status f4 =
      ValidateConv(c.d, WinogradBf16(ConvAlgorithm::kWinograd4, 16, 64, 8), KernelConfig{});
  ASSERT_FALSE(f4.ok());
  EXPECT_NE(f4.error().message().find("winograd2 only, not winograd4"), std::string::npos)
      << f4.error().message();
}

// F(4x4)'s bf16 run, past ValidateConv (which refuses it): its kernel
// alone on one thread, pre-packed, against the double reference.
double F4x4Bf16Error(const ConvShape& s) {
  const ConvTiling t = WinogradBf16(ConvAlgorithm::kWinograd4, 32, 256, 128, 7, 32);
  RandomConv c(s, true, false, 7, s.batch * s.out_channels * s.pixels());
  const std::vector<double> want = c.Want();
  c.PrePack(t);
  KernelConfig config;
  config.threads = 1;
  config.local_buffer_bytes = 4 << 20;
  conv_detail::OpsOf(t).run_share(c.d, t, config, RunMode::kFull, 0);
  double err = 0, scale = 1e-6;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(c.y[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

// The figures conv_winograd.h states for bf16, printed: F(2x2) held to its
// tolerance, F(4x4) past it (why it stays f32), on ResNet-like channel
// counts (normal data, 3x3 p1, against the double reference).
TEST(WinogradBf16Accuracy, ResNetLikeChannels) {
  for (int64_t c : {64, 128, 256, 512}) {
    const ConvShape s = MakeShape(1, c, 14, 14, 32, 3, 1, 1);
    const double f2 = RunAgainstReference(s, WinogradBf16(kF2, 32, 256, 128, 7, 32), true, false,
                                          true, 2, 4 << 20)
                          .max_rel_error;
    const double f4 = F4x4Bf16Error(s);
    std::printf("bf16 %s: max relative error winograd2 %.3g, winograd4 %.3g\n",
                s.ToString().c_str(), f2, f4);
    EXPECT_LT(f2, kWinograd2Bf16Tolerance);
    EXPECT_GT(f4, kWinograd2Bf16Tolerance);
  }
}

}  // namespace
}  // namespace fusetune::kernels
