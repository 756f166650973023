// Winograd convolution F(m x m, 3x3), m = 2 or 4 (Lavin & Gray 2015), as an
// algorithm of the convolution template (conv.h, conv_algorithm.h).
//
// A tile is oc_block output channels by a band of whole output rows (a
// multiple of m). The band's output is covered by th x tw Winograd tiles of
// m x m outputs, each reading an alpha x alpha input patch (alpha = m + 2).
// Per slice of k_block input channels:
//   1. the input band and its halo are copied into the local buffer, each row
//      split into its m column phases ([ic][row][phase][u] holds input column
//      u * m + phase), so that element (i, j) of 16 consecutive tiles is one
//      contiguous 16-lane load;
//   2. V = B^T d B for every tile, 16 tiles per vector, stored as
//      [alpha^2][tile sliver][ic][mr]: the A operand slivers of the micro-kernels;
//   3. the weights' U = G g G^T, laid out [alpha^2][oc panel][ic][nr] (the B
//      panels), are copied from the pre-packed weights or transformed from W;
//   4. alpha^2 GEMMs M[pt][tile, oc] += V[pt][tile, ic] x U[pt][ic, oc].
// After the last slice Y = A^T M A, 16 output channels per vector, lands in
// the output tile (rows = channels, columns = positions) and FinishConvTile
// takes over.
//
// Tiles are the GEMMs' rows and channels their columns (not the other way
// round) because a small map has few tiles: 14x14 is 7 x 7 = 49 F(2x2)
// tiles, which columns of 16 or 32 pad to 64 (a third of the products
// wasted) and rows of 7 hold exactly, while channel counts are multiples of
// 16. With the swap (and a 7-row micro-tile), the best tilings of ResNet-50's
// 3x3 layers went from 0.85 to 0.49 ms at 56x56 (F(4x4)), 0.73 to 0.62 ms
// at 28x28, 0.92 to 0.76 ms at 14x14 (F(2x2)), on the Zen 4 guest
// (`onednn_conv --fusetune --only resnet50`).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/bf16.h"
#include "kernels/conv_algorithm.h"
#include "kernels/conv_rows.h"
#include "kernels/conv_winograd.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::kernels::conv_detail {

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

