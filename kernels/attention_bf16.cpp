// The attention template in bf16 (attention.h): the query tile loop of
// attention.cpp with Q, K, V and P in bfloat16 in the local buffer and both
// products on the bf16 micro-kernels (microkernel_bf16.h).
//
// The micro-kernels take K in pairs along the depth. Q x K^T runs over the
// head dimension: Q's rows are bf16 rows padded to an even length, and each
// sliver of nr keys is K^T in k-pairs ([head_dim / 2][nr][2]). P x V runs
// over the keys: P's rows are converted from the score tile after the
// online softmax, and each sliver of nr value columns holds V's rows in
// pairs ([keys / 2][nr][2]).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/attention_internal.h"
#include "kernels/bf16.h"
#include "kernels/microkernel_bf16.h"
#include "kernels/row_simd.h"  // TransposeRows

namespace fusetune::kernels::attention_internal {

namespace {

Bf16* TakeHalves(LocalBuffer& local, int64_t halves) {
  return reinterpret_cast<Bf16*>(local.Take(static_cast<size_t>((halves + 1) / 2)));
}

// n floats from src read through `stride`, into dst (contiguous).
const float* Gathered(const float* src, int64_t stride, int64_t n, std::vector<float>& dst) {
  if (stride == 1) return src;
  dst.resize(n);
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
  return dst.data();
}

class Bf16Runner : public QueryTileLoop<Bf16Runner> {
 public:
  Bf16Runner(const AttentionDesc& d, const AttentionTiling& t, RunMode mode)
      : QueryTileLoop(d, t, mode), mk_(FindBf16MicroKernel(t.mr, t.nr)) {
    q_ = TakeHalves(local_, l_.q_tile);
    kp_ = TakeHalves(local_, l_.k_panel);
    vp_ = TakeHalves(local_, l_.v_panel);
    p_ = TakeHalves(local_, l_.p_tile);
    std::fill(p_, p_ + l_.p_tile, Bf16{0});
    if (mode == RunMode::kComputeOnly) {  // panels are never packed: ordinary values
      std::fill(q_, q_ + l_.q_tile, FloatToBf16(0.05f));
      std::fill(kp_, kp_ + l_.k_panel, FloatToBf16(0.05f));
      std::fill(vp_, vp_ + l_.v_panel, FloatToBf16(0.5f));
    }
  }

 private:
  friend class QueryTileLoop<Bf16Runner>;

  // Q's rows scaled and rounded, each padded to whole k-pairs; rows past
  // the tile's are zero.
  void PackQ(const QueryTile& tile) {
    const float* base = d_.q.data + tile.b * d_.q.batch + tile.h * d_.q.head + tile.i0 * d_.q.row;
    const int64_t dim = d_.head_dim;
    row_.resize(l_.dim_pad);
    for (int64_t i = 0; i < l_.br_pad; ++i) {
      Bf16* dst = q_ + i * l_.dim_pad;
      if (i >= tile.rows) {
        std::fill(dst, dst + l_.dim_pad, Bf16{0});
        continue;
      }
      const float* src = base + i * d_.q.row;
      for (int64_t p = 0; p < dim; ++p) row_[p] = src[p * d_.q.col] * d_.scale;
      std::fill(row_.begin() + dim, row_.end(), 0.0f);
      ConvertToBf16(row_.data(), l_.dim_pad, dst);
    }
  }

  void PackKeysAndValues(const QueryTile& tile, int64_t j0, int64_t cols) {
    PackKeys(tile, j0, cols);
    PackValues(tile, j0, cols);
  }

