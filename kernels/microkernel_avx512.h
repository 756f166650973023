// Internal to the AVX-512 micro-kernels (microkernel.cpp, f32;
// microkernel_bf16.cpp, bf16; conv_im2col.cpp's gather-carrying one): what
// they do besides their multiply-adds.
// The register tile of float sums stored to C, and the copy a micro-kernel
// carries (microkernel.h's MicroKernelRowsCopyFn): a panel of the next step
// moved into the local buffer one 16-float vector every 2^shift steps of the
// k loop, so that its loads spread over the whole call, the rest at the end.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace fusetune::kernels::avx512_internal {

// The smallest spacing that still fits `vectors` into `steps` iterations.
inline int CopySpacingShift(int64_t steps, int64_t vectors) {
  int shift = 0;
  while (shift < 6 && (steps >> (shift + 1)) >= vectors) ++shift;
  return shift;
}

class CarriedCopy {
 public:
  CarriedCopy(int64_t steps, const float* src, float* dst, int64_t floats)
      : src_(src),
        dst_(dst),
        floats_(floats),
        vectors_(floats / 16),
        mask_(floats >= 16 ? (int64_t{1} << CopySpacingShift(steps, floats / 16)) - 1 : 0) {}
  // At step p of the k loop.
  __attribute__((target("avx512f"), always_inline)) inline void Step(int64_t p) {
    if ((p & mask_) == 0 && copied_ < vectors_) {
      _mm512_storeu_ps(dst_ + copied_ * 16, _mm512_loadu_ps(src_ + copied_ * 16));
      ++copied_;
    }
  }
  // After the loop: what the steps did not carry.
  void Finish() {
    if (floats_ > copied_ * 16)
      std::memcpy(dst_ + copied_ * 16, src_ + copied_ * 16, (floats_ - copied_ * 16) * sizeof(float));
  }

 private:
  const float* src_;
  float* dst_;
  int64_t floats_, vectors_, mask_, copied_ = 0;
};

// C[MR x 16 NV] (+)= acc, row stride ldc.
template <int MR, int NV>
__attribute__((target("avx512f"), always_inline)) inline void StoreTile(const __m512 (&acc)[MR][NV],
                                                                       float* c, int64_t ldc,
                                                                       bool accumulate) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* dst = c + i * ldc + v * 16;
      const __m512 r = accumulate ? _mm512_add_ps(_mm512_loadu_ps(dst), acc[i][v]) : acc[i][v];
      _mm512_storeu_ps(dst, r);
    }
}

}  // namespace fusetune::kernels::avx512_internal
