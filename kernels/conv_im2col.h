// Internal to the implicit-GEMM convolution (conv.h's kIm2colGemm): what its
// f32 form (conv_im2col.cpp) and its bf16 form (conv_im2col_bf16.cpp) share:
// the block geometry, the order of a thread's steps, and the gather of an
// im2col block from X into nr-wide f32 slivers in the local buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv_algorithm.h"

namespace fusetune::kernels::conv_detail {

inline int64_t Im2colRoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The block sizes a tiling actually runs with on a shape: blocks larger than
// the shape are clamped, so the local buffer is sized for what is used.
struct Im2colGeometry {
  int64_t k;       // reduction length: in_per_group * kernel_h * kernel_w
  int64_t kc;      // reduction slice
  int64_t mc_pad;  // channel rows of the A panel and C tile (multiple of mr)
  int64_t nc_pad;  // position columns of the B panel and C tile (multiple of nr)
  int64_t a_floats() const { return mc_pad * kc; }
  int64_t b_floats() const { return kc * nc_pad; }
  int64_t c_floats() const { return mc_pad * nc_pad; }
};

inline Im2colGeometry Im2colGeometryOf(const ConvShape& s, const ConvTiling& t) {
  Im2colGeometry g;
  g.k = s.in_per_group() * s.kernel_h * s.kernel_w;
  g.kc = std::min(t.k_block, g.k);
  g.mc_pad = Im2colRoundUp(std::min(t.oc_block, s.out_per_group()), t.mr);
  g.nc_pad = Im2colRoundUp(std::min(t.pixel_block, s.pixels()), t.nr);
  return g;
}

// One kc slice of one output tile, and which operands must be copied for it:
// with a single slice (kc covers K), a panel already in the local buffer from
// the previous tile is kept (B when the image, position block and group are
// the same, A when the channel block is).
struct Im2colStep {
  ConvTile tile;
  int64_t group, k0, depth;
  bool pack_a, pack_b, last;
};

// Visits the steps of tiles [begin, end) of `walk` in the order they run.
template <typename F>
void ForEachIm2colStep(const ConvShape& s, const Im2colGeometry& g, const ConvTileWalk& walk,
                       int64_t begin, int64_t end, F&& visit) {
  const bool one_slice = g.kc >= g.k;
  int64_t a_key[2] = {-1, -1}, b_key[4] = {-1, -1, -1, -1};
  for (int64_t i = begin; i < end; ++i) {
    const ConvTile tile = walk.At(i);
    const int64_t group = tile.oc0 / s.out_per_group();
    for (int64_t k0 = 0; k0 < g.k; k0 += g.kc) {
      Im2colStep step{tile, group, k0, std::min(g.kc, g.k - k0), true, true, k0 + g.kc >= g.k};
      if (one_slice) {
        const int64_t a_now[2] = {tile.oc0, tile.ocs};
        const int64_t b_now[4] = {tile.image, tile.p0, tile.ps, group};
        step.pack_a = !std::equal(a_now, a_now + 2, a_key);
        step.pack_b = !std::equal(b_now, b_now + 4, b_key);
        std::copy(a_now, a_now + 2, a_key);
        std::copy(b_now, b_now + 4, b_key);
      }
      visit(step);
    }
  }
}

// A run of one B row inside one nr-wide sliver: `n` columns from lane `lane`
// of sliver `sliver`, read from X at src + t * stride_w (t < n) of the row's
// input channel, of which only t in [lo, hi) lie inside the input (the rest
// is padding: zeros).
struct Im2colPiece {
  int32_t sliver, lane, n, lo, hi;
  int64_t src;
};

// One 16-lane step of a stride-1 or stride-2 piece: a masked load of X
// (lanes in the padding are not read, and load as zeros) and a masked store
// into the panel. With stride 2 the step reads a window of 32 floats from
// src, `load` masking its first 16 and `load_hi` its last (even lanes only),
// and keeps the even ones.
struct Im2colVectorCopy {
  int64_t src;
  int32_t sliver;
  uint16_t lane, load, store, load_hi;
};

// The pieces of every B row of a position block, per kernel offset (kh, kw):
// rows of different input channels share them, only X's channel changes.
// With stride 1 or 2 they are also cut into vector steps, so that gathering
// a row is one loop of the same few instructions, without data-dependent
// branches (kIm2colVectorStrides).
inline constexpr int64_t kIm2colVectorStrides = 2;  // strides 1 and 2 have vector steps

struct GatherPlan {
  int64_t p0 = -1, ps = 0;
  std::vector<Im2colPiece> pieces;
  std::vector<int64_t> first;  // pieces of offset r: [first[r], first[r + 1])
  std::vector<Im2colVectorCopy> vectors;
  std::vector<int64_t> first_vector;  // the same for the vector steps
  // The part of an input channel the block reads, [lo, hi) floats from its
  // start: whole input rows, prefetched a few channels ahead.
  int64_t read_lo = 0, read_hi = 0;
};

// `plan` for the tile's position block (rebuilt only when it changes).
void PlanIm2colGather(const ConvShape& s, int nr, const ConvTile& tile, GatherPlan* plan);

// B rows [k0, k0 + depth) of the step's position block, from the input
// channels of its group, into f32 slivers [depth][nr] at `b` (the last
// sliver's columns past the tile are zeros), from NCHW X or, for a 1x1
// stride-1 conv, NCHW16c X. Returns the bytes read from X.
int64_t GatherIm2colBlock(const ConvDesc& d, const ConvTiling& t, const Im2colStep& st,
                          GatherPlan* plan, float* b);

// The im2col estimate of either precision (the A panel's bytes are those
// of the tiling's precision).
TilingEstimate EstimateIm2col(const ConvDesc& d, const ConvTiling& t, int threads);

}  // namespace fusetune::kernels::conv_detail
