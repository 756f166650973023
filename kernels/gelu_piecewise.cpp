#include "kernels/gelu_piecewise.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/simd_math.h"

namespace fusetune::kernels {

namespace {

constexpr int kPieces = 32;  // one 32-entry permute (two registers) per coefficient
constexpr int kDegree = 4;
constexpr double kRange = 6.0;  // |GELU(-6)| = 6e-9; GELU(6) = 6 - 6e-9
// x -> s = (x + kRange) * kScale in [0, kPieces): piece floor(s), u in [-1, 1).
constexpr float kScale = static_cast<float>(kPieces / (2 * kRange));
// The largest float below kPieces (floats in [16, 32) lie 2^-19 apart): s
// is clamped to it so that the last piece's u stays below 1.
constexpr float kLastS = kPieces - 1.0f / (1 << 19);

struct Coefficients {
  // c[j][i]: coefficient of u^j in piece i.
  alignas(64) float c[kDegree + 1][kPieces];
};

double ExactGelu(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }

// The interpolant of GELU at the degree + 1 Chebyshev nodes of piece i
// (nearly the minimax polynomial), in monomial form in u.
void FitPiece(int i, Coefficients& out) {
  constexpr int n = kDegree + 1;
  const double half = kRange / kPieces, mid = -kRange + (2 * i + 1) * half;
  double node[n], coef[n];
  for (int k = 0; k < n; ++k) {
    node[k] = std::cos(std::numbers::pi * (k + 0.5) / n);
    coef[k] = ExactGelu(mid + node[k] * half);
  }
  for (int j = 1; j < n; ++j)  // Newton's divided differences
    for (int k = n - 1; k >= j; --k) coef[k] = (coef[k] - coef[k - 1]) / (node[k] - node[k - j]);
  double mono[n] = {};
  for (int k = n - 1; k >= 0; --k) {  // mono = mono * (u - node[k]) + coef[k]
    for (int j = n - 1; j >= 0; --j) mono[j] = (j > 0 ? mono[j - 1] : 0.0) - mono[j] * node[k];
    mono[0] += coef[k];
  }
  for (int j = 0; j < n; ++j) out.c[j][i] = static_cast<float>(mono[j]);
}

const Coefficients& TheCoefficients() {
  static const Coefficients coefficients = [] {
    Coefficients c{};
    for (int i = 0; i < kPieces; ++i) FitPiece(i, c);
    return c;
  }();
  return coefficients;
}

}  // namespace

#if defined(__AVX512F__)

namespace {

struct Tables16 {
  __m512 lo[kDegree + 1], hi[kDegree + 1];  // pieces 0-15 and 16-31
};

[[gnu::always_inline]] inline __m512 Gelu16(__m512 x, const Tables16& t) {
  const __m512 s = _mm512_fmadd_ps(x, _mm512_set1_ps(kScale), _mm512_set1_ps(kPieces / 2));
  // max/min return their second operand when either is NaN: s, so NaN stays NaN.
  const __m512 clamped =
      _mm512_min_ps(_mm512_set1_ps(kLastS), _mm512_max_ps(_mm512_setzero_ps(), s));
  const __m512 piece = _mm512_roundscale_ps(clamped, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512i index = _mm512_cvttps_epi32(piece);
  const __m512 u =
      _mm512_fmsub_ps(_mm512_sub_ps(clamped, piece), _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f));
  __m512 p = _mm512_permutex2var_ps(t.lo[kDegree], index, t.hi[kDegree]);
  for (int j = kDegree - 1; j >= 0; --j)
    p = _mm512_fmadd_ps(p, u, _mm512_permutex2var_ps(t.lo[j], index, t.hi[j]));
  const __mmask16 above = _mm512_cmp_ps_mask(s, _mm512_set1_ps(kPieces), _CMP_GE_OQ);
  const __mmask16 below = _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_LT_OQ);
  p = _mm512_mask_mov_ps(p, above, x);
  return _mm512_mask_mov_ps(p, below, _mm512_setzero_ps());
}

}  // namespace

void GeluErfPiecewise(const float* in, const float* bias, float* out, int64_t n) {
  const Coefficients& c = TheCoefficients();
  Tables16 t;
  for (int j = 0; j <= kDegree; ++j) {
    t.lo[j] = _mm512_load_ps(c.c[j]);
    t.hi[j] = _mm512_load_ps(c.c[j] + 16);
  }
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 x = _mm512_loadu_ps(in + j);
    if (bias) x = _mm512_add_ps(x, _mm512_loadu_ps(bias + j));
    _mm512_storeu_ps(out + j, Gelu16(x, t));
  }
  if (j < n) {
    const __mmask16 k = simd::Tail(n - j);
    __m512 x = _mm512_maskz_loadu_ps(k, in + j);
    if (bias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, bias + j));
    _mm512_mask_storeu_ps(out + j, k, Gelu16(x, t));
  }
}

FT_SIMD_MATH_END

#else  // portable: the same pieces, one element at a time

void GeluErfPiecewise(const float* in, const float* bias, float* out, int64_t n) {
  const Coefficients& c = TheCoefficients();
  for (int64_t j = 0; j < n; ++j) {
    const float x = in[j] + (bias ? bias[j] : 0.0f);
    const float s = std::fma(x, kScale, kPieces / 2);
    if (std::isnan(s)) {
      out[j] = s;
    } else if (s >= kPieces) {
      out[j] = x;
    } else if (s < 0) {
      out[j] = 0;
    } else {
      const float clamped = std::min(kLastS, s), piece = std::floor(clamped);
      const int i = static_cast<int>(piece);
      const float u = std::fma(clamped - piece, 2.0f, -1.0f);
      float p = c.c[kDegree][i];
      for (int d = kDegree - 1; d >= 0; --d) p = std::fma(p, u, c.c[d][i]);
      out[j] = p;
    }
  }
}

#endif

}  // namespace fusetune::kernels
