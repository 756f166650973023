// The implicit-GEMM (im2col) algorithm of the convolution template (conv.h):
// per group, Y[oc, p] = W[oc, kk] x B[kk, p] with kk = (ic, kh, kw) and p an
// output position of one image. B, the im2col matrix, is never built in
// global memory: each kc x nc block of it is gathered straight from X into
// the micro-kernels' nr-wide B panels in the local buffer, and reused by the
// consecutive tiles (channel blocks innermost) that need the same block.
#include <fmt/format.h>

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv_im2col.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_avx512.h"

namespace fusetune::kernels::conv_detail {

namespace {

using Geometry = Im2colGeometry;
using Step = Im2colStep;
using Piece = Im2colPiece;
using VectorCopy = Im2colVectorCopy;

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

// Where the A block of (channels [oc0, oc0 + ocs), slice k0) starts in the
// pre-packed weights: each group holds RoundUp(out_per_group, mr) x K floats,
// its channel blocks one after the other (every block but the last a multiple
// of mr), each block its slices one after the other as kc x mr slivers.
int64_t PackedOffset(const ConvShape& s, const ConvTiling& t, const Geometry& g, int64_t oc0,
                     int64_t ocs, int64_t k0) {
  const int64_t group = oc0 / s.out_per_group(), in_group = oc0 % s.out_per_group();
  return group * RoundUp(s.out_per_group(), t.mr) * g.k + in_group * g.k + RoundUp(ocs, t.mr) * k0;
}

// Packs W's rows [oc0, oc0 + ocs) and columns [k0, k0 + depth) as slivers of
// mr rows, each [depth][mr] (the micro-kernels' packed A), zero-padding the
// rows past ocs.
void PackA(const ConvDesc& d, const ConvTiling& t, int64_t k, int64_t oc0, int64_t ocs, int64_t k0,
           int64_t depth, float* ap) {
  const int mr = t.mr;
  for (int64_t s0 = 0; s0 < ocs; s0 += mr) {
    float* sliver = ap + s0 * depth;
    const int64_t rows = std::min<int64_t>(mr, ocs - s0);
    if (rows < mr) std::memset(sliver, 0, sizeof(float) * depth * mr);
    for (int64_t i = 0; i < rows; ++i) {
      const float* src = d.w + (oc0 + s0 + i) * k + k0;
      for (int64_t p = 0; p < depth; ++p) sliver[p * mr + i] = src[p];
    }
  }
}

void AddPiece(std::vector<Piece>& pieces, const Piece& p, int64_t stride_w) {
  if (!pieces.empty()) {
    Piece& last = pieces.back();
    const bool whole = last.lo == 0 && last.hi == last.n && p.lo == 0 && p.hi == p.n;
    if (whole && last.sliver == p.sliver && last.lane + last.n == p.lane &&
        last.src + last.n * stride_w == p.src) {
      last.n += p.n;
      last.hi = last.n;
      return;
    }
  }
  pieces.push_back(p);
}

// The floats of a vector step's window that its `lanes` read: lane t reads
// the window's float t * stride (stride 1 or 2: a window of 16 or 32).
uint32_t WindowMask(uint32_t lanes, int64_t stride) {
  if (stride == 1) return lanes;
  uint32_t window = 0;
  for (int t = 0; t < 16; ++t)
    if (lanes >> t & 1u) window |= 1u << (2 * t);
  return window;
}

// Splits the output positions [p0, p0 + ps) into pieces: at output-row ends
// (a new input row) and at sliver ends, then zero pieces up to the last
// sliver's end. Adjacent pieces that continue each other (a 1x1 stride-1
// convolution's rows) merge.
void BuildPlan(const ConvShape& s, int nr, int64_t p0, int64_t ps, GatherPlan* plan) {
  plan->p0 = p0;
  plan->ps = ps;
  plan->pieces.clear();
  plan->first.assign(1, 0);
  for (int64_t kh = 0; kh < s.kernel_h; ++kh)
    for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
      for (int64_t j = 0; j < ps;) {
        const int64_t oh = (p0 + j) / s.out_w, ow = (p0 + j) % s.out_w;
        const int64_t n = std::min({s.out_w - ow, ps - j, nr - j % nr});
        const int64_t ih = oh * s.stride_h - s.pad_top + kh * s.dilation_h;
        const int64_t iw = ow * s.stride_w - s.pad_left + kw * s.dilation_w;
        Piece p{static_cast<int32_t>(j / nr),
                static_cast<int32_t>(j % nr),
                static_cast<int32_t>(n),
                0,
                0,
                ih * s.in_w + iw};
        if (ih >= 0 && ih < s.in_h) {
          // t with 0 <= iw + t * stride_w < in_w
          const int64_t lo = iw >= 0 ? 0 : CeilDiv(-iw, s.stride_w);
          const int64_t hi = iw >= s.in_w ? 0 : CeilDiv(s.in_w - iw, s.stride_w);
          p.lo = static_cast<int32_t>(std::min(lo, n));
          p.hi = static_cast<int32_t>(std::clamp(hi, p.lo + int64_t{0}, n));
        }
        if (p.lo >= p.hi) p.lo = p.hi = 0;
        AddPiece(plan->pieces, p, s.stride_w);
        j += n;
      }
      for (int64_t j = ps; j < RoundUp(ps, nr);) {  // the last sliver's padding columns
        const int64_t n = nr - j % nr;
        plan->pieces.push_back({static_cast<int32_t>(j / nr), static_cast<int32_t>(j % nr),
                                static_cast<int32_t>(n), 0, 0, 0});
        j += n;
      }
      plan->first.push_back(static_cast<int64_t>(plan->pieces.size()));
    }
  const int64_t first_row = p0 / s.out_w * s.stride_h - s.pad_top;
  const int64_t last_row =
      (p0 + ps - 1) / s.out_w * s.stride_h - s.pad_top + (s.kernel_h - 1) * s.dilation_h;
  plan->read_lo = std::clamp<int64_t>(first_row, 0, s.in_h) * s.in_w;
  plan->read_hi = std::clamp<int64_t>(last_row + 1, 0, s.in_h) * s.in_w;
  plan->vectors.clear();
  plan->first_vector.assign(1, 0);
  if (s.stride_w > kIm2colVectorStrides) return;
  for (size_t r = 0; r + 1 < plan->first.size(); ++r) {
    for (int64_t i = plan->first[r]; i < plan->first[r + 1]; ++i) {
      const Piece& p = plan->pieces[i];
      for (int32_t v = 0; v < p.n; v += 16) {
        const int32_t count = std::min(16, p.n - v);
        const int32_t lo = std::clamp(p.lo - v, 0, 16), hi = std::clamp(p.hi - v, 0, 16);
        const uint32_t lanes = hi > lo ? ((1u << hi) - 1) & ~((1u << lo) - 1) : 0;
        const uint32_t window = WindowMask(lanes, s.stride_w);
        plan->vectors.push_back(
            {p.src + v * s.stride_w, p.sliver, static_cast<uint16_t>(p.lane + v),
             static_cast<uint16_t>(window & 0xffffu), static_cast<uint16_t>((1u << count) - 1),
             static_cast<uint16_t>(window >> 16)});
      }
    }
    plan->first_vector.push_back(static_cast<int64_t>(plan->vectors.size()));
  }
}

void CopyPiecePortable(const Piece& p, const float* xc, int64_t stride_w, float* dst) {
  for (int32_t t = 0; t < p.n; ++t)
    dst[t] = t >= p.lo && t < p.hi ? xc[p.src + t * stride_w] : 0.0f;
}

// A vector step's 16 values: X at src + t * kStride (t < 16), lanes
// outside the input as zeros. Masked lanes are never read (and never
// fault), so padding costs nothing extra; stride 2 keeps the even floats of
// a 32-float window (one permute: the direct conv's stride-2 rows do the same).
template <int kStride>
__attribute__((target("avx512f"), always_inline)) inline __m512 LoadStep(const VectorCopy& v,
                                                                         const float* xc) {
  if constexpr (kStride == 1) {
    return _mm512_maskz_loadu_ps(v.load, xc + v.src);
  } else {
    static_assert(kStride == 2);
    const __m512i evens =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512 a = _mm512_maskz_loadu_ps(v.load, xc + v.src);
    const __m512 b = _mm512_maskz_loadu_ps(v.load_hi, xc + v.src + 16);
    return _mm512_permutex2var_ps(a, evens, b);
  }
}

// Stride 1 or 2: B rows [k0, k0 + depth) by the plan's vector steps.
template <int kStride>
__attribute__((target("avx512f"))) void GatherAvx512(const GatherPlan& plan, const float* x_group,
                                                     int64_t plane, int64_t channels, int64_t khw,
                                                     int64_t k0, int64_t depth, int nr, float* b) {
  const int64_t sliver_stride = depth * nr;
  // X's channels lie a plane apart, too far for the hardware prefetchers to
  // follow: the rows of a channel some 16 B rows ahead are fetched while this
  // one is gathered (about a point of the FMA peak on a 56x56 layer, measured).
  const int64_t ahead = std::max<int64_t>(1, 16 / khw);
  for (int64_t kk = k0; kk < k0 + depth; ++kk) {
    const int64_t ic = kk / khw, r = kk % khw;
    const float* xc = x_group + ic * plane;
    if (r == 0 && ic + ahead < channels) {
      const char* next = reinterpret_cast<const char*>(xc + ahead * plane);
      for (int64_t at = plan.read_lo * 4; at < plan.read_hi * 4; at += 64)
        _mm_prefetch(next + at, _MM_HINT_T0);
    }
    float* row = b + (kk - k0) * nr;
    const VectorCopy* end = plan.vectors.data() + plan.first_vector[r + 1];
    for (const VectorCopy* v = plan.vectors.data() + plan.first_vector[r]; v != end; ++v)
      _mm512_mask_storeu_ps(row + v->sliver * sliver_stride + v->lane, v->store,
                            LoadStep<kStride>(*v, xc));
  }
}

// A 1x1 stride-1 unpadded conv on NCHW16c X (CheckLayouts): B's rows are
// X's channels, so 16 of them at 16 positions are one 16x16 transpose
// into the slivers; the last sliver's lanes past the tile are zeros.
void GatherBlocked(const ConvDesc& d, const ConvTiling& t, const Step& st, float* b) {
  const ConvShape& s = d.shape;
  const ConvTile& tile = st.tile;
  const int64_t nr = t.nr, depth = st.depth;
  const ActivationDims dims{s.batch, s.in_channels, s.in_h, s.in_w};
  for (int64_t kb = 0; kb < depth; kb += kLayoutChannelBlock) {
    const float* block =
        d.x + ChannelPlane(ActivationLayout::kNCHWc, dims, tile.image, st.k0 + kb).offset;
    for (int64_t p = 0; p < tile.ps;) {
      const int64_t lane = p % nr;
      const int64_t n = std::min({kLayoutChannelBlock, nr - lane, tile.ps - p});
      BlockedToRows(block + (tile.p0 + p) * kLayoutChannelBlock, n,
                    b + (p / nr) * depth * nr + kb * nr + lane, nr);
      p += n;
    }
  }
  if (const int64_t tail = tile.ps % nr; tail != 0) {
    float* last = b + (tile.ps / nr) * depth * nr;
    for (int64_t k = 0; k < depth; ++k) std::fill(last + k * nr + tail, last + (k + 1) * nr, 0.0f);
  }
}

bool HasAvx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"); }

}  // namespace