// 16 lanes: one AVX-512 register, or what the compiler makes of it elsewhere.
constexpr int kLanes = 16;
#if defined(__AVX512F__)
using Vec = __m512;
inline Vec LoadLanes(const float* p, int n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
inline void StoreLanes(float* p, Vec v, int n) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
#else
// (Without AVX-512, GCC warns that 64-byte vectors are passed by a changed
// ABI; these functions are internal, kernels/CMakeLists.txt quiets -Wpsabi.)
using Vec = float __attribute__((vector_size(64)));
inline Vec LoadLanes(const float* p, int n) {
  Vec v = {};
  for (int l = 0; l < n; ++l) v[l] = p[l];
  return v;
}
#endif

// The 1-D transforms of F(m, 3): In = B^T d (alpha -> alpha), Out = A^T x
// (alpha -> m), Weight = G g (3 -> alpha). `s` and `os` are element strides,
// so the same code transforms columns and rows of a 2-D tile.
template <int M>
struct Wino;

template <>
struct Wino<2> {
  static constexpr int kAlpha = 4;
  template <class T>
  static void In(const T* d, int s, T* o, int os) {
    o[0] = d[0] - d[2 * s];
    o[os] = d[s] + d[2 * s];
    o[2 * os] = d[2 * s] - d[s];
    o[3 * os] = d[s] - d[3 * s];
  }
  template <class T>
  static void Out(const T* x, int s, T* y, int ys) {
    y[0] = x[0] + x[s] + x[2 * s];
    y[ys] = x[s] - x[2 * s] - x[3 * s];
  }
  static void Weight(const float* g, int s, float* u, int us) {
    u[0] = g[0];
    u[us] = 0.5f * (g[0] + g[s] + g[2 * s]);
    u[2 * us] = 0.5f * (g[0] - g[s] + g[2 * s]);
    u[3 * us] = g[2 * s];
  }
};

template <>
struct Wino<4> {
  static constexpr int kAlpha = 6;
  template <class T>
  static void In(const T* d, int s, T* o, int os) {
    const T d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    const T a = d4 - 4.0f * d2, b = d3 - 4.0f * d1;  // rows 1, 2
    const T c = d4 - d2, e = 2.0f * (d3 - d1);       // rows 3, 4
    o[0] = 4.0f * d0 - 5.0f * d2 + d4;
    o[os] = a + b;
    o[2 * os] = a - b;
    o[3 * os] = c + e;
    o[4 * os] = c - e;
    o[5 * os] = 4.0f * d1 - 5.0f * d3 + d5;
  }
  template <class T>
  static void Out(const T* x, int s, T* y, int ys) {
    const T p = x[s] + x[2 * s], q = x[s] - x[2 * s];
    const T r = x[3 * s] + x[4 * s], t = x[3 * s] - x[4 * s];
    y[0] = x[0] + p + r;
    y[ys] = q + 2.0f * t;
    y[2 * ys] = p + 4.0f * r;
    y[3 * ys] = q + 8.0f * t + x[5 * s];
  }
  static void Weight(const float* g, int s, float* u, int us) {
    const float g0 = g[0], g1 = g[s], g2 = g[2 * s];
    u[0] = 0.25f * g0;
    u[us] = -(g0 + g1 + g2) / 6.0f;
    u[2 * us] = -(g0 - g1 + g2) / 6.0f;
    u[3 * us] = g0 / 24.0f + g1 / 12.0f + g2 / 6.0f;
    u[4 * us] = g0 / 24.0f - g1 / 12.0f + g2 / 6.0f;
    u[5 * us] = g2;
  }
};

int TileOf(ConvAlgorithm a) { return a == ConvAlgorithm::kWinograd4 ? 4 : 2; }

// U = G g G^T of one 3x3 filter, written as u[i * us_i + j * us_j].
template <int M>
void TransformWeight(const float* g, float* u, int64_t us_i, int64_t us_j) {
  constexpr int A = Wino<M>::kAlpha;
  float t[A][3], r[A][A];
  for (int j = 0; j < 3; ++j) Wino<M>::Weight(g + j, 3, &t[0][j], 3);
  for (int i = 0; i < A; ++i) Wino<M>::Weight(&t[i][0], 1, &r[i][0], 1);
  for (int i = 0; i < A; ++i)
    for (int j = 0; j < A; ++j) u[i * us_i + j * us_j] = r[i][j];
}

void TransformWeightOf(int m, const float* g, float* u, int64_t us_i, int64_t us_j) {
  if (m == 4)
    TransformWeight<4>(g, u, us_i, us_j);
  else
    TransformWeight<2>(g, u, us_i, us_j);
}

// Everything the kernel, its buffer size and its estimate derive from a
// tiling, in one place so that they agree.
//
// In bf16 (ConvTiling::precision) the GEMMs run on the bf16 micro-kernels:
// U is pre-packed in bf16 as their B panels ([alpha^2][oc panel][ic pair]
// [nr][2]); V is computed in f32 as above, then each point's slivers are
// rounded in place to k-pairs ([tile sliver][ic pair][mr] 32-bit words,
// the micro-kernels' packed A). U and V are then counted in 32-bit words,
// a word per channel in f32 and per channel pair in bf16; M and the
// transforms stay f32.
struct Geometry {
  int m, alpha, points, mr, nr;
  bool bf16;
  int64_t tw;        // Winograd tiles across the output width
  int64_t uw;        // input columns per phase: tw + 1 (the halo of the last tile)
  int64_t rows_pb;   // output rows per band (the tile walk's, a multiple of m)
  int64_t tpad_max;  // tiles of a full band rounded up to mr
  int64_t kb;        // input channels per slice
  int64_t kw;        // U's words per output channel of a slice: kb, or kb / 2 rounded up in bf16
  int64_t ocb;       // output channels per tile rounded up to nr (M's leading dimension)
  int64_t band_row;  // floats per band row: m phases of uw
  int64_t rows_in;   // band rows with the halo: rows_pb + 2
  // Floats between consecutive points' U, V and M: one cache line more than
  // their size, so that the 36 (16) points of a tile do not all fall in the
  // same L1 sets (with 4 KiB-multiple strides the transforms thrashed them;
  // the skew took 13% off a 64x56x56 F(4x4) run, measured with perf).
  int64_t ustride, vstride, mstride;
  int64_t band_floats, v_floats, u_floats, m_floats, out_floats;

  Geometry(const ConvDesc& d, const ConvTiling& t) {
    const ConvShape& s = d.shape;
    m = TileOf(t.algorithm);
    alpha = m + 2;
    points = alpha * alpha;
    mr = t.mr;
    nr = t.nr;
    tw = CeilDiv(s.out_w, m);
    uw = tw + 1;
    rows_pb = AlgorithmWalk(d, t).rows_per_block();
    rows_pb = std::min(rows_pb, RoundUp(s.out_h, m));
    tpad_max = RoundUp(rows_pb / m * tw, mr);
    kb = std::min(t.k_block, s.in_channels);
    bf16 = t.precision == Precision::kBf16;
    kw = Words(kb);
    ocb = RoundUp(std::min(t.oc_block, s.out_channels), nr);
    band_row = m * uw;
    rows_in = rows_pb + 2;
    band_floats = kb * rows_in * band_row + kLanes;  // slack past the last row
    ustride = ocb * kw + kLanes;
    vstride = kb * tpad_max + kLanes;
    mstride = ocb * tpad_max + kLanes;
    v_floats = points * vstride;
    u_floats = points * ustride;
    m_floats = points * mstride;
    out_floats = std::min(t.oc_block, s.out_channels) * rows_pb * s.out_w;
    oc_step = t.oc_block;
    oc_blocks = CeilDiv(s.out_channels, t.oc_block);
    slices = CeilDiv(s.in_channels, kb);
  }
  int64_t oc_step, oc_blocks, slices;  // the tile walk's channel blocks, the input slices

  int64_t Floats() const { return band_floats + v_floats + u_floats + m_floats + out_floats; }
  // The 32-bit words `channels` input channels take in U's panels and V's
  // bf16 slivers.
  int64_t Words(int64_t channels) const { return bf16 ? CeilDiv(channels, 2) : channels; }
  // Bytes of one pre-packed transformed weight.
  int64_t PackedWeightBytes() const { return bf16 ? 2 : 4; }
  // The pre-packed U of channel block `block` and slice `slice`: the local
  // buffer's U region as it will be, so that loading it is one copy.
  int64_t PackedBlock(int64_t block, int64_t slice) const {
    return (block * slices + slice) * u_floats;
  }
};

Status Applies(const ConvShape& s) {
  if (s.kernel_h != 3 || s.kernel_w != 3 || s.stride_h != 1 || s.stride_w != 1 ||
      s.dilation_h != 1 || s.dilation_w != 1 || s.groups != 1)
    return Error(ErrorCode::kInvalidArgument,
                 "winograd: only 3x3 kernels with stride 1, dilation 1 and groups 1 (its "
                 "transforms are those of F(m x m, 3x3) over dense channels; a 1-D convolution "
                 "is 1x3): " +
                     s.ToString());
  return Status::Ok();
}

Status CheckTiling(const ConvDesc&, const ConvTiling& t) {
  if (t.precision == Precision::kBf16) {
    if (FindBf16MicroKernel(t.mr, t.nr) == nullptr)
      return Error(ErrorCode::kInvalidArgument, NoBf16MicroKernel(t.mr, t.nr));
  } else if (FindMicroKernel(t.mr, t.nr) == nullptr) {
    std::string shapes;
    for (auto [m, n] : MicroTileShapes()) shapes += fmt::format(" {}x{}", m, n);
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format("tiling.mr x tiling.nr: {}x{} is not a micro-tile shape; choose one of{}", t.mr,
                    t.nr, shapes));
  }
  // Any oc_block: a block's last weight panel is padded to nr with zero
  // channels (wasted products the estimate counts).
  return Status::Ok();
}

