#include "kernels/ffn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/activation_simd.h"
#include "kernels/gemm_pack.h"
#include "kernels/microkernel.h"

namespace fusetune::kernels {

using gemm_internal::ABlock;
using gemm_internal::CeilDiv;
using gemm_internal::RoundUp;

std::string FfnTiling::ToString() const {
  return fmt::format("mb={} hb={} micro={}x{}", mb, hb, mr, nr);
}

namespace {

struct Layout {
  int64_t mb_pad, hb_pad, n_pad, x_panel, stage, w1_panel, h_tile, w2_panel, o_tile;
  int up;  // 2 for SwiGLU (W1 and W3), else 1
  int64_t floats() const { return x_panel + stage + up * (w1_panel + h_tile) + w2_panel + o_tile; }
};

Layout MakeLayout(const FfnDesc& d, const FfnTiling& t) {
  Layout l;
  l.mb_pad = RoundUp(t.mb, t.mr);
  l.hb_pad = RoundUp(t.hb, t.nr);
  l.n_pad = RoundUp(d.n, t.nr);
  l.x_panel = l.mb_pad * d.k;
  l.stage = d.prologue.empty() ? 0 : t.mb * d.k + 2 * t.mb;
  l.w1_panel = d.k * l.hb_pad;
  l.h_tile = l.mb_pad * l.hb_pad;
  l.w2_panel = t.hb * l.n_pad;
  l.o_tile = l.mb_pad * l.n_pad;
  l.up = d.swiglu ? 2 : 1;
  return l;
}

// The X operand as a GEMM descriptor, so that packing and the prologue are shared.
GemmDesc XAsGemm(const FfnDesc& d) {
  GemmDesc g;
  g.m = d.m;
  g.k = d.k;
  g.a = d.x;
  g.a_row_stride = d.x_row_stride;
  g.a_col_stride = d.x_col_stride;
  g.prologue = d.prologue;
  return g;
}

GemmOutput WeightAsOutput(const float* w, int64_t row_stride, int64_t n) {
  GemmOutput out;
  out.n = n;
  out.b = w;
  out.b_row_stride = row_stride;
  return out;
}

}  // namespace

int64_t FfnLocalBytes(const FfnDesc& d, const FfnTiling& t) {
  return static_cast<int64_t>(sizeof(float)) * MakeLayout(d, t).floats() + 12 * 64;
}

Status ValidateFfn(const FfnDesc& d, const FfnTiling& t, const KernelConfig& config) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (d.m < 1 || d.k < 1 || d.hidden < 1 || d.n < 1)
    return bad(fmt::format("ffn: m, k, hidden, n must be positive (got {}, {}, {}, {})", d.m, d.k,
                           d.hidden, d.n));
  if (!d.x || !d.w1 || !d.w2 || !d.o || (d.swiglu && !d.w3))
    return bad("ffn: descriptor.x, .w1, .w2, .o (and .w3 for SwiGLU) must point to data");
  if (d.o_row_stride < d.n)
    return bad(fmt::format("ffn: descriptor.o_row_stride {} < n {}", d.o_row_stride, d.n));
  if (d.prologue.norm != NormKind::kNone && !d.prologue.gamma)
    return bad("ffn: descriptor.prologue.gamma is required by the norm");
  if (IsRowNorm(d.act))
    return bad("ffn: descriptor.act is a layer_norm; the hidden tiles do not hold whole rows");
  if (t.mb < 1) return bad(fmt::format("tiling.mb: {} must be positive", t.mb));
  if (t.hb < 1) return bad(fmt::format("tiling.hb: {} must be positive", t.hb));
  return CheckMicroTileAndBuffer(t.mr, t.nr, FfnLocalBytes(d, t), config,
                                 [&] { return fmt::format("mb={} hb={}", t.mb, t.hb); });
}

namespace {

class FfnRunner {
 public:
  FfnRunner(const FfnDesc& d, const FfnTiling& t, RunMode mode)
      : d_(d),
        t_(t),
        mode_(mode),
        l_(MakeLayout(d, t)),
        mk_(FindMicroKernel(t.mr, t.nr)),
        x_gemm_(XAsGemm(d)),
        local_(static_cast<size_t>(FfnLocalBytes(d, t))) {
    xp_ = local_.Take(l_.x_panel);
    if (l_.stage) {
      stage_ = local_.Take(t.mb * d.k);
      norm_ = {local_.Take(t.mb), local_.Take(t.mb)};
    }
    for (int u = 0; u < l_.up; ++u) {
      w1p_[u] = local_.Take(l_.w1_panel);
      h_[u] = local_.Take(l_.h_tile);
    }
    w2p_ = local_.Take(l_.w2_panel);
    o_ = local_.Take(l_.o_tile);
    if (mode == RunMode::kComputeOnly) {
      std::fill(xp_, xp_ + l_.x_panel, 0.5f);
      for (int u = 0; u < l_.up; ++u) std::fill(w1p_[u], w1p_[u] + l_.w1_panel, 0.01f);
      std::fill(w2p_, w2p_ + l_.w2_panel, 0.01f);
      if (stage_) std::fill(stage_, stage_ + t.mb * d.k, 0.5f);
    }
  }

  void Run(int64_t i0) {
    const int64_t rows = std::min(t_.mb, d_.m - i0);
    PackX(i0, rows);
    for (int64_t h0 = 0; h0 < d_.hidden; h0 += t_.hb) {
      const int64_t cols = std::min(t_.hb, d_.hidden - h0);
      Hidden(i0, rows, h0, cols);
      Output(rows, h0, cols);
    }
    Finish(i0, rows);
  }