void PlanIm2colGather(const ConvShape& s, int nr, const ConvTile& tile, GatherPlan* plan) {
  if (plan->p0 != tile.p0 || plan->ps != tile.ps) BuildPlan(s, nr, tile.p0, tile.ps, plan);
}

int64_t GatherIm2colBlock(const ConvDesc& d, const ConvTiling& t, const Step& st, GatherPlan* plan,
                          float* b) {
  const ConvShape& s = d.shape;
  const ConvTile& tile = st.tile;
  const int64_t bytes = static_cast<int64_t>(sizeof(float)) * st.depth * tile.ps;
  if (t.in_layout == ActivationLayout::kNCHWc) {
    GatherBlocked(d, t, st, b);
    return bytes;
  }
  PlanIm2colGather(s, t.nr, tile, plan);
  const int64_t khw = s.kernel_h * s.kernel_w, plane = s.in_h * s.in_w;
  const float* x_group = d.x + (tile.image * s.in_channels + st.group * s.in_per_group()) * plane;
  static const bool avx512 = HasAvx512();
  if (avx512 && s.stride_w <= kIm2colVectorStrides) {
    const auto gather = s.stride_w == 1 ? GatherAvx512<1> : GatherAvx512<2>;
    gather(*plan, x_group, plane, s.in_per_group(), khw, st.k0, st.depth, t.nr, b);
    return bytes;
  }
  const int64_t sliver_stride = st.depth * t.nr;
  for (int64_t kk = st.k0; kk < st.k0 + st.depth; ++kk) {
    const int64_t ic = kk / khw, r = kk % khw;
    const float* xc = x_group + ic * plane;
    float* row = b + (kk - st.k0) * t.nr;
    const Piece* last = plan->pieces.data() + plan->first[r + 1];
    for (const Piece* p = plan->pieces.data() + plan->first[r]; p != last; ++p)
      CopyPiecePortable(*p, xc, s.stride_w, row + p->sliver * sliver_stride + p->lane);
  }
  return bytes;
}

