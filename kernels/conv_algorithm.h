// Internal to the convolution template (conv.h): what each algorithm
// provides, and the tile walk and tile finishing they share. One file per
// algorithm (conv_im2col.cpp, conv_direct.cpp, conv_winograd.cpp,
// conv_depthwise.cpp) defines its ConvAlgorithmOps, and one file per bf16
// form (conv_im2col_bf16.cpp, conv_direct_bf16.cpp); conv.cpp dispatches.
#pragma once

#include <cstdint>

#include "kernels/conv.h"
#include "kernels/estimate.h"

namespace fusetune::kernels::conv_detail {

struct ConvAlgorithmOps {
  // Whether the algorithm computes this shape at all (conv.h's ConvAlgorithmApplies).
  Status (*applies)(const ConvShape& shape);
  // The algorithm's own rules on the tiling (block multiples, micro-tile);
  // conv.cpp has already checked the shape, the applicability and positive blocks.
  Status (*check_tiling)(const ConvDesc& desc, const ConvTiling& tiling);
  int64_t (*local_bytes)(const ConvDesc& desc, const ConvTiling& tiling);
  int64_t (*packed_floats)(const ConvDesc& desc, const ConvTiling& tiling);  // 0: none
  void (*prepack)(const ConvDesc& desc, const ConvTiling& tiling, float* dst);
  // One thread's share of a validated run.
  KernelStats (*run_share)(const ConvDesc& desc, const ConvTiling& tiling,
                           const KernelConfig& config, RunMode mode, int thread);
  TilingEstimate (*estimate)(const ConvDesc& desc, const ConvTiling& tiling, int threads);
};

const ConvAlgorithmOps& Im2colGemmOps();
const ConvAlgorithmOps& DirectOps();
const ConvAlgorithmOps& WinogradOps();  // kWinograd2 and kWinograd4 (the tiling says which)
const ConvAlgorithmOps& DepthwiseOps();
const ConvAlgorithmOps& Im2colGemmBf16Ops();  // kIm2colGemm in bf16 (conv_im2col_bf16.cpp)
const ConvAlgorithmOps& DirectBf16Ops();      // kDirect in bf16 (conv_direct_bf16.cpp)
// Its blocks without AVX512-BF16 (what DirectBf16Ops() is on such a CPU; tests).
const ConvAlgorithmOps& DirectBf16PortableOps();
const ConvAlgorithmOps& OpsOf(ConvAlgorithm algorithm);  // the f32 forms
// The ops that run `tiling`: its algorithm's, in its precision.
const ConvAlgorithmOps& OpsOf(const ConvTiling& tiling);

// One output tile: image `image`, output channels [oc0, oc0 + ocs), output
// positions [p0, p0 + ps) of that image (flattened oh * out_w + ow). With a
// max pool (ConvDesc::max_pool), the pooled rows [pool_row0, pool_row0 +
// pool_rows) that the tile's conv rows are the windows of.
struct ConvTile {
  int64_t image = 0, oc0 = 0, ocs = 0, p0 = 0, ps = 0;
  int64_t pool_row0 = 0, pool_rows = 0;
  // Whether `other` reads the same input band (a max pool's bands can start
  // at the same row and differ in length).
  bool SameBand(const ConvTile& other) const {
    return image == other.image && p0 == other.p0 && ps == other.ps;
  }
};

// The output tiles of a tiling in (image, position block, channel block)
// order, channel blocks innermost so that consecutive tiles of a thread share
// their input. Channel blocks never straddle a group (im2col cuts each
// group's out_per_group channels into blocks). `whole_rows` (direct,
// Winograd, depthwise) makes position blocks whole output rows:
// max(1, pixel_block / out_w) rows, rounded up to a multiple of `row_multiple`.
// An active `pool` makes every walk one of whole rows whose position blocks
// are bands of pooled rows: each tile the conv rows its pooled rows read,
// at most rows_per_block() of them, so that neighbouring tiles overlap by
// the windows' halo.
class ConvTileWalk {
 public:
  // `across_groups` (depthwise: one channel per group) cuts all
  // out_channels into blocks regardless of groups.
  ConvTileWalk(const ConvShape& shape, int64_t oc_block, int64_t pixel_block, bool whole_rows,
               int64_t row_multiple = 1, bool across_groups = false,
               const ConvMaxPool& pool = ConvMaxPool{});
  int64_t size() const { return images_ * pos_blocks_ * oc_blocks_; }
  ConvTile At(int64_t index) const;
  // The tiles [begin, end) of `thread`: contiguous, as even as possible.
  void ShareOf(int thread, int threads, int64_t* begin, int64_t* end) const;
  int64_t rows_per_block() const { return rows_per_block_; }  // whole_rows only
  int64_t position_blocks() const { return pos_blocks_; }     // per image
  // Pooled rows per tile (max pool only): 0 when rows_per_block() rows
  // hold no whole window.
  int64_t pooled_rows_per_block() const { return pool_rows_per_block_; }