int64_t LocalBytes(const ConvDesc& d, const ConvTiling& t) {
  return static_cast<int64_t>(sizeof(float)) * Geometry(d, t).Floats() + 5 * 64;
}

int64_t PackedFloats(const ConvDesc& d, const ConvTiling& t) {
  const Geometry g(d, t);
  return g.oc_blocks * g.slices * g.u_floats;
}

// One filter's U = G g G^T into a block's U (`u`: point 0 of a channel
// block and slice of kbh channels) as output channel o and input channel c
// of it: in f32 at [point][o / nr][c][o % nr], in bf16 at [point][o / nr]
// [c / 2][o % nr][c % 2].
void StoreFilterU(const Geometry& g, const float* filter, int64_t o, int64_t c, int64_t kbh,
                  float* u) {
  const int64_t panel = (o / g.nr) * g.nr * g.Words(kbh);
  if (!g.bf16) {
    TransformWeightOf(g.m, filter, u + panel + c * g.nr + o % g.nr, g.alpha * g.ustride, g.ustride);
    return;
  }
  float t[6 * 6];
  TransformWeightOf(g.m, filter, t, g.alpha, 1);
  Bf16* at = reinterpret_cast<Bf16*>(u + panel) + (c / 2 * g.nr + o % g.nr) * 2 + c % 2;
  for (int pt = 0; pt < g.points; ++pt) at[2 * pt * g.ustride] = FloatToBf16(t[pt]);
}

// Packed layout: per (channel block, input slice), U as the local buffer
// holds it (StoreFilterU), padding channels zero. Specific to the tiling's
// oc_block, k_block, nr and precision.
void PrePack(const ConvDesc& d, const ConvTiling& t, float* dst) {
  const Geometry g(d, t);
  const ConvShape& s = d.shape;
  std::fill(dst, dst + PackedFloats(d, t), 0.0f);
  for (int64_t oc = 0; oc < s.out_channels; ++oc)
    for (int64_t ic = 0; ic < s.in_channels; ++ic) {
      const int64_t slice = ic / g.kb, kbh = std::min(g.kb, s.in_channels - slice * g.kb);
      StoreFilterU(g, d.w + (oc * s.in_channels + ic) * 9, oc % g.oc_step, ic % g.kb, kbh,
                   dst + g.PackedBlock(oc / g.oc_step, slice));
    }
}

// Input floats read from X for one slice of a band: the band's rows and
// columns (with halo) that fall inside the input, per channel.
int64_t InputFloatsPerChannel(const ConvShape& s, const Geometry& g, int64_t oh0, int64_t rows) {
  const int64_t ih0 = oh0 - s.pad_top, ih1 = ih0 + rows + 2;
  const int64_t valid_rows =
      std::max<int64_t>(0, std::min(ih1, s.in_h) - std::max<int64_t>(ih0, 0));
  const int64_t iw0 = -s.pad_left, iw1 = iw0 + g.uw * g.m;
  const int64_t valid_cols =
      std::max<int64_t>(0, std::min(iw1, s.in_w) - std::max<int64_t>(iw0, 0));
  return valid_rows * valid_cols;
}

