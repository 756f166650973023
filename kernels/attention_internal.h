// What the f32 and bf16 attention runners share (attention.cpp,
// attention_bf16.cpp): the query tile, the local buffer's layout, the mask
// and the copy out. Not part of the kernels' interface.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/row_simd.h"

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

// The query tile loop of both precisions (FlashAttention's recurrence over
// key blocks): per tile Q's rows are packed once; per key block K and V
// (unless the panels hold them from this thread's previous tile: tiles are
// dealt by head) and the additive mask; then the scores, the mask, the
// online-softmax update and O += P x V; the output rows go out at the end.
// `Operands` (CRTP) holds Q, K and V in its element type and computes the
// two products:
//   void PackQ(const QueryTile&);                            // scaled; rows past the tile's zero
//   void PackKeysAndValues(const QueryTile&, int64_t j0, int64_t cols);
//   void Scores(const QueryTile&, int64_t cols);             // S = Q x K^T into s_
//   void AccumulateOutput(const QueryTile&, int64_t cols);   // O += P x V, P in s_
// This loop takes the float parts of the local buffer (scores, output,
// row maxima and sums, mask) and counts every copy.
template <typename Operands>
class QueryTileLoop {
 public:
  QueryTileLoop(const AttentionDesc& d, const AttentionTiling& t, RunMode mode)
      : d_(d), t_(t), mode_(mode), l_(MakeLayout(d, t)), local_(static_cast<size_t>(l_.bytes())) {
    s_ = local_.Take(l_.s_tile);
    o_ = local_.Take(l_.o_tile);
    m_ = local_.Take(l_.br_pad);
    sum_ = local_.Take(l_.br_pad);
    if (l_.mask_tile) mask_ = local_.Take(l_.mask_tile);
    if (mask_ && mode == RunMode::kComputeOnly) std::fill(mask_, mask_ + l_.mask_tile, 0.0f);
  }

  void Run(const QueryTile& tile) {
    if (mode_ != RunMode::kComputeOnly) {
      operands().PackQ(tile);
      stats.bytes_global_to_local += 4 * tile.rows * d_.head_dim;
    }
    std::fill(m_, m_ + l_.br_pad, -INFINITY);
    std::fill(sum_, sum_ + l_.br_pad, 0.0f);
    std::fill(o_, o_ + l_.o_tile, 0.0f);
    const int64_t kv_end = AttentionKeyEnd(d_, tile.i0, tile.rows);
    for (int64_t j0 = 0; j0 < kv_end; j0 += t_.bc) {
      const int64_t cols = std::min(t_.bc, kv_end - j0);
      CopyKeyBlock(tile, j0, cols);
      if (mode_ == RunMode::kCopyOnly) continue;
      operands().Scores(tile, cols);
      if (mask_)
        for (int64_t i = 0; i < tile.rows; ++i)
          for (int64_t j = 0; j < cols; ++j) s_[i * l_.bc_pad + j] += mask_[i * t_.bc + j];
      if (d_.mask == MaskKind::kCausal) MaskAboveDiagonal(d_, tile, j0, cols, s_, l_.bc_pad);
      // New row maxima, P = exp(S - max) in place of the scores, running sums
      // and the rescaled output rows; rows past the tile's are left alone.
      for (int64_t i = 0; i < tile.rows; ++i)
        OnlineSoftmaxRow(s_ + i * l_.bc_pad, cols, &m_[i], &sum_[i], o_ + i * l_.dv_pad,
                         d_.value_dim);
      operands().AccumulateOutput(tile, cols);
    }
    if (mode_ != RunMode::kComputeOnly)
      stats.bytes_local_to_global += WriteOutputRows(d_, tile, o_, l_.dv_pad, sum_, mode_);
    ++stats.tiles;
  }

  KernelStats stats;

 protected:
  const AttentionDesc& d_;
  const AttentionTiling& t_;
  RunMode mode_;
  Layout l_;
  LocalBuffer local_;
  float *s_, *o_, *m_, *sum_, *mask_ = nullptr;

 private:
  Operands& operands() { return static_cast<Operands&>(*this); }

  void CopyKeyBlock(const QueryTile& tile, int64_t j0, int64_t cols) {
    const PackedKeys keys{tile.b, tile.h, j0, cols};
    if (mode_ != RunMode::kComputeOnly) {
      if (!(keys == packed_)) {
        operands().PackKeysAndValues(tile, j0, cols);
        stats.bytes_global_to_local += 4 * cols * (d_.head_dim + d_.value_dim);
      }
      if (d_.mask == MaskKind::kAdditive)
        stats.bytes_global_to_local += CopyMaskBlock(d_, tile, j0, cols, mask_, t_.bc);
    }
    packed_ = keys;
  }

  struct PackedKeys {
    int64_t b = -1, h = -1, j0 = -1, cols = -1;
    bool operator==(const PackedKeys&) const = default;
  } packed_;  // what the K and V panels hold
};

// The query tiles dealt to the threads (QueryTileThread), each thread's on
// one Runner.
template <typename Runner>
KernelStats RunQueryTiles(const AttentionDesc& d, const AttentionTiling& t,
                          const KernelConfig& config, RunMode mode,
                          const std::vector<QueryTile>& tiles) {
  const int64_t count = static_cast<int64_t>(tiles.size());
  const bool causal = d.mask == MaskKind::kCausal;
  return RunThreadShares(config.threads, [&](int th) {
    Runner runner(d, t, mode);
    for (int64_t i = 0; i < count; ++i)
      if (QueryTileThread(i, count, config.threads, causal) == th) runner.Run(tiles[i]);
    return runner.stats;
  });
}

// The bf16 template's query tile loop (the caller validated the launch and
// left queries of at most 8 rows to the decode path).
KernelStats RunAttentionBf16(const AttentionDesc& d, const AttentionTiling& t,
                             const KernelConfig& config, RunMode mode,
                             const std::vector<QueryTile>& tiles);

}  // namespace fusetune::kernels::attention_internal
