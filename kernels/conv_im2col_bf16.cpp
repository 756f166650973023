// The implicit-GEMM convolution in bf16 (conv.h's ConvTiling::precision):
// the f32 form's blocks and steps (conv_im2col.h), with W pre-packed in bf16
// rows and each im2col block gathered in f32 as the f32 form gathers it,
// then rounded to the bf16 micro-kernels' k-pairs in the local buffer. The
// sums, bias, epilogue and pools stay in f32. The f32 form carries the next
// block's gather through its micro-kernels; this one gathers between them:
// the rounding pass is over the block the micro-kernels then reuse for
// every channel row of the tile, so it costs about 1 / oc_block of the work.
#include <fmt/format.h>

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/bf16.h"
#include "kernels/conv_im2col.h"
#include "kernels/microkernel_bf16.h"
#include "kernels/precision.h"

namespace fusetune::kernels::conv_detail {

namespace {

using Geometry = Im2colGeometry;
using Step = Im2colStep;

int64_t RoundUp(int64_t x, int64_t m) { return Im2colRoundUp(x, m); }

// Pre-packed W: per group RoundUp(out_per_group, mr) rows of K rounded up to
// even bf16 values, zeros past the group's channels and past K. A tile's A
// block is then its rows' [k0, k0 + depth) runs, whatever the blocks.
int64_t PackedRowHalves(const Geometry& g) { return RoundUp(g.k, 2); }
int64_t PackedGroupRows(const ConvShape& s, const ConvTiling& t) {
  return RoundUp(s.out_per_group(), t.mr);
}

// Whether B's blocks go straight from X into k-pairs (GatherPairsAvx512):
// stride 1 on NCHW X, with AVX512-BF16. Else they are gathered in f32 into
// a staging panel and rounded in a second pass.
bool GathersPairsDirectly(const ConvDesc& d, const ConvTiling& t) {
  return CpuHasBf16Dot() && d.shape.stride_w == 1 && t.in_layout == ActivationLayout::kNCHW;
}

// The local buffer in bf16 halves and floats: A [mc_pad][kc_pad] bf16, the
// f32 staging [kc][nc_pad] (none when B is gathered straight into pairs),
// B's bf16 k-pairs [kc_pad / 2][nc_pad][2], C f32.
struct Layout {
  int64_t kc_pad, a_floats, stage_floats, b_floats, c_floats;
};

Layout LayoutOf(const ConvDesc& d, const ConvTiling& t) {
  const Geometry g = Im2colGeometryOf(d.shape, t);
  Layout l;
  l.kc_pad = RoundUp(g.kc, 2);
  l.a_floats = g.mc_pad * l.kc_pad / 2;
  l.stage_floats = GathersPairsDirectly(d, t) ? 0 : g.b_floats();
  l.b_floats = l.kc_pad * g.nc_pad / 2;
  l.c_floats = g.c_floats();
  return l;
}

// W's rows [oc0, oc0 + rows_pad) and columns [k0, k0 + depth) in bf16, rows
// depth_pad apart, zeros past `ocs` rows and past `depth` columns.
void ConvertRows(const ConvDesc& d, int64_t k, int64_t oc0, int64_t ocs, int64_t rows_pad,
                 int64_t k0, int64_t depth, int64_t depth_pad, Bf16* dst) {
  for (int64_t r = 0; r < rows_pad; ++r) {
    Bf16* row = dst + r * depth_pad;
    if (r < ocs) ConvertToBf16(d.w + (oc0 + r) * k + k0, depth, row);
    std::fill(row + (r < ocs ? depth : 0), row + depth_pad, Bf16{0});
  }
}

// Stride 1 on NCHW X, with AVX512-BF16: each B row straight from X into
// its half of the k-pairs, without the f32 staging. Row p of the block
// goes to the even (p even) or odd 16-bit positions of pair p / 2: its 16
// floats rounded to bf16, widened to 32-bit lanes (and shifted up for the
// odd half), stored under a word mask that leaves the other row's halves
// alone. The plan's vector steps are the f32 gather's, so padding lanes
// load as zeros here too. On ResNet-50's 56x56 1x1 layers the staging pass
// cost about a third of the kernel's time (bench_conv --sweep --bf16).
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void GatherPairsAvx512(
    const GatherPlan& plan, const float* x_group, int64_t plane, int64_t channels, int64_t khw,
    int64_t k0, int64_t depth, int nr, Bf16* b) {
  const int64_t depth_pad = RoundUp(depth, 2), sliver_halves = depth_pad * nr;
  const int64_t ahead = std::max<int64_t>(1, 16 / khw);  // channels prefetched ahead, as in f32
  for (int64_t kk = k0; kk < k0 + depth; ++kk) {
    const int64_t ic = kk / khw, r = kk % khw, p = kk - k0;
    const float* xc = x_group + ic * plane;
    if (r == 0 && ic + ahead < channels) {
      const char* next = reinterpret_cast<const char*>(xc + ahead * plane);
      for (int64_t at = plan.read_lo * 4; at < plan.read_hi * 4; at += 64)
        _mm_prefetch(next + at, _MM_HINT_T0);
    }
    const bool odd = (p & 1) != 0;
    const uint32_t half = odd ? 0xaaaaaaaau : 0x55555555u;
    Bf16* pair = b + p / 2 * nr * 2;
    const Im2colVectorCopy* end = plan.vectors.data() + plan.first_vector[r + 1];
    for (const Im2colVectorCopy* v = plan.vectors.data() + plan.first_vector[r]; v != end; ++v) {
      const __m512 x = _mm512_maskz_loadu_ps(v->load, xc + v->src);
      // (The zero-masked forms: GCC 12's plain ones warn of an undefined source.)
      __m512i wide = _mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)_mm512_cvtneps_pbh(x));
      if (odd) wide = _mm512_maskz_slli_epi32(0xffff, wide, 16);
      // The store mask is the low `count` lanes: 2 count words, this row's half of them.
      const int count = __builtin_popcount(v->store);
      const uint32_t words = count == 16 ? 0xffffffffu : (1u << (2 * count)) - 1;
      _mm512_mask_storeu_epi16(pair + v->sliver * sliver_halves + v->lane * 2,
                               static_cast<__mmask32>(words & half), wide);
    }
  }
  if (depth % 2 == 0) return;
  // An odd depth's last pair: its second halves are zeros.
  const int64_t slivers = (plan.ps + nr - 1) / nr;
  for (int64_t q = 0; q < slivers; ++q) {
    Bf16* last = b + q * sliver_halves + (depth_pad / 2 - 1) * nr * 2;
    for (int64_t j = 0; j < nr; ++j) last[2 * j + 1] = 0;
  }
}