#if defined(__AVX512F__)
// The lanes of a 16-float load at src + base that lie inside [0, n).
inline __mmask16 InsideMask(int64_t base, int64_t n) {
  const int64_t lo = std::clamp<int64_t>(-base, 0, kLanes);
  const int64_t hi = std::clamp<int64_t>(n - base, lo, kLanes);
  return static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// One input row (n floats, read from column -pad on, zeros outside) split
// into its M column phases of uw floats each: dst[p * uw + u] = src[u * M + p - pad].
template <int M>
void SplitPhases(const float* src, int64_t n, int64_t pad, int64_t uw, float* dst) {
  const __m512i lo = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(1));
  for (int64_t u0 = 0; u0 < uw; u0 += kLanes) {
    const int64_t base = u0 * M - pad;
    Vec in[M];
    for (int k = 0; k < M; ++k)
      in[k] = _mm512_maskz_loadu_ps(InsideMask(base + k * kLanes, n), src + base + k * kLanes);
    Vec phase[M];
    if constexpr (M == 2) {
      phase[0] = _mm512_permutex2var_ps(in[0], lo, in[1]);
      phase[1] = _mm512_permutex2var_ps(in[0], hi, in[1]);
    } else {
      // Even and odd floats of each half, then even and odd of those.
      const Vec e01 = _mm512_permutex2var_ps(in[0], lo, in[1]);
      const Vec o01 = _mm512_permutex2var_ps(in[0], hi, in[1]);
      const Vec e23 = _mm512_permutex2var_ps(in[2], lo, in[3]);
      const Vec o23 = _mm512_permutex2var_ps(in[2], hi, in[3]);
      phase[0] = _mm512_permutex2var_ps(e01, lo, e23);
      phase[2] = _mm512_permutex2var_ps(e01, hi, e23);
      phase[1] = _mm512_permutex2var_ps(o01, lo, o23);
      phase[3] = _mm512_permutex2var_ps(o01, hi, o23);
    }
    const int count = static_cast<int>(std::min<int64_t>(kLanes, uw - u0));
    for (int p = 0; p < M; ++p) StoreLanes(dst + p * uw + u0, phase[p], count);
  }
}
#endif

// Up to 16 consecutive tiles of a band read as one vector: lanes [lo, hi)
// of segment k read p[offset + lane] (one segment per tile row touched).
struct LaneSegment {
  int lo, hi;
  int64_t offset;
};
// Where a chunk's lanes go in V's mr-tile slivers: lanes [lo, hi) are stored
// from point + c * mr + offset - lo on (one masked store each).
struct SliverPiece {
  int lo, hi;
  int64_t offset;
};
struct LaneChunk {
  int64_t idx = 0;  // the first tile
  int n = 0, segments = 0, pieces = 0;
  LaneSegment seg[kLanes];
  SliverPiece piece[kLanes];
};

inline Vec LoadChunk(const float* p, const LaneChunk& ch) {
  if (ch.segments == 1) return LoadLanes(p + ch.seg[0].offset + ch.seg[0].lo, ch.n);
#if defined(__AVX512F__)
  Vec v = _mm512_setzero_ps();
  for (int k = 0; k < ch.segments; ++k) {
    const LaneSegment& s = ch.seg[k];
    const auto mask = static_cast<__mmask16>(((1u << s.hi) - 1) & ~((1u << s.lo) - 1));
    // Lanes outside the mask are not read: the address below the segment is never touched.
    v = _mm512_mask_loadu_ps(v, mask, p + s.offset);
  }
  return v;
#else
  Vec v = {};
  for (int k = 0; k < ch.segments; ++k)
    for (int l = ch.seg[k].lo; l < ch.seg[k].hi; ++l) v[l] = p[ch.seg[k].offset + l];
  return v;
#endif
}

// Output rows of a tile (whole rows of one band).
int64_t RowsOf(const ConvShape& s, const ConvTile& t) { return t.ps / s.out_w; }

class Runner {
 public:
  Runner(const ConvDesc& d, const ConvTiling& t, RunMode mode)
      : d_(d),
        t_(t),
        s_(d.shape),
        g_(d, t),
        mode_(mode),
        mk_(FindMicroKernel(t.mr, t.nr)),
        bk_(g_.bf16 ? FindBf16MicroKernel(t.mr, t.nr) : nullptr),
        local_(static_cast<size_t>(LocalBytes(d, t))) {
    band_ = local_.Take(g_.band_floats);
    v_ = local_.Take(g_.v_floats);
    u_ = local_.Take(g_.u_floats);
    m_ = local_.Take(g_.m_floats);
    out_ = local_.Take(g_.out_floats);
    row_.resize(static_cast<size_t>(s_.in_w));  // a gathered row of a non-NCHW X
    // Compute-only runs never copy: ordinary values keep the arithmetic representative.
    if (mode == RunMode::kComputeOnly) {
      std::fill(band_, band_ + g_.band_floats, 0.5f);
      std::fill(u_, u_ + g_.u_floats, 0.25f);
    }
    if (mode == RunMode::kCopyOnly) std::fill(out_, out_ + g_.out_floats, 0.0f);
  }

  KernelStats Run(int thread, int threads) {
    const ConvTileWalk walk = AlgorithmWalk(d_, t_);
    int64_t begin, end;
    walk.ShareOf(thread, threads, &begin, &end);
    for (int64_t i = begin; i < end; ++i) {
      const ConvTile next = i + 1 < end ? walk.At(i + 1) : ConvTile{};
      RunTile(walk.At(i), i + 1 < end ? &next : nullptr);
    }
    return stats_;
  }

 private:
  // The weight panels a step multiplies by: U of channels [oc0, oc0 + ocs), slice ic0.
  struct WeightSlice {
    int64_t oc0 = -1, ocs = 0, ic0 = -1, kbh = 0;
  };

  // The step after slice ic0 of `tile`: its next slice, else the next tile's first.
  WeightSlice NextWeights(const ConvTile& tile, int64_t ic0, const ConvTile* next) const {
    if (ic0 + g_.kb < s_.in_channels)
      return {tile.oc0, tile.ocs, ic0 + g_.kb, std::min(g_.kb, s_.in_channels - ic0 - g_.kb)};
    if (next == nullptr) return {};
    return {next->oc0, next->ocs, 0, std::min(g_.kb, s_.in_channels)};
  }

