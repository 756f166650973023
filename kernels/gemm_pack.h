// Internal to the GEMM template: copying blocks of A and B from global memory
// into the packed panel layouts the micro-kernels read, and A's prologue.
#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/gemm.h"

namespace fusetune::kernels::gemm_internal {

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

// A panel's or B panel's k extent: bf16 panels hold whole k-pairs.
inline int64_t PanelDepth(int64_t depth, Precision precision) {
  return precision == Precision::kBf16 ? RoundUp(depth, 2) : depth;
}
inline int64_t PairPadded(int64_t depth) { return RoundUp(depth, 2); }

// A block: rows [i0, i0+rows) and columns [p0, p0+depth) of batch b.
struct ABlock {
  int64_t batch, i0, rows, p0, depth;
};

// Copies sliver s (rows s*mr .. s*mr+mr-1 of the block) into the A panel,
// which holds the block by rows ([rows][depth], read by the micro-kernels'
// row-major entry), zero-padding missing rows. Returns bytes read from global.
int64_t PackASliver(const GemmDesc& d, const ABlock& blk, int mr, int64_t s, float* ap);

// A block of B: rows [p0, p0+depth) and columns [j0, j0+cols) of batch b;
// with a pre-packed B, where its panel starts in out.b_packed (floats).
struct BBlock {
  int64_t batch, p0, depth, j0, cols;
  int64_t packed_offset = 0;
};

// Where block (j0, p0) starts in a pre-packed B (see PrePackB), in elements
// of the tiling's precision.
int64_t PrePackedBlockOffset(const GemmDesc& d, const GemmTiling& t, int64_t j0, int64_t p0);

// The B panel holds a block as slivers of nr columns, each [depth][nr]
// (sliver s at bp + s*depth*nr), the last one zero-padded. It is packed in
// parts, so that double buffering can interleave them with the micro-kernels:
// groups of rows when B is row-major, whole slivers when it is transposed or
// pre-packed (then each part is one contiguous copy).
// Each returns the bytes read from global.
int64_t BPackParts(const GemmOutput& out, const BBlock& blk, int nr);
int64_t PackBPart(const GemmOutput& out, const BBlock& blk, int nr, int64_t part, float* bp);
int64_t PackB(const GemmOutput& out, const BBlock& blk, int nr, float* bp);  // all parts

// The bf16 forms (gemm_pack_bf16.cpp), same parts and counts: the A panel's
// rows are PairPadded(depth) long, a B sliver is [depth / 2][nr][2]
// (microkernel_bf16.h); a pre-packed B (out.b_packed) holds bf16 panels.
// Bytes read from global are counted in the source's type: 4 per element of
// an f32 tensor, 2 of a pre-packed bf16 one.
int64_t PackASliverBf16(const GemmDesc& d, const ABlock& blk, int mr, int64_t s, Bf16* ap);
int64_t PackBPartBf16(const GemmOutput& out, const BBlock& blk, int nr, int64_t part, Bf16* bp);
// The staged rows of a prologue (rows x depth floats) to the bf16 A panel,
// zero-padded to whole micro-tiles.
void StagedRowsToBf16(const float* stage, int64_t rows, int64_t depth, int mr, Bf16* ap);

// Row statistics of the prologue's norm: mean and 1/sqrt(var + eps) (or
// 1/sqrt(mean(x^2) + eps) for RMSNorm), one pair per row of the block.
struct NormStats {
  float* mean;
  float* rstd;
};

// Stages a whole A block through the prologue: copies it into `stage`
// (rows x depth), applies the elementwise ops, then the norm with `stats`
// (computed here from the block when depth == K, else by ComputeNormStats
// beforehand). Returns bytes read from global.
int64_t StageWithPrologue(const GemmDesc& d, const ABlock& blk, RunMode mode, float* stage,
                          NormStats stats, bool stats_ready);
// StageWithPrologue, then the staged rows moved to the f32 A panel.
int64_t PackAWithPrologue(const GemmDesc& d, const ABlock& blk, int mr, RunMode mode, float* stage,
                          NormStats stats, bool stats_ready, float* ap);
// One pass over the block's full rows (K columns) in chunks of `chunk` to get
// the norm's statistics when the packed block covers only part of K.
int64_t ComputeNormStats(const GemmDesc& d, int64_t batch, int64_t i0, int64_t rows, int64_t chunk,
                         RunMode mode, float* stage, NormStats stats);

}  // namespace fusetune::kernels::gemm_internal
