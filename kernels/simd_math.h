// AVX-512 forms of fast_math.h's transcendentals, 16 lanes at a time, for
// the kernels' .cpp files that vectorise by hand (row_simd, activation_simd).
// Include only under __AVX512F__; it brings <immintrin.h> with GCC 12's
// spurious -Wuninitialized reports silenced (GCC bug 105593, fixed in GCC 13)
// until the matching FT_SIMD_MATH_END.
#pragma once

#if defined(__AVX512F__)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // GCC's false positives; clang has no such warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace fusetune::kernels::simd {

// FastExp on 16 lanes: the same clamp, range reduction and polynomial.
[[gnu::always_inline]] inline __m512 Exp16(__m512 x) {
  // vmaxps/vminps return their second operand when either is NaN: x, so
  // that NaN stays NaN, as in FastExp.
  x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-87.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
  __m512 p = _mm512_set1_ps(0.00138925994f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.00833336077f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.0416666493f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.166666672f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

// 1 / d from the 14-bit estimate and one Newton step (relative error about
// 2^-28): a division (vdivps) costs several times more on these cores.
[[gnu::always_inline]] inline __m512 Recip16(__m512 d) {
  const __m512 e = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(e, _mm512_fnmadd_ps(d, e, _mm512_set1_ps(2.0f)));
}

// The first n (< 16) lanes.
inline __mmask16 Tail(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

}  // namespace fusetune::kernels::simd

#define FT_SIMD_MATH_END _Pragma("GCC diagnostic pop")

#endif