  void RunTile(const ConvTile& tile, const ConvTile* next) {
    const int64_t rows = RowsOf(s_, tile), oh0 = tile.p0 / s_.out_w;
    const int64_t th = CeilDiv(rows, g_.m), tiles = th * g_.tw, tpad = RoundUp(tiles, g_.mr);
    // One slice holds every input channel: V stays valid for the band's next
    // channel block (tiles walk channel blocks innermost).
    const bool keep_v = g_.kb >= s_.in_channels && has_v_ && tile.SameBand(v_band_);
    has_v_ = true;
    v_band_ = tile;
    for (int64_t ic0 = 0, slice = 0; ic0 < s_.in_channels; ic0 += g_.kb, ++slice) {
      const int64_t kbh = std::min(g_.kb, s_.in_channels - ic0);
      if (mode_ != RunMode::kComputeOnly && !keep_v) CopyBand(tile.image, ic0, kbh, oh0, th);
      LoadWeights(tile, ic0, kbh);
      if (mode_ == RunMode::kCopyOnly) continue;
      if (!keep_v) {
        if (g_.m == 4)
          TransformInput<4>(kbh, tiles, tpad);
        else
          TransformInput<2>(kbh, tiles, tpad);
        if (g_.bf16) RoundVToPairs(kbh, tpad);
      }
      Multiply(tile, kbh, tpad, slice > 0, NextWeights(tile, ic0, next));
    }
    if (mode_ != RunMode::kCopyOnly) {
      if (g_.m == 4)
        TransformOutput<4>(tile, rows, th);
      else
        TransformOutput<2>(tile, rows, th);
    }
    FinishConvTile(d_, tile, out_, tile.ps, t_.out_layout, mode_, &stats_);
  }

  // One input row into its m column phases (dst[p * uw + u] = column u * m + p - pad_left).
  void SplitRow(const float* src, float* dst) const {
    const int m = g_.m;
#if defined(__AVX512F__)
    if (m == 4)
      SplitPhases<4>(src, s_.in_w, s_.pad_left, g_.uw, dst);
    else
      SplitPhases<2>(src, s_.in_w, s_.pad_left, g_.uw, dst);
#else
    for (int p = 0; p < m; ++p) {
      // Columns u * m + p - pad_left inside [0, in_w) for u in [lo, hi).
      const int64_t first = p - s_.pad_left;
      const int64_t lo = first >= 0 ? 0 : CeilDiv(-first, m);
      const int64_t hi = std::clamp<int64_t>(CeilDiv(s_.in_w - first, m), lo, g_.uw);
      float* phase = dst + p * g_.uw;
      std::fill(phase, phase + lo, 0.0f);
      const float* col = src + first;
      for (int64_t u = lo; u < hi; ++u) phase[u] = col[u * m];
      std::fill(phase + hi, phase + g_.uw, 0.0f);
    }
#endif
  }

  // The band's input rows of channels [ic0, ic0 + kbh), zero padded, each
  // row split into its m column phases.
  void CopyBand(int64_t image, int64_t ic0, int64_t kbh, int64_t oh0, int64_t th) {
    const int m = g_.m;
    const int64_t rows_in = th * m + 2, cols = g_.uw * m;
    int64_t copied = 0;
    for (int64_t c = 0; c < kbh; ++c) {
      const PlaneView plane = InputPlane(d_, t_, image, ic0 + c);
      for (int64_t r = 0; r < rows_in; ++r) {
        float* dst = band_ + (c * g_.rows_in + r) * g_.band_row;
        const int64_t ih = oh0 + r - s_.pad_top;
        if (ih < 0 || ih >= s_.in_h) {
          std::fill(dst, dst + g_.band_row, 0.0f);
          continue;
        }
        SplitRow(PlaneRow(s_, d_.x, plane, ih, row_.data()), dst);
        copied += std::max<int64_t>(0, std::min(cols - s_.pad_left, s_.in_w));
      }
    }
    stats_.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * copied;
  }

  // U's panels for the tile's channels and the slice: copied from the
  // pre-packed weights, else transformed from W (in copy-only runs too: the
  // transform is how W is read). Kept when the previous slice loaded the
  // same ones (a single channel block and slice).
  void LoadWeights(const ConvTile& tile, int64_t ic0, int64_t kbh) {
    if (tile.oc0 == u_oc0_ && ic0 == u_ic0_) return;
    u_oc0_ = tile.oc0;
    u_ic0_ = ic0;
    if (mode_ == RunMode::kComputeOnly) return;
    const int64_t panels = CeilDiv(tile.ocs, g_.nr), ustride = g_.ustride, words = g_.Words(kbh);
    if (d_.w_packed != nullptr) {
      // One run (one stream for the hardware prefetcher), up to the last
      // point's panels.
      std::memcpy(u_, d_.w_packed + g_.PackedBlock(tile.oc0 / g_.oc_step, ic0 / g_.kb),
                  sizeof(float) * ((g_.points - 1) * ustride + panels * g_.nr * words));
      stats_.bytes_global_to_local += g_.PackedWeightBytes() * g_.points * tile.ocs * kbh;
      return;
    }
    // The last panel's padding columns (and in bf16 an odd slice's last
    // pair): zeros.
    if (tile.ocs % g_.nr != 0 || (g_.bf16 && kbh % 2 != 0))
      for (int pt = 0; pt < g_.points; ++pt)
        std::fill(u_ + pt * ustride, u_ + pt * ustride + panels * g_.nr * words, 0.0f);
    for (int64_t o = 0; o < tile.ocs; ++o)
      for (int64_t c = 0; c < kbh; ++c)
        StoreFilterU(g_, d_.w + ((tile.oc0 + o) * s_.in_channels + ic0 + c) * 9, o, c, kbh, u_);
    stats_.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * 9 * tile.ocs * kbh;
  }