namespace {

// A gather in progress, one vector step at a time: the micro-kernels below
// carry the next block's gather through their k loops while they compute
// this one (B is double-buffered), as a DMA engine would overlap them, and
// prefetch the input channels it reaches a few channels ahead. On ResNet's
// 56x56 layers this took 3-4 points of the FMA peak off the 13-20% the
// gather cost on its own (measured; the masked stores remain the part that
// does not hide).
struct GatherCursor {
  const VectorCopy* steps;  // the plan's vector steps
  const int64_t* first;     // per kernel offset
  const VectorCopy *v, *row_end;
  const float* xc;  // the current row's input channel
  float* row;       // the current row in the panel
  int64_t rows_left, r, khw, plane, sliver_stride, nr;
  int64_t left;  // vector steps still to do
  // Prefetch: a channel `ahead` of the current one, while channels_left > ahead.
  int64_t ahead, channels_left, read_lo, read_hi;
};

__attribute__((target("avx512f"))) inline void PrefetchChannel(const GatherCursor* g) {
  if (g->channels_left <= g->ahead) return;
  const char* next = reinterpret_cast<const char*>(g->xc + g->ahead * g->plane);
  for (int64_t at = g->read_lo * 4; at < g->read_hi * 4; at += 64)
    _mm_prefetch(next + at, _MM_HINT_T0);
}

GatherCursor StartGather(const GatherPlan& plan, const float* x_group, int64_t plane,
                         int64_t channels, int64_t khw, int64_t k0, int64_t depth, int nr,
                         float* b) {
  GatherCursor g;
  g.steps = plan.vectors.data();
  g.first = plan.first_vector.data();
  g.khw = khw;
  g.plane = plane;
  g.nr = nr;
  g.sliver_stride = depth * nr;
  g.r = k0 % khw;
  g.xc = x_group + k0 / khw * plane;
  g.row = b;
  g.rows_left = depth;
  g.v = g.steps + g.first[g.r];
  g.row_end = g.steps + g.first[g.r + 1];
  g.left = 0;
  for (int64_t kk = k0; kk < k0 + depth; ++kk) g.left += g.first[kk % khw + 1] - g.first[kk % khw];
  g.ahead = std::max<int64_t>(1, 16 / khw);
  g.channels_left = channels - k0 / khw;
  g.read_lo = plan.read_lo;
  g.read_hi = plan.read_hi;
  for (int64_t c = 0; c < std::min(g.ahead, g.channels_left); ++c) {
    const char* x = reinterpret_cast<const char*>(g.xc + c * plane);
    for (int64_t at = g.read_lo * 4; at < g.read_hi * 4; at += 64)
      _mm_prefetch(x + at, _MM_HINT_T0);
  }
  return g;
}

template <int kStride>
__attribute__((target("avx512f"), always_inline)) inline void GatherStep(GatherCursor* g) {
  const VectorCopy* v = g->v;
  _mm512_mask_storeu_ps(g->row + v->sliver * g->sliver_stride + v->lane, v->store,
                        LoadStep<kStride>(*v, g->xc));
  --g->left;
  if (++g->v != g->row_end || --g->rows_left == 0) return;
  g->row += g->nr;
  if (++g->r == g->khw) {
    g->r = 0;
    g->xc += g->plane;
    --g->channels_left;
    PrefetchChannel(g);
  }
  g->v = g->steps + g->first[g->r];
  g->row_end = g->steps + g->first[g->r + 1];
}

template <int kStride>
__attribute__((target("avx512f"))) void FinishGather(GatherCursor* g) {
  while (g->left > 0) GatherStep<kStride>(g);
}

// The AVX-512 micro-kernels of microkernel.cpp (packed A kc x MR, B kc x
// 16 NV) carrying `quota` steps of a gather, one per k iteration.
using GatherKernelFn = void (*)(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc,
                                bool accumulate, GatherCursor* g, int64_t quota);

template <int MR, int NV, int kStride>
__attribute__((target("avx512f,fma"))) void KernelWithGather(int64_t kc, const float* ap,
                                                             const float* bp, float* c, int64_t ldc,
                                                             bool accumulate, GatherCursor* g,
                                                             int64_t quota) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = _mm512_load_ps(bp + p * NV * 16 + v * 16);
    if (quota > 0) {
      GatherStep<kStride>(g);
      --quota;
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(ap[p * MR + i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  while (quota-- > 0) GatherStep<kStride>(g);
  avx512_internal::StoreTile<MR, NV>(acc, c, ldc, accumulate);
}

template <int kStride>
GatherKernelFn FindGatherKernelOfStride(int mr, int nr) {
  if (mr == 8 && nr == 32) return KernelWithGather<8, 2, kStride>;
  if (mr == 6 && nr == 32) return KernelWithGather<6, 2, kStride>;
  if (mr == 14 && nr == 16) return KernelWithGather<14, 1, kStride>;
  if (mr == 12 && nr == 32) return KernelWithGather<12, 2, kStride>;
  return nullptr;
}

// A gather-carrying kernel and the finish of its gather.
struct GatherKernel {
  GatherKernelFn compute = nullptr;
  void (*finish)(GatherCursor*) = nullptr;
};

// The gather-carrying kernel of micro shape mr x nr over NCHW X, or none.
GatherKernel FindGatherKernel(const ConvShape& s, const ConvTiling& t) {
  if (!HasAvx512() || t.in_layout != ActivationLayout::kNCHW) return {};
  if (s.stride_w == 1) return {FindGatherKernelOfStride<1>(t.mr, t.nr), FinishGather<1>};
  if (s.stride_w == 2) return {FindGatherKernelOfStride<2>(t.mr, t.nr), FinishGather<2>};
  return {};
}

// One thread's share of a run.
class Runner {
 public:
  Runner(const ConvDesc& d, const ConvTiling& t, RunMode mode)
      : d_(d),
        s_(d.shape),
        t_(t),
        g_(Im2colGeometryOf(d.shape, t)),
        mode_(mode),
        mk_(FindMicroKernel(t.mr, t.nr)),
        gather_kernel_(FindGatherKernel(d.shape, t)),
        local_(static_cast<size_t>(Im2colGemmOps().local_bytes(d, t))) {
    a_ = local_.Take(g_.a_floats());
    b_[0] = local_.Take(g_.b_floats());
    b_[1] = local_.Take(g_.b_floats());
    c_ = local_.Take(g_.c_floats());
    // Compute-only runs never pack: ordinary values keep the epilogue
    // representative. Copy-only runs never compute: C is copied out as is.
    if (mode == RunMode::kComputeOnly) {
      std::fill(a_, a_ + g_.a_floats(), 0.5f);
      for (float* b : b_) std::fill(b, b + g_.b_floats(), 0.25f);
    }
    if (mode == RunMode::kCopyOnly) std::fill(c_, c_ + g_.c_floats(), 0.0f);
  }

  KernelStats Run(int thread, int threads) {
    const ConvTileWalk walk = AlgorithmWalk(d_, t_);
    int64_t begin = 0, end = 0;
    walk.ShareOf(thread, threads, &begin, &end);
    std::vector<Step> steps;
    ForEachIm2colStep(s_, g_, walk, begin, end, [&](const Step& step) { steps.push_back(step); });
    int cur = 0;         // the B panel the current step computes with
    bool ready = false;  // whether its B was gathered during the previous step
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& step = steps[i];
      if (mode_ != RunMode::kComputeOnly) {
        if (step.pack_a) CopyA(step);
        if (step.pack_b && !ready) GatherB(step, b_[cur]);
      }
      const Step* next = i + 1 < steps.size() && steps[i + 1].pack_b ? &steps[i + 1] : nullptr;
      ready = mode_ == RunMode::kFull && next != nullptr && gather_kernel_.compute != nullptr;
      if (ready) {
        GatherCursor g = StartGatherB(*next, b_[cur ^ 1]);
        Compute(step, b_[cur], &g);
        gather_kernel_.finish(&g);
      } else if (mode_ != RunMode::kCopyOnly) {
        Compute(step, b_[cur], nullptr);
      }
      if (step.last) FinishConvTile(d_, step.tile, c_, g_.nc_pad, t_.out_layout, mode_, &stats_);
      if (ready) cur ^= 1;
    }
    return stats_;
  }

 private:
  void CopyA(const Step& st) {
    const ConvTile& tile = st.tile;
    if (d_.w_packed != nullptr) {
      const float* src = d_.w_packed + PackedOffset(s_, t_, g_, tile.oc0, tile.ocs, st.k0);
      std::memcpy(a_, src, sizeof(float) * RoundUp(tile.ocs, t_.mr) * st.depth);
    } else {
      PackA(d_, t_, g_.k, tile.oc0, tile.ocs, st.k0, st.depth, a_);
    }
    stats_.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * tile.ocs * st.depth;
  }

  void GatherB(const Step& st, float* b) {
    stats_.bytes_global_to_local += GatherIm2colBlock(d_, t_, st, &plan_, b);
  }

  // The same gather as GatherB (stride 1 or 2, AVX-512), to be carried by Compute.
  GatherCursor StartGatherB(const Step& st, float* b) {
    const ConvTile& tile = st.tile;
    PlanIm2colGather(s_, t_.nr, tile, &plan_);
    const int64_t khw = s_.kernel_h * s_.kernel_w, plane = s_.in_h * s_.in_w;
    const float* x_group =
        d_.x + (tile.image * s_.in_channels + st.group * s_.in_per_group()) * plane;
    stats_.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * st.depth * tile.ps;
    return StartGather(plan_, x_group, plane, s_.in_per_group(), khw, st.k0, st.depth, t_.nr, b);
  }

  // The micro-kernel calls of a step on B panel `b`; with `g`, each call
  // also carries an equal share of the next block's gather.
  void Compute(const Step& st, const float* b, GatherCursor* g) {
    const int64_t slivers = CeilDiv(st.tile.ps, t_.nr);
    const bool accumulate = st.k0 > 0;
    int64_t calls_left = slivers * CeilDiv(st.tile.ocs, t_.mr);
    for (int64_t q = 0; q < slivers; ++q) {
      const float* bp = b + q * st.depth * t_.nr;
      for (int64_t i0 = 0; i0 < st.tile.ocs; i0 += t_.mr, --calls_left) {
        const float* ap = a_ + i0 * st.depth;
        float* c = c_ + i0 * g_.nc_pad + q * t_.nr;
        if (g != nullptr)
          gather_kernel_.compute(st.depth, ap, bp, c, g_.nc_pad, accumulate, g,
                                 CeilDiv(g->left, calls_left));
        else
          mk_->fn(st.depth, ap, bp, c, g_.nc_pad, accumulate);
      }
    }
  }

  const ConvDesc& d_;
  const ConvShape& s_;
  const ConvTiling& t_;
  Geometry g_;
  RunMode mode_;
  const MicroKernel* mk_;
  GatherKernel gather_kernel_;
  LocalBuffer local_;
  float *a_ = nullptr, *c_ = nullptr;
  float* b_[2] = {};
  GatherPlan plan_;
  KernelStats stats_;
};

Status Applies(const ConvShape&) { return Status::Ok(); }

int64_t LocalBytes(const ConvDesc& d, const ConvTiling& t) {
  const Geometry g = Im2colGeometryOf(d.shape, t);
  // Two B panels: the next block's is gathered while this one's computes.
  // Each region is rounded to 64 bytes by LocalBuffer::Take.
  return static_cast<int64_t>(sizeof(float)) * (g.a_floats() + 2 * g.b_floats() + g.c_floats()) +
         4 * 64;
}

Status CheckTiling(const ConvDesc& d, const ConvTiling& t) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (FindMicroKernel(t.mr, t.nr) == nullptr) {
    std::string shapes;
    for (auto [m, n] : MicroTileShapes()) shapes += fmt::format(" {}x{}", m, n);
    return bad(
        fmt::format("tiling.mr x tiling.nr: {}x{} is not a micro-tile shape; choose one of{}", t.mr,
                    t.nr, shapes));
  }
  // A block covering a whole group may have any size; the others start at
  // multiples of mr, which the pre-packed layout relies on.
  if (t.oc_block % t.mr != 0 && t.oc_block < d.shape.out_per_group())
    return bad(
        fmt::format("tiling.oc_block: {} must be a multiple of mr ({}) or cover the {} "
                    "output channels of a group",
                    t.oc_block, t.mr, d.shape.out_per_group()));
  if (t.pixel_block % t.nr != 0)
    return bad(
        fmt::format("tiling.pixel_block: {} must be a multiple of nr ({})", t.pixel_block, t.nr));
  return Status::Ok();
}

int64_t PackedFloats(const ConvDesc& d, const ConvTiling& t) {
  const ConvShape& s = d.shape;
  return s.groups * RoundUp(s.out_per_group(), t.mr) * Im2colGeometryOf(s, t).k;
}

void PrePack(const ConvDesc& d, const ConvTiling& t, float* dst) {
  const ConvShape& s = d.shape;
  const Geometry g = Im2colGeometryOf(s, t);
  for (int64_t group = 0; group < s.groups; ++group)
    for (int64_t in = 0; in < s.out_per_group(); in += t.oc_block) {
      const int64_t oc0 = group * s.out_per_group() + in;
      const int64_t ocs = std::min(t.oc_block, s.out_per_group() - in);
      for (int64_t k0 = 0; k0 < g.k; k0 += g.kc)
        PackA(d, t, g.k, oc0, ocs, k0, std::min(g.kc, g.k - k0),
              dst + PackedOffset(s, t, g, oc0, ocs, k0));
    }
}

KernelStats RunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                     RunMode mode, int thread) {
  return Runner(d, t, mode).Run(thread, config.threads);
}

}  // namespace

