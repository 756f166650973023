// kDirect: direct convolution on channel-blocked tiles, groups == 1. A tile
// is oc_block output channels (a multiple of 16) by a band of whole output
// rows. For each slice of k_block input channels the band's input rows are
// copied into the local buffer as [ic][ih][iw] with the padding materialised
// (phase layout for strides, conv_rows.h), and a register block of RB output
// columns x V 16-channel vectors accumulates in zmm registers (with AVX2
// only, in strips of ymm halves: see Avx2Strip): one broadcast
// input value and V weight vectors per tap. The sums are kept channel-blocked
// ([oc/16][position][16]) across slices and finished where they lie
// (FinishBlockedConvTile: into NCHW16c Y as they lie, into NCHW Y transposed
// as they are copied out), or, where the epilogue reads an operand of Y's
// shape in NCHW or a pool follows, transposed at the end into the rows =
// channels tile FinishConvTile takes.
//
// A 1x1 stride-1 unpadded conv reading NCHW16c keeps its band as X holds it,
// [ic/16][position][16] (a copy of whole rows per block of 16 channels, no
// transpose), and its register blocks read a column's input 16 floats on:
// each band copy through CopyBands transposed those blocks into planes, and
// such a conv ran 1.1-1.55x as long as on NCHW input inside MobileNetV2.
//
// Weights: [oc/16][ic][kh][kw][16] (oc padded with zeros to 16). Pre-packed
// (desc.w_packed) they are read in place; without, each tile packs the
// slice it needs into the local buffer from W (counted as copies), which
// costs ocs * k_block * kh * kw floats per slice against ps times as many
// multiply-adds.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/conv_direct.h"
#include "kernels/layout.h"
#include "kernels/row_simd.h"
#include "kernels/simd_math.h"

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace fusetune::kernels::conv_detail {

DirectLayout DirectLayoutOf(const ConvDesc& d, const ConvTiling& t) {
  const ConvShape& s = d.shape;
  DirectLayout l;
  l.band_rows = std::min(AlgorithmWalk(d, t).rows_per_block(), s.out_h);
  l.band = BandOf(s, l.band_rows);
  l.tile_ld = l.band_rows * s.out_w;
  const int64_t slice = t.precision == Precision::kBf16 ? DirectRoundUp(t.k_block, 2) : t.k_block;
  l.ks = std::min(slice, s.in_channels);
  l.vectors = (std::min(t.oc_block, s.out_channels) + kDirectLanes - 1) / kDirectLanes;
  l.taps = s.kernel_h * s.kernel_w;
  l.pack = d.w_packed == nullptr;
  l.band_blocked = t.precision == Precision::kF32 && t.in_layout == ActivationLayout::kNCHWc &&
                   s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 &&
                   s.pad_top == 0 && s.pad_left == 0 && s.out_h == s.in_h && s.out_w == s.in_w &&
                   s.in_channels % kDirectLanes == 0 && l.ks % kDirectLanes == 0;
  // Not transposed into rows and back.
  l.finish_blocks = FinishableInBlocks(d, t.out_layout);
  l.row_tile_floats = l.finish_blocks ? 0 : std::min(t.oc_block, s.out_channels) * l.tile_ld;
  return l;
}

int64_t DirectChunkOf(int64_t out_w) {
  const int64_t chunks = (out_w + kDirectMaxColumns - 1) / kDirectMaxColumns;
  return (out_w + chunks - 1) / chunks;
}

std::vector<int64_t> DirectTapOffsets(const ConvShape& s, const BandGeometry& g) {
  std::vector<int64_t> offsets;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh)
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) offsets.push_back(TapOffset(s, g, kh, kw));
  return offsets;
}

void DirectUnblock(const float* acc, int64_t ocs, int64_t ps, int64_t ld, float* out) {
  for (int64_t v = 0; v * kDirectLanes < ocs; ++v)
    BlockedToRows(acc + v * ld * kDirectLanes, ps, out + v * kDirectLanes * ld, ld,
                  std::min(kDirectLanes, ocs - v * kDirectLanes));
}

void DirectFinishTile(const ConvDesc& d, const ConvTiling& t, const DirectLayout& l,
                      const ConvTile& c, float* acc, float* out, RunMode mode, KernelStats* stats) {
  if (l.finish_blocks) {
    FinishBlockedConvTile(d, c, acc, l.tile_ld * kDirectLanes, t.out_layout, mode, stats);
    stats->tiles += 1;
    return;
  }
  if (mode != RunMode::kCopyOnly) DirectUnblock(acc, c.ocs, c.ps, l.tile_ld, out);
  FinishConvTile(d, c, out, l.tile_ld, t.out_layout, mode, stats);
}

