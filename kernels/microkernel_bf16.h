// bf16 GEMM micro-kernels: C[mr x nr] (+)= A x B with A and B in bfloat16
// and the sums in float (kernels/precision.h). K runs in pairs, as the
// dot-product instruction takes them: vdpbf16ps adds a[2q] b[2q] + a[2q+1]
// b[2q+1] into each float lane. So A is a row-major bf16 block whose rows
// are padded to an even length (element (i, p) at a[i * lda + p], lda even),
// and a B panel of nr columns holds, per k-pair q, nr pairs: element (p, j)
// at bp[(p / 2 * nr + j) * 2 + p % 2]. An odd K's last pair ends in zeros.
// The shapes are those f32 micro-tiles whose width is whole vectors of 16.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bf16.h"

namespace fusetune::kernels {

using Bf16MicroKernelFn = void (*)(int64_t kpairs, const Bf16* a, int64_t lda, const Bf16* bp,
                                   float* c, int64_t ldc, bool accumulate);
// The same carrying `copy_floats` floats from copy_src to copy_dst, spread
// over its k-pairs (microkernel.h's MicroKernelRowsCopyFn, for streaming the
// next pre-packed B panel into the local buffer while this one computes).
using Bf16MicroKernelCopyFn = void (*)(int64_t kpairs, const Bf16* a, int64_t lda, const Bf16* bp,
                                       float* c, int64_t ldc, bool accumulate,
                                       const float* copy_src, float* copy_dst,
                                       int64_t copy_floats);

struct Bf16MicroKernel {
  int mr;
  int nr;
  const char* isa;  // "avx512_bf16" or "portable"
  Bf16MicroKernelFn fn;
  Bf16MicroKernelCopyFn fn_copy;
  // The same with A packed in k-pairs as the B panels are: element (i, p) at
  // a[(p / 2 * mr + i) * 2 + p % 2], lda unused. Winograd's transformed
  // tiles are stored so (conv_winograd.cpp): one row of 32-bit pairs per
  // k-pair, written 16 tiles at a time.
  Bf16MicroKernelFn fn_packed_a;
  Bf16MicroKernelCopyFn fn_packed_a_copy;
};

// The bf16 micro-tile shapes, in the order of MicroTileShapes().
std::vector<std::pair<int, int>> Bf16MicroTileShapes();
// The fastest implementation of mr x nr here; nullptr for a shape not in the set.
const Bf16MicroKernel* FindBf16MicroKernel(int mr, int nr);
// Why a tiling of mr x nr cannot run in bf16: "tiling.mr x tiling.nr: 12x24
// has no bf16 micro-kernel; choose one of 8x32 ..." (the templates' checks).
std::string NoBf16MicroKernel(int mr, int nr);
// The portable one (for tests comparing ISAs).
const Bf16MicroKernel* FindPortableBf16MicroKernel(int mr, int nr);

}  // namespace fusetune::kernels
