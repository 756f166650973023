#include "kernels/conv_chain.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

#include "kernels/simd_math.h"  // <immintrin.h>, GCC 12's false -Wmaybe-uninitialized silenced

#include "kernels/conv_algorithm.h"
#include "kernels/conv_chain_products.h"
#include "kernels/conv_depthwise.h"
#include "kernels/conv_rows.h"
#include "kernels/estimate.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::kernels {

using conv_detail::BandGeometry;
using conv_detail::ChainExtents;
using conv_detail::ChainProducts;
using conv_detail::ChainProductsOf;
using conv_detail::ChainProductsOps;
using conv_detail::ConvTile;
using conv_detail::ConvTileWalk;

std::string ConvChainTiling::ToString() const {
  return fmt::format(
      "rows={} e={} micro={}x{}{}{}", rows, e_block, mr, nr, split_expanded ? " split=e" : "",
      precision != Precision::kF32 ? std::string(" ") + PrecisionName(precision) : std::string());
}

namespace {

int64_t RoundUp(int64_t x, int64_t m) { return conv_detail::ChainRoundUp(x, m); }
int64_t Expanded(const ConvChainDesc& d) { return d.depthwise.in_channels; }
int64_t Taps(const ConvChainDesc& d) { return d.depthwise.kernel_h * d.depthwise.kernel_w; }

// The output as the conv template's tile walk and finishing see it: C'
// channels of the depthwise stage's output size.
ConvShape OutShape(const ConvChainDesc& d) {
  ConvShape s = d.depthwise;
  s.out_channels = d.out_channels;
  s.groups = 1;
  return s;
}

ConvTileWalk WalkOf(const ConvChainDesc& d, const ConvChainTiling& t) {
  const ConvShape s = OutShape(d);
  return ConvTileWalk(s, d.out_channels, t.rows * s.out_w, /*whole_rows=*/true);
}

// Sizes of one thread's local-buffer regions, in floats.
struct Layout {
  int64_t rows = 0;      // output rows per tile
  BandGeometry band;     // one channel's depthwise band
  // Columns of X's packed band and of the expanded block: the depthwise
  // band layout (padding and stride phases), so that each expanded channel
  // is its depthwise band as the expand writes it.
  int64_t x_ld = 0;
  int64_t out_ld = 0;    // columns of the depthwise output and the accumulator
  int64_t out_rows = 0;  // accumulator rows: C' rounded up to mr
};

Layout LayoutOf(const ConvChainDesc& d, const ConvChainTiling& t) {
  const ConvShape& s = d.depthwise;
  Layout l;
  l.rows = std::min(t.rows, s.out_h);
  l.band = conv_detail::BandOf(s, l.rows);
  l.x_ld = RoundUp(l.band.floats(), t.nr);
  l.out_ld = RoundUp(l.rows * s.out_w, t.nr);
  l.out_rows = RoundUp(d.out_channels, t.mr);
  return l;
}

int64_t RegionBytes(int64_t floats) { return conv_detail::ChainRegionBytes(floats); }

ChainExtents ExtentsOf(const Layout& l) { return {l.x_ld, l.out_ld, l.out_rows}; }

int64_t LocalBytesOf(const ConvChainDesc& d, const ConvChainTiling& t, const Layout& l) {
  // The depthwise output row, the block's outputs as f32 panels, the
  // accumulator, the block's depthwise filters; with an expand the
  // expanded block, two of X's channels' bands on their way into the
  // panels and the band's inside mask, else the depthwise band; then the
  // products' operands.
  int64_t bytes = RegionBytes(l.out_ld) + RegionBytes(t.e_block * l.out_ld) +
                  RegionBytes(l.out_rows * l.out_ld) + RegionBytes(t.e_block * Taps(d));
  if (d.expand)
    bytes += RegionBytes(t.e_block * l.x_ld) + RegionBytes(2 * l.band.floats()) +
             RegionBytes(l.band.floats());
  else
    bytes += RegionBytes(l.band.floats());
  return bytes + ChainProductsOf(t).local_bytes(d, t, ExtentsOf(l));
}

// Bytes of weights and biases a tile copies for a block of `eb` expanded
// channels: the depthwise filters and biases in f32, the products' weights
// as their form copies them.
int64_t BlockWeightBytes(const ConvChainDesc& d, const ConvChainTiling& t, int64_t eb) {
  int64_t floats = eb * Taps(d);
  if (d.expand && d.expand_bias) floats += eb;
  if (d.dw_bias) floats += eb;
  // the project's bias is counted by FinishConvTile
  return 4 * floats + ChainProductsOf(t).block_weight_bytes(d, t, eb);
}

// The e_block blocks a thread runs: all, or its share when split.
struct BlockRange {
  int64_t begin = 0, end = 0;  // in blocks
};

int64_t Blocks(const ConvChainDesc& d, const ConvChainTiling& t) {
  return (Expanded(d) + t.e_block - 1) / t.e_block;
}

BlockRange BlocksOf(const ConvChainDesc& d, const ConvChainTiling& t, int thread, int threads) {
  const int64_t n = Blocks(d, t);
  if (!t.split_expanded) return {0, n};
  return {n * thread / threads, n * (thread + 1) / threads};
}

// Expanded channels in blocks [r.begin, r.end).
int64_t ChannelsIn(const ConvChainDesc& d, const ConvChainTiling& t, BlockRange r) {
  return std::min(Expanded(d), r.end * t.e_block) - std::min(Expanded(d), r.begin * t.e_block);
}

int64_t BlockChannels(const ConvChainDesc& d, const ConvChainTiling& t, int64_t block) {
  return ChannelsIn(d, t, {block, block + 1});
}

// BlockWeightBytes over the blocks of `r`.
int64_t RangeWeightBytes(const ConvChainDesc& d, const ConvChainTiling& t, BlockRange r) {
  int64_t n = 0;
  for (int64_t block = r.begin; block < r.end; ++block)
    n += BlockWeightBytes(d, t, BlockChannels(d, t, block));
  return n;
}

// The input rows a tile's band covers inside X: [r0, r1).
struct BandRows {
  int64_t ih0 = 0, r0 = 0, r1 = 0;
};

BandRows RowsOf(const ConvShape& s, const BandGeometry& g, int64_t oh0) {
  BandRows b;
  b.ih0 = conv_detail::BandFirstRow(s, oh0);
  b.r0 = std::max<int64_t>(0, b.ih0);
  b.r1 = std::min(s.in_h, b.ih0 + g.rows);
  return b;
}

// min(max(x + bias, lo), hi): the expand's bias and a ReLU or Clip applied
// in one pass, or dw_act's clamp applied as the depthwise rows are packed.
struct BandActivation {
  float bias = 0.0f;
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};

// An activation list as one clamp (none, ReLU, Clip: MobileNetV2's ReLU6),
// applied with the bias in the expanded block's one pass (ActivateInside)
// or as the depthwise rows are packed; nullopt for any other op, which
// then runs as passes of its own (ApplyEpilogue).
std::optional<BandActivation> AsClamp(const std::vector<EpilogueOp>& ops) {
  BandActivation a;
  for (const EpilogueOp& op : ops) {
    float lo = 0.0f, hi = std::numeric_limits<float>::infinity();
    if (op.kind == EpilogueKind::kClip) {
      lo = op.scalar;
      hi = op.scalar2;
    } else if (op.kind != EpilogueKind::kRelu) {
      return std::nullopt;
    }
    // clamp(clamp(x, a.lo, a.hi), lo, hi) == clamp(x, clamp(a.lo), clamp(a.hi))
    a.lo = std::min(std::max(a.lo, lo), hi);
    a.hi = std::min(std::max(a.hi, lo), hi);
  }
  return a;
}

// Copies `n` floats of a row into consecutive nr-column panels of `depth`
// rows (the micro-kernels' B layout), zeros past n, each value clamped to
// [clamp.lo, clamp.hi] (clamp.bias is not added; NaNs pass).
void PackRowIntoPanels(const float* src, int64_t n, int64_t row, int64_t depth, int nr,
                       float* panels, const BandActivation& clamp = {}) {
#if defined(__AVX512F__)
  if (nr % 16 == 0) {  // masked vectors: no call per panel (memcpy and memset were 7%)
    const __m512 lo = _mm512_set1_ps(clamp.lo), hi = _mm512_set1_ps(clamp.hi);
    for (int64_t p = 0; p * nr < n; ++p) {
      float* dst = panels + (p * depth + row) * nr;
      for (int64_t j = 0; j < nr; j += 16) {
        const int64_t left = std::clamp<int64_t>(n - p * nr - j, 0, 16);
        const __mmask16 m = static_cast<__mmask16>((1u << left) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(m, src + p * nr + j);
        _mm512_storeu_ps(dst + j, _mm512_min_ps(hi, _mm512_max_ps(lo, v)));
      }
    }
    return;
  }
#endif
  for (int64_t p = 0; p * nr < n; ++p) {
    const int64_t cols = std::min<int64_t>(nr, n - p * nr);
    float* dst = panels + (p * depth + row) * nr;
    for (int64_t j = 0; j < cols; ++j)
      dst[j] = std::min(std::max(src[p * nr + j], clamp.lo), clamp.hi);
    std::fill(dst + cols, dst + nr, 0.0f);
  }
}

// v = min(max(v + a.bias, a.lo), a.hi) where inside[i] != 0, else 0: an
// expanded channel's band biased and clamped, its padding (where the expand
// read X's zeros, and the bias would leave a value) zeroed. NaNs pass.
void ActivateInside(const BandActivation& a, const float* inside, int64_t n, float* v) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 bias = _mm512_set1_ps(a.bias), lo = _mm512_set1_ps(a.lo),
               hi = _mm512_set1_ps(a.hi), zero = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16) {
    const __mmask16 in = _mm512_cmp_ps_mask(_mm512_loadu_ps(inside + i), zero, _CMP_NEQ_OQ);
    const __m512 x = _mm512_add_ps(_mm512_loadu_ps(v + i), bias);
    _mm512_storeu_ps(v + i, _mm512_maskz_mov_ps(in, _mm512_min_ps(hi, _mm512_max_ps(lo, x))));
  }
#endif
  for (; i < n; ++i) v[i] = inside[i] != 0 ? std::min(std::max(v[i] + a.bias, a.lo), a.hi) : 0.0f;
}

