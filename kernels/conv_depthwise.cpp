// kDepthwise: groups == in_channels == out_channels, each channel convolved
// with its own kernel_h x kernel_w filter. A tile is oc_block channels by a
// band of whole output rows; the band's input rows (halo and zero padding
// included) of those channels are copied into the local buffer in phase
// layout (conv_rows.h), so that every tap reads 16 consecutive output
// columns with one vector load whatever the stride. k_block is unused: there
// is no reduction over channels.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv_algorithm.h"
#include "kernels/conv_depthwise.h"
#include "kernels/conv_rows.h"
#include "kernels/simd_math.h"

namespace fusetune::kernels::conv_detail {

namespace {

Status DepthwiseApplies(const ConvShape& s) {
  if (s.groups != s.in_channels || s.groups != s.out_channels)
    return Error(ErrorCode::kInvalidArgument,
                 "depthwise needs groups == in_channels == out_channels, got " + s.ToString());
  return Status::Ok();
}

// Any positive blocks work: a band is whole rows, channels are independent
// (on NCHW16c, whole blocks of 16).
Status DepthwiseCheckTiling(const ConvDesc& d, const ConvTiling& t) {
  return DepthwiseBlocked(d, t) ? BlockedDepthwiseCheck(d, t) : Status::Ok();
}

ConvTileWalk WalkOf(const ConvDesc& d, const ConvTiling& t) { return AlgorithmWalk(d, t); }

struct Layout {
  int64_t band_rows = 0;  // output rows per tile
  BandGeometry band;
  int64_t tile_ld = 0;  // output tile columns
};

Layout LayoutOf(const ConvDesc& d, const ConvTiling& t) {
  Layout l;
  l.band_rows = std::min(WalkOf(d, t).rows_per_block(), d.shape.out_h);
  l.band = BandOf(d.shape, l.band_rows);
  l.tile_ld = l.band_rows * d.shape.out_w;
  return l;
}

int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

int64_t DepthwiseLocalBytes(const ConvDesc& d, const ConvTiling& t) {
  if (DepthwiseBlocked(d, t)) return BlockedDepthwiseLocalBytes(d, t);
  const Layout l = LayoutOf(d, t);
  const int64_t ocs = std::min(t.oc_block, d.shape.out_channels);
  return RoundUp64(4 * ocs * l.band.floats()) + RoundUp64(4 * ocs * l.tile_ld);
}

int64_t NoPacking(const ConvDesc&, const ConvTiling&) { return 0; }
void NoPrepack(const ConvDesc&, const ConvTiling&, float*) {}

#if defined(__AVX512F__)
// R output rows x V vectors of 16 output columns of one channel, R * V
// independent sums (the FMA latency needs about 8 in flight). `in` is the
// band at the block's first row and column, `row_step` the floats between
// the bands of consecutive output rows; the last vector is masked by `last`.
// TAPS > 0 keeps the filter in registers; 0 reads `taps` of them.
template <int R, int V, int TAPS>
void DwBlock(const float* in, int64_t row_step, const int64_t* off, const float* w, int64_t taps,
             float* out, int64_t out_ld, __mmask16 last, float bias) {
  constexpr int64_t kTaps = TAPS > 0 ? TAPS : 1;
  __m512 wt[kTaps];
  if constexpr (TAPS > 0)
    for (int t = 0; t < TAPS; ++t) wt[t] = _mm512_set1_ps(w[t]);
  __m512 a[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[r][v] = _mm512_set1_ps(bias);
  const int64_t n = TAPS > 0 ? TAPS : taps;
#pragma GCC unroll 9
  for (int64_t t = 0; t < n; ++t) {
    const __m512 wv = TAPS > 0 ? wt[TAPS > 0 ? t : 0] : _mm512_set1_ps(w[t]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float* src = in + r * row_step + off[t];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const __mmask16 m = v == V - 1 ? last : static_cast<__mmask16>(0xFFFF);
        a[r][v] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, src + 16 * v), a[r][v]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(out + r * out_ld + 16 * v, v == V - 1 ? last : 0xFFFF, a[r][v]);
}

using DwBlockFn = void (*)(const float*, int64_t, const int64_t*, const float*, int64_t, float*,
                           int64_t, __mmask16, float);

// kDwBlocks[taps == 9][R - 1][V - 1].
constexpr DwBlockFn kDwBlocks[2][4][2] = {{{DwBlock<1, 1, 0>, DwBlock<1, 2, 0>},
                                           {DwBlock<2, 1, 0>, DwBlock<2, 2, 0>},
                                           {DwBlock<3, 1, 0>, DwBlock<3, 2, 0>},
                                           {DwBlock<4, 1, 0>, DwBlock<4, 2, 0>}},
                                          {{DwBlock<1, 1, 9>, DwBlock<1, 2, 9>},
                                           {DwBlock<2, 1, 9>, DwBlock<2, 2, 9>},
                                           {DwBlock<3, 1, 9>, DwBlock<3, 2, 9>},
                                           {DwBlock<4, 1, 9>, DwBlock<4, 2, 9>}}};

// 3x3, dilation_h 1, stride_h SH: each input row is loaded once per block
// and feeds every output row whose window covers it (with SH = 1, 6 rows
// of loads for 4 output rows instead of 12). `col` holds the band offsets
// of the three column taps.
template <int R, int V, int SH>
void Dw3x3(const float* in, int64_t row_floats, const int64_t* col, const float* w, float* out,
           int64_t out_ld, __mmask16 last, float bias) {
  __m512 wt[9];
  for (int t = 0; t < 9; ++t) wt[t] = _mm512_set1_ps(w[t]);
  __m512 a[R][V];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[r][v] = _mm512_set1_ps(bias);
  constexpr int kRows = (R - 1) * SH + 3;
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const __mmask16 m = v == V - 1 ? last : static_cast<__mmask16>(0xFFFF);
        const __m512 x = _mm512_maskz_loadu_ps(m, in + i * row_floats + col[kw] + 16 * v);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int kh = i - r * SH;
          if (kh >= 0 && kh < 3) a[r][v] = _mm512_fmadd_ps(wt[kh * 3 + kw], x, a[r][v]);
        }
      }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      _mm512_mask_storeu_ps(out + r * out_ld + 16 * v, v == V - 1 ? last : 0xFFFF, a[r][v]);
}

using Dw3x3Fn = void (*)(const float*, int64_t, const int64_t*, const float*, float*, int64_t,
                         __mmask16, float);

// kDw3x3[SH - 1][R - 1][V - 1].
constexpr Dw3x3Fn kDw3x3[2][4][2] = {{{Dw3x3<1, 1, 1>, Dw3x3<1, 2, 1>},
                                      {Dw3x3<2, 1, 1>, Dw3x3<2, 2, 1>},
                                      {Dw3x3<3, 1, 1>, Dw3x3<3, 2, 1>},
                                      {Dw3x3<4, 1, 1>, Dw3x3<4, 2, 1>}},
                                     {{Dw3x3<1, 1, 2>, Dw3x3<1, 2, 2>},
                                      {Dw3x3<2, 1, 2>, Dw3x3<2, 2, 2>},
                                      {Dw3x3<3, 1, 2>, Dw3x3<3, 2, 2>},
                                      {Dw3x3<4, 1, 2>, Dw3x3<4, 2, 2>}}};

// One channel of a tile: blocks of 4 rows x 32 columns, smaller at the
// edges, each output starting from the bias.
void ChannelBlocks(const ConvShape& s, const BandGeometry& g, const float* band, const int64_t* off,
                   const float* w, float bias, int64_t rows, float* out) {
  const int64_t taps = s.kernel_h * s.kernel_w;
  const int64_t row_step = s.stride_h * g.row_floats;
  const bool k3x3 = s.kernel_h == 3 && s.kernel_w == 3 && s.dilation_h == 1 && s.stride_h <= 2;
  const int specialised = taps == 9 ? 1 : 0;
  for (int64_t r = 0; r < rows; r += 4) {
    const int64_t nr = std::min<int64_t>(4, rows - r);
    for (int64_t ow = 0; ow < s.out_w; ow += 32) {
      const int64_t cols = std::min<int64_t>(32, s.out_w - ow);
      const int64_t nv = (cols + 15) / 16;
      const __mmask16 last = simd::Tail(cols - 16 * (nv - 1)) | (cols % 16 == 0 ? 0xFFFF : 0);
      const float* in = band + r * row_step + ow;
      float* o = out + r * s.out_w + ow;
      if (k3x3)
        kDw3x3[s.stride_h - 1][nr - 1][nv - 1](in, g.row_floats, off, w, o, s.out_w, last, bias);
      else
        kDwBlocks[specialised][nr - 1][nv - 1](in, row_step, off, w, taps, o, s.out_w, last, bias);
    }
  }
}
#else
void ChannelBlocks(const ConvShape& s, const BandGeometry& g, const float* band, const int64_t* off,
                   const float* w, float bias, int64_t rows, float* out) {
  const int64_t taps = s.kernel_h * s.kernel_w;
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = band + r * s.stride_h * g.row_floats;
    float* o = out + r * s.out_w;
    for (int64_t c = 0; c < s.out_w; ++c) o[c] = bias;
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t c = 0; c < s.out_w; ++c) o[c] += w[t] * in[off[t] + c];
  }
}
#endif

}  // namespace

