#include "kernels/gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/microkernel.h"

namespace fusetune::kernels {

const char* LoopOrderName(LoopOrder order) { return order == LoopOrder::kMN ? "mn" : "nm"; }
const char* ParallelSplitName(ParallelSplit split) {
  switch (split) {
    case ParallelSplit::kM:
      return "m";
    case ParallelSplit::kN:
      return "n";
    case ParallelSplit::kMN:
      return "mn";
  }
  return "?";
}

std::string GemmTiling::ToString() const {
  return fmt::format("mc={} nc={} kc={} micro={}x{} order={} split={}", mc, nc, kc, mr, nr,
                     LoopOrderName(order), ParallelSplitName(split));
}

namespace {

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t CeilDiv(int64_t x, int64_t m) { return (x + m - 1) / m; }

}  // namespace

int64_t GemmLocalBytes(const GemmTiling& t) {
  const int64_t mc = RoundUp(t.mc, t.mr), nc = RoundUp(t.nc, t.nr);
  return static_cast<int64_t>(sizeof(float)) * (mc * t.kc + t.kc * nc + mc * nc) + 3 * 64;
}

Status ValidateGemm(const GemmDesc& d, const GemmTiling& t, const KernelConfig& config) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (d.batch < 1 || d.m < 1 || d.n < 1 || d.k < 1)
    return bad(fmt::format("gemm: batch, m, n, k must be positive (got {}, {}, {}, {})", d.batch,
                           d.m, d.n, d.k));
  if (!d.a || !d.b || !d.c) return bad("gemm: descriptor.a, .b and .c must point to data");
  if (d.c_row_stride < d.n)
    return bad(fmt::format("gemm: descriptor.c_row_stride {} < n {}", d.c_row_stride, d.n));
  for (size_t i = 0; i < d.epilogue.size(); ++i) {
    const EpilogueKind kind = d.epilogue[i].kind;
    const bool needs_data = kind == EpilogueKind::kBiasAdd || kind == EpilogueKind::kResidualAdd ||
                            kind == EpilogueKind::kMultiply;
    if (needs_data && !d.epilogue[i].data)
      return bad(fmt::format("gemm: descriptor.epilogue[{}] ({}) has no operand", i,
                             EpilogueKindName(kind)));
  }
  if (t.mc < 1) return bad(fmt::format("tiling.mc: {} must be positive", t.mc));
  if (t.nc < 1) return bad(fmt::format("tiling.nc: {} must be positive", t.nc));
  if (t.kc < 1) return bad(fmt::format("tiling.kc: {} must be positive", t.kc));
  if (!FindMicroKernel(t.mr, t.nr)) {
    std::string shapes;
    for (auto [mr, nr] : MicroTileShapes()) shapes += fmt::format(" {}x{}", mr, nr);
    return bad(
        fmt::format("tiling.mr x tiling.nr: {}x{} is not a micro-tile shape; choose one of{}", t.mr,
                    t.nr, shapes));
  }
  if (config.threads < 1)
    return bad(fmt::format("config.threads: {} must be positive", config.threads));
  const int64_t need = GemmLocalBytes(t);
  if (need > static_cast<int64_t>(config.local_buffer_bytes))
    return bad(
        fmt::format("tiling: needs {} bytes of local buffer (mc={} nc={} kc={}), capacity is {}",
                    need, t.mc, t.nc, t.kc, config.local_buffer_bytes));
  return Status::Ok();
}

namespace {

// Copies A[b, i0:i0+rows, p0:p0+depth] into slivers of mr rows, [depth][mr]
// each, zero-padding missing rows. Returns bytes read from global.
int64_t PackA(const GemmDesc& d, int64_t b, int64_t i0, int64_t rows, int64_t p0, int64_t depth,
              int mr, float* ap) {
  const float* base = d.a + b * d.a_batch_stride + i0 * d.a_row_stride + p0 * d.a_col_stride;
  for (int64_t s = 0; s < CeilDiv(rows, mr); ++s) {
    float* dst = ap + s * depth * mr;
    for (int i = 0; i < mr; ++i) {
      const int64_t row = s * mr + i;
      if (row >= rows) {
        for (int64_t p = 0; p < depth; ++p) dst[p * mr + i] = 0.0f;
        continue;
      }
      const float* src = base + row * d.a_row_stride;
      if (d.a_col_stride == 1)
        for (int64_t p = 0; p < depth; ++p) dst[p * mr + i] = src[p];
      else
        for (int64_t p = 0; p < depth; ++p) dst[p * mr + i] = src[p * d.a_col_stride];
    }
  }
  return static_cast<int64_t>(sizeof(float)) * rows * depth;
}

// Copies B[b, p0:p0+depth, j0:j0+cols] into slivers of nr columns, [depth][nr] each.
int64_t PackB(const GemmDesc& d, int64_t b, int64_t p0, int64_t depth, int64_t j0, int64_t cols,
              int nr, float* bp) {
  const float* base = d.b + b * d.b_batch_stride + p0 * d.b_row_stride + j0 * d.b_col_stride;
  for (int64_t s = 0; s < CeilDiv(cols, nr); ++s) {
    float* dst = bp + s * depth * nr;
    const int64_t width = std::min<int64_t>(nr, cols - s * nr);
    for (int64_t p = 0; p < depth; ++p) {
      const float* src = base + p * d.b_row_stride + s * nr * d.b_col_stride;
      float* row = dst + p * nr;
      if (d.b_col_stride == 1) {
        std::memcpy(row, src, width * sizeof(float));
      } else {
        for (int64_t j = 0; j < width; ++j) row[j] = src[j * d.b_col_stride];
      }
      for (int64_t j = width; j < nr; ++j) row[j] = 0.0f;
    }
  }
  return static_cast<int64_t>(sizeof(float)) * depth * cols;
}

struct Block {
  int64_t batch, ic, jc;  // block indices
};

// One thread's share of the work: its blocks, in loop order.
std::vector<Block> BlocksForThread(const GemmDesc& d, const GemmTiling& t, int thread,
                                   int threads) {
  const int64_t mb = CeilDiv(d.m, t.mc), nb = CeilDiv(d.n, t.nc);
  auto mine = [&](int64_t ic, int64_t jc, int64_t flat) {
    switch (t.split) {
      case ParallelSplit::kM:
        return ic * threads / mb == thread;
      case ParallelSplit::kN:
        return jc * threads / nb == thread;
      case ParallelSplit::kMN:
        return flat % threads == thread;
    }
    return false;
  };
  std::vector<Block> blocks;
  int64_t flat = 0;
  for (int64_t b = 0; b < d.batch; ++b) {
    const int64_t outer = t.order == LoopOrder::kMN ? mb : nb,
                  inner = t.order == LoopOrder::kMN ? nb : mb;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i, ++flat) {
        const int64_t ic = t.order == LoopOrder::kMN ? o : i,
                      jc = t.order == LoopOrder::kMN ? i : o;
        if (mine(ic, jc, flat)) blocks.push_back({b, ic, jc});
      }
  }
  return blocks;
}