  // V = B^T d B for every tile of the band and channel of the slice, 16
  // consecutive tiles per vector (across tile rows when a row has fewer:
  // a 28-wide F(4x4) band has 7 tiles a row), each vector's lanes stored
  // into the mr-tile slivers they belong to (StoreToSlivers).
  template <int M>
  void TransformInput(int64_t kbh, int64_t tiles, int64_t tpad) {
    constexpr int A = Wino<M>::kAlpha;
    const int64_t vstride = g_.vstride;
    chunks_.clear();
    for (int64_t idx = 0; idx < tiles;) {
      LaneChunk ch;
      ch.idx = idx;
      ch.n = static_cast<int>(std::min<int64_t>(kLanes, tiles - idx));
      for (int l = 0; l < ch.n;) {
        const int64_t r = (idx + l) / g_.tw, t = (idx + l) % g_.tw;
        const int seg = static_cast<int>(std::min<int64_t>(ch.n - l, g_.tw - t));
        ch.seg[ch.segments++] = {l, l + seg, r * M * g_.band_row + t - l};
        l += seg;
      }
      PlanSliverPieces(kbh, &ch);
      chunks_.push_back(ch);
      idx += ch.n;
    }
    for (int64_t c = 0; c < kbh; ++c) {
      const float* band = band_ + c * g_.rows_in * g_.band_row;
      for (const LaneChunk& ch : chunks_) {
        // Columns first (A loads each), then rows straight into V: at most
        // 2 A + A * A vectors live, not the whole tile twice.
        Vec tmp[A * A];
        for (int j = 0; j < A; ++j) {
          Vec col[A];
          const float* src = band + (j % M) * g_.uw + j / M;
          for (int i = 0; i < A; ++i) col[i] = LoadChunk(src + i * g_.band_row, ch);
          Wino<M>::In(col, 1, tmp + j, A);
        }
        for (int i = 0; i < A; ++i) {
          Vec row[A];
          Wino<M>::In(tmp + i * A, 1, row, 1);
          for (int j = 0; j < A; ++j)
            StoreToSlivers(row[j], ch, v_ + (i * A + j) * vstride + c * g_.mr);
        }
      }
    }
    // The padding tiles of the last sliver: zeros, so that M's unused rows stay finite.
    const Vec zero = {};
    for (int64_t idx = tiles; idx < tpad; idx += kLanes) {
      LaneChunk ch;
      ch.idx = idx;
      ch.n = static_cast<int>(std::min<int64_t>(kLanes, tpad - idx));
      PlanSliverPieces(kbh, &ch);
      for (int pt = 0; pt < A * A; ++pt)
        for (int64_t c = 0; c < kbh; ++c) StoreToSlivers(zero, ch, v_ + pt * vstride + c * g_.mr);
    }
  }

  // The sliver pieces of a chunk's lanes (tiles idx + lane): tile t of
  // channel c lies at (t / mr) * kbh * mr + c * mr + t % mr of a point's V.
  void PlanSliverPieces(int64_t kbh, LaneChunk* ch) const {
    const int mr = g_.mr;
    ch->pieces = 0;
    for (int l = 0; l < ch->n;) {
      const int64_t t = ch->idx + l;
      const int in_sliver = static_cast<int>(t % mr);
      const int count = std::min(ch->n - l, mr - in_sliver);
      ch->piece[ch->pieces++] = {l, l + count, (t / mr) * kbh * mr + in_sliver};
      l += count;
    }
  }

  // A chunk's lanes into one point's V at channel `at` (= point + c * mr):
  // each piece one masked store, its pointer moved back by its first lane.
  static void StoreToSlivers(Vec v, const LaneChunk& ch, float* at) {
#if defined(__AVX512F__)
    // Two whole 8-tile slivers (mr 8, a chunk starting on a sliver): two
    // plain 256-bit stores; masked stores cost several times more on Zen 4.
    if (ch.pieces == 2 && ch.piece[0].hi == 8 && ch.piece[1].hi == 16 && ch.piece[0].lo == 0) {
      _mm256_storeu_ps(at + ch.piece[0].offset, _mm512_castps512_ps256(v));
      _mm256_storeu_ps(at + ch.piece[1].offset, _mm512_extractf32x8_ps(v, 1));
      return;
    }
#endif
    for (int k = 0; k < ch.pieces; ++k) {
      const SliverPiece& p = ch.piece[k];
#if defined(__AVX512F__)
      const auto mask = static_cast<__mmask16>(((1u << p.hi) - 1) & ~((1u << p.lo) - 1));
      _mm512_mask_storeu_ps(at + p.offset - p.lo, mask, v);  // masked lanes are never written
#else
      for (int l = p.lo; l < p.hi; ++l) at[p.offset + l - p.lo] = v[l];
#endif
    }
  }