// Floats of the nr-column panels of `depth` rows covering n columns.
int64_t PanelFloats(int64_t n, int64_t depth, int nr) { return RoundUp(n, nr) * depth; }

void AddRowBias(const float* bias, int64_t rows, int64_t cols, int64_t ld, float* tile) {
  if (bias == nullptr) return;
  for (int64_t r = 0; r < rows; ++r) {
    const float b = bias[r];
    float* row = tile + r * ld;
    for (int64_t c = 0; c < cols; ++c) row[c] += b;
  }
}

// rows x cols (+)= A[rows x depth] (rows of `a`, leading dimension lda) x the
// B panels (depth rows each): whole mr x nr micro-tiles, rows rounded up to mr.
void MicroGemm(const MicroKernel& mk, int64_t rows, int64_t cols, int64_t depth, const float* a,
               int64_t lda, const float* panels, float* c, int64_t ldc, bool accumulate) {
  for (int64_t p = 0; p * mk.nr < cols; ++p)
    for (int64_t m = 0; m < rows; m += mk.mr)
      mk.fn_rows(depth, a + m * lda, lda, panels + p * depth * mk.nr, c + m * ldc + p * mk.nr, ldc,
                 accumulate);
}

// Pre-packed f32 weights: the expand's [E rounded up to mr][C] rows, then
// the project's [C' rounded up to mr][E], zero rows past the real ones, so
// that every micro-kernel call reads whole mr-row blocks.
int64_t ExpandPackedFloats(const ConvChainDesc& d, const ConvChainTiling& t) {
  return d.expand ? RoundUp(Expanded(d), t.mr) * d.in_channels : 0;
}

