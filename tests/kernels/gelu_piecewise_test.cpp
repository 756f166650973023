// The bf16 epilogues' GELU (kernels/gelu_piecewise.h) against the exact GELU
// in double precision: within its stated absolute error everywhere (every
// piece, both ends of the range, every tail length), specials, the bias added
// in the same pass, and the epilogue taking it for bf16 kernels only.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "common/rng.h"
#include "kernels/epilogue.h"
#include "kernels/gelu_piecewise.h"

namespace fusetune::kernels {
namespace {

double ExactGeluOf(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }

TEST(GeluPiecewise, WithinItsAbsoluteErrorOverTheWholeLine) {
  std::vector<float> in;
  for (double x = -8.0; x < 8.0; x += 1.0 / 4096) in.push_back(static_cast<float>(x));
  for (float x : {-1e30f, -100.0f, -6.0f, -5.9999995f, 5.9999995f, 6.0f, 100.0f, 1e30f})
    in.push_back(x);
  std::vector<float> out(in.size());
  GeluErfPiecewise(in.data(), nullptr, out.data(), static_cast<int64_t>(in.size()));
  for (size_t j = 0; j < in.size(); ++j)
    ASSERT_NEAR(out[j], ExactGeluOf(in[j]), kGeluPiecewiseAbsError + 1e-7 * std::fabs(in[j]))
        << "at " << in[j];
}

TEST(GeluPiecewise, SpecialsAndEveryTailLength) {
  const float in[] = {NAN, INFINITY, -INFINITY, 0.0f};
  float out[4];
  GeluErfPiecewise(in, nullptr, out, 4);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], INFINITY);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_NEAR(out[3], 0.0f, kGeluPiecewiseAbsError);
  for (int64_t n = 0; n <= 40; ++n) {
    Rng rng(static_cast<uint64_t>(n) + 3);
    std::vector<float> x(n), got(n + 1, -7.0f);
    for (float& v : x) v = static_cast<float>(3 * rng.Normal());
    GeluErfPiecewise(x.data(), nullptr, got.data(), n);
    for (int64_t j = 0; j < n; ++j) ASSERT_NEAR(got[j], ExactGeluOf(x[j]), 2e-6) << n;
    EXPECT_EQ(got[n], -7.0f) << "wrote past the end";
  }
}

TEST(GeluPiecewise, BiasInTheSamePassEqualsAddingItFirst) {
  Rng rng(11);
  for (int64_t n : {1, 16, 37}) {
    std::vector<float> x(n), bias(n), added(n), fused(n), separate(n);
    for (int64_t j = 0; j < n; ++j) {
      x[j] = static_cast<float>(2 * rng.Normal());
      bias[j] = static_cast<float>(rng.Normal());
      added[j] = x[j] + bias[j];
    }
    GeluErfPiecewise(x.data(), bias.data(), fused.data(), n);
    GeluErfPiecewise(added.data(), nullptr, separate.data(), n);
    EXPECT_EQ(fused, separate) << n;
  }
}

// A bf16 kernel's epilogue (bias, then GELU) is one piecewise pass with the
// same counted bytes as the f32 epilogue; an f32 kernel keeps activation_simd.
TEST(GeluPiecewise, TheEpilogueTakesItForBf16KernelsOnly) {
  constexpr int64_t kRows = 5, kCols = 21, kLd = 32;
  Rng rng(5);
  std::vector<float> tile(kRows * kLd), bias(kCols);
  for (float& v : tile) v = static_cast<float>(2 * rng.Normal());
  for (float& v : bias) v = static_cast<float>(rng.Normal());
  const std::vector<EpilogueOp> ops = {EpilogueOp::Bias(bias.data()),
                                       EpilogueOp::Act(EpilogueKind::kGeluErf)};
  std::vector<float> f32 = tile, bf16 = tile;
  const int64_t f32_bytes = ApplyEpilogue(ops, f32.data(), kLd, kRows, kCols, 0, 0, 0);
  const int64_t bf16_bytes =
      ApplyEpilogue(ops, bf16.data(), kLd, kRows, kCols, 0, 0, 0, RunMode::kFull, Precision::kBf16);
  EXPECT_EQ(f32_bytes, bf16_bytes);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kLd; ++c) {
      const float x = tile[r * kLd + c];
      if (c >= kCols) {  // the padding is not touched
        EXPECT_EQ(bf16[r * kLd + c], x);
        continue;
      }
      const double want = ExactGeluOf(static_cast<double>(x + bias[c]));
      EXPECT_NEAR(bf16[r * kLd + c], want, kGeluPiecewiseAbsError);
      EXPECT_NEAR(f32[r * kLd + c], want, 1e-6 + 2e-6 * std::fabs(want));
    }
}

}  // namespace
}  // namespace fusetune::kernels