std::vector<int64_t> DepthwiseTapOffsets(const ConvShape& s, const BandGeometry& g) {
  std::vector<int64_t> offsets;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh)
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) offsets.push_back(TapOffset(s, g, kh, kw));
  return offsets;
}

void DepthwiseChannel(const ConvShape& s, const BandGeometry& g, const float* band,
                      const int64_t* offsets, const float* w, float bias, int64_t rows,
                      float* out) {
  ChannelBlocks(s, g, band, offsets, w, bias, rows, out);
}

namespace {

// The tile's channels, rows of the band one after the other.
void ComputeTile(const ConvShape& s, const Layout& l, const float* band, const float* w,
                 const float* bias, const std::vector<int64_t>& offsets, int64_t ocs, int64_t rows,
                 float* tile) {
  const int64_t taps = s.kernel_h * s.kernel_w;
  for (int64_t c = 0; c < ocs; ++c)
    DepthwiseChannel(s, l.band, band + c * l.band.floats(), offsets.data(), w + c * taps,
                     bias ? bias[c] : 0.0f, rows, tile + c * l.tile_ld);
}

KernelStats DepthwiseRunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                              RunMode mode, int thread) {
  if (DepthwiseBlocked(d, t)) return BlockedDepthwiseRunShare(d, t, config, mode, thread);
  const ConvShape& s = d.shape;
  const ConvTileWalk walk = WalkOf(d, t);
  const Layout l = LayoutOf(d, t);
  const int64_t ocb = std::min(t.oc_block, s.out_channels);
  LocalBuffer local(static_cast<size_t>(DepthwiseLocalBytes(d, t)));
  float* band = local.Take(ocb * l.band.floats());
  float* tile = local.Take(ocb * l.tile_ld);
  // Compute-only runs read whatever the band holds: finite values, not
  // stale NaNs or denormals that would slow the arithmetic.
  if (mode == RunMode::kComputeOnly) std::fill(band, band + ocb * l.band.floats(), 0.5f);
  // Copy-only runs still apply the epilogue's operand ops to the tile and
  // stream it out: zeros, not stale NaNs or denormals.
  if (mode == RunMode::kCopyOnly) std::fill(tile, tile + ocb * l.tile_ld, 0.0f);
  const std::vector<int64_t> offsets = DepthwiseTapOffsets(s, l.band);
  const int64_t taps = s.kernel_h * s.kernel_w;
  ConvDesc unbiased = d;
  unbiased.bias = nullptr;
  KernelStats stats;
  int64_t begin = 0, end = 0;
  walk.ShareOf(thread, config.threads, &begin, &end);
  for (int64_t i = begin; i < end; ++i) {
    const ConvTile tile_at = walk.At(i);
    const int64_t oh0 = tile_at.p0 / s.out_w;
    const int64_t rows = tile_at.ps / s.out_w;
    const BandGeometry g = BandOf(s, rows);
    const int64_t ih0 = BandFirstRow(s, oh0);
    if (mode != RunMode::kComputeOnly) {
      const int64_t read = CopyBands(s, d.x, t.in_layout, tile_at.image, tile_at.oc0, tile_at.ocs,
                                     ih0, g, band, l.band.floats());
      stats.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * read;
    }
    // The bias starts the sums (no pass of its own); its read is counted here.
    if (d.bias != nullptr && mode != RunMode::kComputeOnly)
      stats.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * tile_at.ocs;
    if (mode != RunMode::kCopyOnly)
      ComputeTile(s, l, band, d.w + tile_at.oc0 * taps, d.bias ? d.bias + tile_at.oc0 : nullptr,
                  offsets, tile_at.ocs, rows, tile);
    FinishConvTile(unbiased, tile_at, tile, l.tile_ld, t.out_layout, mode, &stats);
  }
  return stats;
}