// The products in f32 (conv_chain_products.h): X's band in nr-column panels
// of C rows, the block's weights as the micro-kernels' A rows.
class F32Products final : public ChainProducts {
 public:
  F32Products(const ConvChainDesc& d, const ConvChainTiling& t, const ChainExtents& x,
              const float* packed, LocalBuffer* local)
      : d_(d),
        t_(t),
        x_(x),
        mk_(*FindMicroKernel(t.mr, t.nr)),
        expand_w_(packed),
        project_w_(packed + ExpandPackedFloats(d, t)) {
    block_project_w_ = local->Take(x.out_rows * t.e_block);
    if (d.expand) {
      x_panels_ = local->Take(d.in_channels * x.x_ld);
      block_expand_w_ = local->Take(t.e_block * d.in_channels);
    }
  }

  static int64_t LocalBytes(const ConvChainDesc& d, const ConvChainTiling& t,
                            const ChainExtents& x) {
    int64_t bytes = RegionBytes(x.out_rows * t.e_block);
    if (d.expand)
      bytes += RegionBytes(d.in_channels * x.x_ld) + RegionBytes(t.e_block * d.in_channels);
    return bytes;
  }

  void PackX(const float* x, int64_t plane, int64_t n, int64_t c0, int64_t count) override {
    for (int64_t i = 0; i < count; ++i)
      PackRowIntoPanels(x + i * plane, n, c0 + i, d_.in_channels, t_.nr, x_panels_);
  }

  // The project's columns [e0, e0 + eb) of every (padded) output row and
  // the expand's rows (padded to mr), contiguous as the micro-kernels read them.
  void CopyBlockWeights(int64_t e0, int64_t eb) override {
    for (int64_t m = 0; m < x_.out_rows; ++m)
      std::memcpy(block_project_w_ + m * eb, project_w_ + m * Expanded(d_) + e0,
                  static_cast<size_t>(eb) * 4);
    if (d_.expand)
      std::memcpy(block_expand_w_, expand_w_ + e0 * d_.in_channels,
                  static_cast<size_t>(RoundUp(eb, t_.mr) * d_.in_channels) * 4);
  }

  void Expand(int64_t eb, int64_t n, float* expanded, int64_t ld) override {
    MicroGemm(mk_, eb, n, d_.in_channels, block_expand_w_, d_.in_channels, x_panels_, expanded, ld,
              false);
  }

  void Project(const float* dw, int64_t eb, int64_t cols, float* acc, int64_t ld,
               bool accumulate) override {
    MicroGemm(mk_, d_.out_channels, cols, eb, block_project_w_, eb, dw, acc, ld, accumulate);
  }

  void FillForComputeOnly() override {
    if (d_.expand) {
      std::fill(x_panels_, x_panels_ + d_.in_channels * x_.x_ld, 0.5f);
      std::fill(block_expand_w_, block_expand_w_ + t_.e_block * d_.in_channels, 0.01f);
    }
    std::fill(block_project_w_, block_project_w_ + x_.out_rows * t_.e_block, 0.01f);
  }

