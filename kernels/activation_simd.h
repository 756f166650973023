// Pointwise activations over contiguous floats, for the GEMM epilogues and
// the elementwise tile programs. With AVX-512 they run 16 lanes at a time,
// divisions as a reciprocal estimate refined once, polynomials by Estrin's
// scheme, to fast_math.h's accuracy; elsewhere they are fast_math.h's
// scalar forms. The compiler vectorised those scalar forms
// too, but with a vdivps each and a degree-9 polynomial: GELU's epilogue
// took a tenth of a 384x768x3072 GEMM.
#pragma once

#include <cstdint>

namespace fusetune::kernels {

enum class Activation { kExp, kTanh, kErf, kSigmoid, kGeluErf, kGeluTanh, kSilu };

// out[j] = f(in[j]) for j < n; `out` may be `in`.
void Activate(Activation f, const float* in, float* out, int64_t n);
// out[j] = f(in[j] + bias[j]) for j < n, in one pass (a GEMM epilogue's bias
// and activation: one read and write of the tile instead of two).
void ActivateBiased(Activation f, const float* in, const float* bias, float* out, int64_t n);
// gate[j] = Silu(gate[j]) * up[j] for j < n (SwiGLU's product).
void SiluTimes(float* gate, const float* up, int64_t n);

}  // namespace fusetune::kernels
