// What the f32 and bf16 attention runners share (attention.cpp,
// attention_bf16.cpp): the query tile, the local buffer's layout, the mask
// and the copy out. Not part of the kernels' interface.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace fusetune::kernels::attention_internal {

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct QueryTile {
  int64_t b, h, i0, rows;
};

// The local buffer of one thread, in elements. f32: Q, K and V panels and
// the score tile in floats. bf16: Q, K and V panels and P (the
// probabilities, the A operand of P x V) in bfloat16, depths padded to
// k-pairs; the scores, the output tile, the row maxima and sums in floats.
struct Layout {
  bool bf16 = false;
  int64_t br_pad, bc_pad, dv_pad, dim_pad;
  int64_t q_tile, k_panel, v_panel, p_tile;  // elements of the operand type
  int64_t s_tile, o_tile, mask_tile;         // floats
  int64_t bytes() const;
};
Layout MakeLayout(const AttentionDesc& d, const AttentionTiling& t);

// The additive mask's block of the tile's rows and keys [j0, j0 + cols) to
// dst (row stride ld); returns the bytes read.
int64_t CopyMaskBlock(const AttentionDesc& d, const QueryTile& tile, int64_t j0, int64_t cols,
                      float* dst, int64_t ld);
// -inf for the scores above the causal diagonal (bottom-right aligned) in
// the tile's block of keys [j0, j0 + cols), score row stride ld.
void MaskAboveDiagonal(const AttentionDesc& d, const QueryTile& tile, int64_t j0, int64_t cols,
                       float* s, int64_t ld);
// The output rows divided by their softmax sums, to O; returns the bytes written.
int64_t WriteOutputRows(const AttentionDesc& d, const QueryTile& tile, const float* o, int64_t ld,
                        const float* sum, RunMode mode);

// The bf16 template's query tile loop (the caller validated the launch and
// left queries of at most 8 rows to the decode path).
Result<KernelStats> RunAttentionBf16(const AttentionDesc& d, const AttentionTiling& t,
                                     const KernelConfig& config, RunMode mode,
                                     const std::vector<QueryTile>& tiles);

}  // namespace fusetune::kernels::attention_internal