 private:
  const ConvChainDesc& d_;
  const ConvChainTiling& t_;
  ChainExtents x_;
  const MicroKernel& mk_;
  const float* expand_w_;
  const float* project_w_;
  float *x_panels_ = nullptr, *block_expand_w_ = nullptr, *block_project_w_ = nullptr;
};

class TileRunner {
 public:
  TileRunner(const ConvChainDesc& d, const ConvChainTiling& t, const float* packed, RunMode mode)
      : d_(d),
        t_(t),
        s_(d.depthwise),
        l_(LayoutOf(d, t)),
        mode_(mode),
        local_(static_cast<size_t>(LocalBytesOf(d, t, l_))),
        offsets_(conv_detail::DepthwiseTapOffsets(s_, l_.band)),
        expand_clamp_(d.expand ? AsClamp(d.expand_act) : std::nullopt),
        dw_clamp_(AsClamp(d.dw_act)) {
    out_view_.shape = OutShape(d);
    out_view_.y = d.y;
    out_view_.bias = d.project_bias;
    out_view_.epilogue = d.epilogue;
    if (d.expand) {
      x_bands_ = local_.Take(2 * l_.band.floats());
      inside_ = local_.Take(l_.band.floats());
    } else {
      band_ = local_.Take(l_.band.floats());
    }
    dw_out_ = local_.Take(l_.out_ld);
    dw_panels_ = local_.Take(t.e_block * l_.out_ld);
    acc_ = local_.Take(l_.out_rows * l_.out_ld);
    block_dw_w_ = local_.Take(t.e_block * Taps(d));
    if (d.expand) expanded_ = local_.Take(t.e_block * l_.x_ld);
    products_ = ChainProductsOf(t).make(d, t, ExtentsOf(l_), packed, &local_);
    // Compute-only runs read whatever X's band and the weights hold: finite
    // values, not stale NaNs or denormals; copy-only runs finish zeroed tiles.
    if (mode == RunMode::kComputeOnly) {
      products_->FillForComputeOnly();
      if (band_) std::fill(band_, band_ + l_.band.floats(), 0.5f);
      std::fill(block_dw_w_, block_dw_w_ + t.e_block * Taps(d), 0.1f);
    }
    if (mode == RunMode::kCopyOnly) std::fill(acc_, acc_ + l_.out_rows * l_.out_ld, 0.0f);
  }

  // The whole chain for one tile: every block, bias, epilogue, copy out.
  void Run(const ConvTile& tile, KernelStats* stats) {
    Accumulate(tile, {0, Blocks(d_, t_)}, stats);
    conv_detail::FinishConvTile(out_view_, tile, acc_, l_.out_ld, ActivationLayout::kNCHW, mode_,
                                stats);
  }

  // Blocks `r` of one tile, their partial project sums written to
  // `partial` (Y's layout) for the second pass.
  void RunPartial(const ConvTile& tile, BlockRange r, float* partial, KernelStats* stats) {
    Accumulate(tile, r, stats);
    if (r.begin == r.end && mode_ != RunMode::kCopyOnly)
      std::fill(acc_, acc_ + l_.out_rows * l_.out_ld, 0.0f);  // no blocks: a zero partial
    if (mode_ == RunMode::kComputeOnly) return;
    const int64_t pixels = s_.out_h * s_.out_w;
    float* out = partial + tile.image * d_.out_channels * pixels + tile.p0;
    for (int64_t c = 0; c < d_.out_channels; ++c)
      std::memcpy(out + c * pixels, acc_ + c * l_.out_ld, static_cast<size_t>(tile.ps) * 4);
    stats->bytes_local_to_global += 4 * d_.out_channels * tile.ps;
  }

 private:
  // inside_ for the band from input row ih0. The mask depends only on how
  // many of the band's rows lie above and below X: the interior bands share
  // one, computed once per thread rather than once per tile.
  void RefreshInside(int64_t ih0, const BandGeometry& g) {
    const std::array<int64_t, 3> key{std::clamp<int64_t>(-ih0, 0, g.rows),
                                     std::clamp<int64_t>(ih0 + g.rows - s_.in_h, 0, g.rows),
                                     g.rows};
    if (key == inside_key_) return;
    conv_detail::InsideBand(s_, ih0, g, inside_);
    inside_key_ = key;
  }

