#include "kernels/attention.h"

#include "kernels/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention_decode.h"
#include "kernels/attention_internal.h"
#include "kernels/fast_math.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"
#include "kernels/row_simd.h"

namespace fusetune::kernels {

const char* MaskKindName(MaskKind kind) {
  switch (kind) {
    case MaskKind::kNone:
      return "none";
    case MaskKind::kCausal:
      return "causal";
    case MaskKind::kAdditive:
      return "additive";
  }
  return "?";
}

std::string AttentionTiling::ToString() const {
  return fmt::format("br={} bc={} micro={}x{}{}", br, bc, mr, nr,
                     precision == Precision::kBf16 ? " bf16" : "");
}

namespace attention_internal {

int64_t Layout::bytes() const {
  const int64_t element = bf16 ? 2 : 4;
  return element * (q_tile + k_panel + v_panel + p_tile) +
         4 * (s_tile + o_tile + mask_tile + 2 * br_pad) + 10 * 64;
}

Layout MakeLayout(const AttentionDesc& d, const AttentionTiling& t) {
  Layout l;
  // A decode step runs in f32 whatever the precision (attention.h): its
  // buffer is sized as f32's, so a bf16 tiling validated here fits it.
  l.bf16 = t.precision == Precision::kBf16 && d.seq_q > kDecodeMaxQueries;
  l.br_pad = RoundUp(t.br, t.mr);
  l.bc_pad = RoundUp(t.bc, t.nr);
  l.dv_pad = RoundUp(d.value_dim, t.nr);
  l.dim_pad = l.bf16 ? RoundUp(d.head_dim, 2) : d.head_dim;  // bf16: whole k-pairs
  l.q_tile = l.br_pad * l.dim_pad;
  l.k_panel = l.dim_pad * l.bc_pad;
  l.v_panel = (l.bf16 ? RoundUp(t.bc, 2) : t.bc) * l.dv_pad;
  l.p_tile = l.bf16 ? l.br_pad * l.bc_pad : 0;
  l.s_tile = l.br_pad * l.bc_pad;
  l.o_tile = l.br_pad * l.dv_pad;
  l.mask_tile = d.mask == MaskKind::kAdditive ? t.br * t.bc : 0;
  return l;
}

int64_t CopyMaskBlock(const AttentionDesc& d, const QueryTile& tile, int64_t j0, int64_t cols,
                      float* dst, int64_t ld) {
  const AttentionView& mk = d.mask_data;
  const float* mb = mk.data + tile.b * mk.batch + tile.h * mk.head + tile.i0 * mk.row + j0 * mk.col;
  for (int64_t i = 0; i < tile.rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[i * ld + j] = mb[i * mk.row + j * mk.col];
  return 4 * tile.rows * cols;
}

void MaskAboveDiagonal(const AttentionDesc& d, const QueryTile& tile, int64_t j0, int64_t cols,
                       float* s, int64_t ld) {
  const int64_t offset = d.seq_kv - d.seq_q;  // causal diagonal, bottom-right aligned
  if (j0 + cols - 1 <= tile.i0 + offset) return;
  for (int64_t i = 0; i < tile.rows; ++i)
    for (int64_t j = std::max<int64_t>(0, tile.i0 + i + offset + 1 - j0); j < cols; ++j)
      s[i * ld + j] = -INFINITY;
}

int64_t WriteOutputRows(const AttentionDesc& d, const QueryTile& tile, const float* o, int64_t ld,
                        const float* sum, RunMode mode) {
  float* base = d.o + tile.b * d.o_batch + tile.h * d.o_head + tile.i0 * d.o_row;
  for (int64_t i = 0; i < tile.rows; ++i) {
    const float inv = mode == RunMode::kCopyOnly || sum[i] == 0 ? 0.0f : 1.0f / sum[i];
    for (int64_t c = 0; c < d.value_dim; ++c) base[i * d.o_row + c] = o[i * ld + c] * inv;
  }
  return 4 * tile.rows * d.value_dim;
}

}  // namespace attention_internal

using attention_internal::Layout;
using attention_internal::MakeLayout;
using attention_internal::QueryTile;
using attention_internal::RoundUp;

int64_t AttentionKeyEnd(const AttentionDesc& d, int64_t i0, int64_t rows) {
  if (d.mask != MaskKind::kCausal) return d.seq_kv;
  return std::clamp<int64_t>(i0 + rows + d.seq_kv - d.seq_q, 0, d.seq_kv);
}

int64_t AttentionLocalBytes(const AttentionDesc& d, const AttentionTiling& t) {
  return MakeLayout(d, t).bytes();
}

namespace {

// Every rule of a launch, in order. `broken(describe)` (a KeepReason or IgnoreReason) hears of the
// first one broken (describe() says why) and returns false: ValidateAttention formats the message,
// AttentionTilingFits never does.
template <typename Broken>
bool RulesHold(const AttentionDesc& d, const AttentionTiling& t, const KernelConfig& config,
               Broken&& broken) {
  if (d.batch < 1 || d.heads < 1 || d.seq_q < 1 || d.seq_kv < 1 || d.head_dim < 1 ||
      d.value_dim < 1)
    return broken([&] {
      return fmt::format(
          "attention: batch, heads, seq_q, seq_kv, head_dim, value_dim must be positive (got "
          "{}, {}, {}, {}, {}, {})",
          d.batch, d.heads, d.seq_q, d.seq_kv, d.head_dim, d.value_dim);
    });
  if (!d.q.data || !d.k.data || !d.v.data || !d.o)
    return broken(
        [] { return std::string("attention: descriptor.q, .k, .v and .o must point to data"); });
  if (d.mask == MaskKind::kAdditive && !d.mask_data.data)
    return broken([] {
      return std::string("attention: descriptor.mask_data is required by an additive mask");
    });
  if (t.br < 1) return broken([&] { return fmt::format("tiling.br: {} must be positive", t.br); });
  if (t.bc < 1) return broken([&] { return fmt::format("tiling.bc: {} must be positive", t.bc); });
  if (t.precision == Precision::kBf16 && !FindBf16MicroKernel(t.mr, t.nr))
    return broken([&] { return NoBf16MicroKernel(t.mr, t.nr); });
  const int64_t local_bytes = AttentionLocalBytes(d, t);
  if (!MicroTileAndBufferFit(t.mr, t.nr, local_bytes, config))
    return broken([&] {
      return CheckMicroTileAndBuffer(t.mr, t.nr, local_bytes, config,
                                     [&] { return fmt::format("br={} bc={}", t.br, t.bc); })
          .error()
          .message();
    });
  return true;
}

}  // namespace

Status ValidateAttention(const AttentionDesc& d, const AttentionTiling& t,
                         const KernelConfig& config) {
  std::string why;
  if (!RulesHold(d, t, config, KeepReason{&why})) return Error(ErrorCode::kInvalidArgument, why);
  return Status::Ok();
}

bool AttentionTilingFits(const AttentionDesc& d, const AttentionTiling& t,
                         const KernelConfig& config) {
  return RulesHold(d, t, config, IgnoreReason{});
}

int QueryTileThread(int64_t index, int64_t count, int threads, bool causal) {
  if (causal) return static_cast<int>(index % threads);
  const int64_t per = (count + threads - 1) / threads;
  return static_cast<int>(index / per);
}

namespace {

// The f32 operands: Q rows, K^T slivers and V slivers in floats, both
// products on the f32 micro-kernels reading A by rows.
class F32Runner : public attention_internal::QueryTileLoop<F32Runner> {
 public:
  F32Runner(const AttentionDesc& d, const AttentionTiling& t, RunMode mode)
      : QueryTileLoop(d, t, mode), mk_(FindMicroKernel(t.mr, t.nr)) {
    q_ = local_.Take(l_.q_tile);
    kp_ = local_.Take(l_.k_panel);
    vp_ = local_.Take(l_.v_panel);
    if (mode == RunMode::kComputeOnly) {  // panels are never packed: ordinary values
      std::fill(q_, q_ + l_.q_tile, 0.05f);
      std::fill(kp_, kp_ + l_.k_panel, 0.05f);
      std::fill(vp_, vp_ + l_.v_panel, 0.5f);
    }
  }

