#include "kernels/bf16.h"

#include <immintrin.h>

#include "kernels/precision.h"

namespace fusetune::kernels {

const char* PrecisionName(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "f32";
}

std::optional<Precision> PrecisionFromName(std::string_view name) {
  if (name == "f32") return Precision::kF32;
  if (name == "bf16") return Precision::kBf16;
  return std::nullopt;
}

bool CpuHasBf16Dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512f");
  return has;
}

namespace {

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void ConvertAvx512(const float* src,
                                                                          int64_t n, Bf16* dst) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + i));
    // A 512-bit masked store (AVX512BW): the 256-bit one needs AVX512VL.
    _mm512_mask_storeu_epi16(dst + i, static_cast<__mmask32>(mask), _mm512_castsi256_si512(h));
  }
}

// 16 columns of two rows to 16 pairs: cvtne2ps puts the first row's 16
// halves in the low 256 bits and the second's in the high ones; one word
// permutation interleaves them.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void InterleaveAvx512(const float* first,
                                                                             const float* second,
                                                                             int64_t n, Bf16* dst) {
  alignas(64) static const uint16_t kPairs[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                  21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                  11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i pairs = _mm512_load_si512(kPairs);
  for (int64_t j = 0; j < n; j += 16) {
    const int64_t w = n - j < 16 ? n - j : 16;
    const __mmask16 mask = static_cast<__mmask16>(w == 16 ? 0xffffu : (1u << w) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(mask, first + j);
    const __m512 hi = second ? _mm512_maskz_loadu_ps(mask, second + j) : _mm512_setzero_ps();
    const __m512i both = _mm512_permutexvar_epi16(pairs, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    if (w == 16)
      _mm512_storeu_si512(dst + 2 * j, both);
    else
      _mm512_mask_storeu_epi16(dst + 2 * j, static_cast<__mmask32>((uint64_t{1} << (2 * w)) - 1),
                               both);
  }
}

// Per pair of rows: their 2n floats (two loads past 16) converted in one
// cvtne2ps, whose halves are the floats in order; one word permutation puts
// column j's two halves side by side (halves j and n + j).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void PairRowsAvx512(const float* src,
                                                                           int64_t rows, int64_t n,
                                                                           Bf16* dst) {
  alignas(64) uint16_t index[32] = {};
  for (int j = 0; j < n; ++j) {
    index[2 * j] = static_cast<uint16_t>(j);
    index[2 * j + 1] = static_cast<uint16_t>(n + j);
  }
  const __m512i pairs = _mm512_load_si512(index);
  const auto out_mask = static_cast<__mmask32>((uint64_t{1} << (2 * n)) - 1);
  for (int64_t q = 0; 2 * q < rows; ++q) {
    const int64_t floats = (2 * q + 1 < rows ? 2 : 1) * n;
    const float* p = src + 2 * q * n;
    const __m512 lo = _mm512_maskz_loadu_ps(
        static_cast<__mmask16>(floats >= 16 ? 0xffffu : (1u << floats) - 1), p);
    const __m512 hi = floats > 16 ? _mm512_maskz_loadu_ps(
                                        static_cast<__mmask16>((1u << (floats - 16)) - 1), p + 16)
                                  : _mm512_setzero_ps();
    const __m512i both = _mm512_permutexvar_epi16(pairs, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    _mm512_mask_storeu_epi16(dst + 2 * q * n, out_mask, both);
  }
}

}  // namespace

void PairConsecutiveRows(const float* src, int64_t rows, int64_t n, Bf16* dst) {
  if (CpuHasBf16Dot() && n <= 16) return PairRowsAvx512(src, rows, n, dst);
  for (int64_t q = 0; 2 * q < rows; ++q)
    InterleaveToBf16Pairs(src + 2 * q * n, 2 * q + 1 < rows ? src + (2 * q + 1) * n : nullptr, n,
                          dst + 2 * q * n);
}

void ConvertToBf16(const float* src, int64_t n, Bf16* dst) {
  if (CpuHasBf16Dot()) return ConvertAvx512(src, n, dst);
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

void InterleaveToBf16Pairs(const float* first, const float* second, int64_t n, Bf16* dst) {
  if (CpuHasBf16Dot()) return InterleaveAvx512(first, second, n, dst);
  for (int64_t j = 0; j < n; ++j) {
    dst[2 * j] = FloatToBf16(first[j]);
    dst[2 * j + 1] = second ? FloatToBf16(second[j]) : Bf16{0};
  }
}

}  // namespace fusetune::kernels
