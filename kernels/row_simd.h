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
// (also the direct convolution's channel-blocked sums into NCHW rows).
void Transpose16x16(__m512 r[16]);
#endif

}  // namespace fusetune::kernels
