// The attention kernel's row primitives against plain loops, across lengths
// that leave every tail size, with masked (-inf) scores.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/rng.h"
#include "kernels/fast_math.h"
#include "kernels/row_simd.h"

namespace fusetune::kernels {
namespace {

std::vector<float> Scores(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> s(n);
  for (float& x : s) x = static_cast<float>(8 * rng.Normal());
  if (n > 3) s[n / 3] = -INFINITY;  // a masked key
  return s;
}

TEST(RowSimd, MaxAndExponentialsMatchPlainLoops) {
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<float> s = Scores(n, n);
    float want_max = -INFINITY;
    for (float x : s) want_max = std::max(want_max, x);
    EXPECT_EQ(RowMax(s.data(), n), want_max) << n;
    const float shift = want_max;
    std::vector<float> want(s);
    double want_sum = 0;
    std::vector<float> want_arg(s);
    for (float& x : want) want_sum += (x = static_cast<float>(std::exp(double{x} - shift)));
    const float sum = ExpShiftedInPlace(s.data(), n, shift);
    EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum) << n;
    // The exponent's rounding: relative error grows with the distance from the maximum.
    for (int64_t j = 0; j < n; ++j) {
      const float distance = std::isinf(want_arg[j]) ? 0.0f : shift - want_arg[j];
      EXPECT_NEAR(s[j], want[j], (4e-7f + 1.2e-7f * distance) * want[j] + 1e-30f) << n;
    }
  }
  EXPECT_EQ(RowMax(nullptr, 0), -INFINITY);
  EXPECT_EQ(ExpShiftedInPlace(nullptr, 0, 1.0f), 0.0f);
}

TEST(RowSimd, TransposeRowsMatchesPlainLoops) {
  for (int64_t keys : {1, 15, 16, 17, 32}) {
    for (int64_t dim : {1, 16, 24, 64}) {
      const int64_t stride = dim + 5, ld = 32;
      std::vector<float> src(keys * stride);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
      std::vector<float> dst(dim * ld, -1.0f);
      TransposeRows(src.data(), stride, keys, dim, dst.data(), ld);
      for (int64_t p = 0; p < dim; ++p)
        for (int64_t r = 0; r < ld; ++r)
          EXPECT_EQ(dst[p * ld + r], r < keys ? src[r * stride + p] : -1.0f)
              << keys << " keys, dim " << dim << ", p " << p << ", r " << r;
    }
  }
}

}  // namespace
}  // namespace fusetune::kernels
