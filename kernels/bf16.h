// bfloat16 values as the kernels store them (uint16_t: the upper half of a
// float's bits) and the conversions between them and float. Rounding is to
// nearest, ties to even, and a denormal becomes a zero of its sign, as the
// AVX512-BF16 conversion instructions do (so the scalar and vector forms
// agree bit for bit); a NaN stays a NaN. The vector forms use those
// instructions when the CPU has them.
#pragma once

#include <cstdint>
#include <cstring>

namespace fusetune::kernels {

using Bf16 = uint16_t;

inline Bf16 FloatToBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<Bf16>((bits >> 16) | 0x40);  // NaN
  if ((bits & 0x7f800000u) == 0) return static_cast<Bf16>((bits >> 16) & 0x8000u);  // denormal
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<Bf16>(bits >> 16);
}

inline float Bf16ToFloat(Bf16 h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// dst[i] = bf16(src[i]) for i < n.
void ConvertToBf16(const float* src, int64_t n, Bf16* dst);
// Two rows of n floats to n pairs: dst[2j] = bf16(first[j]), dst[2j + 1] =
// bf16(second[j]) (0 when `second` is null): the k-pair layout of the bf16
// micro-kernels' B panels (kernels/microkernel_bf16.h). In place too: dst
// may lie at or below `first` (each 16 columns of both rows are read before
// their pairs are written, and pair j never lies past first[j]) when
// `second` lies at or past first + n.
void InterleaveToBf16Pairs(const float* first, const float* second, int64_t n, Bf16* dst);
// `rows` consecutive rows of n floats (row r at src + r * n) to their
// pairs: dst[(q * n + j) * 2 + h] = bf16(row 2q + h, column j), 0 for an odd
// count's missing last row. In place too: dst may lie at or below src (pair
// q's words land at or below row 2q's floats, which are read first). With
// AVX512-BF16 and n <= 16, one short vector sequence a pair of rows.
void PairConsecutiveRows(const float* src, int64_t rows, int64_t n, Bf16* dst);

}  // namespace fusetune::kernels
