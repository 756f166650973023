// Branch-free f32 transcendentals, inline so that loops over them vectorise
// (std::exp and std::erf neither vectorise here nor stay fast on underflow).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fusetune::kernels {

// exp(x) with relative error below 3e-7; inputs clamped to [-87, 88], NaN stays NaN.
inline float FastExp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // x = n ln2 + r with |r| <= ln2/2; exp(r) by a degree-6 polynomial; 2^n via the exponent bits.
  const float n = std::nearbyint(x * 1.44269504f);
  const float r = x - n * 0.693145752f - n * 1.42860677e-6f;
  const float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666493f + r * (0.00833336077f +
                                                                            r * 0.00138925994f)))));
  // A NaN n converts to int only as undefined behaviour (UBSan stops there);
  // the NaN reaches the result through p.
  const int32_t bits = (static_cast<int32_t>(n == n ? n : 0.0f) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// erfc(|x|) with relative error below 1e-5 (2e-6 up to |x| = 5.6; 0 from
// |x| = 9 on, where erfc is 4e-37): Numerical Recipes' Chebyshev form t exp(-x^2 + P(t)),
// t = 1 / (1 + |x|/2).
inline float FastErfcOfAbs(float x) {
  const float z = std::min(std::fabs(x), 9.0f);
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float p =
      -z * z - 1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f +
                          t * (0.27886807f +
                               t * (-1.13520398f +
                                    t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  return z >= 9.0f ? 0.0f : t * FastExp(p);  // NaN stays NaN
}

// erf(x) with absolute error below 5e-7.
inline float FastErf(float x) {
  const float r = 1.0f - FastErfcOfAbs(x);
  return x >= 0 ? r : -r;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1); exact limits at both ends thanks to the clamp in FastExp.
inline float FastTanh(float x) { return 1.0f - 2.0f / (FastExp(2.0f * x) + 1.0f); }
// 0 below x = -80, as the vector form: FastExp's clamp would leave
// 1 / (1 + e^88), a subnormal (NaN stays NaN).
inline float FastSigmoid(float x) { return x < -80.0f ? 0.0f : 1.0f / (1.0f + FastExp(-x)); }
// GELU's negative tail as 0.5 x erfc(|x| / sqrt 2) and x sigmoid(2u): no
// 1 + erf or 1 + tanh to cancel where the values are tiny (the vector
// kernels' forms, so that machines without AVX-512 compute the same).
inline float GeluErf(float x) {
  const float tail = 0.5f * x * FastErfcOfAbs(x * 0.70710678f);
  return x < 0 ? tail : x - tail;
}
inline float GeluTanh(float x) {
  return x * FastSigmoid(2.0f * 0.7978845608f * (x + 0.044715f * x * x * x));
}
inline float Silu(float x) { return x * FastSigmoid(x); }

}  // namespace fusetune::kernels
