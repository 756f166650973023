// The implicit-GEMM convolution in bf16 (ConvTiling::precision): every
// output within the bf16 GEMM's stated bound of the exact convolution
// (docs/PRECISION.md) on the shapes the f32 form is checked on, pre-packed
// weights identical to converting them at run time, the run modes and the
// estimate counting bf16 weights, and the tilings it refuses.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/conv.h"
#include "kernels/estimate.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"
#include "tests/kernels/conv_test_util.h"

namespace fusetune::kernels {
namespace {

using testing::MakeShape;
using testing::RandomConv;

ConvTiling Bf16Im2col(int64_t oc_block, int64_t pixel_block, int64_t k_block, int mr, int nr) {
  ConvTiling t =
      testing::Tiling(ConvAlgorithm::kIm2colGemm, oc_block, pixel_block, k_block, mr, nr);
  t.precision = Precision::kBf16;
  return t;
}

double WorstBoundRatio(const ConvShape& s, const ConvTiling& tiling, bool prepack,
                       bool residual_relu, int threads = 2) {
  return testing::Bf16WorstBoundRatio(s, tiling, prepack, residual_relu, threads);
}

std::vector<ConvShape> Shapes() {
  return {MakeShape(1, 16, 14, 14, 32, 3, 1, 1),   MakeShape(1, 3, 32, 32, 16, 7, 2, 3),
          MakeShape(1, 32, 9, 9, 24, 1),           MakeShape(1, 32, 10, 10, 24, 1, 2),
          MakeShape(1, 8, 12, 12, 16, 3, 1, 2, 2), MakeShape(1, 16, 9, 11, 20, 3, 2, 1, 1, 4),
          MakeShape(1, 8, 1, 50, 12, 5, 1, 2),     MakeShape(2, 8, 9, 9, 16, 3, 1, 1),
          MakeShape(1, 7, 13, 11, 13, 3, 1, 1),    MakeShape(1, 4, 3, 3, 8, 5, 1, 4)};
}

TEST(ConvIm2colBf16, WithinTheBoundOnEveryShapeAndMicroShape) {
  for (auto [mr, nr] : Bf16MicroTileShapes()) {
    if (IsThinMicroTile(mr, nr)) continue;  // decode GEMMs' tiles, not in the conv space
    // Small blocks with odd and short slices, then blocks covering the shape.
    for (const ConvTiling& t :
         {Bf16Im2col(mr, nr, 7, mr, nr), Bf16Im2col(2 * mr, 2 * nr, 16, mr, nr),
          Bf16Im2col(8 * mr, 8 * nr, 4096, mr, nr)})
      for (const ConvShape& s : Shapes()) {
        SCOPED_TRACE(fmt::format("{} {}", s.ToString(), t.ToString()));
        EXPECT_LE(WorstBoundRatio(s, t, /*prepack=*/true, /*residual_relu=*/false), 1.0);
      }
  }
}

TEST(ConvIm2colBf16, EpilogueUnpackedWeightsAndOneThreadWithinTheBound) {
  const ConvShape s = MakeShape(2, 24, 12, 12, 40, 3, 1, 1);
  const ConvTiling t = Bf16Im2col(16, 64, 32, 8, 32);
  for (bool prepack : {false, true})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("prepack={} threads={}", prepack, threads));
      EXPECT_LE(WorstBoundRatio(s, t, prepack, /*residual_relu=*/true, threads), 1.0);
    }
}

TEST(ConvIm2colBf16, PrePackedWeightsGiveTheSameBitsAsConvertingThemPerTile) {
  const ConvShape s = MakeShape(1, 20, 10, 10, 36, 3, 2, 1, 1, 2);
  for (const ConvTiling& t : {Bf16Im2col(8, 32, 16, 8, 32), Bf16Im2col(64, 256, 4096, 8, 32)}) {
    RandomConv a(s, true, true, 3, s.batch * s.out_channels * s.pixels());
    RandomConv b(s, true, true, 3, s.batch * s.out_channels * s.pixels());
    b.PrePack(t);
    ASSERT_EQ(b.packed.size(), static_cast<size_t>(PrePackedConvWeightFloats(b.d, t)));
    testing::ConvRun ra, rb;
    ASSERT_TRUE(a.Run(t, 2, 1 << 20, &ra));
    ASSERT_TRUE(b.Run(t, 2, 1 << 20, &rb));
    EXPECT_EQ(a.y, b.y) << t.ToString();
    // The weights stream in half the bytes of the f32 form's.
    ConvTiling f32 = t;
    f32.precision = Precision::kF32;
    EXPECT_LT(PrePackedConvWeightFloats(b.d, t), PrePackedConvWeightFloats(b.d, f32));
  }
}

TEST(ConvIm2colBf16, RunModesAndEstimateCountBf16Weights) {
  const ConvShape s = MakeShape(1, 16, 14, 14, 32, 3, 1, 1);
  for (const ConvTiling& t : {Bf16Im2col(16, 64, 4096, 8, 32), Bf16Im2col(8, 32, 40, 8, 32)}) {
    testing::ExpectRunModesCountAlike(s, t);
    RandomConv c(s, true, false, 1, s.batch * s.out_channels * s.pixels());
    for (int threads : {1, 2}) {
      testing::ConvRun run;
      ASSERT_TRUE(c.Run(t, threads, 1 << 20, &run));
      const TilingEstimate e = EstimateConv(c.d, t, threads);
      EXPECT_EQ(e.bytes_in, static_cast<double>(run.stats.bytes_global_to_local)) << t.ToString();
      EXPECT_EQ(e.bytes_out, static_cast<double>(run.stats.bytes_local_to_global));
      EXPECT_EQ(e.local_bytes, ConvLocalBytes(c.d, t));
      ConvTiling f32 = t;
      f32.precision = Precision::kF32;
      EXPECT_LT(e.bytes_in, EstimateConv(c.d, f32, threads).bytes_in);
    }
  }
}

TEST(ConvIm2colBf16, RefusesAlgorithmsAndMicroShapesWithoutABf16Form) {
  const ConvShape s = MakeShape(1, 16, 14, 14, 32, 3, 1, 1);
  RandomConv c(s, true, false, 1, s.batch * s.out_channels * s.pixels());
  KernelConfig config;
  const ConvShape dw_shape = MakeShape(1, 16, 14, 14, 16, 3, 1, 1, 1, 16);
  RandomConv dw(dw_shape, true, false, 1, dw_shape.out_channels * dw_shape.pixels());
  ConvTiling depthwise = testing::Tiling(ConvAlgorithm::kDepthwise, 16, 64, 16);
  depthwise.precision = Precision::kBf16;
  const Status d = ValidateConv(dw.d, depthwise, config);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("tiling.precision: bf16 is computed by im2col_gemm, direct "
                                     "and winograd2 only, not depthwise"),
            std::string::npos)
      << d.error().message();
  for (auto [mr, nr] : MicroTileShapes()) {
    if (IsThinMicroTile(mr, nr)) continue;
    const ConvTiling t = Bf16Im2col(2 * mr * 4, 4 * nr, 64, mr, nr);
    const bool has = FindBf16MicroKernel(mr, nr) != nullptr;
    const Status st = ValidateConv(c.d, t, config);
    EXPECT_EQ(st.ok(), has) << t.ToString() << (st.ok() ? "" : ": " + st.error().message());
    if (!has && !st.ok()) {
      EXPECT_NE(st.error().message().find("bf16 micro-kernel"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace fusetune::kernels
