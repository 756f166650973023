// The direct convolution in bf16 (ConvTiling::precision): every output
// within the bf16 GEMM's stated bound of the exact convolution
// (docs/PRECISION.md) on the shapes the f32 form is checked on (odd channel
// counts and slices, strides, dilations, padding wider than a row, 1-D),
// outputs that really differ from f32's, pre-packed weights identical to
// packing them per tile, the vector and portable blocks agreeing, the run
// modes and the estimate counting alike, and a global pool on its sums
// (layouts: conv_layout_test.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_algorithm.h"
#include "kernels/precision.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RandomConv;

ConvTiling Bf16Direct(int64_t oc_block, int64_t pixel_block, int64_t k_block) {
  ConvTiling t = testing::Tiling(ConvAlgorithm::kDirect, oc_block, pixel_block, k_block);
  t.precision = Precision::kBf16;
  return t;
}

std::vector<ConvShape> DirectBf16Shapes() {
  return {MakeShape(1, 16, 14, 14, 32, 3, 1, 1),   MakeShape(1, 3, 32, 32, 16, 7, 2, 3),
          MakeShape(1, 32, 9, 9, 24, 1),           MakeShape(1, 32, 10, 10, 24, 1, 2),
          MakeShape(1, 8, 12, 12, 16, 3, 1, 2, 2), MakeShape(1, 16, 9, 11, 20, 3, 2, 1, 1),
          MakeShape(1, 8, 1, 50, 12, 5, 1, 2),     MakeShape(2, 8, 9, 9, 16, 3, 1, 1),
          MakeShape(1, 7, 13, 11, 13, 3, 1, 1),    MakeShape(1, 4, 3, 3, 8, 5, 1, 4),
          MakeShape(1, 5, 4, 40, 33, 3, 1, 1)};
}

TEST(ConvDirectBf16, WithinTheBoundOnEveryShape) {
  // Odd and short slices (rounded up to even), one channel vector and two,
  // bands of one row and of the whole output, slices covering the channels.
  for (const ConvTiling& t : {Bf16Direct(16, 1, 3), Bf16Direct(32, 64, 4), Bf16Direct(64, 4096, 7),
                              Bf16Direct(48, 256, 4096)})
    for (const ConvShape& s : DirectBf16Shapes())
      for (bool prepack : {true, false}) {
        SCOPED_TRACE(fmt::format("{} {} prepack={}", s.ToString(), t.ToString(), prepack));
        EXPECT_LE(testing::Bf16WorstBoundRatio(s, t, prepack, /*residual_relu=*/false), 1.0);
      }
}

TEST(ConvDirectBf16, EpilogueAndOneThreadWithinTheBoundAndNotF32sResults) {
  const ConvShape s = MakeShape(2, 24, 12, 12, 40, 3, 1, 1);
  const ConvTiling t = Bf16Direct(32, 48, 10);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(fmt::format("threads={}", threads));
    EXPECT_LE(testing::Bf16WorstBoundRatio(s, t, true, /*residual_relu=*/true, threads), 1.0);
  }
  testing::ExpectBf16DiffersFromF32(s, t);
}

TEST(ConvDirectBf16, PrePackedWeightsGiveTheSameBitsAsPackingThemPerTile) {
  const ConvShape s = MakeShape(1, 19, 10, 10, 36, 3, 2, 1);
  for (const ConvTiling& t : {Bf16Direct(16, 20, 5), Bf16Direct(48, 4096, 4096)}) {
    RandomConv a(s, true, true, 3, s.batch * s.out_channels * s.pixels());
    RandomConv b(s, true, true, 3, s.batch * s.out_channels * s.pixels());
    b.PrePack(t);
    ASSERT_EQ(b.packed.size(), static_cast<size_t>(PrePackedConvWeightFloats(b.d, t)));
    testing::ConvRun ra, rb;
    ASSERT_TRUE(a.Run(t, 2, 1 << 20, &ra));
    ASSERT_TRUE(b.Run(t, 2, 1 << 20, &rb));
    EXPECT_EQ(a.y, b.y) << t.ToString();
    ConvTiling f32 = t;
    f32.precision = Precision::kF32;
    EXPECT_LT(PrePackedConvWeightFloats(b.d, t), PrePackedConvWeightFloats(b.d, f32))
        << "bf16 weights take half the bytes";
  }
}

