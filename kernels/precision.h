// The precision a kernel computes in: a choice of its tiling, searched like
// block sizes, because it trades error for speed (docs/PRECISION.md).
//   f32:  every operand and every operation in float.
//   bf16: the matrix operands rounded to bfloat16 (8 bits of mantissa) as
//         they are copied into the local buffer (constant weights once, when
//         they are pre-packed), products summed in float by the
//         AVX512-BF16 dot-product instruction; epilogues, prologues,
//         reductions and the copy out in float (a GELU in its piecewise
//         form, absolute error 1e-6: gelu_piecewise.h).
#pragma once

#include <optional>
#include <string_view>

namespace fusetune::kernels {

enum class Precision { kF32, kBf16 };
inline constexpr int kNumPrecisions = 2;
const char* PrecisionName(Precision precision);  // "f32", "bf16"
std::optional<Precision> PrecisionFromName(std::string_view name);

// Whether this CPU has the bf16 dot-product instruction (vdpbf16ps, the
// Linux flag avx512_bf16). Without it a bf16 kernel still computes the same
// values, on a portable micro-kernel far slower than f32: tiling spaces
// offer bf16 only where this holds (fusion_space/ asks the target module).
bool CpuHasBf16Dot();

}  // namespace fusetune::kernels
