// Attention: O = softmax(scale * Q x K^T + mask) x V with online softmax
// (FlashAttention's recurrence), per batch and head, never materialising the
// score matrix in global memory.
//
// Per tile of Br query rows a thread copies Q's rows into the local buffer
// once, then for each block of Bc keys copies K's and V's rows (and the mask
// block, if additive), computes the Br x Bc scores with the GEMM micro-kernel,
// updates the running row maxima and sums, and accumulates P x V into the
// output tile, which is copied out at the end. Q, K, V, O and the mask are
// read through strides, so head splits, K^T views and one packed QKV tensor
// need no copies. Causal masking is aligned to the bottom-right corner
// (query i sees keys j <= i + seq_kv - seq_q); key blocks entirely above the
// diagonal are skipped. A query of at most 8 rows (a decode step) takes the
// decode path instead (attention_decode.h).
//
// In bf16 (kernels/precision.h) Q, K and V are rounded to bfloat16 as they
// are copied into the local buffer, and so are the probabilities P before
// P x V; both products sum in float on the bf16 micro-kernels, and the
// softmax, its running maxima and sums and the output stay in float
// (attention_bf16.cpp). The decode path computes in f32 whatever the
// tiling's precision: it streams K and V once, and converting them would
// cost what the faster products save.
#pragma once

#include <string>

#include "common/status.h"
#include "kernels/precision.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

enum class MaskKind { kNone, kCausal, kAdditive };
const char* MaskKindName(MaskKind kind);

// A 4-d view: element (b, h, row, col) at data[b*batch + h*head + row*row + col*col].
struct AttentionView {
  const float* data = nullptr;
  int64_t batch = 0, head = 0, row = 0, col = 1;
};

struct AttentionDesc {
  int64_t batch = 1, heads = 1, seq_q = 0, seq_kv = 0, head_dim = 0, value_dim = 0;
  AttentionView q, k, v;  // rows: queries / keys; cols: head_dim (value_dim for v)
  float* o = nullptr;     // element (b, h, i, c) at o[b*o_batch + h*o_head + i*o_row + c]
  int64_t o_batch = 0, o_head = 0, o_row = 0;
  float scale = 1.0f;
  MaskKind mask = MaskKind::kNone;
  AttentionView mask_data;  // kAdditive: [B?, H?, seq_q, seq_kv], strides 0 broadcast
};

struct AttentionTiling {
  int64_t br = 64, bc = 64;
  int mr = 8, nr = 32;  // the GEMM micro-tile used for Q x K^T and P x V
  Precision precision = Precision::kF32;
  std::string ToString() const;
  bool operator==(const AttentionTiling&) const = default;
};

int64_t AttentionLocalBytes(const AttentionDesc& desc, const AttentionTiling& tiling);
// The keys query rows [i0, i0 + rows) read: all of them, or under a causal
// mask those up to the last row's diagonal (bottom-right aligned).
int64_t AttentionKeyEnd(const AttentionDesc& desc, int64_t i0, int64_t rows);
Status ValidateAttention(const AttentionDesc& desc, const AttentionTiling& tiling,
                         const KernelConfig& config);
// ValidateAttention(...).ok() without building a message (tiling spaces).
bool AttentionTilingFits(const AttentionDesc& desc, const AttentionTiling& tiling,
                         const KernelConfig& config);
Result<KernelStats> RunAttention(const AttentionDesc& desc, const AttentionTiling& tiling,
                                 const KernelConfig& config, RunMode mode = RunMode::kFull);
// The thread that runs query tile `index` of `count` (ordered by batch, head,
// then rows): contiguous ranges, so that a thread's consecutive tiles share
// a head and its K and V are packed once when one key block holds them all;
// round-robin under a causal mask, where later tiles cost more.
int QueryTileThread(int64_t index, int64_t count, int threads, bool causal);

}  // namespace fusetune::kernels
