#include "kernels/activation_simd.h"

#include "kernels/fast_math.h"
#include "kernels/simd_math.h"

namespace fusetune::kernels {

#if defined(__AVX512F__)

namespace {

using simd::Exp16;
using simd::Recip16;
using simd::Tail;

[[gnu::always_inline]] inline __m512 Set(float v) { return _mm512_set1_ps(v); }

// Results below about 1e-35 are returned as 0 rather than computed: their
// products would be subnormal, and each subnormal result costs a microcode
// assist of a hundred cycles or more (the GEMM's GELU epilogue ran 1.7x
// slower on inputs that reached them).
constexpr float kTinyExponent = 80.0f;  // exp(-80) = 1.8e-35

// |x| with x's sign bit put back.
[[gnu::always_inline]] inline __m512 WithSignOf(__m512 magnitude, __m512 x) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

// FastErf's form: erfc(|x|) = t exp(-x^2 + P(t)), t = 1 / (1 + |x|/2), P of
// degree 9 (Numerical Recipes), whose relative error in erfc stays below
// 1.2e-7 for all x, so that GELU's negative tail, 0.5 x erfc(|x|/sqrt 2),
// keeps its relative accuracy (Abramowitz and Stegun's shorter 7.1.26 is
// accurate only absolutely, to 1.5e-7: up to 2e-3 relative at x = -4, and
// worse below).
[[gnu::always_inline]] inline __m512 ErfcOfAbs16(__m512 x) {
  // erfc(9) = 4e-37, and z^2 - P(t) stays below 82 up to there.
  const __m512 z = _mm512_min_ps(Set(9.0f), _mm512_abs_ps(x));
  const __m512 t = Recip16(_mm512_fmadd_ps(z, Set(0.5f), Set(1.0f)));
  // Estrin's scheme: shorter dependency chains than Horner's.
  const __m512 t2 = _mm512_mul_ps(t, t), t4 = _mm512_mul_ps(t2, t2), t8 = _mm512_mul_ps(t4, t4);
  const __m512 p01 = _mm512_fmadd_ps(t, Set(1.00002368f), Set(-1.26551223f));
  const __m512 p23 = _mm512_fmadd_ps(t, Set(0.09678418f), Set(0.37409196f));
  const __m512 p45 = _mm512_fmadd_ps(t, Set(0.27886807f), Set(-0.18628806f));
  const __m512 p67 = _mm512_fmadd_ps(t, Set(1.48851587f), Set(-1.13520398f));
  const __m512 p89 = _mm512_fmadd_ps(t, Set(0.17087277f), Set(-0.82215223f));
  const __m512 p03 = _mm512_fmadd_ps(t2, p23, p01), p47 = _mm512_fmadd_ps(t2, p67, p45);
  const __m512 p = _mm512_fmadd_ps(t8, p89, _mm512_fmadd_ps(t4, p47, p03));
  const __mmask16 not_tiny = _mm512_cmp_ps_mask(z, Set(9.0f), _CMP_NGE_UQ);
  return _mm512_maskz_mul_ps(not_tiny, t, Exp16(_mm512_fnmadd_ps(z, z, p)));
}

[[gnu::always_inline]] inline __m512 Erf16(__m512 x) {
  return WithSignOf(_mm512_sub_ps(Set(1.0f), ErfcOfAbs16(x)), x);
}

// 1 - 2 / (exp(2x) + 1): exact limits at both ends (the clamps).
[[gnu::always_inline]] inline __m512 Tanh16(__m512 x) {
  const __m512 e = Exp16(_mm512_min_ps(Set(kTinyExponent), _mm512_add_ps(x, x)));
  return _mm512_fnmadd_ps(Set(2.0f), Recip16(_mm512_add_ps(e, Set(1.0f))), Set(1.0f));
}

// 1 / (1 + exp(-x)), 0 below x = -80 (NaN stays NaN).
[[gnu::always_inline]] inline __m512 Sigmoid16(__m512 x) {
  const __mmask16 not_tiny = _mm512_cmp_ps_mask(x, Set(-kTinyExponent), _CMP_NLT_UQ);
  const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_maskz_mov_ps(not_tiny, Recip16(_mm512_add_ps(e, Set(1.0f))));
}

[[gnu::always_inline]] inline __m512 Activate16(Activation f, __m512 x) {
  switch (f) {
    case Activation::kExp:
      return Exp16(x);
    case Activation::kTanh:
      return Tanh16(x);
    case Activation::kErf:
      return Erf16(x);
    case Activation::kSigmoid:
      return Sigmoid16(x);
    case Activation::kGeluErf: {
      // x < 0: 0.5 x erfc(|x|/sqrt 2), else x - 0.5 x erfc(x/sqrt 2): no
      // 1 + erf(x) to cancel in the negative tail.
      const __m512 tail = _mm512_mul_ps(_mm512_mul_ps(x, Set(0.5f)),
                                        ErfcOfAbs16(_mm512_mul_ps(x, Set(0.70710678f))));
      const __mmask16 negative = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
      return _mm512_mask_blend_ps(negative, _mm512_sub_ps(x, tail), tail);
    }
    case Activation::kGeluTanh: {
      // 0.5 x (1 + tanh u) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
      const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
      const __m512 two_u =
          _mm512_mul_ps(Set(2 * 0.7978845608f), _mm512_fmadd_ps(x3, Set(0.044715f), x));
      return _mm512_mul_ps(x, Sigmoid16(two_u));
    }
    case Activation::kSilu:
      return _mm512_mul_ps(x, Sigmoid16(x));
  }
  return x;
}

// The switch sits outside the loop: one instantiation per activation (and
// per whether a bias is added first).
template <Activation F, bool kBias>
void ActivateAll(const float* in, const float* bias, float* out, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 x = _mm512_loadu_ps(in + j);
    if constexpr (kBias) x = _mm512_add_ps(x, _mm512_loadu_ps(bias + j));
    _mm512_storeu_ps(out + j, Activate16(F, x));
  }
  if (j < n) {
    const __mmask16 k = Tail(n - j);
    __m512 x = _mm512_maskz_loadu_ps(k, in + j);
    if constexpr (kBias) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, bias + j));
    _mm512_mask_storeu_ps(out + j, k, Activate16(F, x));
  }
}