 private:
  friend class attention_internal::QueryTileLoop<F32Runner>;

  // Q rows, scaled (so scores need no extra multiply), row-major; padding rows are zero.
  void PackQ(const QueryTile& tile) {
    const float* base = d_.q.data + tile.b * d_.q.batch + tile.h * d_.q.head + tile.i0 * d_.q.row;
    const int64_t dim = d_.head_dim;
    for (int64_t i = 0; i < l_.br_pad; ++i) {
      float* dst = q_ + i * dim;
      const float* src = base + i * d_.q.row;
      if (i >= tile.rows)
        std::fill(dst, dst + dim, 0.0f);
      else if (d_.q.col == 1)
        for (int64_t p = 0; p < dim; ++p) dst[p] = src[p] * d_.scale;
      else
        for (int64_t p = 0; p < dim; ++p) dst[p] = src[p * d_.q.col] * d_.scale;
    }
  }

  // K rows j0.. as [head_dim][nr] slivers (K^T), V rows as [cols][nr] slivers
  // of value columns.
  void PackKeysAndValues(const QueryTile& tile, int64_t j0, int64_t cols) {
    const int64_t dim = d_.head_dim, dv = d_.value_dim;
    const float* kb = d_.k.data + tile.b * d_.k.batch + tile.h * d_.k.head + j0 * d_.k.row;
    for (int64_t s0 = 0; s0 < cols; s0 += t_.nr) {
      float* sliver = kp_ + (s0 / t_.nr) * dim * t_.nr;
      const int64_t keys = std::min<int64_t>(t_.nr, cols - s0);
      if (d_.k.col == 1) {
        TransposeRows(kb + s0 * d_.k.row, d_.k.row, keys, dim, sliver, t_.nr);
      } else {
        for (int64_t j = 0; j < keys; ++j)
          for (int64_t p = 0; p < dim; ++p)
            sliver[p * t_.nr + j] = kb[(s0 + j) * d_.k.row + p * d_.k.col];
      }
      for (int64_t p = 0; keys < t_.nr && p < dim; ++p)
        std::fill(sliver + p * t_.nr + keys, sliver + (p + 1) * t_.nr, 0.0f);
    }
    const float* vb = d_.v.data + tile.b * d_.v.batch + tile.h * d_.v.head + j0 * d_.v.row;
    for (int64_t j = 0; j < cols; ++j) {
      const float* src = vb + j * d_.v.row;
      for (int64_t c0 = 0; c0 < l_.dv_pad; c0 += t_.nr) {
        float* dst = vp_ + (c0 / t_.nr) * cols * t_.nr + j * t_.nr;
        const int64_t width = std::clamp<int64_t>(dv - c0, 0, t_.nr);
        if (d_.v.col == 1)
          std::memcpy(dst, src + c0, width * sizeof(float));
        else
          for (int64_t c = 0; c < width; ++c) dst[c] = src[(c0 + c) * d_.v.col];
        std::fill(dst + width, dst + t_.nr, 0.0f);
      }
    }
  }