TEST(ConvDirectBf16, VectorAndPortableBlocksGiveTheSameResults) {
  if (!CpuHasBf16Dot()) GTEST_SKIP() << "no AVX512-BF16 here: the portable blocks alone run";
  const ConvShape s = MakeShape(1, 13, 9, 9, 20, 3, 1, 1);
  const ConvTiling t = Bf16Direct(32, 81, 6);
  RandomConv vector(s, true, false, 9, s.batch * s.out_channels * s.pixels());
  testing::ConvRun run;
  ASSERT_TRUE(vector.Run(t, 1, 1 << 20, &run));
  // The portable blocks' share of one thread is the whole run.
  RandomConv portable(s, true, false, 9, s.batch * s.out_channels * s.pixels());
  KernelConfig config;
  config.threads = 1;
  conv_detail::DirectBf16PortableOps().run_share(portable.d, t, config, RunMode::kFull, 0);
  // The same bf16 products; the sums' order differs (vdpbf16ps adds a
  // pair at once): a few f32 roundings of each output's magnitude.
  for (size_t i = 0; i < vector.y.size(); ++i)
    EXPECT_NEAR(vector.y[i], portable.y[i], 1e-5f * (1 + std::abs(portable.y[i]))) << i;
}

// Odd channels and an odd k_block, weights pre-packed and packed per tile.
TEST(ConvDirectBf16, RunModesAndEstimateCountAlike) {
  for (const ConvShape& s : {MakeShape(1, 16, 14, 14, 32, 3, 1, 1), MakeShape(1, 7, 9, 9, 20, 3)})
    for (const ConvTiling& t : {Bf16Direct(16, 64, 4096), Bf16Direct(32, 28, 3)})
      for (bool prepack : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {} prepack={}", s.ToString(), t.ToString(), prepack));
        testing::ExpectRunModesCountAlike(s, t, ConvGlobalPool::kNone, prepack);
        testing::ExpectEstimateCountsWhatRunsCount(s, t, prepack);
      }
}

// A global average pool after the conv (ResNet's last conv) on the bf16
// sums: the pooled values stay within bf16's rounding of the f32 form's.
TEST(ConvDirectBf16, AGlobalPoolRunsOnItsBf16Sums) {
  const ConvShape s = MakeShape(1, 24, 10, 10, 32, 3, 1, 1);
  ConvTiling t = Bf16Direct(32, 4096, 8);
  RandomConv c(s, true, false, 2, s.batch * s.out_channels);
  c.d.global_pool = ConvGlobalPool::kAverage;
  testing::ConvRun run;
  ASSERT_TRUE(c.Run(t, 2, 1 << 20, &run));
  ConvTiling f32 = t;
  f32.precision = Precision::kF32;
  RandomConv want(s, true, false, 2, s.batch * s.out_channels);
  want.d.global_pool = ConvGlobalPool::kAverage;
  testing::ConvRun run_f32;
  ASSERT_TRUE(want.Run(f32, 2, 1 << 20, &run_f32));
  double scale = 1e-6, err = 0;
  for (size_t i = 0; i < want.y.size(); ++i) {
    scale = std::max(scale, double(std::abs(want.y[i])));
    err = std::max(err, double(std::abs(c.y[i] - want.y[i])));
  }
  EXPECT_LE(err / scale, 1e-2);
  EXPECT_GT(err, 0) << "bf16 rounds";
}

}  // namespace
}  // namespace fusetune::kernels
