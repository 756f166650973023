// Register-blocked GEMM micro-kernels: C[mr x nr] (+)= A_panel^T * B_panel,
// where the A panel is packed as kc x mr (column of A-rows per k) and the B
// panel as kc x nr. The shape (mr x nr) is a tiling choice from a fixed set;
// the instruction set is chosen at run time: AVX-512, else AVX2, else a
// portable version of the same shape.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

using MicroKernelFn = void (*)(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                               bool accumulate);
// The same with A read as a row-major mr x kc block with leading dimension
// lda, for operands already laid out by rows in the local buffer (Q tiles,
// softmax probabilities, hidden activations): no repacking needed.
using MicroKernelRowsFn = void (*)(int64_t kc, const float* a, int64_t lda, const float* bp,
                                   float* c, int64_t ldc, bool accumulate);

// fn_rows that also copies `copy_floats` floats from copy_src to copy_dst
// (non-overlapping, any alignment), spread over its k iterations: a panel of
// the next step moves into the local buffer while this one computes, as a DMA
// engine would overlap them. Loads and stores of the copy use the ports the
// FMAs leave idle (a copy so interleaved cost 0.53 ms where a separate
// memcpy of the same bytes from L3 cost 1.20 ms, measured).
using MicroKernelRowsCopyFn = void (*)(int64_t kc, const float* a, int64_t lda, const float* bp,
                                       float* c, int64_t ldc, bool accumulate,
                                       const float* copy_src, float* copy_dst, int64_t copy_floats);

// fn (packed A) carrying a copy the same way: Winograd's next weight panels
// move into the local buffer while this slice's transform-domain GEMMs run.
using MicroKernelCopyFn = void (*)(int64_t kc, const float* ap, const float* bp, float* c,
                                   int64_t ldc, bool accumulate, const float* copy_src,
                                   float* copy_dst, int64_t copy_floats);

struct MicroKernel {
  int mr;
  int nr;
  const char* isa;  // "avx512", "avx2" or "portable"
  MicroKernelFn fn;
  MicroKernelRowsFn fn_rows;
  MicroKernelRowsCopyFn fn_rows_copy;
  MicroKernelCopyFn fn_copy;
};

// The supported micro-tile shapes, best first for this machine.
std::vector<std::pair<int, int>> MicroTileShapes();
// The fastest implementation of mr x nr on this CPU; nullptr for a shape not in the set.
const MicroKernel* FindMicroKernel(int mr, int nr);
// A thin tile (1x128, 2x64, 4x64): a GEMM of a few rows (a decode step's)
// computes with it only the rows it has; anywhere else it cannot win.
bool IsThinMicroTile(int mr, int nr);
// The same, with a vector kernel on this CPU (the portable one only would be
// slower than any wide tile even there).
bool HasVectorThinMicroTile(int mr, int nr);
// The portable implementation (for tests comparing ISAs).
const MicroKernel* FindPortableMicroKernel(int mr, int nr);

// What every template checks of a tiling besides its own block sizes: mr x
// nr is a micro-tile shape here, config.threads is positive, and the
// `local_bytes` one thread needs fit the local buffer. `blocks` names the
// tiling's block sizes for the message ("mc=384 nc=256 kc=96"); it is called
// only on an error, since kernels validate on every launch.
Status CheckMicroTileAndBuffer(int mr, int nr, int64_t local_bytes, const KernelConfig& config,
                               const std::function<std::string()>& blocks);
// The same rules as a predicate, with no message.
bool MicroTileAndBufferFit(int mr, int nr, int64_t local_bytes, const KernelConfig& config);

}  // namespace fusetune::kernels
