// Internal to the direct convolution's two precisions (conv_direct.cpp in
// f32, conv_direct_bf16.cpp in bf16): the tile's layout in the local
// buffer, the register blocks' column chunks, the tile loop and the
// estimate they share. The sums are f32 in both, kept channel-blocked
// ([oc/16][position][16]) across slices and finished where they lie
// (FinishBlockedConvTile), or, where a pool or an NCHW operand of Y's shape
// follows, transposed at the end into rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv_algorithm.h"
#include "kernels/conv_rows.h"

namespace fusetune::kernels::conv_detail {

inline constexpr int64_t kDirectLanes = 16;
inline constexpr int kDirectMaxColumns = 14;  // RB: output columns of a register block

inline int64_t DirectRoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct DirectLayout {
  int64_t band_rows = 0;  // output rows per tile
  BandGeometry band;
  int64_t tile_ld = 0;  // positions per tile
  // Input channels per slice: in bf16 rounded up to even, so that every
  // slice starts at the first channel of a pair.
  int64_t ks = 0;
  int64_t vectors = 0;  // 16-channel vectors per tile
  int64_t taps = 0;
  bool pack = false;  // weights packed per tile (no w_packed)
  // The f32 conv keeps X's NCHW16c blocks as its band ([ic/16][position][16],
  // no transpose): a 1x1 stride-1 conv whose positions are X's, slices of
  // whole 16-channel blocks.
  bool band_blocked = false;
  // A tile's sums are finished where they lie (FinishBlockedConvTile,
  // FinishableInBlocks): NCHW16c Y (its blocks already) or NCHW Y (transposed
  // as they are copied out), no pool, epilogue operands the blocks can
  // address.
  bool finish_blocks = false;
  // Floats of the tile of rows the sums are transposed into (0 when they
  // are finished in their blocks).
  int64_t row_tile_floats = 0;
};

DirectLayout DirectLayoutOf(const ConvDesc& d, const ConvTiling& t);

// Columns per register block: out_w cut into equal chunks of at most kDirectMaxColumns.
int64_t DirectChunkOf(int64_t out_w);
// Narrow outputs take two rows per block to keep enough sums in flight.
inline int64_t DirectBlockRows(int64_t chunk) { return chunk * 2 <= kDirectMaxColumns ? 2 : 1; }

// One register block of a slice: `vectors` (1 or 2) 16-channel vectors
// from `vector` on, `rows` output rows, `columns` output columns.
struct DirectBlock {
  int64_t vectors, rows, columns;
  int64_t vector;      // its first 16-channel vector in the tile
  int64_t in_offset;   // of its first position's input in the band
  int64_t acc_offset;  // of its first position's sums from its first vector's
  bool first_rows;     // among the tile's first output rows: it reads its weights first
};

// The register blocks of one slice over a tile of `rows` output rows and
// `vectors` 16-channel vectors, channel vectors innermost (a block's input
// stays in L1 across them); `in_row` the band's step between output rows,
// `in_col` between output columns.
template <typename Block>
void ForEachDirectBlock(const ConvShape& s, int64_t rows, int64_t vectors, int64_t in_row,
                        int64_t in_col, Block&& block) {
  const int64_t chunk = DirectChunkOf(s.out_w);
  const int64_t block_rows = DirectBlockRows(chunk);
  for (int64_t r = 0; r < rows;) {
    const int64_t nr = std::min(block_rows, rows - r);
    for (int64_t ow = 0; ow < s.out_w; ow += chunk) {
      const int64_t cols = std::min(chunk, s.out_w - ow);
      for (int64_t v = 0; v < vectors;) {
        const int64_t nv = vectors - v >= 2 ? 2 : 1;
        block(DirectBlock{nv, nr, cols, v, r * in_row + ow * in_col,
                          (r * s.out_w + ow) * kDirectLanes, r == 0});
        v += nv;
      }
    }
    r += nr;
  }
}

// What a register block reads and writes: R output rows x C output columns
// x V 16-channel vectors. `In` is an input element of the band (a float, or
// in bf16 a word holding a pair of channels), `W` a weight element.
template <typename In, typename W>
struct DirectBlockArgs {
  const In* in;            // input of the block's first position at tap 0, channel (pair) 0
  int64_t in_row;          // elements between the inputs of consecutive output rows
  const int64_t* tap_off;  // band offsets of the taps
  int64_t taps;
  int64_t channel_stride;  // elements between the bands of consecutive channels (pairs), or
                           // of consecutive 16-channel blocks (a blocked band)
  int64_t channels;        // input channels (pairs) of the slice
  const W* w;              // weights of channel 0, tap 0, vector 0
  int64_t w_vstride;       // elements between vectors of weights
  float* acc;              // sums of the block's first position, vector 0: 16 per position
  int64_t acc_row;         // floats between the sums of consecutive output rows
  int64_t acc_vstride;
  bool accumulate;  // add to acc (later slices) or overwrite it (the first)
  // The next block's weights (same layout), prefetched as this block runs,
  // or null: see DirectComputeSlice; `next_vectors` of them (1 or 2) lie there.
  const W* w_next = nullptr;
  int64_t next_vectors = 0;
};

// The channel vectors from a tile's first output channel (oc0) on whose
// weights its blocks may prefetch: with pre-packed weights the next tiles'
// too (a tile's last block fetches the next tile's first), else the tile's
// own (0: DirectComputeSlice's `w_vectors`).
inline int64_t DirectPrefetchVectors(const ConvShape& s, const DirectLayout& l, int64_t oc0) {
  return l.pack ? 0 : (s.out_channels - oc0 + kDirectLanes - 1) / kDirectLanes;
}

// In a register block's (channel, tap) step at `w`: the same step's weights
// of up to V vectors after the block's (b.w_next, as many as lie there),
// fetched into L1 while the block computes; nothing when there are none.
template <int V, typename In, typename W>
inline void PrefetchNextWeights(const DirectBlockArgs<In, W>& b, const W* w) {
  if (b.w_next == nullptr) return;
  const W* next = b.w_next + (w - b.w);
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v)
    if (v < b.next_vectors) __builtin_prefetch(next + v * b.w_vstride, 0, 3);
}