  // bf16: each point's f32 slivers of V ([sliver][kbh][mr] floats) rounded
  // in place to k-pairs ([sliver][kbh / 2 rounded up][mr] words, an odd
  // slice's last pair ending in zeros). Slivers move down as they shrink,
  // first to last: sliver s's words start at or below its floats, past
  // sliver s - 1's words (PairConsecutiveRows' in-place rule).
  void RoundVToPairs(int64_t kbh, int64_t tpad) {
    const int mr = g_.mr;
    const int64_t pairs = g_.Words(kbh);
    for (int pt = 0; pt < g_.points; ++pt)
      for (int64_t q = 0; q < tpad; q += mr)
        PairConsecutiveRows(v_ + pt * g_.vstride + q * kbh, kbh, mr,
                            reinterpret_cast<Bf16*>(v_ + pt * g_.vstride + q * pairs));
  }

  // One micro-tile of a point's GEMM, carrying `n` floats of the next U from
  // copy_src to copy_dst (n 0: none); in bf16 on V's and U's k-pairs.
  void MicroTile(int64_t kbh, const float* v, const float* u, float* m, bool accumulate,
                 const float* copy_src, float* copy_dst, int64_t n) const {
    if (g_.bf16) {
      const auto* a = reinterpret_cast<const Bf16*>(v);
      const auto* b = reinterpret_cast<const Bf16*>(u);
      if (n > 0)
        bk_->fn_packed_a_copy(g_.Words(kbh), a, 0, b, m, g_.ocb, accumulate, copy_src, copy_dst, n);
      else
        bk_->fn_packed_a(g_.Words(kbh), a, 0, b, m, g_.ocb, accumulate);
      return;
    }
    if (n > 0)
      mk_->fn_copy(kbh, v, u, m, g_.ocb, accumulate, copy_src, copy_dst, n);
    else
      mk_->fn(kbh, v, u, m, g_.ocb, accumulate);
  }

  // alpha^2 GEMMs of the slice: M[pt] (+)= V[pt] x U[pt], each weight panel
  // kept in L1 across the band's tile slivers.
  // With pre-packed weights, the next step's U panels (`next`, when they
  // differ from these) move in while these compute, as a DMA engine would
  // overlap them: point pt - 1's, whose products are done, carried by point
  // pt's micro-kernel calls, an equal share each; the last point's after the
  // loop. (On 256x14x14 F(4x4) the plain copy of U was a fifth of the run.)
  void Multiply(const ConvTile& tile, int64_t kbh, int64_t tpad, bool accumulate,
                const WeightSlice& next) {
    const int64_t ustride = g_.ustride, vstride = g_.vstride, mstride = g_.mstride,
                  ocs_pad = RoundUp(tile.ocs, g_.nr), words = g_.Words(kbh);
    const bool ahead = mode_ == RunMode::kFull && d_.w_packed != nullptr && next.oc0 >= 0 &&
                       (next.oc0 != u_oc0_ || next.ic0 != u_ic0_);
    const float* src =
        ahead ? d_.w_packed + g_.PackedBlock(next.oc0 / g_.oc_step, next.ic0 / g_.kb) : nullptr;
    const int64_t point_floats = ahead ? CeilDiv(next.ocs, g_.nr) * g_.nr * g_.Words(next.kbh) : 0;
    const int64_t calls = (ocs_pad / g_.nr) * (tpad / g_.mr);
    const int64_t share = RoundUp(CeilDiv(point_floats, std::max<int64_t>(calls, 1)), kLanes);
    for (int pt = 0; pt < g_.points; ++pt) {
      int64_t copied = 0;
      for (int64_t p = 0; p < ocs_pad; p += g_.nr)
        for (int64_t q = 0; q < tpad; q += g_.mr) {
          const float* v = v_ + pt * vstride + q * words;
          const float* u = u_ + pt * ustride + p * words;
          float* m = m_ + pt * mstride + q * g_.ocb + p;
          const int64_t n =
              pt > 0 ? std::max<int64_t>(0, std::min(share, point_floats - copied)) : 0;
          const int64_t at = (pt - 1) * ustride + copied;
          MicroTile(kbh, v, u, m, accumulate, n > 0 ? src + at : nullptr, n > 0 ? u_ + at : nullptr,
                    n);
          copied += n;  // calls x share >= point_floats: the point is whole after its calls
        }
    }
    if (!ahead) return;
    const int64_t last = (g_.points - 1) * ustride;
    std::memcpy(u_ + last, src + last, sizeof(float) * point_floats);
    u_oc0_ = next.oc0;
    u_ic0_ = next.ic0;
    stats_.bytes_global_to_local += g_.PackedWeightBytes() * g_.points * next.ocs * next.kbh;
  }