  KernelStats stats;

 private:
  void PackX(int64_t i0, int64_t rows) {
    if (mode_ == RunMode::kComputeOnly && d_.prologue.empty()) return;
    const ABlock a{0, i0, rows, 0, d_.k};
    if (!d_.prologue.empty()) {
      stats.bytes_global_to_local +=
          gemm_internal::PackAWithPrologue(x_gemm_, a, t_.mr, mode_, stage_, norm_, false, xp_);
      return;
    }
    for (int64_t s = 0; s < CeilDiv(rows, t_.mr); ++s)
      stats.bytes_global_to_local += gemm_internal::PackASliver(x_gemm_, a, t_.mr, s, xp_);
  }

  // H = act(X W1[:, h0:h0+cols] + b1), or silu(X W1) * (X W3), in the hidden
  // tile, which the second GEMM reads by rows. Rows past `rows` (X's zero
  // padding) hold act(b1): they only reach output rows that are not written.
  void Hidden(int64_t i0, int64_t rows, int64_t h0, int64_t cols) {
    const float* w[2] = {d_.w1, d_.w3};
    for (int u = 0; u < l_.up; ++u) {
      if (mode_ != RunMode::kComputeOnly) {
        const GemmOutput wo = WeightAsOutput(w[u], d_.w1_row_stride, d_.hidden);
        stats.bytes_global_to_local +=
            gemm_internal::PackB(wo, {0, 0, d_.k, h0, cols}, t_.nr, w1p_[u]);
      }
      if (mode_ == RunMode::kCopyOnly) continue;
      for (int64_t jr = 0; jr < cols; jr += t_.nr)
        for (int64_t ir = 0; ir < rows; ir += t_.mr)
          mk_->fn_rows(d_.k, xp_ + ir * d_.k, d_.k, w1p_[u] + (jr / t_.nr) * d_.k * t_.nr,
                       h_[u] + ir * l_.hb_pad + jr, l_.hb_pad, false);
    }
    if (d_.swiglu) {
      if (mode_ != RunMode::kCopyOnly)
        for (int64_t r = 0; r < rows; ++r)
          SiluTimes(h_[0] + r * l_.hb_pad, h_[1] + r * l_.hb_pad, cols);
    } else {
      std::vector<EpilogueOp> ops;
      if (d_.b1) ops.push_back(EpilogueOp::Bias(d_.b1));
      ops.push_back(EpilogueOp::Act(d_.act));
      stats.bytes_global_to_local +=
          ApplyEpilogue(ops, h_[0], l_.hb_pad, rows, cols, 0, i0, h0, mode_);
    }
  }

  // O += H x W2[h0:h0+cols, :].
  void Output(int64_t rows, int64_t h0, int64_t cols) {
    if (mode_ != RunMode::kComputeOnly) {
      const GemmOutput wo = WeightAsOutput(d_.w2, d_.w2_row_stride, d_.n);
      stats.bytes_global_to_local += gemm_internal::PackB(wo, {0, h0, cols, 0, d_.n}, t_.nr, w2p_);
    }
    if (mode_ == RunMode::kCopyOnly) return;
    for (int64_t jr = 0; jr < d_.n; jr += t_.nr)
      for (int64_t ir = 0; ir < rows; ir += t_.mr)
        mk_->fn_rows(cols, h_[0] + ir * l_.hb_pad, l_.hb_pad, w2p_ + (jr / t_.nr) * cols * t_.nr,
                     o_ + ir * l_.n_pad + jr, l_.n_pad, h0 > 0);
  }

  void Finish(int64_t i0, int64_t rows) {
    if (mode_ == RunMode::kCopyOnly) std::memset(o_, 0, sizeof(float) * l_.o_tile);
    stats.bytes_global_to_local +=
        ApplyEpilogue(d_.epilogue, o_, l_.n_pad, rows, d_.n, 0, i0, 0, mode_);
    if (mode_ != RunMode::kComputeOnly) {
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(d_.o + (i0 + r) * d_.o_row_stride, o_ + r * l_.n_pad, d_.n * sizeof(float));
      stats.bytes_local_to_global += 4 * rows * d_.n;
    }
    ++stats.tiles;
  }

  const FfnDesc& d_;
  const FfnTiling& t_;
  RunMode mode_;
  Layout l_;
  const MicroKernel* mk_;
  GemmDesc x_gemm_;
  LocalBuffer local_;
  float *xp_ = nullptr, *stage_ = nullptr, *w2p_ = nullptr, *o_ = nullptr;
  float* w1p_[2] = {};
  float* h_[2] = {};
  gemm_internal::NormStats norm_{nullptr, nullptr};
};

}  // namespace

Result<KernelStats> RunFfn(const FfnDesc& d, const FfnTiling& t, const KernelConfig& config,
                           RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateFfn(d, t, config));
  const int64_t blocks = CeilDiv(d.m, t.mb);
  return RunThreadShares(config.threads, [&](int th) {
    const int64_t first = blocks * th / config.threads, last = blocks * (th + 1) / config.threads;
    if (first >= last) return KernelStats{};
    FfnRunner runner(d, t, mode);
    for (int64_t b = first; b < last; ++b) runner.Run(b * t.mb);
    return runner.stats;
  });
}

}  // namespace fusetune::kernels
