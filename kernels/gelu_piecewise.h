// GELU (erf form) for the epilogues of bf16 kernels, where it cost 10-14% of
// a bf16 GEMM + bias + GELU: a degree-4 polynomial per piece of [-6, 6)
// (32 pieces, Chebyshev interpolants of the exact GELU, built once), the
// piece's coefficients fetched by a 32-entry register permute; x itself
// above 6, 0 below -6. About 10 vector instructions against activation_simd's
// ~40 (a reciprocal, an exp and a degree-9 polynomial): 3.3x faster.
//
// The price: its error is absolute, at most kGeluPiecewiseAbsError (measured
// 8.6e-7 near x = 5, i.e. 1.5 float ulps), where activation_simd's GeluErf
// keeps 2e-7 relative even in the negative tail (GELU(-5) = -1.4e-6). A bf16
// group's outputs carry a relative error of ~2^-8 from its rounded operands,
// so this adds nothing that its error budget sees; f32 kernels keep the
// relatively accurate form.
#pragma once

#include <cstdint>

namespace fusetune::kernels {

inline constexpr double kGeluPiecewiseAbsError = 1e-6;

// out[j] = GELU(in[j] + (bias ? bias[j] : 0)) for j < n; `out` may be `in`.
// NaN stays NaN, +inf gives +inf, -inf gives 0.
void GeluErfPiecewise(const float* in, const float* bias, float* out, int64_t n);

}  // namespace fusetune::kernels
