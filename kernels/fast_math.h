// Branch-free f32 transcendentals, inline so that loops over them vectorise
// (std::exp and std::erf neither vectorise here nor stay fast on underflow).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fusetune::kernels {

// exp(x) with relative error below 3e-7; inputs clamped to [-87, 88].
inline float FastExp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // x = n ln2 + r with |r| <= ln2/2; exp(r) by a degree-6 polynomial; 2^n via the exponent bits.
  const float n = std::nearbyint(x * 1.44269504f);
  const float r = x - n * 0.693145752f - n * 1.42860677e-6f;
  const float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (0.166666672f + r * (0.0416666493f + r * (0.00833336077f +
                                                                            r * 0.00138925994f)))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// erf(x) with absolute error below 5e-7: Numerical Recipes' Chebyshev form of
// erfc, erf(x) = 1 - t exp(-x^2 + P(t)), t = 1 / (1 + |x|/2).
inline float FastErf(float x) {
  const float z = std::min(std::fabs(x), 4.0f);  // erf(4) = 1 in f32
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
  const float r = 1.0f - t * FastExp(p);
  return x >= 0 ? r : -r;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1); exact limits at both ends thanks to the clamp in FastExp.
inline float FastTanh(float x) { return 1.0f - 2.0f / (FastExp(2.0f * x) + 1.0f); }
inline float FastSigmoid(float x) { return 1.0f / (1.0f + FastExp(-x)); }
inline float GeluErf(float x) { return 0.5f * x * (1.0f + FastErf(x * 0.70710678f)); }
inline float GeluTanh(float x) {
  return 0.5f * x * (1.0f + FastTanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}
inline float Silu(float x) { return x / (1.0f + FastExp(-x)); }

}  // namespace fusetune::kernels