TilingEstimate DirectEstimateOf(const ConvDesc& d, const ConvTiling& t, int threads,
                                int64_t local_bytes) {
  const ConvShape& s = d.shape;
  const ConvTileWalk walk = AlgorithmWalk(d, t);
  const DirectLayout l = DirectLayoutOf(d, t);
  const int64_t slices = (s.in_channels + l.ks - 1) / l.ks;
  TilingEstimate e;
  e.local_bytes = local_bytes;
  double total = 0, busiest = 0, useful = 0;
  for (int th = 0; th < threads; ++th) {
    int64_t begin = 0, end = 0;
    walk.ShareOf(th, threads, &begin, &end);
    double work = 0;
    ConvTile previous;
    for (int64_t i = begin; i < end; ++i) {
      const ConvTile c = walk.At(i);
      const BandGeometry g = BandOf(s, c.ps / s.out_w);
      const int64_t ih0 = BandFirstRow(s, c.p0 / s.out_w);
      if (!(i > begin && l.ks >= s.in_channels && previous.SameBand(c)))
        e.bytes_in += 4.0 * s.in_channels * BandReadFloats(s, ih0, g);
      previous = c;
      if (l.pack) e.bytes_in += 4.0 * c.ocs * s.in_channels * l.taps;
      if (d.bias != nullptr) e.bytes_in += 4.0 * c.ocs;
      e.bytes_in += EpilogueReadBytes(d.epilogue, c.ocs, c.ps);
      e.bytes_out += 4.0 * c.ocs * c.ps;
      const double per_channel = static_cast<double>(c.ps) * s.in_channels * l.taps;
      work += DirectRoundUp(c.ocs, kDirectLanes) * per_channel;
      useful += c.ocs * per_channel;
    }
    e.max_thread_tiles = std::max(e.max_thread_tiles, end - begin);
    busiest = std::max(busiest, work);
    total += work;
  }
  e.tiles = walk.size();
  e.max_thread_work = total > 0 ? busiest / total : 1;
  e.lane_utilisation = total > 0 ? useful / total : 1;
  e.steps = e.max_thread_tiles * slices;
  return e;
}