class Runner {
 public:
  Runner(const ConvDesc& d, const ConvTiling& t, RunMode mode)
      : d_(d),
        s_(d.shape),
        t_(t),
        g_(Im2colGeometryOf(d.shape, t)),
        l_(LayoutOf(d, t)),
        mode_(mode),
        mk_(FindBf16MicroKernel(t.mr, t.nr)),
        pairs_direct_(GathersPairsDirectly(d, t)),
        local_(static_cast<size_t>(Im2colGemmBf16Ops().local_bytes(d, t))) {
    a_ = reinterpret_cast<Bf16*>(local_.Take(l_.a_floats));
    if (!pairs_direct_) stage_ = local_.Take(l_.stage_floats);
    b_ = reinterpret_cast<Bf16*>(local_.Take(l_.b_floats));
    c_ = local_.Take(l_.c_floats);
    // As the f32 form: compute-only runs compute on ordinary values (0.5
    // and 0.25 in bf16), copy-only runs copy C out as it is.
    if (mode == RunMode::kComputeOnly) {
      std::fill(a_, a_ + 2 * l_.a_floats, FloatToBf16(0.5f));
      std::fill(b_, b_ + 2 * l_.b_floats, FloatToBf16(0.25f));
    }
    if (mode == RunMode::kCopyOnly) std::fill(c_, c_ + l_.c_floats, 0.0f);
  }

  KernelStats Run(int thread, int threads) {
    const ConvTileWalk walk = AlgorithmWalk(d_, t_);
    int64_t begin = 0, end = 0;
    walk.ShareOf(thread, threads, &begin, &end);
    ForEachIm2colStep(s_, g_, walk, begin, end, [&](const Step& step) {
      if (mode_ != RunMode::kComputeOnly) {
        if (step.pack_a) CopyA(step);
        if (step.pack_b) GatherB(step);
      }
      if (mode_ != RunMode::kCopyOnly) Compute(step);
      if (step.last) FinishConvTile(d_, step.tile, c_, g_.nc_pad, t_.out_layout, mode_, &stats_);
    });
    return stats_;
  }

