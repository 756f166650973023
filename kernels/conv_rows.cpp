#include "kernels/conv_rows.h"

#include <algorithm>
#include <cstring>

#include "kernels/simd_math.h"

namespace fusetune::kernels::conv_detail {

BandGeometry BandOf(const ConvShape& s, int64_t out_rows) {
  BandGeometry g;
  g.rows = (out_rows - 1) * s.stride_h + (s.kernel_h - 1) * s.dilation_h + 1;
  g.width = (s.out_w - 1) * s.stride_w + (s.kernel_w - 1) * s.dilation_w + 1;
  g.phase = (g.width + s.stride_w - 1) / s.stride_w;
  g.row_floats = g.phase * s.stride_w;
  return g;
}

namespace {

// Input columns a padded row reads: iw in [0, InCols) (padded j = iw + pad_left).
int64_t InCols(const ConvShape& s, const BandGeometry& g) {
  return std::clamp<int64_t>(g.width - s.pad_left, 0, s.in_w);
}

// Stride 2: even padded columns to phase 0, odd ones to phase 1, 16 at a
// time in the middle where the whole 32-column window lies inside the row.
void CopyRowStride2(const float* src, int64_t in_cols, int64_t pad, const BandGeometry& g,
                    float* dst) {
  float* even = dst;
  float* odd = dst + g.phase;
  int64_t i = 0;
  // Padded column j = 2 i + q reads src[j - pad].
  auto at = [&](int64_t j) {
    const int64_t iw = j - pad;
    return (j < g.width && iw >= 0 && iw < in_cols) ? src[iw] : 0.0f;
  };
  for (; i < g.phase && 2 * i < pad; ++i) {
    even[i] = at(2 * i);
    odd[i] = at(2 * i + 1);
  }
#if defined(__AVX512F__)
  const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (; i + 16 <= g.phase && 2 * i + 32 - pad <= in_cols && 2 * i + 32 <= g.width; i += 16) {
    const __m512 a = _mm512_loadu_ps(src + 2 * i - pad);
    const __m512 b = _mm512_loadu_ps(src + 2 * i - pad + 16);
    _mm512_storeu_ps(even + i, _mm512_permutex2var_ps(a, evens, b));
    _mm512_storeu_ps(odd + i, _mm512_permutex2var_ps(a, odds, b));
  }
#endif
  for (; i < g.phase; ++i) {
    even[i] = at(2 * i);
    odd[i] = at(2 * i + 1);
  }
}

void CopyRow(const ConvShape& s, const float* src, int64_t in_cols, const BandGeometry& g,
             float* dst) {
  const int64_t pad = s.pad_left;
  if (s.stride_w == 1) {
    const int64_t left = std::min(pad, g.width);
    std::memset(dst, 0, sizeof(float) * left);
    std::memcpy(dst + left, src, sizeof(float) * in_cols);
    std::memset(dst + left + in_cols, 0, sizeof(float) * (g.row_floats - left - in_cols));
  } else if (s.stride_w == 2) {
    CopyRowStride2(src, in_cols, pad, g, dst);
  } else {
    for (int64_t q = 0; q < s.stride_w; ++q)
      for (int64_t i = 0; i < g.phase; ++i) {
        const int64_t j = q + i * s.stride_w, iw = j - pad;
        dst[q * g.phase + i] = (j < g.width && iw >= 0 && iw < in_cols) ? src[iw] : 0.0f;
      }
  }
}

}  // namespace

int64_t CopyBand(const ConvShape& s, const float* plane, int64_t ih0, const BandGeometry& g,
                 float* dst) {
  const int64_t in_cols = InCols(s, g);
  int64_t rows_read = 0;
  for (int64_t r = 0; r < g.rows; ++r) {
    const int64_t ih = ih0 + r;
    float* row = dst + r * g.row_floats;
    if (ih < 0 || ih >= s.in_h) {
      std::memset(row, 0, sizeof(float) * g.row_floats);
      continue;
    }
    CopyRow(s, plane + ih * s.in_w, in_cols, g, row);
    ++rows_read;
  }
  return rows_read * in_cols;
}

int64_t BandReadFloats(const ConvShape& s, int64_t ih0, const BandGeometry& g) {
  const int64_t rows =
      std::max<int64_t>(0, std::min(s.in_h, ih0 + g.rows) - std::max<int64_t>(0, ih0));
  return rows * InCols(s, g);
}

}  // namespace fusetune::kernels::conv_detail

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
