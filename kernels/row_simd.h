// Row primitives of the attention kernel: the softmax's row maximum and
// exponentials, and the transpose of K's rows into the micro-kernel's B
// slivers. AVX-512 where the compiler left the plain loops scalar (perf: the
// row sums as scalar adds and K's transpose as scattered scalar stores were
// a third of attention's time outside the micro-kernel); the same loops in
// portable C++ elsewhere.
#pragma once

#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace fusetune::kernels {

float RowMax(const float* s, int64_t n);
// s[j] = exp(s[j] - shift) for j < n, where shift >= every s[j] (the row
// maximum); returns the sum of the new values. Relative error about
// 2e-7 + 1.2e-7 |s[j] - shift| (the exponent's rounding), at least 2^-126.
float ExpShiftedInPlace(float* s, int64_t n, float shift);
// FlashAttention's online-softmax update of one score row s[0..n) against a
// new key block: the running maximum *m, P = exp(S - max) in place of the
// scores, the running sum *sum, and the output row o[0..dv) rescaled to
// the new maximum. A row whose every key so far is masked (-inf) gets P = 0.
void OnlineSoftmaxRow(float* s, int64_t n, float* m, float* sum, float* o, int64_t dv);
// Transposes `keys` rows of `dim` floats (row r at src + r * row_stride,
// contiguous) into dst[p * ld + r]: K's rows into a [dim][nr] sliver.
void TransposeRows(const float* src, int64_t row_stride, int64_t keys, int64_t dim, float* dst,
                   int64_t ld);

#if defined(__AVX512F__)
// Rows r[0..15] become columns: r[k] holds element k of every input row
// (also the convolutions' channel-blocked sums into NCHW rows). Inline: as
// a call it kept the 16 registers in memory, 9% of the stem conv's cycles.
inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xDD);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
  }
}
#endif

}  // namespace fusetune::kernels