  void Scores(const QueryTile& tile, int64_t cols) {
    for (int64_t jr = 0; jr < cols; jr += t_.nr)
      for (int64_t ir = 0; ir < tile.rows; ir += t_.mr)
        mk_->fn_rows(d_.head_dim, q_ + ir * d_.head_dim, d_.head_dim,
                     kp_ + (jr / t_.nr) * d_.head_dim * t_.nr, s_ + ir * l_.bc_pad + jr, l_.bc_pad,
                     false);
  }

  // O += P x V, P read by rows straight from the score tile.
  void AccumulateOutput(const QueryTile& tile, int64_t cols) {
    for (int64_t jr = 0; jr < d_.value_dim; jr += t_.nr)
      for (int64_t ir = 0; ir < tile.rows; ir += t_.mr)
        mk_->fn_rows(cols, s_ + ir * l_.bc_pad, l_.bc_pad, vp_ + (jr / t_.nr) * cols * t_.nr,
                     o_ + ir * l_.dv_pad + jr, l_.dv_pad, true);
  }

  const MicroKernel* mk_;
  float *q_, *kp_, *vp_;
};

}  // namespace

Result<KernelStats> RunAttention(const AttentionDesc& d, const AttentionTiling& t,
                                 const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateAttention(d, t, config));
  if (d.seq_q <= kDecodeMaxQueries) return RunAttentionDecode(d, t, config, mode);
  std::vector<QueryTile> tiles;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i0 = 0; i0 < d.seq_q; i0 += t.br)
        tiles.push_back({b, h, i0, std::min(t.br, d.seq_q - i0)});
  if (t.precision == Precision::kBf16)
    return attention_internal::RunAttentionBf16(d, t, config, mode, tiles);
  return attention_internal::RunQueryTiles<F32Runner>(d, t, config, mode, tiles);
}

}  // namespace fusetune::kernels