 private:
  ConvShape shape_;
  ConvMaxPool pool_;
  int64_t oc_block_, pos_block_, rows_per_block_ = 0, pool_rows_per_block_ = 0;
  int64_t images_, pos_blocks_, oc_blocks_, oc_blocks_per_group_;
};

// The tile walk `tiling.algorithm` runs on `desc` (its position blocks, a
// max pool's bands; channel blocks as ConvTileWalk cuts them for a grouped
// conv). Every algorithm walks this one.
ConvTileWalk AlgorithmWalk(const ConvDesc& desc, const ConvTiling& tiling);

// Finishes a computed tile held as ocs rows of ps floats (leading dimension
// ld) in the local buffer: adds the bias, runs the epilogue and copies the
// rows out to Y, or with a global pool reduces each row (the tile holds all
// of the image's positions) and writes the ocs pooled values, or with a max
// pool writes the tile's pooled rows. Counts the
// bias, epilogue reads and the copy out in `stats`. kComputeOnly skips the
// copies (and reads), kCopyOnly the arithmetic. May overwrite the tile.
// Y and the epilogue's operands of Y's shape lie in `y_layout`.
void FinishConvTile(const ConvDesc& desc, const ConvTile& tile, float* acc, int64_t ld,
                    ActivationLayout y_layout, RunMode mode, KernelStats* stats);

// Whether an epilogue operand can be addressed on a tile held as 16-channel
// blocks ([position][16] per block): one of Y's shape (a residual, in Y's
// NCHW16c), one value per channel, or one value for the whole tile; ops
// that read no memory (activations, scalars) always can.
bool EpilogueOpAddressableInBlocks(const ConvShape& s, const EpilogueOp& op);
bool EpilogueAddressableInBlocks(const ConvShape& s, const std::vector<EpilogueOp>& ops);
// Whether a tile held as whole 16-channel blocks can be finished where it
// lies into Y in `y_layout` (FinishBlockedConvTile): no pool, and NCHW16c Y
// with operands addressable in blocks, or NCHW Y whose operands hold one
// value per channel or per tile (one of Y's shape would be read across 16
// planes per position).
bool FinishableInBlocks(const ConvDesc& desc, ActivationLayout y_layout);
// Finishes a computed tile held as whole 16-channel blocks, block i's
// [position][16] at blocks + i * block_ld, into Y in `y_layout` where
// FinishableInBlocks (conv_finish_blocks.cpp): the bias and the epilogue on
// the blocks, then each block copied out as it lies (NCHW16c) or transposed
// into Y's planes (NCHW), counted as FinishConvTile and the estimates count
// them (EpilogueReadBytes; not the tile itself). Run modes as FinishConvTile:
// kComputeOnly skips the copies and the epilogue's ops that read memory,
// kCopyOnly the bias and the ops that read none.
void FinishBlockedConvTile(const ConvDesc& desc, const ConvTile& tile, float* blocks,
                           int64_t block_ld, ActivationLayout y_layout, RunMode mode,
                           KernelStats* stats);

// The bytes ApplyEpilogue reads from global memory for a rows x cols tile:
// what an estimate adds for a tile's epilogue operands.
double EpilogueReadBytes(const std::vector<EpilogueOp>& ops, int64_t rows, int64_t cols);

// Zero-padded read of X: the value at (image, channel, ih, iw), 0 outside.
inline float XAt(const ConvDesc& d, int64_t image, int64_t c, int64_t ih, int64_t iw) {
  const ConvShape& s = d.shape;
  if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) return 0.0f;
  return d.x[((image * s.in_channels + c) * s.in_h + ih) * s.in_w + iw];
}

}  // namespace fusetune::kernels::conv_detail