namespace {

constexpr int64_t kLanes = kDirectLanes;
constexpr int kMaxColumns = kDirectMaxColumns;

int64_t RoundUp(int64_t x, int64_t m) { return DirectRoundUp(x, m); }

Status DirectApplies(const ConvShape& s) {
  if (s.groups != 1)
    return Error(ErrorCode::kInvalidArgument,
                 "direct needs groups == 1 (depthwise or im2col for grouped), got " + s.ToString());
  return Status::Ok();
}

Status DirectCheckTiling(const ConvDesc&, const ConvTiling& t) {
  if (t.oc_block % kLanes != 0)
    return Error(ErrorCode::kInvalidArgument,
                 "tiling.oc_block: direct needs a multiple of 16, got " + t.ToString());
  return Status::Ok();
}

int64_t Bytes64(int64_t floats) { return RoundUp(4 * floats, 64); }

int64_t DirectLocalBytes(const ConvDesc& d, const ConvTiling& t) {
  const DirectLayout l = DirectLayoutOf(d, t);
  const int64_t oc = l.vectors * kLanes;
  int64_t bytes =
      Bytes64(l.ks * l.band.floats()) + Bytes64(oc * l.tile_ld) + Bytes64(l.row_tile_floats);
  if (l.pack) bytes += Bytes64(oc * l.ks * l.taps);
  return bytes;
}

int64_t DirectPackedFloats(const ConvDesc& d, const ConvTiling&) {
  const ConvShape& s = d.shape;
  return RoundUp(s.out_channels, kLanes) * s.in_channels * s.kernel_h * s.kernel_w;
}

// Weights of output channels [oc0, oc0 + ocs) and input channels [ic0, ic0
// + ics) as [vector][ic][tap][16], zero beyond ocs. Returns floats read.
int64_t PackWeights(const ConvShape& s, const float* w, int64_t oc0, int64_t ocs, int64_t ic0,
                    int64_t ics, float* dst) {
  const int64_t taps = s.kernel_h * s.kernel_w;
  const int64_t vectors = (ocs + kLanes - 1) / kLanes;
  for (int64_t v = 0; v < vectors; ++v)
    for (int64_t ic = 0; ic < ics; ++ic)
      for (int64_t tap = 0; tap < taps; ++tap) {
        float* out = dst + ((v * ics + ic) * taps + tap) * kLanes;
        for (int64_t lane = 0; lane < kLanes; ++lane) {
          const int64_t oc = v * kLanes + lane;
          out[lane] = oc < ocs ? w[((oc0 + oc) * s.in_channels + ic0 + ic) * taps + tap] : 0.0f;
        }
      }
  return std::min(ocs, vectors * kLanes) * ics * taps;
}

void DirectPrepack(const ConvDesc& d, const ConvTiling&, float* dst) {
  const ConvShape& s = d.shape;
  const int64_t per_vector = s.in_channels * s.kernel_h * s.kernel_w * kLanes;
  for (int64_t oc0 = 0; oc0 < s.out_channels; oc0 += kLanes)
    PackWeights(s, d.w, oc0, std::min(kLanes, s.out_channels - oc0), 0, s.in_channels,
                dst + oc0 / kLanes * per_vector);
}

using BlockArgs = DirectBlockArgs<float, float>;

// BLOCKED: the band is [ic/16][position][16] (DirectLayout::band_blocked): a
// column's input lies kLanes floats after the previous column's, a
// channel's one float after the previous channel's within its block.
template <bool BLOCKED>
const float* ChannelBand(const BlockArgs& b, int64_t ic) {
  if constexpr (BLOCKED) return b.in + ic / kLanes * b.channel_stride + ic % kLanes;
  return b.in + ic * b.channel_stride;
}

#if defined(__AVX512F__)
template <int V, int C, int R, bool BLOCKED>
void Block(const BlockArgs& b) {
  constexpr int64_t kColumn = BLOCKED ? kLanes : 1;
  __m512 a[V][R][C];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v)
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j)
        a[v][r][j] = b.accumulate
                         ? _mm512_loadu_ps(b.acc + v * b.acc_vstride + r * b.acc_row + j * kLanes)
                         : _mm512_setzero_ps();
  const float* w = b.w;
  for (int64_t ic = 0; ic < b.channels; ++ic) {
    const float* src = ChannelBand<BLOCKED>(b, ic);
    for (int64_t t = 0; t < b.taps; ++t, w += kLanes) {
      const float* p = src + b.tap_off[t];
      __m512 wv[V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_ps(w + v * b.w_vstride);
      PrefetchNextWeights<V>(b, w);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        const float* row = p + r * b.in_row;  // one base per row, columns as displacements
#pragma GCC unroll 16
        for (int j = 0; j < C; ++j) {
          const __m512 x = _mm512_set1_ps(row[j * kColumn]);
#pragma GCC unroll 2
          for (int v = 0; v < V; ++v) a[v][r][j] = _mm512_fmadd_ps(wv[v], x, a[v][r][j]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v)
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j)
        _mm512_storeu_ps(b.acc + v * b.acc_vstride + r * b.acc_row + j * kLanes, a[v][r][j]);
}
#elif defined(__AVX2__) && defined(__FMA__)
// AVX2 has 16 ymm registers, half as wide as zmm: a 16-channel vector is two
// halves, and a strip of N <= 6 of the block's R x C positions (row-major,
// from position Q) of one vector keeps its 2N sums, the 2 weight halves and
// the broadcast in registers (all positions at once would spill). Each strip
// runs the whole slice: the weights and band are read again per strip, from
// L1 or L2. `prefetch`: the vector's first strip fetches the weights of the
// next block (of the next tile after the tile's last), as PrefetchNextWeights.
template <int C, int Q, int N, bool BLOCKED>
void Avx2Strip(const BlockArgs& b, int v, bool prefetch) {
  constexpr int64_t kColumn = BLOCKED ? kLanes : 1;
  float* acc = b.acc + v * b.acc_vstride;
  int64_t acc_at[N], in_at[N];
#pragma GCC unroll 8
  for (int q = 0; q < N; ++q) {
    acc_at[q] = (Q + q) / C * b.acc_row + (Q + q) % C * kLanes;
    in_at[q] = (Q + q) / C * b.in_row + (Q + q) % C * kColumn;
  }
  __m256 lo[N], hi[N];
#pragma GCC unroll 8
  for (int q = 0; q < N; ++q) {
    lo[q] = b.accumulate ? _mm256_loadu_ps(acc + acc_at[q]) : _mm256_setzero_ps();
    hi[q] = b.accumulate ? _mm256_loadu_ps(acc + acc_at[q] + 8) : _mm256_setzero_ps();
  }
  const float* w = b.w + v * b.w_vstride;
  for (int64_t ic = 0; ic < b.channels; ++ic) {
    const float* src = ChannelBand<BLOCKED>(b, ic);
    for (int64_t t = 0; t < b.taps; ++t, w += kLanes) {
      const float* p = src + b.tap_off[t];
      const __m256 w_lo = _mm256_loadu_ps(w), w_hi = _mm256_loadu_ps(w + 8);
      if (prefetch) __builtin_prefetch(b.w_next + (w - b.w), 0, 3);
#pragma GCC unroll 8
      for (int q = 0; q < N; ++q) {
        const __m256 x = _mm256_broadcast_ss(p + in_at[q]);
        lo[q] = _mm256_fmadd_ps(w_lo, x, lo[q]);
        hi[q] = _mm256_fmadd_ps(w_hi, x, hi[q]);
      }
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < N; ++q) {
    _mm256_storeu_ps(acc + acc_at[q], lo[q]);
    _mm256_storeu_ps(acc + acc_at[q] + 8, hi[q]);
  }
}

// The R x C positions as strips of at most 6, all but the last of one
// width (14: 5, 5, 4; 13: 5, 5, 3).
template <int C, int kPositions, int S, bool BLOCKED>
void Avx2Strips(const BlockArgs& b, int v, bool prefetch) {
  constexpr int kStrips = (kPositions + 5) / 6;
  constexpr int kWide = (kPositions + kStrips - 1) / kStrips;
  constexpr int kQ = S * kWide;
  if constexpr (kQ < kPositions) {
    constexpr int kN = kQ + kWide <= kPositions ? kWide : kPositions - kQ;
    Avx2Strip<C, kQ, kN, BLOCKED>(b, v, prefetch);
    Avx2Strips<C, kPositions, S + 1, BLOCKED>(b, v, false);
  }
}

template <int V, int C, int R, bool BLOCKED>
void Block(const BlockArgs& b) {
  for (int v = 0; v < V; ++v)
    Avx2Strips<C, R * C, 0, BLOCKED>(b, v, b.w_next != nullptr && v < b.next_vectors);
}
#else
template <int V, int C, int R, bool BLOCKED>
void Block(const BlockArgs& b) {
  constexpr int64_t kColumn = BLOCKED ? kLanes : 1;
  float a[V][R][C][kLanes];
  for (int v = 0; v < V; ++v)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j)
        for (int64_t l = 0; l < kLanes; ++l)
          a[v][r][j][l] =
              b.accumulate ? b.acc[v * b.acc_vstride + r * b.acc_row + j * kLanes + l] : 0.0f;
  const float* w = b.w;
  for (int64_t ic = 0; ic < b.channels; ++ic) {
    const float* src = ChannelBand<BLOCKED>(b, ic);
    for (int64_t t = 0; t < b.taps; ++t, w += kLanes) {
      const float* p = src + b.tap_off[t];
      for (int v = 0; v < V; ++v)
        for (int r = 0; r < R; ++r)
          for (int j = 0; j < C; ++j)
            for (int64_t l = 0; l < kLanes; ++l)
              a[v][r][j][l] += w[v * b.w_vstride + l] * p[r * b.in_row + j * kColumn];
    }
  }
  for (int v = 0; v < V; ++v)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j)
        for (int64_t l = 0; l < kLanes; ++l)
          b.acc[v * b.acc_vstride + r * b.acc_row + j * kLanes + l] = a[v][r][j][l];
}
#endif

using BlockFn = void (*)(const BlockArgs&);
using BlockRow = std::array<BlockFn, kMaxColumns + 1>;

template <int V, int R, bool BLOCKED, int... C>
constexpr BlockRow BlockTable(std::integer_sequence<int, C...>) {
  return {nullptr, (C + 1 <= kMaxColumns / R ? &Block<V, C + 1, R, BLOCKED> : nullptr)...};
}

// [V - 1][R - 1][C]: V in {1, 2} vectors, R in {1, 2} rows, C columns,
// R * C <= kMaxColumns (two rows only for outputs narrower than 8).
template <bool BLOCKED>
constexpr BlockRow kBlocks[2][2] = {
    {BlockTable<1, 1, BLOCKED>(std::make_integer_sequence<int, kMaxColumns>{}),
     BlockTable<1, 2, BLOCKED>(std::make_integer_sequence<int, kMaxColumns>{})},
    {BlockTable<2, 1, BLOCKED>(std::make_integer_sequence<int, kMaxColumns>{}),
     BlockTable<2, 2, BLOCKED>(std::make_integer_sequence<int, kMaxColumns>{})}};

// The band of input channels [ic0, ic0 + ics) (whole blocks of 16) for
// `rows` output rows from oh0: each block's rows copied as they lie.
// Returns the floats read.
int64_t CopyBlockedBand(const ConvDesc& d, int64_t image, int64_t ic0, int64_t ics, int64_t oh0,
                        int64_t rows, const DirectLayout& l, float* band) {
  const ConvShape& s = d.shape;
  const ActivationDims dims{s.batch, s.in_channels, s.in_h, s.in_w};
  const int64_t floats = rows * s.in_w * kLanes;
  for (int64_t c = 0; c < ics; c += kLanes) {
    const float* block = d.x + ChannelPlane(ActivationLayout::kNCHWc, dims, image, ic0 + c).offset;
    std::memcpy(band + c * l.band.floats(), block + oh0 * s.in_w * kLanes, sizeof(float) * floats);
  }
  return ics * rows * s.in_w;
}

KernelStats DirectRunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                           RunMode mode, int thread) {
  const ConvShape& s = d.shape;
  const DirectLayout l = DirectLayoutOf(d, t);
  const int64_t oc_max = l.vectors * kLanes;
  LocalBuffer local(static_cast<size_t>(DirectLocalBytes(d, t)));
  float* band = local.Take(l.ks * l.band.floats());
  float* acc = local.Take(oc_max * l.tile_ld);
  float* out = local.Take(l.row_tile_floats);
  float* wbuf = l.pack ? local.Take(oc_max * l.ks * l.taps) : nullptr;
  // Compute-only runs read whatever the buffers hold: finite values.
  if (mode == RunMode::kComputeOnly) {
    std::fill(band, band + l.ks * l.band.floats(), 0.5f);
    if (wbuf) std::fill(wbuf, wbuf + oc_max * l.ks * l.taps, 0.5f);
  }
  // Copy-only runs still apply the epilogue's operand ops to the tile and
  // stream it out: zeros, not stale NaNs or denormals (in the sums too, which
  // a tile finished in its blocks reads).
  if (mode == RunMode::kCopyOnly) {
    std::fill(out, out + l.row_tile_floats, 0.0f);
    std::fill(acc, acc + oc_max * l.tile_ld, 0.0f);
  }
  const std::vector<int64_t> tap_off = DirectTapOffsets(s, l.band);
  const bool blocked = l.band_blocked;
  KernelStats stats;
  auto slice = [&](const DirectSlice& sl) {
    const ConvTile& c = *sl.tile;
    const float* w = nullptr;
    int64_t w_vstride = 0;
    if (l.pack) {
      if (mode != RunMode::kComputeOnly)
        stats.bytes_global_to_local += 4 * PackWeights(s, d.w, c.oc0, c.ocs, sl.ic0, sl.ics, wbuf);
      w = wbuf;
      w_vstride = sl.ics * l.taps * kLanes;
    } else {
      w_vstride = s.in_channels * l.taps * kLanes;
      w = d.w_packed + c.oc0 / kLanes * w_vstride + sl.ic0 * l.taps * kLanes;
    }
    if (mode != RunMode::kComputeOnly && sl.copy_band)
      stats.bytes_global_to_local +=
          4 *
          (blocked
               ? CopyBlockedBand(d, c.image, sl.ic0, sl.ics, c.p0 / s.out_w, sl.rows, l, band)
               : CopyBands(s, d.x, t.in_layout, c.image, sl.ic0, sl.ics,
                           BandFirstRow(s, c.p0 / s.out_w), sl.geometry, band, l.band.floats()));
    const int64_t w_vectors = DirectPrefetchVectors(s, l, c.oc0);
    if (mode != RunMode::kCopyOnly)
      DirectComputeSlice(blocked ? kBlocks<true> : kBlocks<false>, s, l, band, tap_off, w,
                         w_vstride, (c.ocs + kLanes - 1) / kLanes, sl.rows, sl.ics, sl.ic0 > 0, acc,
                         w_vectors, blocked ? kLanes : 1);
  };
  auto finish = [&](const ConvTile& c) { DirectFinishTile(d, t, l, c, acc, out, mode, &stats); };
  ForEachDirectSlice(d, t, l, config, thread, slice, finish);
  return stats;
}

TilingEstimate DirectEstimate(const ConvDesc& d, const ConvTiling& t, int threads) {
  return DirectEstimateOf(d, t, threads, DirectLocalBytes(d, t));
}

}  // namespace

const ConvAlgorithmOps& DirectOps() {
  static const ConvAlgorithmOps ops = {DirectApplies,      DirectCheckTiling, DirectLocalBytes,
                                       DirectPackedFloats, DirectPrepack,     DirectRunShare,
                                       DirectEstimate};
  return ops;
}

}  // namespace fusetune::kernels::conv_detail

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