  // Each sliver of nr keys transposed to [head_dim][nr] floats, then rows
  // p and p + 1 interleaved into the sliver's k-pairs.
  void PackKeys(const QueryTile& tile, int64_t j0, int64_t cols) {
    const int64_t dim = d_.head_dim, nr = t_.nr;
    const float* kb = d_.k.data + tile.b * d_.k.batch + tile.h * d_.k.head + j0 * d_.k.row;
    transposed_.resize(dim * nr);
    for (int64_t s0 = 0; s0 < cols; s0 += nr) {
      const int64_t keys = std::min<int64_t>(nr, cols - s0);
      float* kt = transposed_.data();
      if (d_.k.col == 1) {
        TransposeRows(kb + s0 * d_.k.row, d_.k.row, keys, dim, kt, nr);
      } else {
        for (int64_t j = 0; j < keys; ++j)
          for (int64_t p = 0; p < dim; ++p) kt[p * nr + j] = kb[(s0 + j) * d_.k.row + p * d_.k.col];
      }
      for (int64_t p = 0; keys < nr && p < dim; ++p)
        std::fill(kt + p * nr + keys, kt + (p + 1) * nr, 0.0f);
      Bf16* sliver = kp_ + (s0 / nr) * l_.dim_pad * nr;
      for (int64_t p = 0; p < dim; p += 2)
        InterleaveToBf16Pairs(kt + p * nr, p + 1 < dim ? kt + (p + 1) * nr : nullptr, nr,
                              sliver + p / 2 * nr * 2);
    }
  }

  // V's rows j and j + 1 interleaved into each value sliver's k-pairs; an
  // odd last key pairs with zeros.
  void PackValues(const QueryTile& tile, int64_t j0, int64_t cols) {
    const int64_t dv = d_.value_dim, nr = t_.nr, cols2 = RoundUp(cols, 2);
    const float* vb = d_.v.data + tile.b * d_.v.batch + tile.h * d_.v.head + j0 * d_.v.row;
    for (int64_t j = 0; j < cols; j += 2) {
      const float* r0 = Gathered(vb + j * d_.v.row, d_.v.col, dv, first_);
      const float* r1 = j + 1 < cols ? Gathered(vb + (j + 1) * d_.v.row, d_.v.col, dv, second_)
                                     : nullptr;
      for (int64_t c0 = 0; c0 < l_.dv_pad; c0 += nr) {
        Bf16* dst = vp_ + (c0 / nr) * cols2 * nr + j / 2 * nr * 2;
        const int64_t width = std::clamp<int64_t>(dv - c0, 0, nr);
        InterleaveToBf16Pairs(r0 + c0, r1 ? r1 + c0 : nullptr, width, dst);
        std::fill(dst + 2 * width, dst + 2 * nr, Bf16{0});
      }
    }
  }

  void Scores(const QueryTile& tile, int64_t cols) {
    const int64_t pairs = l_.dim_pad / 2;
    for (int64_t jr = 0; jr < cols; jr += t_.nr)
      for (int64_t ir = 0; ir < tile.rows; ir += t_.mr)
        mk_->fn(pairs, q_ + ir * l_.dim_pad, l_.dim_pad, kp_ + (jr / t_.nr) * l_.dim_pad * t_.nr,
                s_ + ir * l_.bc_pad + jr, l_.bc_pad, false);
  }

  // O += P x V: P's rows rounded to bf16 (an odd key count padded with a
  // zero), then the products over the keys' pairs.
  void AccumulateOutput(const QueryTile& tile, int64_t cols) {
    const int64_t cols2 = RoundUp(cols, 2);
    for (int64_t i = 0; i < tile.rows; ++i) {
      ConvertToBf16(s_ + i * l_.bc_pad, cols, p_ + i * l_.bc_pad);
      if (cols2 > cols) p_[i * l_.bc_pad + cols] = 0;
    }
    for (int64_t jr = 0; jr < d_.value_dim; jr += t_.nr)
      for (int64_t ir = 0; ir < tile.rows; ir += t_.mr)
        mk_->fn(cols2 / 2, p_ + ir * l_.bc_pad, l_.bc_pad, vp_ + (jr / t_.nr) * cols2 * t_.nr,
                o_ + ir * l_.dv_pad + jr, l_.dv_pad, true);
  }

  const Bf16MicroKernel* mk_;
  Bf16 *q_, *kp_, *vp_, *p_;
  // Staging for the conversions (a row of Q; a sliver of K^T; V's rows
  // read through a stride), outside the local buffer as the GEMM's gathers.
  std::vector<float> row_, transposed_, first_, second_;
};

}  // namespace

KernelStats RunAttentionBf16(const AttentionDesc& d, const AttentionTiling& t,
                             const KernelConfig& config, RunMode mode,
                             const std::vector<QueryTile>& tiles) {
  return RunQueryTiles<Bf16Runner>(d, t, config, mode, tiles);
}

}  // namespace fusetune::kernels::attention_internal
