#include "kernels/row_simd.h"

#include <algorithm>
#include <cmath>

#include "kernels/fast_math.h"
#include "kernels/simd_math.h"

namespace fusetune::kernels {

#if defined(__AVX512F__)

namespace {

using simd::Tail;

// Horizontal reductions through memory: this runs once per row.
float LanesMax(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return *std::max_element(lanes, lanes + 16);
}
float LanesSum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float total = 0;
  for (float x : lanes) total += x;
  return total;
}

}  // namespace

float RowMax(const float* s, int64_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(s + j));
  if (j < n) m = _mm512_mask_max_ps(m, Tail(n - j), m, _mm512_maskz_loadu_ps(Tail(n - j), s + j));
  return LanesMax(m);
}

// 2^y for y <= 0 (NaN stays NaN): y = n + r, |r| <= 1/2, 2^r by its Taylor
// polynomial of degree 6 (error 1.2e-7 at |r| = 1/2), 2^n applied by vscalefps.
// Clamped at 2^-126, the smallest normal float: subnormal results cost a
// microcode assist each.
[[gnu::always_inline]] inline __m512 Exp2NonPositive16(__m512 y) {
  y = _mm512_max_ps(_mm512_set1_ps(-126.0f), y);
  const __m512 n = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(y, n);
  __m512 p = _mm512_set1_ps(1.54035304e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.33335581e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.61812911e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.55041087e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.40226507e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.93147182e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// exp(s - shift) = 2^((s - shift) log2 e): with no upper clamp and no integer
// conversion, eleven operations per 16 lanes against Exp16's sixteen (the
// softmax's exponentials were a fifth of attention's time). The difference
// is taken first, so the row maximum's own term is exactly 1.
float ExpShiftedInPlace(float* s, int64_t n, float shift) {
  const __m512 log2e = _mm512_set1_ps(1.44269504f);
  const __m512 m = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e =
        Exp2NonPositive16(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(s + j), m), log2e));
    _mm512_storeu_ps(s + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (j < n) {
    const __mmask16 k = Tail(n - j);
    const __m512 e =
        Exp2NonPositive16(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m), log2e));
    _mm512_mask_storeu_ps(s + j, k, e);
    sum = _mm512_mask_add_ps(sum, k, sum, e);
  }
  return LanesSum(sum);
}

void TransposeRows(const float* src, int64_t row_stride, int64_t keys, int64_t dim, float* dst,
                   int64_t ld) {
  int64_t r0 = 0;
  for (; r0 + 16 <= keys; r0 += 16) {
    int64_t p0 = 0;
    for (; p0 + 16 <= dim; p0 += 16) {
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + (r0 + i) * row_stride + p0);
      Transpose16x16(r);
      for (int k = 0; k < 16; ++k) _mm512_storeu_ps(dst + (p0 + k) * ld + r0, r[k]);
    }
    for (; p0 < dim; ++p0)
      for (int64_t i = 0; i < 16; ++i) dst[p0 * ld + r0 + i] = src[(r0 + i) * row_stride + p0];
  }
  for (; r0 < keys; ++r0)
    for (int64_t p = 0; p < dim; ++p) dst[p * ld + r0] = src[r0 * row_stride + p];
}

FT_SIMD_MATH_END

#else  // portable

float RowMax(const float* s, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  return m;
}

float ExpShiftedInPlace(float* s, int64_t n, float shift) {
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += (s[j] = FastExp(s[j] - shift));
  return sum;
}

void TransposeRows(const float* src, int64_t row_stride, int64_t keys, int64_t dim, float* dst,
                   int64_t ld) {
  for (int64_t r = 0; r < keys; ++r)
    for (int64_t p = 0; p < dim; ++p) dst[p * ld + r] = src[r * row_stride + p];
}

#endif

void OnlineSoftmaxRow(float* s, int64_t n, float* m, float* sum, float* o, int64_t dv) {
  const float m_new = std::max(*m, RowMax(s, n));
  if (m_new == -INFINITY) {  // every key so far is masked for this row
    std::fill(s, s + n, 0.0f);
    return;
  }
  const float row_sum = ExpShiftedInPlace(s, n, m_new);
  const float alpha = *m == -INFINITY ? 0.0f : FastExp(*m - m_new);
  *sum = *sum * alpha + row_sum;
  *m = m_new;
  if (alpha != 1.0f)
    for (int64_t c = 0; c < dv; ++c) o[c] *= alpha;
}

}  // namespace fusetune::kernels
