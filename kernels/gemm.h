// GEMM with fusion: C_o = epilogue_o(prologue(A) x B_o) for one or more
// outputs o sharing A (horizontal fusion: Q, K and V projections; SwiGLU's
// gate and up, combined as silu(A x B_gate) * (A x B_up)), batched, with A and
// every B read through arbitrary strides (so transposes and head splits are
// free views).
//
// The computation follows the NPU model. Per output block (mc x nc) a thread
// keeps a C tile in its local buffer; for each kc slice it copies (packs) the
// A block (mc x kc) and the B block (kc x nc) from global memory into the
// local buffer, unless the same block is already there, runs the micro-kernel
// over mr x nr sub-tiles, and finally applies the epilogue and copies the
// tile out. The loop order decides which operand is re-packed: with kc = K,
// order kMN packs each A block once and B once per A block, kNM the reverse.
// The prologue (elementwise ops on A, then a per-row LayerNorm or RMSNorm) is
// applied while A is packed; its row statistics come from the packed block
// when kc covers K, else from one extra pass over the rows (counted).
// With double buffering the panels of the next step are packed into a second
// set of buffers, interleaved with the micro-kernel calls of the current one;
// with refilling (single buffered) the next step's B slivers take the places
// of the current one's as its columns finish.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/epilogue.h"
#include "kernels/precision.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

enum class NormKind { kNone, kLayerNorm, kRmsNorm };
const char* NormKindName(NormKind kind);

struct GemmPrologue {
  // Applied first, to A's elements (row = i, column = p): a bias here is per
  // column of A, a residual an [M, K] tensor added to A.
  std::vector<EpilogueOp> elementwise;
  NormKind norm = NormKind::kNone;
  const float* gamma = nullptr;  // [K]
  const float* beta = nullptr;   // [K], LayerNorm only, optional
  float epsilon = 1e-5f;
  bool empty() const { return elementwise.empty() && norm == NormKind::kNone; }
};

// One B operand and the output it produces.
struct GemmOutput {
  int64_t n = 0;
  const float* b =
      nullptr;  // element (b, p, j) at b[b*b_batch_stride + p*b_row_stride + j*b_col_stride]
  int64_t b_row_stride = 0, b_col_stride = 1, b_batch_stride = 0;
  // Optional: the same B pre-packed by PrePackB for the tiling being run
  // (constant weights, packed once when a program is prepared). Copying a
  // block into the local buffer is then one contiguous run per sliver
  // instead of a strided gather of short rows. Needs an unbatched B
  // (b_batch_stride 0 or batch 1); `b` stays the source of truth. With a
  // bf16 tiling it holds bf16 panels (half the bytes to stream).
  const float* b_packed = nullptr;
  float* c = nullptr;  // element (b, i, j) at c[b*c_batch_stride + i*c_row_stride + j]
  int64_t c_row_stride = 0, c_batch_stride = 0;
  std::vector<EpilogueOp> epilogue;
};

struct GemmDesc {
  int64_t batch = 1, m = 0, k = 0;
  const float* a =
      nullptr;  // element (b, i, p) at a[b*a_batch_stride + i*a_row_stride + p*a_col_stride]
  int64_t a_row_stride = 0, a_col_stride = 1, a_batch_stride = 0;
  GemmPrologue prologue;
  std::vector<GemmOutput> outputs;
  // SwiGLU: outputs[0] is the gate and outputs[1] the up projection (same n);
  // the result silu(gate) * up goes through outputs[0]'s epilogue into
  // outputs[0].c; outputs[1].c is not written.
  bool swiglu = false;
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
  bool double_buffer = false;
  // Single buffered, the next step's B slivers refilled in place as the
  // columns that read them finish, carried by the micro-kernel calls (see
  // ThreadRunner::ComputeRefilling): the copies overlap the compute without
  // halving the blocks, where the compute per sliver is long enough to hide
  // one (a 384x768x3072 GEMM: 3-4% faster); where it is not, as in a
  // weight-streaming decode GEMM, the carried copy is slower than a plain one
  // (measured 5-30%). So it is a choice the search makes. Needs pre-packed
  // B; elsewhere the same tiling copies as without it.
  bool refill = false;
  // bf16: A and B rounded to bfloat16 as they are packed, the bf16
  // micro-kernels (microkernel_bf16.h), sums and epilogues in float.
  Precision precision = Precision::kF32;
  std::string ToString() const;
  bool operator==(const GemmTiling&) const = default;
};

// Bytes of local buffer one thread needs for `tiling` on `desc`.
int64_t GemmLocalBytes(const GemmDesc& desc, const GemmTiling& tiling);
// Errors name the offending field ("tiling.nr: 20 is not a micro-tile width...").
Status ValidateGemm(const GemmDesc& desc, const GemmTiling& tiling, const KernelConfig& config);
// ValidateGemm(...).ok() without building a message: for enumerating tiling
// spaces, where most points break a rule.
bool GemmTilingFits(const GemmDesc& desc, const GemmTiling& tiling, const KernelConfig& config);
// Pre-packed B (GemmOutput::b_packed): every (kc x nc) block of outputs[o]'s
// B in the panel layout the kernel copies into its local buffer, block
// (j0 / nc, p0 / kc) at a fixed stride. Only valid for the tiling's kc, nc
// and nr; batch 0 of B is packed.
int64_t PrePackedBFloats(const GemmDesc& desc, int output, const GemmTiling& tiling);
void PrePackB(const GemmDesc& desc, int output, const GemmTiling& tiling, float* dst);

Result<KernelStats> RunGemm(const GemmDesc& desc, const GemmTiling& tiling,
                            const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
