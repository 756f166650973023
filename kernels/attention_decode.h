// Attention for a few queries against a long key/value sequence: a decode
// step (1-8 new tokens against a KV cache), as flash-decoding runs it.
//
// The GEMM path of attention.cpp pads the query tile to the micro-tile's
// rows and transposes every key block into panels; with one query row that
// is 8x the multiply-adds and a strided transpose per block, where the step
// should only stream the cache. Here each block of Bc keys is copied into
// the local buffer as it lies (K and V rows are contiguous runs), the scores
// are dot products of the few query rows with the key rows, and P x V adds
// scaled value rows to the output rows. Keys are split across threads when
// there are fewer (batch, head, query tile) items than threads: each split
// keeps its own running maxima, sums and output rows, combined at the end
// (flash-decoding's split-K).
#pragma once

#include "kernels/attention.h"

namespace fusetune::kernels {

// A query of at most this many rows takes the decode path (RunAttention
// routes it here).
inline constexpr int64_t kDecodeMaxQueries = 8;

// How many key ranges each (batch, head, query tile) is split into for
// `threads` threads: 1 when there are at least as many items as threads,
// else enough to occupy them, never ranges shorter than one key block.
int64_t DecodeKeySplits(const AttentionDesc& desc, const AttentionTiling& tiling, int threads);

// The decode path's local buffer per thread: at most AttentionLocalBytes.
int64_t DecodeLocalBytes(const AttentionDesc& desc, const AttentionTiling& tiling);

// RunAttention for desc.seq_q <= kDecodeMaxQueries (validated by the caller).
// The tiling's Br cuts the queries into tiles and Bc the keys into blocks;
// the micro-tile is not used.
KernelStats RunAttentionDecode(const AttentionDesc& desc, const AttentionTiling& tiling,
                               const KernelConfig& config, RunMode mode);

}  // namespace fusetune::kernels