// One slice over the whole tile: each register block run by
// table[vectors - 1][rows - 1][columns] (the precision's kernels).
// `w_vectors`: the channel vectors whose weights lie from `w` on, the
// tile's and, with pre-packed weights, the next tiles' (0: the tile's).
// `in_col`: 1 for a band of channel planes, kDirectLanes for a band of
// 16-channel blocks (DirectLayout::band_blocked), whose channel_stride then steps
// from one block to the next. The tap offsets are not scaled by it: a
// blocked band is a 1x1 conv's, whose one tap is at 0.
template <typename In, typename W, typename Table>
void DirectComputeSlice(const Table& table, const ConvShape& s, const DirectLayout& l,
                        const In* band, const std::vector<int64_t>& tap_off, const W* w,
                        int64_t w_vstride, int64_t vectors, int64_t rows, int64_t channels,
                        bool accumulate, float* acc, int64_t w_vectors = 0, int64_t in_col = 1) {
  DirectBlockArgs<In, W> b;
  b.in_row = s.stride_h * l.band.row_floats * in_col;
  b.tap_off = tap_off.data();
  b.taps = l.taps;
  b.channel_stride = l.band.floats() * in_col;
  b.channels = channels;
  b.w_vstride = w_vstride;
  b.acc_row = s.out_w * kDirectLanes;
  b.acc_vstride = l.tile_ld * kDirectLanes;
  b.accumulate = accumulate;
  ForEachDirectBlock(s, rows, vectors, b.in_row, in_col, [&](const DirectBlock& block) {
    b.in = band + block.in_offset;
    b.w = w + block.vector * w_vstride;
    // The blocks of the first rows read each channel vector's weights for
    // the first time: from DRAM when a model's weights exceed the caches
    // (measured inside MobileNetV2: its 7x7 layers' 1x1 convs ran 5-15%
    // faster with this). Each prefetches the next vectors' as it computes,
    // the last the next tile's, so that their reads overlap its arithmetic;
    // later rows find them in L2.
    const int64_t next = block.vector + block.vectors;
    const int64_t ahead = std::max(vectors, w_vectors) - next;
    b.w_next = block.first_rows && ahead > 0 ? w + next * w_vstride : nullptr;
    b.next_vectors = std::min<int64_t>(ahead, 2);
    b.acc = acc + block.vector * b.acc_vstride + block.acc_offset;
    table[block.vectors - 1][block.rows - 1][block.columns](b);
  });
}

// A tile's sums transposed into its rows and finished (bias, epilogue,
// pools, the copy out: FinishConvTile); copy-only runs skip the transpose.
// Where DirectLayout::finish_blocks the sums are finished where they lie
// (FinishBlockedConvTile), overwritten.
void DirectFinishTile(const ConvDesc& d, const ConvTiling& t, const DirectLayout& l,
                      const ConvTile& c, float* acc, float* out, RunMode mode, KernelStats* stats);

std::vector<int64_t> DirectTapOffsets(const ConvShape& s, const BandGeometry& g);

// acc [vector][position][16] -> out [channel][position] (ld positions), ocs rows.
void DirectUnblock(const float* acc, int64_t ocs, int64_t ps, int64_t ld, float* out);

// One slice of a tile: input channels [ic0, ic0 + ics); `copy_band`: the
// band of the slice must be copied in (false when the thread's previous
// tile read the same band, with a single slice).
struct DirectSlice {
  const ConvTile* tile;
  int64_t rows;  // output rows of the tile
  BandGeometry geometry;
  int64_t ic0, ics;
  bool copy_band;
};

// The thread's tiles in the walk's order, each cut into slices of l.ks
// input channels: `slice` for each slice, then `finish` for the tile.
template <typename Slice, typename Finish>
void ForEachDirectSlice(const ConvDesc& d, const ConvTiling& t, const DirectLayout& l,
                        const KernelConfig& config, int thread, Slice&& slice, Finish&& finish) {
  const ConvShape& s = d.shape;
  const ConvTileWalk walk = AlgorithmWalk(d, t);
  int64_t begin = 0, end = 0;
  walk.ShareOf(thread, config.threads, &begin, &end);
  ConvTile previous;
  for (int64_t i = begin; i < end; ++i) {
    const ConvTile c = walk.At(i);
    const int64_t rows = c.ps / s.out_w;
    // With one slice, the band of the thread's previous tile is this one's
    // when only the channel block changed: copied once for all of them.
    const bool reuse = i > begin && l.ks >= s.in_channels && previous.SameBand(c);
    previous = c;
    for (int64_t ic0 = 0; ic0 < s.in_channels; ic0 += l.ks)
      slice(
          DirectSlice{&c, rows, BandOf(s, rows), ic0, std::min(l.ks, s.in_channels - ic0), !reuse});
    finish(c);
  }
}

// The estimate of both precisions: the same tiles, copies and epilogue;
// `local_bytes` the precision's.
TilingEstimate DirectEstimateOf(const ConvDesc& d, const ConvTiling& t, int threads,
                                int64_t local_bytes);

}  // namespace fusetune::kernels::conv_detail