 private:
  void CopyA(const Step& st) {
    const ConvTile& tile = st.tile;
    const int64_t depth_pad = RoundUp(st.depth, 2), rows = RoundUp(tile.ocs, t_.mr);
    if (d_.w_packed != nullptr) {
      const int64_t row_halves = PackedRowHalves(g_);
      const int64_t first_row = st.group * PackedGroupRows(s_, t_) + tile.oc0 % s_.out_per_group();
      const Bf16* src = reinterpret_cast<const Bf16*>(d_.w_packed) + first_row * row_halves + st.k0;
      // An odd slice (k_block odd, or K's last) ends its rows in a zero of
      // its own: the packed row's next value may be past its end.
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(a_ + r * depth_pad, src + r * row_halves, sizeof(Bf16) * st.depth);
        if (depth_pad > st.depth) a_[r * depth_pad + st.depth] = 0;
      }
    } else {
      ConvertRows(d_, g_.k, tile.oc0, tile.ocs, rows, st.k0, st.depth, depth_pad, a_);
    }
    stats_.bytes_global_to_local += static_cast<int64_t>(sizeof(Bf16)) * tile.ocs * st.depth;
  }

  // B's block into k-pairs: straight from X, or the f32 gather into the
  // staging slivers [depth][nr], then each sliver's rows in pairs to bf16
  // k-pairs (an odd depth's last pair ends in zeros).
  void GatherB(const Step& st) {
    if (pairs_direct_) {
      const ConvTile& tile = st.tile;
      PlanIm2colGather(s_, t_.nr, tile, &plan_);
      const int64_t plane = s_.in_h * s_.in_w;
      GatherPairsAvx512(
          plan_, d_.x + (tile.image * s_.in_channels + st.group * s_.in_per_group()) * plane, plane,
          s_.in_per_group(), s_.kernel_h * s_.kernel_w, st.k0, st.depth, t_.nr, b_);
      stats_.bytes_global_to_local += static_cast<int64_t>(sizeof(float)) * st.depth * tile.ps;
      return;
    }
    stats_.bytes_global_to_local += GatherIm2colBlock(d_, t_, st, &plan_, stage_);
    const int64_t nr = t_.nr, depth = st.depth, depth_pad = RoundUp(depth, 2);
    const int64_t slivers = (st.tile.ps + nr - 1) / nr;
    for (int64_t q = 0; q < slivers; ++q) {
      const float* src = stage_ + q * depth * nr;
      Bf16* dst = b_ + q * depth_pad * nr;
      for (int64_t p = 0; p < depth; p += 2)
        InterleaveToBf16Pairs(src + p * nr, p + 1 < depth ? src + (p + 1) * nr : nullptr, nr,
                              dst + p * nr);
    }
  }

  void Compute(const Step& st) {
    const int64_t nr = t_.nr, depth_pad = RoundUp(st.depth, 2);
    const int64_t slivers = (st.tile.ps + nr - 1) / nr;
    const bool accumulate = st.k0 > 0;
    for (int64_t q = 0; q < slivers; ++q) {
      const Bf16* bp = b_ + q * depth_pad * nr;
      for (int64_t i0 = 0; i0 < st.tile.ocs; i0 += t_.mr)
        mk_->fn(depth_pad / 2, a_ + i0 * depth_pad, depth_pad, bp, c_ + i0 * g_.nc_pad + q * nr,
                g_.nc_pad, accumulate);
    }
  }

  const ConvDesc& d_;
  const ConvShape& s_;
  const ConvTiling& t_;
  Geometry g_;
  Layout l_;
  RunMode mode_;
  const Bf16MicroKernel* mk_;
  bool pairs_direct_;  // GatherPairsAvx512, else the f32 gather and a rounding pass
  LocalBuffer local_;
  Bf16 *a_ = nullptr, *b_ = nullptr;
  float *stage_ = nullptr, *c_ = nullptr;
  GatherPlan plan_;
  KernelStats stats_;
};

int64_t LocalBytes(const ConvDesc& d, const ConvTiling& t) {
  const Layout l = LayoutOf(d, t);
  // Each region is rounded to 64 bytes by LocalBuffer::Take.
  return static_cast<int64_t>(sizeof(float)) *
             (l.a_floats + l.stage_floats + l.b_floats + l.c_floats) +
         4 * 64;
}

Status CheckTiling(const ConvDesc& d, const ConvTiling& t) {
  FT_RETURN_IF_ERROR(Im2colGemmOps().check_tiling(d, t));
  if (FindBf16MicroKernel(t.mr, t.nr) == nullptr)
    return Error(ErrorCode::kInvalidArgument, NoBf16MicroKernel(t.mr, t.nr));
  return Status::Ok();
}

int64_t PackedFloats(const ConvDesc& d, const ConvTiling& t) {
  const ConvShape& s = d.shape;
  // Two bf16 values a float; every row holds an even number of them.
  return s.groups * PackedGroupRows(s, t) * PackedRowHalves(Im2colGeometryOf(s, t)) / 2;
}

void PrePack(const ConvDesc& d, const ConvTiling& t, float* dst) {
  const ConvShape& s = d.shape;
  const Geometry g = Im2colGeometryOf(s, t);
  const int64_t rows = PackedGroupRows(s, t), halves = PackedRowHalves(g);
  for (int64_t group = 0; group < s.groups; ++group)
    ConvertRows(d, g.k, group * s.out_per_group(), s.out_per_group(), rows, 0, g.k, halves,
                reinterpret_cast<Bf16*>(dst) + group * rows * halves);
}

KernelStats RunShare(const ConvDesc& d, const ConvTiling& t, const KernelConfig& config,
                     RunMode mode, int thread) {
  return Runner(d, t, mode).Run(thread, config.threads);
}

}  // namespace

const ConvAlgorithmOps& Im2colGemmBf16Ops() {
  static const ConvAlgorithmOps ops{
      Im2colGemmOps().applies, CheckTiling, LocalBytes, PackedFloats, PrePack, RunShare,
      EstimateIm2col};
  return ops;
}

}  // namespace fusetune::kernels::conv_detail