KernelStats RunThread(const GemmDesc& d, const GemmTiling& t, const KernelConfig& config,
                      RunMode mode, int thread) {
  KernelStats stats;
  const std::vector<Block> blocks = BlocksForThread(d, t, thread, config.threads);
  if (blocks.empty()) return stats;
  const MicroKernel* mk = FindMicroKernel(t.mr, t.nr);
  LocalBuffer local(static_cast<size_t>(GemmLocalBytes(t)));
  const int64_t mc_pad = RoundUp(t.mc, t.mr), nc_pad = RoundUp(t.nc, t.nr);
  float* ap = local.Take(mc_pad * t.kc);
  float* bp = local.Take(t.kc * nc_pad);
  float* cl = local.Take(mc_pad * nc_pad);
  if (mode == RunMode::kComputeOnly) {
    // Panels are never packed in this mode. Fill them with ordinary non-zero
    // values: zeros would make the epilogue's transcendentals unrepresentative.
    std::fill(ap, ap + mc_pad * t.kc, 0.5f);
    std::fill(bp, bp + t.kc * nc_pad, 0.25f);
  }
  Block a_cached{-1, -1, -1}, b_cached{-1, -1, -1};  // (batch, block, k-slice) in the local buffer
  for (const Block& blk : blocks) {
    const int64_t i0 = blk.ic * t.mc, rows = std::min(t.mc, d.m - i0);
    const int64_t j0 = blk.jc * t.nc, cols = std::min(t.nc, d.n - j0);
    for (int64_t p0 = 0, slice = 0; p0 < d.k; p0 += t.kc, ++slice) {
      const int64_t depth = std::min(t.kc, d.k - p0);
      if (mode != RunMode::kComputeOnly) {
        if (!(a_cached.batch == blk.batch && a_cached.ic == blk.ic && a_cached.jc == slice)) {
          stats.bytes_global_to_local += PackA(d, blk.batch, i0, rows, p0, depth, t.mr, ap);
          a_cached = {blk.batch, blk.ic, slice};
        }
        if (!(b_cached.batch == blk.batch && b_cached.jc == blk.jc && b_cached.ic == slice)) {
          stats.bytes_global_to_local += PackB(d, blk.batch, p0, depth, j0, cols, t.nr, bp);
          b_cached = {blk.batch, slice, blk.jc};
        }
      }
      if (mode == RunMode::kCopyOnly) continue;
      for (int64_t jr = 0; jr < cols; jr += t.nr)
        for (int64_t ir = 0; ir < rows; ir += t.mr)
          mk->fn(depth, ap + (ir / t.mr) * depth * t.mr, bp + (jr / t.nr) * depth * t.nr,
                 cl + ir * nc_pad + jr, nc_pad, p0 > 0);
    }
    if (mode == RunMode::kCopyOnly) std::memset(cl, 0, sizeof(float) * mc_pad * nc_pad);
    stats.bytes_global_to_local +=
        ApplyEpilogue(d.epilogue, cl, nc_pad, rows, cols, blk.batch, i0, j0, mode);
    if (mode != RunMode::kComputeOnly) {
      float* dst = d.c + blk.batch * d.c_batch_stride + i0 * d.c_row_stride + j0;
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dst + r * d.c_row_stride, cl + r * nc_pad, cols * sizeof(float));
      stats.bytes_local_to_global += static_cast<int64_t>(sizeof(float)) * rows * cols;
    }
    ++stats.tiles;
  }
  return stats;
}

}  // namespace

Result<KernelStats> RunGemm(const GemmDesc& desc, const GemmTiling& tiling,
                            const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateGemm(desc, tiling, config));
  std::vector<KernelStats> per_thread(config.threads);
  ForEachThread(config.threads,
                [&](int t) { per_thread[t] = RunThread(desc, tiling, config, mode, t); });
  KernelStats total;
  for (const KernelStats& s : per_thread) total += s;
  return total;
}

}  // namespace fusetune::kernels