  // The project's sums over blocks `r` of one tile into acc_.
  void Accumulate(const ConvTile& tile, BlockRange r, KernelStats* stats) {
    if (r.begin == r.end) return;
    const BandGeometry g = conv_detail::BandOf(s_, tile.ps / s_.out_w);
    const BandRows b = RowsOf(s_, g, tile.p0 / s_.out_w);
    if (d_.expand) {
      RefreshInside(b.ih0, g);
      if (mode_ != RunMode::kComputeOnly) stats->bytes_global_to_local += 4 * PackX(tile, g, b);
    }
    for (int64_t block = r.begin; block < r.end; ++block) {
      const int64_t e0 = block * t_.e_block;
      const int64_t eb = std::min(t_.e_block, Expanded(d_) - e0);
      if (mode_ != RunMode::kComputeOnly) {
        CopyBlockWeights(e0, eb);
        stats->bytes_global_to_local += BlockWeightBytes(d_, t_, eb);
      }
      if (d_.expand && mode_ != RunMode::kCopyOnly) Expand(tile.image, e0, eb, g);
      for (int64_t e = 0; e < eb; ++e)
        stats->bytes_global_to_local += 4 * Depthwise(tile, e0 + e, e, eb, g, b);
      // dw_act is pointwise without operands: applied as the depthwise rows
      // are packed when it is a clamp, else one pass over the block's panels
      // as one row (padding columns included) instead of one per channel.
      if (mode_ != RunMode::kCopyOnly && !dw_clamp_)
        ApplyEpilogue(d_.dw_act, dw_panels_, 0, 1, PanelFloats(tile.ps, eb, t_.nr), tile.image, e0,
                      0);
      if (mode_ != RunMode::kCopyOnly)
        products_->Project(dw_panels_, eb, tile.ps, acc_, l_.out_ld, block > r.begin);
    }
  }

  // A block's weights into the local buffer: the depthwise filters, and
  // the products' expand rows and project columns.
  void CopyBlockWeights(int64_t e0, int64_t eb) {
    const int64_t taps = Taps(d_);
    std::memcpy(block_dw_w_, d_.dw_w + e0 * taps, static_cast<size_t>(eb * taps) * 4);
    products_->CopyBlockWeights(e0, eb);
  }

  // X's band (the rows the tile's depthwise windows read) laid out as the
  // depthwise band, zero padding and stride phases included, into the B
  // panels, two channels at a time. Returns the floats read from X.
  int64_t PackX(const ConvTile& tile, const BandGeometry& g, const BandRows& b) {
    const int64_t plane = s_.in_h * s_.in_w, n = g.floats();
    const float* x = d_.x + tile.image * d_.in_channels * plane;
    int64_t read = 0;
    for (int64_t c0 = 0; c0 < d_.in_channels; c0 += 2) {
      const int64_t count = std::min<int64_t>(2, d_.in_channels - c0);
      for (int64_t i = 0; i < count; ++i)
        read += conv_detail::CopyBand(s_, x + (c0 + i) * plane, b.ih0, g, x_bands_ + i * n);
      products_->PackX(x_bands_, n, n, c0, count);
    }
    return read;
  }

  // Expanded channels [e0, e0 + eb), each its depthwise band: biased and
  // activated (in one pass with a clamp), the padding zeroed again.
  void Expand(int64_t image, int64_t e0, int64_t eb, const BandGeometry& g) {
    const int64_t n = g.floats();
    products_->Expand(eb, n, expanded_, l_.x_ld);
    if (!expand_clamp_) {
      AddRowBias(d_.expand_bias ? d_.expand_bias + e0 : nullptr, eb, n, l_.x_ld, expanded_);
      ApplyEpilogue(d_.expand_act, expanded_, l_.x_ld, eb, n, image, e0, 0);
    }
    for (int64_t slot = 0; slot < eb; ++slot) {
      BandActivation act;  // without a clamp (done above): only the padding zeroed
      if (expand_clamp_) {
        act = *expand_clamp_;
        act.bias = d_.expand_bias ? d_.expand_bias[e0 + slot] : 0.0f;
      }
      ActivateInside(act, inside_, n, expanded_ + slot * l_.x_ld);
    }
  }

  // Channel `e` of the depthwise stage (row `slot` of the block) into the
  // project's B panels; returns the floats read from X (no expand only).
  int64_t Depthwise(const ConvTile& tile, int64_t e, int64_t slot, int64_t eb,
                    const BandGeometry& g, const BandRows& b) {
    int64_t read = 0;
    // With an expand, the expanded channel is its band already.
    const float* band = d_.expand ? expanded_ + slot * l_.x_ld : band_;
    if (!d_.expand && mode_ != RunMode::kComputeOnly) {
      const float* plane = d_.x + (tile.image * s_.in_channels + e) * s_.in_h * s_.in_w;
      read = conv_detail::CopyBand(s_, plane, b.ih0, g, band_);
    }
    if (mode_ == RunMode::kCopyOnly) return read;
    const int64_t rows = tile.ps / s_.out_w;
    conv_detail::DepthwiseChannel(s_, g, band, offsets_.data(), block_dw_w_ + slot * Taps(d_),
                                  d_.dw_bias ? d_.dw_bias[e] : 0.0f, rows, dw_out_);
    PackRowIntoPanels(dw_out_, tile.ps, slot, eb, t_.nr, dw_panels_,
                      dw_clamp_.value_or(BandActivation{}));
    return read;
  }

