// kDepthwise on NCHW16c input (ConvTiling in_layout kNCHWc; out_layout
// kNCHWc, or kNCHW as DepthwiseBlocked allows): 16 channels are one vector,
// so every output position is 16 channels' sums at once and every map width
// fills whole vectors, where the NCHW form vectorises along a row and wastes
// lanes on small maps (7x7: 7 of 16). A tile is oc_block channels (whole
// blocks of 16) by a band of whole output rows; for each block of 16 its
// band of input rows, zero padded, is one contiguous copy per row
// ([row][padded column][16] in the local buffer), the output tile
// [position][16] is computed with the filter's taps in registers, the
// epilogue runs on it in that order, and it is written back as one
// contiguous run of the output block, or into NCHW planes transposed on the
// way (FinishBlockedConvTile): MobileNetV2's 1x1 convs after a depthwise
// read NCHW faster, and a layout transform between them was a pass of its
// own.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "kernels/conv_algorithm.h"
#include "kernels/conv_depthwise.h"
#include "kernels/simd_math.h"

namespace fusetune::kernels::conv_detail {

namespace {

constexpr int64_t kBlock = kLayoutChannelBlock;

struct BlockedLayout {
  int64_t rows = 0;         // output rows per band
  int64_t rows_in = 0;      // input rows a band reads
  int64_t width = 0;        // padded input columns a row of outputs spans
  int64_t tile_floats = 0;  // rows * out_w * 16
  int64_t band_floats() const { return rows_in * width * kBlock; }
};

BlockedLayout BlockedLayoutOf(const ConvDesc& d, const ConvTiling& t) {
  const ConvShape& s = d.shape;
  BlockedLayout l;
  l.rows = std::min(AlgorithmWalk(d, t).rows_per_block(), s.out_h);
  l.rows_in = (l.rows - 1) * s.stride_h + (s.kernel_h - 1) * s.dilation_h + 1;
  l.width = (s.out_w - 1) * s.stride_w + (s.kernel_w - 1) * s.dilation_w + 1;
  l.tile_floats = l.rows * s.out_w * kBlock;
  return l;
}

int64_t RoundUp64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Rows [ih0, ih0 + rows_in) of one block of X into [row][width][16], zero
// where they fall in the padding. Returns the floats read from X.
int64_t CopyBlockBand(const ConvShape& s, const float* x_block, int64_t ih0, const BlockedLayout& l,
                      float* band) {
  const int64_t first = std::min(s.pad_left, l.width);
  const int64_t cols = std::clamp<int64_t>(l.width - s.pad_left, 0, s.in_w);
  int64_t read = 0;
  for (int64_t r = 0; r < l.rows_in; ++r) {
    float* row = band + r * l.width * kBlock;
    const int64_t ih = ih0 + r;
    if (ih < 0 || ih >= s.in_h) {
      std::fill(row, row + l.width * kBlock, 0.0f);
      continue;
    }
    std::fill(row, row + first * kBlock, 0.0f);
    std::memcpy(row + first * kBlock, x_block + ih * s.in_w * kBlock, sizeof(float) * cols * kBlock);
    std::fill(row + (first + cols) * kBlock, row + l.width * kBlock, 0.0f);
    read += cols * kBlock;
  }
  return read;
}

#if defined(__AVX512F__)
// N consecutive outputs of one output row (`in`: the band at the first
// one's window), each tap's weight vector loaded once for the N sums.
template <int N>
void OutputsAvx512(const ConvShape& s, int64_t width, const float* in, const float* w,
                   const float* bias, float* out) {
  __m512 acc[N];
  const __m512 b = _mm512_loadu_ps(bias);
  for (int n = 0; n < N; ++n) acc[n] = b;
  for (int64_t kh = 0; kh < s.kernel_h; ++kh)
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
      const __m512 wv = _mm512_loadu_ps(w + (kh * s.kernel_w + kw) * kBlock);
      const float* tap = in + (kh * s.dilation_h * width + kw * s.dilation_w) * kBlock;
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n)
        acc[n] = _mm512_fmadd_ps(_mm512_loadu_ps(tap + n * s.stride_w * kBlock), wv, acc[n]);
    }
  for (int n = 0; n < N; ++n) _mm512_storeu_ps(out + n * kBlock, acc[n]);
}
#endif

// One output row of one block from the band rows it reads (`in` at the
// first of them).
void OutputRow(const ConvShape& s, const BlockedLayout& l, const float* in, const float* w,
               const float* bias, float* out) {
  int64_t ow = 0;
#if defined(__AVX512F__)
  for (; ow + 8 <= s.out_w; ow += 8)
    OutputsAvx512<8>(s, l.width, in + ow * s.stride_w * kBlock, w, bias, out + ow * kBlock);
  for (; ow < s.out_w; ++ow)
    OutputsAvx512<1>(s, l.width, in + ow * s.stride_w * kBlock, w, bias, out + ow * kBlock);
#endif
  for (; ow < s.out_w; ++ow) {
    float acc[kBlock];
    for (int64_t c = 0; c < kBlock; ++c) acc[c] = bias[c];
    for (int64_t kh = 0; kh < s.kernel_h; ++kh)
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        const float* x =
            in + (kh * s.dilation_h * l.width + ow * s.stride_w + kw * s.dilation_w) * kBlock;
        const float* wt = w + (kh * s.kernel_w + kw) * kBlock;
        for (int64_t c = 0; c < kBlock; ++c) acc[c] += x[c] * wt[c];
      }
    std::memcpy(out + ow * kBlock, acc, sizeof(acc));
  }
}

}  // namespace