template <bool kBias>
void Dispatch(Activation f, const float* in, const float* bias, float* out, int64_t n) {
  switch (f) {
    case Activation::kExp:
      return ActivateAll<Activation::kExp, kBias>(in, bias, out, n);
    case Activation::kTanh:
      return ActivateAll<Activation::kTanh, kBias>(in, bias, out, n);
    case Activation::kErf:
      return ActivateAll<Activation::kErf, kBias>(in, bias, out, n);
    case Activation::kSigmoid:
      return ActivateAll<Activation::kSigmoid, kBias>(in, bias, out, n);
    case Activation::kGeluErf:
      return ActivateAll<Activation::kGeluErf, kBias>(in, bias, out, n);
    case Activation::kGeluTanh:
      return ActivateAll<Activation::kGeluTanh, kBias>(in, bias, out, n);
    case Activation::kSilu:
      return ActivateAll<Activation::kSilu, kBias>(in, bias, out, n);
  }
}

}  // namespace

void Activate(Activation f, const float* in, float* out, int64_t n) {
  Dispatch<false>(f, in, nullptr, out, n);
}

void ActivateBiased(Activation f, const float* in, const float* bias, float* out, int64_t n) {
  Dispatch<true>(f, in, bias, out, n);
}

void SiluTimes(float* gate, const float* up, int64_t n) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 g = Activate16(Activation::kSilu, _mm512_loadu_ps(gate + j));
    _mm512_storeu_ps(gate + j, _mm512_mul_ps(g, _mm512_loadu_ps(up + j)));
  }
  if (j < n) {
    const __mmask16 k = Tail(n - j);
    const __m512 g = Activate16(Activation::kSilu, _mm512_maskz_loadu_ps(k, gate + j));
    _mm512_mask_storeu_ps(gate + j, k, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(k, up + j)));
  }
}

FT_SIMD_MATH_END

#else  // portable

namespace {

float Scalar(Activation f, float x) {
  switch (f) {
    case Activation::kExp:
      return FastExp(x);
    case Activation::kTanh:
      return FastTanh(x);
    case Activation::kErf:
      return FastErf(x);
    case Activation::kSigmoid:
      return FastSigmoid(x);
    case Activation::kGeluErf:
      return GeluErf(x);
    case Activation::kGeluTanh:
      return GeluTanh(x);
    case Activation::kSilu:
      return Silu(x);
  }
  return x;
}

}  // namespace

void Activate(Activation f, const float* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = Scalar(f, in[j]);
}

void ActivateBiased(Activation f, const float* in, const float* bias, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = Scalar(f, in[j] + bias[j]);
}

void SiluTimes(float* gate, const float* up, int64_t n) {
  for (int64_t j = 0; j < n; ++j) gate[j] = Silu(gate[j]) * up[j];
}

#endif

}  // namespace fusetune::kernels