  const ConvChainDesc& d_;
  const ConvChainTiling& t_;
  const ConvShape& s_;
  Layout l_;
  RunMode mode_;
  LocalBuffer local_;
  std::vector<int64_t> offsets_;
  // expand_act and dw_act when they are clamps, applied by the copies.
  std::optional<BandActivation> expand_clamp_, dw_clamp_;
  ConvDesc out_view_;
  float *band_ = nullptr, *dw_out_ = nullptr, *dw_panels_ = nullptr, *acc_ = nullptr;
  float *expanded_ = nullptr, *block_dw_w_ = nullptr;
  float *x_bands_ = nullptr, *inside_ = nullptr;  // with an expand
  std::array<int64_t, 3> inside_key_{-1, -1, -1};  // RefreshInside's rows above, below, held
  std::unique_ptr<ChainProducts> products_;
};

Status CheckActivations(const std::vector<EpilogueOp>& ops, const char* stage) {
  for (const EpilogueOp& op : ops)
    if (op.reads_memory() || IsRowNorm(op.kind))
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("conv chain: {} op {} must be pointwise without operands", stage,
                               EpilogueKindName(op.kind)));
  return Status::Ok();
}

}  // namespace

Status ValidateConvChainDesc(const ConvChainDesc& d) {
  auto bad = [](const std::string& what) {
    return Error(ErrorCode::kInvalidArgument, "conv chain: " + what);
  };
  const ConvShape& s = d.depthwise;
  FT_RETURN_IF_ERROR(ValidateConvShape(s));
  if (s.groups != s.in_channels || s.groups != s.out_channels)
    return bad("the depthwise stage needs groups == in_channels == out_channels, got " +
               s.ToString());
  if (d.in_channels < 1 || d.out_channels < 1)
    return bad(fmt::format("in_channels {} and out_channels {} must be positive", d.in_channels,
                           d.out_channels));
  if (!d.expand && d.in_channels != s.in_channels)
    return bad(fmt::format("without an expand X's {} channels must be the depthwise stage's {}",
                           d.in_channels, s.in_channels));
  if (d.x == nullptr || d.dw_w == nullptr || d.project_w == nullptr || d.y == nullptr ||
      (d.expand && d.expand_w == nullptr))
    return bad("x, y and every stage's weights must be set");
  FT_RETURN_IF_ERROR(CheckActivations(d.expand_act, "expand_act"));
  FT_RETURN_IF_ERROR(CheckActivations(d.dw_act, "dw_act"));
  for (const EpilogueOp& op : d.epilogue)
    if (IsRowNorm(op.kind))
      return bad(std::string("epilogue: ") + EpilogueKindName(op.kind) +
                 " needs whole rows, which a conv tile does not hold");
  return Status::Ok();
}

int64_t ConvChainLocalBytes(const ConvChainDesc& d, const ConvChainTiling& t) {
  return LocalBytesOf(d, t, LayoutOf(d, t));
}

Status ValidateConvChain(const ConvChainDesc& d, const ConvChainTiling& t,
                         const KernelConfig& config) {
  FT_RETURN_IF_ERROR(ValidateConvChainDesc(d));
  if (t.rows < 1 || t.e_block < 1 || t.mr < 1 || t.nr < 1 || t.e_block % t.mr != 0)
    return Error(
        ErrorCode::kInvalidArgument,
        "tiling: rows and e_block must be positive, e_block a multiple of mr: " + t.ToString());
  if (t.precision == Precision::kBf16) {
    if (FindBf16MicroKernel(t.mr, t.nr) == nullptr)
      return Error(ErrorCode::kInvalidArgument, NoBf16MicroKernel(t.mr, t.nr));
    if (t.e_block % 2 != 0)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("tiling.e_block: {} is odd; in bf16 the blocks of expanded "
                               "channels start on the micro-kernels' k-pairs",
                               t.e_block));
  }
  return CheckMicroTileAndBuffer(t.mr, t.nr, ConvChainLocalBytes(d, t), config,
                                 [&] { return t.ToString(); });
}

bool ConvChainTilingFits(const ConvChainDesc& d, const ConvChainTiling& t,
                         const KernelConfig& config) {
  return ValidateConvChain(d, t, config).ok();
}

double ConvChainMacs(const ConvChainDesc& d) {
  const ConvShape& s = d.depthwise;
  const double e = static_cast<double>(Expanded(d));
  const double out = static_cast<double>(s.batch * s.out_h * s.out_w);
  double macs = out * e * (static_cast<double>(Taps(d)) + static_cast<double>(d.out_channels));
  if (d.expand) macs += static_cast<double>(s.batch * s.in_h * s.in_w) * e * d.in_channels;
  return macs;
}

double ConvChainWorkRatio(const ConvChainDesc& d, const ConvChainTiling& t) {
  if (!d.expand || t.rows < 1) return 1.0;
  const ConvShape& s = d.depthwise;
  double expanded_rows = 0;
  for (int64_t oh0 = 0; oh0 < s.out_h; oh0 += t.rows) {
    const BandRows b = RowsOf(s, conv_detail::BandOf(s, std::min(t.rows, s.out_h - oh0)), oh0);
    expanded_rows += static_cast<double>(b.r1 - b.r0);
  }
  const double extra = (expanded_rows - static_cast<double>(s.in_h)) * s.in_w * s.batch *
                       static_cast<double>(Expanded(d) * d.in_channels);
  return 1.0 + extra / ConvChainMacs(d);
}

