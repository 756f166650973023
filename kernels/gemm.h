// GEMM with fusion: C = epilogue(A x B), batched, with A and B read through
// arbitrary strides (so transposes and head splits are free views).
//
// The computation follows the NPU model. Per output block (mc x nc) a thread
// keeps a C tile in its local buffer; for each kc slice it copies (packs) the
// A block (mc x kc) and the B block (kc x nc) from global memory into the
// local buffer, unless the same block is already there, runs the micro-kernel
// over mr x nr sub-tiles, and finally applies the epilogue and copies the
// tile out. The loop order decides which operand is re-packed: with kc = K,
// order kMN packs each A block once and B once per A block, kNM the reverse.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/epilogue.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

struct GemmDesc {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const float* a =
      nullptr;  // element (b, i, p) at a[b*a_batch_stride + i*a_row_stride + p*a_col_stride]
  int64_t a_row_stride = 0, a_col_stride = 1, a_batch_stride = 0;
  const float* b =
      nullptr;  // element (b, p, j) at b[b*b_batch_stride + p*b_row_stride + j*b_col_stride]
  int64_t b_row_stride = 0, b_col_stride = 1, b_batch_stride = 0;
  float* c = nullptr;  // element (b, i, j) at c[b*c_batch_stride + i*c_row_stride + j]
  int64_t c_row_stride = 0, c_batch_stride = 0;
  std::vector<EpilogueOp> epilogue;
};

enum class LoopOrder { kMN, kNM };
enum class ParallelSplit { kM, kN, kMN };  // kMN: blocks dealt round-robin over both dimensions
const char* LoopOrderName(LoopOrder order);
const char* ParallelSplitName(ParallelSplit split);

struct GemmTiling {
  int64_t mc = 96, nc = 256, kc = 256;
  int mr = 8, nr = 32;
  LoopOrder order = LoopOrder::kMN;
  ParallelSplit split = ParallelSplit::kM;
  std::string ToString() const;
};

// Bytes of local buffer one thread needs for `tiling`.
int64_t GemmLocalBytes(const GemmTiling& tiling);
// Errors name the offending field ("tiling.nr: 20 is not a micro-tile width...").
Status ValidateGemm(const GemmDesc& desc, const GemmTiling& tiling, const KernelConfig& config);
Result<KernelStats> RunGemm(const GemmDesc& desc, const GemmTiling& tiling,
                            const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