namespace fusetune::kernels {

TilingEstimate EstimateAttention(const AttentionDesc& d, const AttentionTiling& t, int threads) {
  TilingEstimate e;
  e.local_bytes = AttentionLocalBytes(d, t);
  if (t.br < 1 || t.bc < 1 || threads < 1) return e;
  std::vector<double> work(threads, 0);
  double computed = 0, useful = 0;
  struct QueryTileCost {
    double bytes_in, bytes_out, work;
    int64_t blocks, kv_end;
  };
  std::vector<QueryTileCost> per_query_tile;  // the same for every batch and head
  for (int64_t i0 = 0; i0 < d.seq_q; i0 += t.br) {
    const int64_t rows = std::min(t.br, d.seq_q - i0);
    const int64_t kv_end = AttentionKeyEnd(d, i0, rows);
    const int64_t blocks = (kv_end + t.bc - 1) / t.bc;
    per_query_tile.push_back({4.0 * rows * d.head_dim + 4.0 * kv_end * (d.head_dim + d.value_dim) +
                                  (d.mask == MaskKind::kAdditive ? 4.0 * rows * kv_end : 0.0),
                              4.0 * rows * d.value_dim,
                              static_cast<double>(RoundUp(rows, t.mr)) * blocks *
                                  RoundUp(t.bc, t.nr) * (d.head_dim + RoundUp(d.value_dim, t.nr)),
                              blocks, kv_end});
    useful += static_cast<double>(d.batch * d.heads) * rows * kv_end * (d.head_dim + d.value_dim);
  }
  int64_t index = 0;
  const int64_t count = d.batch * d.heads * static_cast<int64_t>(per_query_tile.size());
  const bool causal = d.mask == MaskKind::kCausal;
  std::vector<int64_t> thread_tiles(threads, 0), thread_steps(threads, 0);
  // What each thread's K and V panels hold after its last tile: head, first
  // key and key count of the last block packed, as the runners track it.
  std::vector<std::array<int64_t, 3>> packed(threads, {-1, -1, -1});
  for (int64_t bh = 0; bh < d.batch * d.heads; ++bh)
    for (const QueryTileCost& c : per_query_tile) {
      const int th = QueryTileThread(index++, count, threads, causal);
      e.bytes_in += c.bytes_in;
      if (c.blocks > 0) {  // a tile with no keys packs nothing
        const int64_t first_cols = std::min(t.bc, c.kv_end);
        if (packed[th] == std::array<int64_t, 3>{bh, 0, first_cols})
          e.bytes_in -= 4.0 * first_cols * (d.head_dim + d.value_dim);
        const int64_t last_j0 = (c.blocks - 1) * t.bc;
        packed[th] = {bh, last_j0, c.kv_end - last_j0};
      }
      e.bytes_out += c.bytes_out;
      work[th] += c.work;
      thread_tiles[th] += 1;
      thread_steps[th] += c.blocks;
      computed += c.work;
    }
  e.tiles = index;
  e.max_thread_tiles = *std::max_element(thread_tiles.begin(), thread_tiles.end());
  e.steps = *std::max_element(thread_steps.begin(), thread_steps.end());
  e.max_thread_work = computed > 0 ? *std::max_element(work.begin(), work.end()) / computed : 1;
  e.lane_utilisation = computed > 0 ? useful / computed : 1;
  return e;
}

}  // namespace fusetune::kernels