TilingEstimate DepthwiseEstimate(const ConvDesc& d, const ConvTiling& t, int threads) {
  const ConvShape& s = d.shape;
  const ConvTileWalk walk = WalkOf(d, t);
  TilingEstimate e;
  e.local_bytes = DepthwiseLocalBytes(d, t);
  double total = 0, busiest = 0;
  for (int th = 0; th < threads; ++th) {
    int64_t begin = 0, end = 0;
    walk.ShareOf(th, threads, &begin, &end);
    double work = 0;
    for (int64_t i = begin; i < end; ++i) {
      const ConvTile c = walk.At(i);
      const int64_t rows = c.ps / s.out_w;
      const BandGeometry g = BandOf(s, rows);
      e.bytes_in += 4.0 * c.ocs * BandReadFloats(s, BandFirstRow(s, c.p0 / s.out_w), g);
      if (d.bias != nullptr) e.bytes_in += 4.0 * c.ocs;
      e.bytes_in += EpilogueReadBytes(d.epilogue, c.ocs, c.ps);
      e.bytes_out += 4.0 * c.ocs * c.ps;
      // Reading the band and writing the tile: the work is the data moved.
      work += static_cast<double>(c.ocs) * (g.floats() + c.ps);
    }
    e.max_thread_tiles = std::max(e.max_thread_tiles, end - begin);
    busiest = std::max(busiest, work);
    total += work;
  }
  e.tiles = walk.size();
  e.max_thread_work = total > 0 ? busiest / total : 1;
  e.steps = e.max_thread_tiles;
  // NCHW vectorises along a row (lanes past its end wasted), NCHW16c across
  // channels (every lane used).
  e.lane_utilisation = DepthwiseBlocked(d, t) ? 1.0
                                              : static_cast<double>(s.out_w) /
                                                    static_cast<double>((s.out_w + 15) / 16 * 16);
  return e;
}

}  // namespace

const ConvAlgorithmOps& DepthwiseOps() {
  static const ConvAlgorithmOps ops = {
      DepthwiseApplies, DepthwiseCheckTiling, DepthwiseLocalBytes, NoPacking,
      NoPrepack,        DepthwiseRunShare,    DepthwiseEstimate};
  return ops;
}

}  // namespace fusetune::kernels::conv_detail

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