bool DepthwiseBlocked(const ConvDesc& d, const ConvTiling& t) {
  if (t.in_layout != ActivationLayout::kNCHWc) return false;
  if (t.out_layout == ActivationLayout::kNCHWc) return true;
  return t.out_layout == ActivationLayout::kNCHW && t.oc_block % kBlock == 0 &&
         FinishableInBlocks(d, t.out_layout);
}

Status BlockedDepthwiseCheck(const ConvDesc& d, const ConvTiling& t) {
  auto forbid = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("tiling {}: depthwise on nchw16c {}", t.ToString(), why));
  };
  if (t.oc_block % kBlock != 0) return forbid("needs oc_block a multiple of 16");
  if (d.max_pool.active()) return forbid("has no max pool");
  for (const EpilogueOp& op : d.epilogue)
    if (!EpilogueOpAddressableInBlocks(d.shape, op))
      return forbid(std::string("cannot address the operand of ") + EpilogueKindName(op.kind));
  return Status::Ok();
}

int64_t BlockedDepthwiseLocalBytes(const ConvDesc& d, const ConvTiling& t) {
  const BlockedLayout l = BlockedLayoutOf(d, t);
  const int64_t taps = d.shape.kernel_h * d.shape.kernel_w;
  return RoundUp64(4 * l.band_floats()) + RoundUp64(4 * l.tile_floats) +
         RoundUp64(4 * (taps + 1) * kBlock);
}

KernelStats BlockedDepthwiseRunShare(const ConvDesc& d, const ConvTiling& t,
                                     const KernelConfig& config, RunMode mode, int thread) {
  const ConvShape& s = d.shape;
  const ConvTileWalk walk = AlgorithmWalk(d, t);
  const BlockedLayout l = BlockedLayoutOf(d, t);
  const int64_t taps = s.kernel_h * s.kernel_w;
  LocalBuffer local(static_cast<size_t>(BlockedDepthwiseLocalBytes(d, t)));
  float* band = local.Take(l.band_floats());
  float* tile = local.Take(l.tile_floats);
  float* w = local.Take((taps + 1) * kBlock);  // the block's taps [tap][16], then its bias
  if (mode == RunMode::kComputeOnly) std::fill(band, band + l.band_floats(), 0.5f);
  if (mode == RunMode::kCopyOnly) std::fill(tile, tile + l.tile_floats, 0.0f);
  // The bias starts the sums: the finish adds none.
  ConvDesc unbiased = d;
  unbiased.bias = nullptr;
  KernelStats stats;
  int64_t begin = 0, end = 0;
  walk.ShareOf(thread, config.threads, &begin, &end);
  for (int64_t i = begin; i < end; ++i) {
    const ConvTile tile_at = walk.At(i);
    const int64_t oh0 = tile_at.p0 / s.out_w, rows = tile_at.ps / s.out_w;
    const int64_t ih0 = oh0 * s.stride_h - s.pad_top;
    for (int64_t c0 = tile_at.oc0; c0 < tile_at.oc0 + tile_at.ocs; c0 += kBlock) {
      if (mode != RunMode::kComputeOnly) {
        const float* x_block = d.x + (tile_at.image * s.in_channels + c0) * s.in_h * s.in_w;
        stats.bytes_global_to_local += 4 * CopyBlockBand(s, x_block, ih0, l, band);
        if (d.bias != nullptr) stats.bytes_global_to_local += 4 * kBlock;
      }
      if (mode != RunMode::kCopyOnly) {
        for (int64_t tap = 0; tap < taps; ++tap)
          for (int64_t c = 0; c < kBlock; ++c) w[tap * kBlock + c] = d.w[(c0 + c) * taps + tap];
        float* bias = w + taps * kBlock;
        for (int64_t c = 0; c < kBlock; ++c) bias[c] = d.bias ? d.bias[c0 + c] : 0.0f;
        for (int64_t r = 0; r < rows; ++r)
          OutputRow(s, l, band + r * s.stride_h * l.width * kBlock, w, bias,
                    tile + r * s.out_w * kBlock);
      }
      ConvTile block = tile_at;
      block.oc0 = c0;
      block.ocs = kBlock;
      FinishBlockedConvTile(unbiased, block, tile, l.tile_floats, t.out_layout, mode, &stats);
    }
    stats.tiles += 1;
  }
  return stats;
}

}  // namespace fusetune::kernels::conv_detail

#if defined(__AVX512F__)
FT_SIMD_MATH_END
#endif
