// kDirect in bf16 (conv.h's ConvTiling::precision): the f32 form's tiles,
// slices, register blocks and f32 sums (conv_direct.h), with the products
// on vdpbf16ps. Input channels go in pairs, as the instruction takes them:
//   - each slice's band is copied into the local buffer in f32 as the f32
//     form copies it (padding materialised, phase layout for strides), 16
//     channels at a time (an NCHW16c block), each chunk then rounded into
//     pair words [ic / 2][position] = {bf16(x[2q]), bf16(x[2q + 1])}, the
//     odd channel of an odd slice's last pair zero;
//   - W is [oc / 16][ic / 2][tap][16][2] bf16, pre-packed when the program
//     is prepared (else packed per tile, counted as copies);
//   - a register block broadcasts one pair word per output column and
//     multiplies it with V weight vectors of 16 output channels x 2 input
//     channels: half the instructions of the f32 form's broadcast-FMA.
// Slices of an odd k_block are rounded up to even so that every slice
// starts at a pair. Bias, epilogue and pools stay f32 (DirectFinishTile).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/conv_direct.h"
#include "kernels/precision.h"

namespace fusetune::kernels::conv_detail {

namespace {

constexpr int64_t kLanes = kDirectLanes;
constexpr int kMaxColumns = kDirectMaxColumns;

constexpr int64_t kStageChannels = 16;  // an NCHW16c block: CopyBands' fast path
int64_t AlignedBytes(int64_t bytes) { return DirectRoundUp(bytes, 64); }
int64_t Pairs(int64_t channels) { return (channels + 1) / 2; }

// The local buffer: the f32 staging band of up to 16 channels, the pair
// words [ks / 2][band], the sums [oc][positions] and the tile out, and the
// per-tile weights [vector][ks / 2][tap][16][2] bf16 without pre-packing.
// From 32 channels a slice the band takes fewer bytes than the f32 form's.
int64_t Bf16LocalBytes(const ConvDesc& d, const ConvTiling& t) {
  const DirectLayout l = DirectLayoutOf(d, t);
  const int64_t oc = l.vectors * kLanes, band = l.band.floats();
  int64_t bytes = AlignedBytes(4 * std::min(l.ks, kStageChannels) * band) +
                  AlignedBytes(4 * Pairs(l.ks) * band) + AlignedBytes(4 * oc * l.tile_ld) +
                  AlignedBytes(4 * l.row_tile_floats);
  if (l.pack) bytes += AlignedBytes(2 * oc * 2 * Pairs(l.ks) * l.taps);
  return bytes;
}

// Halves of W per 16-channel vector, pre-packed: every input pair and tap.
int64_t PackedVectorHalves(const ConvShape& s) {
  return Pairs(s.in_channels) * s.kernel_h * s.kernel_w * kLanes * 2;
}

int64_t Bf16PackedFloats(const ConvDesc& d, const ConvTiling&) {
  const ConvShape& s = d.shape;
  return DirectRoundUp(s.out_channels, kLanes) / kLanes * PackedVectorHalves(s) / 2;
}

// Weights of output channels [oc0, oc0 + ocs) and input channels [ic0, ic0
// + ics) as [vector][pair][tap][16][2] bf16, zeros beyond ocs and past an
// odd ics. Returns floats read.
int64_t PackWeights(const ConvShape& s, const float* w, int64_t oc0, int64_t ocs, int64_t ic0,
                    int64_t ics, Bf16* dst) {
  const int64_t taps = s.kernel_h * s.kernel_w, pairs = Pairs(ics);
  const int64_t vectors = (ocs + kLanes - 1) / kLanes;
  for (int64_t v = 0; v < vectors; ++v)
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t tap = 0; tap < taps; ++tap) {
        Bf16* out = dst + ((v * pairs + q) * taps + tap) * kLanes * 2;
        for (int64_t lane = 0; lane < kLanes; ++lane) {
          const int64_t oc = v * kLanes + lane;
          for (int64_t half = 0; half < 2; ++half) {
            const int64_t ic = 2 * q + half;
            out[2 * lane + half] =
                oc < ocs && ic < ics
                    ? FloatToBf16(w[((oc0 + oc) * s.in_channels + ic0 + ic) * taps + tap])
                    : Bf16{0};
          }
        }
      }
  return std::min(ocs, vectors * kLanes) * ics * taps;
}

void Bf16Prepack(const ConvDesc& d, const ConvTiling&, float* dst) {
  const ConvShape& s = d.shape;
  Bf16* out = reinterpret_cast<Bf16*>(dst);
  for (int64_t oc0 = 0; oc0 < s.out_channels; oc0 += kLanes)
    PackWeights(s, d.w, oc0, std::min(kLanes, s.out_channels - oc0), 0, s.in_channels,
                out + oc0 / kLanes * PackedVectorHalves(s));
}

// The slice's band [ic0, ic0 + ics) as pair words (`stride` words per
// pair, the first `used` of them this tile's), through the f32 staging
// band 16 channels at a time. Returns the floats read from X.
int64_t CopyPairs(const ConvDesc& d, const ConvTiling& t, const DirectSlice& sl, int64_t stride,
                  float* stage, uint32_t* words) {
  const ConvShape& s = d.shape;
  const ConvTile& c = *sl.tile;
  const int64_t used = sl.geometry.floats(), first_row = BandFirstRow(s, c.p0 / s.out_w);
  int64_t read = 0;
  for (int64_t k = 0; k < sl.ics; k += kStageChannels) {
    const int64_t n = std::min(kStageChannels, sl.ics - k);
    read += CopyBands(s, d.x, t.in_layout, c.image, sl.ic0 + k, n, first_row, sl.geometry, stage,
                      stride);
    for (int64_t q = 0; q < Pairs(n); ++q)
      InterleaveToBf16Pairs(stage + 2 * q * stride,
                            2 * q + 1 < n ? stage + (2 * q + 1) * stride : nullptr, used,
                            reinterpret_cast<Bf16*>(words + (k / 2 + q) * stride));
  }
  return read;
}

// A block's input: pair words; its weights: 32 halves per (pair, tap).
using BlockArgs = DirectBlockArgs<uint32_t, Bf16>;

template <int V, int C, int R>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void DotBlock(const BlockArgs& b) {
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
  const Bf16* w = b.w;
  for (int64_t q = 0; q < b.channels; ++q) {
    const uint32_t* src = b.in + q * b.channel_stride;
    for (int64_t t = 0; t < b.taps; ++t, w += 2 * kLanes) {
      const uint32_t* p = src + b.tap_off[t];
      __m512bh wv[V];
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(w + v * b.w_vstride);
      PrefetchNextWeights<V>(b, w);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        const uint32_t* row = p + r * b.in_row;
#pragma GCC unroll 16
        for (int j = 0; j < C; ++j) {
          const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(row[j]));
#pragma GCC unroll 2
          for (int v = 0; v < V; ++v) a[v][r][j] = _mm512_dpbf16_ps(a[v][r][j], x, wv[v]);
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

// Without AVX512-BF16: the same products of the same bf16 values, in float.
template <int V, int C, int R>
void PortableBlock(const BlockArgs& b) {
  for (int v = 0; v < V; ++v)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < C; ++j) {
        float* sums = b.acc + v * b.acc_vstride + r * b.acc_row + j * kLanes;
        if (!b.accumulate) std::fill(sums, sums + kLanes, 0.0f);
        const Bf16* w = b.w + v * b.w_vstride;
        for (int64_t q = 0; q < b.channels; ++q)
          for (int64_t t = 0; t < b.taps; ++t, w += 2 * kLanes) {
            Bf16 x[2];
            std::memcpy(x, b.in + q * b.channel_stride + b.tap_off[t] + r * b.in_row + j, 4);
            for (int64_t l = 0; l < kLanes; ++l)
              sums[l] += Bf16ToFloat(w[2 * l]) * Bf16ToFloat(x[0]) +
                         Bf16ToFloat(w[2 * l + 1]) * Bf16ToFloat(x[1]);
          }
      }
}

using BlockFn = void (*)(const BlockArgs&);
using BlockRow = std::array<BlockFn, kMaxColumns + 1>;

template <bool kDot, int V, int R, int... C>
constexpr BlockRow BlockTable(std::integer_sequence<int, C...>) {
  return {nullptr,
          (C + 1 <= kMaxColumns / R ? (kDot ? &DotBlock<V, C + 1, R> : &PortableBlock<V, C + 1, R>)
                                    : nullptr)...};
}

template <bool kDot>
struct Blocks {
  // [V - 1][R - 1][C], as conv_direct.cpp's kBlocks.
  static constexpr std::array<std::array<BlockRow, 2>, 2> kTable = {
      {{BlockTable<kDot, 1, 1>(std::make_integer_sequence<int, kMaxColumns>{}),
        BlockTable<kDot, 1, 2>(std::make_integer_sequence<int, kMaxColumns>{})},
       {BlockTable<kDot, 2, 1>(std::make_integer_sequence<int, kMaxColumns>{}),
        BlockTable<kDot, 2, 2>(std::make_integer_sequence<int, kMaxColumns>{})}}};
};

template <bool kDot>
KernelStats Bf16RunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                         RunMode mode, int thread) {
  const ConvShape& s = d.shape;
  const DirectLayout l = DirectLayoutOf(d, t);
  const int64_t oc_max = l.vectors * kLanes, band_floats = l.band.floats();
  LocalBuffer local(static_cast<size_t>(Bf16LocalBytes(d, t)));
  float* stage = local.Take(std::min(l.ks, kStageChannels) * band_floats);
  uint32_t* words = reinterpret_cast<uint32_t*>(local.Take(Pairs(l.ks) * band_floats));
  float* acc = local.Take(oc_max * l.tile_ld);
  float* out = local.Take(l.row_tile_floats);
  const int64_t wbuf_halves = oc_max * 2 * Pairs(l.ks) * l.taps;
  Bf16* wbuf = l.pack ? reinterpret_cast<Bf16*>(local.Take(wbuf_halves / 2)) : nullptr;
  // As the f32 form: compute-only runs compute on ordinary values (pairs
  // of 0.5), copy-only runs stream out zeros.
  if (mode == RunMode::kComputeOnly) {
    const Bf16 half = FloatToBf16(0.5f);
    std::fill(words, words + Pairs(l.ks) * band_floats, (uint32_t{half} << 16) | half);
    if (wbuf) std::fill(wbuf, wbuf + wbuf_halves, half);
  }
  if (mode == RunMode::kCopyOnly) {  // zeros in the tile and the sums (conv_direct.cpp)
    std::fill(out, out + l.row_tile_floats, 0.0f);
    std::fill(acc, acc + oc_max * l.tile_ld, 0.0f);
  }
  const std::vector<int64_t> tap_off = DirectTapOffsets(s, l.band);
  const Bf16* packed = reinterpret_cast<const Bf16*>(d.w_packed);
  KernelStats stats;
  auto slice = [&](const DirectSlice& sl) {
    const ConvTile& c = *sl.tile;
    const Bf16* w = nullptr;
    int64_t w_vstride = 0;
    if (l.pack) {
      if (mode != RunMode::kComputeOnly)
        stats.bytes_global_to_local += 4 * PackWeights(s, d.w, c.oc0, c.ocs, sl.ic0, sl.ics, wbuf);
      w = wbuf;
      w_vstride = Pairs(sl.ics) * l.taps * kLanes * 2;
    } else {
      w_vstride = PackedVectorHalves(s);
      w = packed + c.oc0 / kLanes * w_vstride + sl.ic0 / 2 * l.taps * kLanes * 2;
    }
    if (mode != RunMode::kComputeOnly && sl.copy_band)
      stats.bytes_global_to_local += 4 * CopyPairs(d, t, sl, band_floats, stage, words);
    const int64_t w_vectors = DirectPrefetchVectors(s, l, c.oc0);
    if (mode != RunMode::kCopyOnly)
      DirectComputeSlice(Blocks<kDot>::kTable, s, l, words, tap_off, w, w_vstride,
                         (c.ocs + kLanes - 1) / kLanes, sl.rows, Pairs(sl.ics), sl.ic0 > 0, acc,
                         w_vectors);
  };
  auto finish = [&](const ConvTile& c) { DirectFinishTile(d, t, l, c, acc, out, mode, &stats); };
  ForEachDirectSlice(d, t, l, config, thread, slice, finish);
  return stats;
}

TilingEstimate Bf16Estimate(const ConvDesc& d, const ConvTiling& t, int threads) {
  return DirectEstimateOf(d, t, threads, Bf16LocalBytes(d, t));
}

// kDot: the vdpbf16ps blocks, else the portable ones.
template <bool kDot>
const ConvAlgorithmOps& Bf16OpsOf() {
  const ConvAlgorithmOps& f32 = DirectOps();
  static const ConvAlgorithmOps ops = {f32.applies,      f32.check_tiling, Bf16LocalBytes,
                                       Bf16PackedFloats, Bf16Prepack,      Bf16RunShare<kDot>,
                                       Bf16Estimate};
  return ops;
}

}  // namespace

const ConvAlgorithmOps& DirectBf16Ops() {
  return CpuHasBf16Dot() ? Bf16OpsOf<true>() : Bf16OpsOf<false>();
}

const ConvAlgorithmOps& DirectBf16PortableOps() { return Bf16OpsOf<false>(); }

}  // namespace fusetune::kernels::conv_detail