  // Y = A^T M A into the output tile, 16 output channels per vector, each
  // output position's vector scattered down its 16 channel rows; edge tiles
  // are cut to the output's extent.
  template <int M>
  void TransformOutput(const ConvTile& tile, int64_t rows, int64_t th) {
    constexpr int A = Wino<M>::kAlpha;
    const int64_t mstride = g_.mstride, ld = tile.ps, w = s_.out_w;
#if defined(__AVX512F__)
    const __m512i lanes =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(static_cast<int>(ld)));
#endif
    for (int64_t r = 0; r < th; ++r)
      for (int64_t t = 0; t < g_.tw; ++t) {
        const float* src = m_ + (r * g_.tw + t) * g_.ocb;
        for (int64_t o = 0; o < tile.ocs; o += kLanes) {
          const int n = static_cast<int>(std::min<int64_t>(kLanes, tile.ocs - o));
          Vec tmp[M * A], out[M * M];
          for (int j = 0; j < A; ++j) {
            Vec col[A];
            for (int i = 0; i < A; ++i) col[i] = LoadLanes(src + (i * A + j) * mstride + o, n);
            Wino<M>::Out(col, 1, tmp + j, A);
          }
          for (int i = 0; i < M; ++i) Wino<M>::Out(tmp + i * A, 1, out + i * M, 1);
          float* base = out_ + o * ld;
          for (int i = 0; i < M && r * M + i < rows; ++i)
            for (int j = 0; j < M && t * M + j < w; ++j) {
              float* at = base + (r * M + i) * w + t * M + j;
#if defined(__AVX512F__)
              _mm512_mask_i32scatter_ps(at, static_cast<__mmask16>((1u << n) - 1), lanes,
                                        out[i * M + j], 4);
#else
              for (int l = 0; l < n; ++l) at[l * ld] = out[i * M + j][l];
#endif
            }
        }
      }
  }

  const ConvDesc& d_;
  const ConvTiling& t_;
  const ConvShape& s_;
  Geometry g_;
  RunMode mode_;
  const MicroKernel* mk_;
  const Bf16MicroKernel* bk_;  // bf16 only
  LocalBuffer local_;
  float *band_, *v_, *u_, *m_, *out_;
  std::vector<float> row_;
  int64_t u_oc0_ = -1, u_ic0_ = -1;  // the channels and slice U holds
  bool has_v_ = false;
  ConvTile v_band_;                // the band V holds (single-slice runs)
  std::vector<LaneChunk> chunks_;  // TransformInput's vectors of tiles
  KernelStats stats_;
};

KernelStats RunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                     RunMode mode, int thread) {
  return Runner(d, t, mode).Run(thread, config.threads);
}

double EpilogueBytes(const ConvDesc& d, const ConvTile& tile) {
  return (d.bias != nullptr ? 4.0 * tile.ocs : 0.0) +
         EpilogueReadBytes(d.epilogue, tile.ocs, tile.ps);
}

// The schedule Runner follows, without data: the same tiles per thread, the
// same slices and weight reloads.
TilingEstimate Estimate(const ConvDesc& d, const ConvTiling& t, int threads) {
  const ConvShape& s = d.shape;
  const Geometry g(d, t);
  TilingEstimate e;
  e.local_bytes = LocalBytes(d, t);
  const ConvTileWalk walk = AlgorithmWalk(d, t);
  const int64_t slices = CeilDiv(s.in_channels, g.kb);
  double total = 0, busiest = 0;
  for (int th_i = 0; th_i < threads; ++th_i) {
    int64_t begin, end;
    walk.ShareOf(th_i, threads, &begin, &end);
    int64_t u_oc0 = -1, u_ic0 = -1;
    bool has_v = false;
    ConvTile v_band;
    double work = 0;
    for (int64_t i = begin; i < end; ++i) {
      const ConvTile tile = walk.At(i);
      const int64_t rows = RowsOf(s, tile), th = CeilDiv(rows, g.m);
      const int64_t tpad = RoundUp(th * g.tw, g.mr);
      if (slices > 1 || !has_v || !tile.SameBand(v_band))
        e.bytes_in +=
            4.0 * s.in_channels * InputFloatsPerChannel(s, g, tile.p0 / s.out_w, th * g.m);
      has_v = true;
      v_band = tile;
      for (int64_t ic0 = 0; ic0 < s.in_channels; ic0 += g.kb) {
        const int64_t kbh = std::min(g.kb, s.in_channels - ic0);
        if (tile.oc0 != u_oc0 || ic0 != u_ic0)
          e.bytes_in += d.w_packed != nullptr
                            ? 1.0 * g.PackedWeightBytes() * g.points * tile.ocs * kbh
                            : 4.0 * 9 * tile.ocs * kbh;
        u_oc0 = tile.oc0;
        u_ic0 = ic0;
      }
      e.bytes_in += EpilogueBytes(d, tile);
      e.bytes_out += 4.0 * tile.ocs * tile.ps;
      work += static_cast<double>(g.points) * RoundUp(tile.ocs, g.nr) * tpad * s.in_channels;
    }
    e.tiles += end - begin;
    e.max_thread_tiles = std::max(e.max_thread_tiles, end - begin);
    e.steps = std::max(e.steps, (end - begin) * slices);
    total += work;
    busiest = std::max(busiest, work);
  }
  // Useful: the transform-domain products the real outputs need
  // (alpha^2 / m^2 per output, channel pair); padding tiles, cut edge tiles
  // and micro-tile padding are the rest.
  const double useful = static_cast<double>(s.batch) * s.out_channels * s.in_channels * s.pixels() *
                        g.points / (g.m * g.m);
  e.lane_utilisation = total > 0 ? useful / total : 1;
  e.max_thread_work = total > 0 ? busiest / total : 1;
  return e;
}

}  // namespace

const ConvAlgorithmOps& WinogradOps() {
  static const ConvAlgorithmOps ops = {Applies, CheckTiling, LocalBytes, PackedFloats,
                                       PrePack, RunShare,    Estimate};
  return ops;
}

}  // namespace fusetune::kernels::conv_detail