int64_t PrePackedConvChainWeightFloats(const ConvChainDesc& d, const ConvChainTiling& t) {
  return ChainProductsOf(t).packed_floats(d, t);
}

void PrePackConvChainWeights(const ConvChainDesc& d, const ConvChainTiling& t, float* dst) {
  ChainProductsOf(t).prepack(d, t, dst);
}

namespace conv_detail {

const ChainProductsOps& F32ChainProducts() {
  static const ChainProductsOps ops{
      F32Products::LocalBytes,
      [](const ConvChainDesc& d, const ConvChainTiling& t) {
        return ExpandPackedFloats(d, t) + RoundUp(d.out_channels, t.mr) * Expanded(d);
      },
      [](const ConvChainDesc& d, const ConvChainTiling& t, float* dst) {
        const int64_t e = Expanded(d);
        std::fill(dst, dst + F32ChainProducts().packed_floats(d, t), 0.0f);
        if (d.expand) std::copy(d.expand_w, d.expand_w + e * d.in_channels, dst);
        std::copy(d.project_w, d.project_w + d.out_channels * e, dst + ExpandPackedFloats(d, t));
      },
      [](const ConvChainDesc& d, const ConvChainTiling& t, int64_t eb) -> int64_t {
        const int64_t expand = d.expand ? RoundUp(eb, t.mr) * d.in_channels : 0;
        return 4 * (RoundUp(d.out_channels, t.mr) * eb + expand);
      },
      [](const ConvChainDesc& d, const ConvChainTiling& t, const ChainExtents& x,
         const float* packed, LocalBuffer* local) -> std::unique_ptr<ChainProducts> {
        return std::make_unique<F32Products>(d, t, x, packed, local);
      }};
  return ops;
}

const ChainProductsOps& ChainProductsOf(const ConvChainTiling& t) {
  return t.precision == Precision::kBf16 ? Bf16ChainProducts() : F32ChainProducts();
}

}  // namespace conv_detail

namespace {

// The second pass of a split run: the tiles dealt to threads as usual, each
// the sum of every thread's partial (in thread order), then the bias, the
// epilogue and the copy out.
KernelStats FinishSplit(const ConvChainDesc& d, const ConvChainTiling& t, const float* partials,
                        const KernelConfig& config, RunMode mode) {
  const ConvTileWalk walk = WalkOf(d, t);
  const Layout l = LayoutOf(d, t);
  ConvDesc out_view;
  out_view.shape = OutShape(d);
  out_view.y = d.y;
  out_view.bias = d.project_bias;
  out_view.epilogue = d.epilogue;
  const int64_t pixels = d.depthwise.pixels();
  const int64_t size = d.depthwise.batch * d.out_channels * pixels;
  return RunThreadShares(config.threads, [&](int thread) {
    LocalBuffer local(static_cast<size_t>(RegionBytes(l.out_rows * l.out_ld)));
    float* acc = local.Take(l.out_rows * l.out_ld);
    std::fill(acc, acc + l.out_rows * l.out_ld, 0.0f);
    KernelStats stats;
    int64_t begin = 0, end = 0;
    walk.ShareOf(thread, config.threads, &begin, &end);
    for (int64_t i = begin; i < end; ++i) {
      const ConvTile tile = walk.At(i);
      if (mode != RunMode::kComputeOnly) {
        const float* at = partials + tile.image * d.out_channels * pixels + tile.p0;
        for (int64_t c = 0; c < d.out_channels; ++c) {
          float* row = acc + c * l.out_ld;
          const float* src = at + c * pixels;
          std::copy(src, src + tile.ps, row);
          for (int p = 1; p < config.threads; ++p)
            for (int64_t j = 0; j < tile.ps; ++j) row[j] += src[p * size + j];
        }
        stats.bytes_global_to_local += 4 * config.threads * d.out_channels * tile.ps;
      } else {
        // Compute-only: the bias and epilogue run on a fresh tile each time,
        // not on the last one's result (which a scale would drift to inf).
        std::fill(acc, acc + l.out_rows * l.out_ld, 0.0f);
      }
      conv_detail::FinishConvTile(out_view, tile, acc, l.out_ld, ActivationLayout::kNCHW, mode,
                                  &stats);
    }
    StreamFence();  // this thread's streamed rows are visible before the join
    return stats;
  });
}

KernelStats RunSplit(const ConvChainDesc& d, const ConvChainTiling& t, const float* packed,
                     const KernelConfig& config, RunMode mode) {
  const ConvTileWalk walk = WalkOf(d, t);
  const int64_t size = d.depthwise.batch * d.out_channels * d.depthwise.pixels();
  // Every float is written by the first pass before the second reads it.
  const std::unique_ptr<float[]> partials(new float[static_cast<size_t>(size * config.threads)]);
  KernelStats first = RunThreadShares(config.threads, [&](int thread) {
    TileRunner runner(d, t, packed, mode);
    KernelStats stats;
    const BlockRange r = BlocksOf(d, t, thread, config.threads);
    for (int64_t i = 0; i < walk.size(); ++i)
      runner.RunPartial(walk.At(i), r, partials.get() + thread * size, &stats);
    return stats;
  });
  const KernelStats second = FinishSplit(d, t, partials.get(), config, mode);
  const double busy = first.busy_seconds + second.busy_seconds;
  first += second;
  first.busy_seconds = busy;
  return first;
}

}  // namespace

