// The conv chain's two matrix products in the tiling's precision
// (ConvChainTiling::precision), for conv_chain.cpp's tile runner:
//   expand:  expanded[eb x n] = W_expand rows [e0, e0 + eb) x X's band
//   project: acc[C' x cols] (+)= W_project columns [e0, e0 + eb) x the
//            block's depthwise outputs
// with the operands they read in the local buffer: X's band packed as the
// micro-kernels' B panels, the block's expand rows and project columns
// copied from the pre-packed weights. The depthwise stage, the biases, the
// activations and the accumulator stay in f32 whatever the precision: only
// what the micro-kernels multiply changes form. The f32 form is in
// conv_chain.cpp, the bf16 form (weights pre-packed in bf16, X's band and
// the depthwise outputs rounded to k-pairs, vdpbf16ps micro-kernels with
// f32 sums) in conv_chain_bf16.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/conv_chain.h"
#include "kernels/traffic.h"

namespace fusetune::kernels::conv_detail {

// The runner's extents the products' regions are sized by, in elements.
struct ChainExtents {
  int64_t x_ld = 0;      // columns of X's packed band (and of the expanded block), band layout
  int64_t out_ld = 0;    // columns of the depthwise outputs and the accumulator
  int64_t out_rows = 0;  // the project's rows: C' rounded up to mr
};

// One thread's products, their operands held in its local buffer.
class ChainProducts {
 public:
  virtual ~ChainProducts() = default;
  // Channels [c0, c0 + count) of X's band into the B panels: rows of n
  // floats, channel c0 + i's at x + i * plane. c0 is even (the bf16 form
  // packs channels in pairs) and count at most 2 unless it ends at C.
  virtual void PackX(const float* x, int64_t plane, int64_t n, int64_t c0, int64_t count) = 0;
  // The block's expand rows and project columns from the pre-packed weights.
  virtual void CopyBlockWeights(int64_t e0, int64_t eb) = 0;
  // expanded[eb x n] (rows ld apart) = the block's expand rows x X's band.
  virtual void Expand(int64_t eb, int64_t n, float* expanded, int64_t ld) = 0;
  // acc (+)= the block's project columns x `dw`: the block's depthwise
  // outputs as f32 B panels (eb rows of nr columns each) covering `cols`.
  virtual void Project(const float* dw, int64_t eb, int64_t cols, float* acc, int64_t ld,
                       bool accumulate) = 0;
  // Finite values in every operand region (compute-only runs read them).
  virtual void FillForComputeOnly() = 0;
};

struct ChainProductsOps {
  // Bytes of the regions a thread's products take in its local buffer.
  int64_t (*local_bytes)(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                         const ChainExtents& extents);
  // The pre-packed weights (expand's rows, then project's), in floats.
  int64_t (*packed_floats)(const ConvChainDesc& desc, const ConvChainTiling& tiling);
  void (*prepack)(const ConvChainDesc& desc, const ConvChainTiling& tiling, float* dst);
  // Bytes CopyBlockWeights copies for a block of eb channels (padding included).
  int64_t (*block_weight_bytes)(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                                int64_t eb);
  std::unique_ptr<ChainProducts> (*make)(const ConvChainDesc& desc, const ConvChainTiling& tiling,
                                         const ChainExtents& extents, const float* packed,
                                         LocalBuffer* local);
};

const ChainProductsOps& F32ChainProducts();   // conv_chain.cpp
const ChainProductsOps& Bf16ChainProducts();  // conv_chain_bf16.cpp
const ChainProductsOps& ChainProductsOf(const ConvChainTiling& tiling);

// Shared by both forms.
inline int64_t ChainRoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t ChainRegionBytes(int64_t floats) { return ChainRoundUp(4 * floats, 64); }

}  // namespace fusetune::kernels::conv_detail
