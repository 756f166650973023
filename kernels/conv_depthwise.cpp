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

// Any positive blocks work: a band is whole rows, channels are independent.
Status DepthwiseCheckTiling(const ConvDesc&, const ConvTiling&) { return Status::Ok(); }

ConvTileWalk WalkOf(const ConvDesc& d, const ConvTiling& t) {
  return ConvTileWalk(d.shape, t.oc_block, t.pixel_block, /*whole_rows=*/true);
}

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
  const Layout l = LayoutOf(d, t);
  const int64_t ocs = std::min(t.oc_block, d.shape.out_channels);
  return RoundUp64(4 * ocs * l.band.floats()) + RoundUp64(4 * ocs * l.tile_ld);
}

int64_t NoPacking(const ConvDesc&, const ConvTiling&) { return 0; }
void NoPrepack(const ConvDesc&, const ConvTiling&, float*) {}

// One output row of one channel: out[ow] = sum over taps of w[tap] *
// band[tap_offset + ow], 16 columns a vector, four vectors at a time.
void ChannelRow(const float* band, const int64_t* offsets, const float* w, int64_t taps,
                int64_t out_w, float* out) {
  int64_t ow = 0;
#if defined(__AVX512F__)
  for (; ow + 64 <= out_w; ow += 64) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t t = 0; t < taps; ++t) {
      const float* src = band + offsets[t] + ow;
      const __m512 wt = _mm512_set1_ps(w[t]);
      a0 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(src), a0);
      a1 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(src + 16), a1);
      a2 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(src + 32), a2);
      a3 = _mm512_fmadd_ps(wt, _mm512_loadu_ps(src + 48), a3);
    }
    _mm512_storeu_ps(out + ow, a0);
    _mm512_storeu_ps(out + ow + 16, a1);
    _mm512_storeu_ps(out + ow + 32, a2);
    _mm512_storeu_ps(out + ow + 48, a3);
  }
  for (; ow < out_w; ow += 16) {
    const __mmask16 m = out_w - ow >= 16 ? static_cast<__mmask16>(0xFFFF) : simd::Tail(out_w - ow);
    __m512 a = _mm512_setzero_ps();
    for (int64_t t = 0; t < taps; ++t)
      a = _mm512_fmadd_ps(_mm512_set1_ps(w[t]), _mm512_maskz_loadu_ps(m, band + offsets[t] + ow),
                          a);
    _mm512_mask_storeu_ps(out + ow, m, a);
  }
#else
  for (; ow < out_w; ++ow) out[ow] = 0.0f;
  for (int64_t t = 0; t < taps; ++t) {
    const float* src = band + offsets[t];
    const float wt = w[t];
    for (int64_t c = 0; c < out_w; ++c) out[c] += wt * src[c];
  }
#endif
}

// The tile's channels, rows of the band one after the other.
void ComputeTile(const ConvShape& s, const Layout& l, const float* band, const float* w,
                 const std::vector<int64_t>& offsets, int64_t ocs, int64_t rows, float* tile) {
  const int64_t taps = s.kernel_h * s.kernel_w;
  for (int64_t c = 0; c < ocs; ++c) {
    const float* chan = band + c * l.band.floats();
    const float* wc = w + c * taps;
    for (int64_t r = 0; r < rows; ++r)
      ChannelRow(chan + r * s.stride_h * l.band.row_floats, offsets.data(), wc, taps, s.out_w,
                 tile + c * l.tile_ld + r * s.out_w);
  }
}

std::vector<int64_t> TapOffsets(const ConvShape& s, const BandGeometry& g) {
  std::vector<int64_t> offsets;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh)
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) offsets.push_back(TapOffset(s, g, kh, kw));
  return offsets;
}

KernelStats DepthwiseRunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                              RunMode mode, int thread) {
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
  const std::vector<int64_t> offsets = TapOffsets(s, l.band);
  const int64_t taps = s.kernel_h * s.kernel_w;
  const int64_t plane = s.in_h * s.in_w;
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
      int64_t read = 0;
      for (int64_t c = 0; c < tile_at.ocs; ++c)
        read += CopyBand(s, d.x + (tile_at.image * s.in_channels + tile_at.oc0 + c) * plane, ih0, g,
                         band + c * l.band.floats());
      stats.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * read;
    }
    if (mode != RunMode::kCopyOnly)
      ComputeTile(s, l, band, d.w + tile_at.oc0 * taps, offsets, tile_at.ocs, rows, tile);
    FinishConvTile(d, tile_at, tile, l.tile_ld, mode, &stats);
  }
  return stats;
}

double EpilogueBytes(const std::vector<EpilogueOp>& ops, int64_t rows, int64_t cols) {
  double bytes = 0;
  for (const EpilogueOp& op : ops)
    if (op.data) bytes += 4.0 * cols * (op.row_stride == 0 ? 1 : rows);
  return bytes;
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
      e.bytes_in += EpilogueBytes(d.epilogue, c.ocs, c.ps);
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
  e.lane_utilisation = static_cast<double>(s.out_w) / static_cast<double>((s.out_w + 15) / 16 * 16);
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