Result<KernelStats> RunConvChain(const ConvChainDesc& d, const ConvChainTiling& t,
                                 const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateConvChain(d, t, config));
  std::vector<float> own;
  const float* packed = d.w_packed;
  if (packed == nullptr) {
    own.resize(static_cast<size_t>(PrePackedConvChainWeightFloats(d, t)));
    PrePackConvChainWeights(d, t, own.data());
    packed = own.data();
  }
  if (t.split_expanded) return RunSplit(d, t, packed, config, mode);
  const ConvTileWalk walk = WalkOf(d, t);
  return RunThreadShares(config.threads, [&](int thread) {
    TileRunner runner(d, t, packed, mode);
    KernelStats stats;
    int64_t begin = 0, end = 0;
    walk.ShareOf(thread, config.threads, &begin, &end);
    for (int64_t i = begin; i < end; ++i) runner.Run(walk.At(i), &stats);
    StreamFence();  // this thread's streamed rows are visible before the join
    return stats;
  });
}

namespace {

// One tile's figures for the estimate: what a thread running blocks `r`
// of it reads and computes (its output or partial counted by the caller).
struct TileFigures {
  double bytes_in = 0, work = 0;
};

TileFigures FiguresOf(const ConvChainDesc& d, const ConvChainTiling& t, const ConvTile& c,
                      BlockRange r) {
  const ConvShape& s = d.depthwise;
  const int64_t e = ChannelsIn(d, t, r);
  TileFigures f;
  if (e == 0) return f;
  const BandGeometry g = conv_detail::BandOf(s, c.ps / s.out_w);
  const BandRows b = RowsOf(s, g, c.p0 / s.out_w);
  const int64_t in_pix = (b.r1 - b.r0) * s.in_w;
  f.bytes_in = static_cast<double>(RangeWeightBytes(d, t, r));
  f.bytes_in +=
      d.expand ? 4.0 * d.in_channels * in_pix : 4.0 * e * conv_detail::BandReadFloats(s, b.ih0, g);
  const double expand = d.expand ? static_cast<double>(in_pix) * e * d.in_channels : 0;
  f.work = expand + static_cast<double>(c.ps) * e * (Taps(d) + d.out_channels);
  return f;
}

// What FinishConvTile reads and writes for a tile (bias, epilogue, output).
double FinishBytesIn(const ConvChainDesc& d, const ConvTile& c) {
  return (d.project_bias ? 4.0 * d.out_channels : 0) +
         conv_detail::EpilogueReadBytes(d.epilogue, d.out_channels, c.ps);
}

}  // namespace

TilingEstimate EstimateConvChain(const ConvChainDesc& d, const ConvChainTiling& t, int threads) {
  const ConvShape& s = d.depthwise;
  const ConvTileWalk walk = WalkOf(d, t);
  const Layout l = LayoutOf(d, t);
  TilingEstimate est;
  est.local_bytes = LocalBytesOf(d, t, l);
  double total = 0, busiest = 0;
  for (int th = 0; th < threads; ++th) {
    int64_t begin = 0, end = walk.size();
    if (!t.split_expanded) walk.ShareOf(th, threads, &begin, &end);
    const BlockRange r = BlocksOf(d, t, th, threads);
    double work = 0;
    for (int64_t i = begin; i < end; ++i) {
      const ConvTile c = walk.At(i);
      const TileFigures f = FiguresOf(d, t, c, r);
      est.bytes_in += f.bytes_in;
      work += f.work;
      // A split run writes each thread's partial and reads them all back.
      const double out = 4.0 * d.out_channels * c.ps;
      est.bytes_out += out;
      if (t.split_expanded) est.bytes_in += out;
      if (!t.split_expanded || th == 0) est.bytes_in += FinishBytesIn(d, c);
      if (t.split_expanded && th == 0) est.bytes_out += out;
    }
    est.max_thread_tiles = std::max(est.max_thread_tiles, end - begin);
    busiest = std::max(busiest, work);
    total += work;
  }
  est.tiles = walk.size();
  est.max_thread_work = total > 0 ? busiest / total : 1;
  int64_t most_blocks = 1;
  for (int th = 0; th < threads; ++th) {
    const BlockRange r = BlocksOf(d, t, th, threads);
    most_blocks = std::max(most_blocks, r.end - r.begin);
  }
  est.steps = est.max_thread_tiles * most_blocks;
  // Columns of the micro-tiles and rows of the project's padded to mr.
  const double cols = static_cast<double>(l.rows * s.out_w);
  est.lane_utilisation = cols / static_cast<double>(l.out_ld) *
                         static_cast<double>(d.out_channels) / static_cast<double>(l.out_rows);
  return est;
}

}  // namespace fusetune::kernels

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