// The fixed cost of a micro-kernel call in k-steps, as the GEMM's estimate
// counts it (gemm.cpp): storing its C micro-tile, and loading it first after
// a tile's first slice.
constexpr double kCallSteps = 4, kAccumulateSteps = 8;

TilingEstimate EstimateIm2col(const ConvDesc& d, const ConvTiling& t, int threads) {
  // A's elements: bf16 halves (conv_im2col_bf16.cpp), as its pre-packed weights are.
  const double a_bytes = t.precision == Precision::kBf16 ? 2.0 : 4.0;
  const ConvShape& s = d.shape;
  const Geometry g = Im2colGeometryOf(s, t);
  const ConvTileWalk walk = AlgorithmWalk(d, t);
  TilingEstimate e;
  e.local_bytes = LocalBytes(d, t);
  std::vector<double> work(threads, 0);
  for (int th = 0; th < threads; ++th) {
    int64_t begin = 0, end = 0, steps = 0;
    walk.ShareOf(th, threads, &begin, &end);
    ForEachIm2colStep(s, g, walk, begin, end, [&](const Step& st) {
      const ConvTile& tile = st.tile;
      if (st.pack_a) e.bytes_in += a_bytes * tile.ocs * st.depth;
      if (st.pack_b) e.bytes_in += 4.0 * st.depth * tile.ps;
      const double call_steps = kCallSteps + (st.k0 > 0 ? kAccumulateSteps : 0);
      work[th] += static_cast<double>(RoundUp(tile.ocs, t.mr)) * RoundUp(tile.ps, t.nr) *
                  (st.depth + call_steps);
      ++steps;
      if (!st.last) return;
      if (d.bias != nullptr) e.bytes_in += 4.0 * tile.ocs;
      e.bytes_in += EpilogueReadBytes(d.epilogue, tile.ocs, tile.ps);
      e.bytes_out += 4.0 * tile.ocs * tile.ps;
    });
    e.tiles += end - begin;
    e.max_thread_tiles = std::max(e.max_thread_tiles, end - begin);
    e.steps = std::max(e.steps, steps);
  }
  double total = 0;
  for (double w : work) total += w;
  e.lane_utilisation = total > 0 ? s.Macs() / total : 1;
  e.max_thread_work = total > 0 ? *std::max_element(work.begin(), work.end()) / total : 1;
  return e;
}

const ConvAlgorithmOps& Im2colGemmOps() {
  static const ConvAlgorithmOps ops{Applies, CheckTiling, LocalBytes,    PackedFloats,
                                    PrePack, RunShare,    EstimateIm2col};
  return ops;
}

}  // namespace fusetune::kernels::conv_detail
