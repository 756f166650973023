#include "kernels/gemm_pack.h"

#include "kernels/row_simd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace fusetune::kernels::gemm_internal {

namespace {

// Rows of a block are rows of a larger tensor, a page or more apart, so the
// hardware prefetcher starts afresh on each; asking for a row this many rows
// ahead keeps enough lines in flight (2.5x faster copies from L3, measured).
constexpr int64_t kPrefetchRowsAhead = 8;

void PrefetchRow(const float* row, int64_t bytes) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

}  // namespace

int64_t PackASliver(const GemmDesc& d, const ABlock& blk, int mr, int64_t s, float* ap) {
  const float* base =
      d.a + blk.batch * d.a_batch_stride + blk.i0 * d.a_row_stride + blk.p0 * d.a_col_stride;
  int64_t copied_rows = 0;
  for (int i = 0; i < mr; ++i) {
    const int64_t row = s * mr + i;
    float* dst = ap + row * blk.depth;
    if (row >= blk.rows) {
      std::fill(dst, dst + blk.depth, 0.0f);
      continue;
    }
    const float* src = base + row * d.a_row_stride;
    if (d.a_col_stride == 1) {
      if (row + kPrefetchRowsAhead < blk.rows)
        PrefetchRow(src + kPrefetchRowsAhead * d.a_row_stride, blk.depth * 4);
      std::memcpy(dst, src, blk.depth * sizeof(float));
    } else {
      for (int64_t p = 0; p < blk.depth; ++p) dst[p] = src[p * d.a_col_stride];
    }
    ++copied_rows;
  }
  return static_cast<int64_t>(sizeof(float)) * copied_rows * blk.depth;
}

namespace {

// Rows of B per part when B is row-major: small enough to interleave with
// the micro-kernels under double buffering.
constexpr int64_t kBRowsPerPart = 16;

bool Transposed(const GemmOutput& out) { return out.b_col_stride != 1; }

// One row of each of `whole` slivers of width kNr. A sliver row is 64-128
// bytes: a copy of a size known at compile time inlines to a few vector
// moves, where a memcpy call per row cost as much as the copy.
template <int kNr>
void CopyWholeSliverRows(const float* src, int64_t whole, int64_t sliver_floats, float* dst) {
  for (int64_t s = 0; s < whole; ++s)
    std::memcpy(dst + s * sliver_floats, src + s * kNr, kNr * sizeof(float));
}

// Rows [first, last), left to right across all slivers: one stream per row
// for the prefetcher, where sliver by sliver would revisit each row nc / nr
// times (2x slower from DRAM, measured).
void PackRowMajor(const GemmOutput& out, const BBlock& blk, const float* base, int nr,
                  int64_t first, int64_t last, float* bp) {
  const int64_t slivers = CeilDiv(blk.cols, nr);
  for (int64_t p = first; p < last; ++p) {
    const float* src = base + p * out.b_row_stride;
    if (p + kPrefetchRowsAhead < blk.depth)
      PrefetchRow(src + kPrefetchRowsAhead * out.b_row_stride, blk.cols * 4);
    const int64_t whole = blk.cols / nr;  // slivers without padding
    float* dst = bp + p * nr;
    const int64_t sliver_floats = blk.depth * nr;
    switch (nr) {
      case 32:
        CopyWholeSliverRows<32>(src, whole, sliver_floats, dst);
        break;
      case 16:
        CopyWholeSliverRows<16>(src, whole, sliver_floats, dst);
        break;
      default:
        for (int64_t s = 0; s < whole; ++s)
          std::memcpy(dst + s * sliver_floats, src + s * nr, nr * sizeof(float));
    }
    for (int64_t s = whole; s < slivers; ++s) {
      const int64_t width = blk.cols - s * nr;
      std::memcpy(dst + s * sliver_floats, src + s * nr, width * sizeof(float));
      std::fill(dst + s * sliver_floats + width, dst + s * sliver_floats + nr, 0.0f);
    }
  }
}

// Sliver s whole, column by column: for a transposed B (nn.Linear's weight
// under Gemm transB=1) columns are the contiguous direction, and row by row
// would touch a page per element (4x slower, measured).
void PackColumnMajor(const GemmOutput& out, const BBlock& blk, const float* base, int nr, int64_t s,
                     float* bp) {
  float* sliver = bp + s * blk.depth * nr;
  if (out.b_row_stride == 1) {
    // Columns contiguous: 16x16 register transposes (a scalar store per
    // element made this copy most of a transposed GEMM's copy time).
    const int64_t width = std::min<int64_t>(nr, blk.cols - s * nr);
    TransposeRows(base + s * nr * out.b_col_stride, out.b_col_stride, width, blk.depth, sliver, nr);
    for (int64_t p = 0; p < blk.depth && width < nr; ++p)
      std::fill(sliver + p * nr + width, sliver + (p + 1) * nr, 0.0f);
    return;
  }
  for (int64_t jj = 0; jj < nr; ++jj) {
    const int64_t j = s * nr + jj;
    float* dst = sliver + jj;
    if (j >= blk.cols) {
      for (int64_t p = 0; p < blk.depth; ++p) dst[p * nr] = 0.0f;
      continue;
    }
    const float* col = base + j * out.b_col_stride;
    if (out.b_row_stride == 1 && j + kPrefetchRowsAhead < blk.cols)
      PrefetchRow(col + kPrefetchRowsAhead * out.b_col_stride, blk.depth * 4);
    for (int64_t p = 0; p < blk.depth; ++p) dst[p * nr] = col[p * out.b_row_stride];
  }
}

}  // namespace

int64_t BPackParts(const GemmOutput& out, const BBlock& blk, int nr) {
  return out.b_packed || Transposed(out) ? CeilDiv(blk.cols, nr)
                                         : CeilDiv(blk.depth, kBRowsPerPart);
}

int64_t PackBPart(const GemmOutput& out, const BBlock& blk, int nr, int64_t part, float* bp) {
  if (out.b_packed) {
    const int64_t floats = blk.depth * nr;  // sliver `part`, padding included
    std::memcpy(bp + part * floats, out.b_packed + blk.packed_offset + part * floats,
                floats * sizeof(float));
    const int64_t width = std::min<int64_t>(nr, blk.cols - part * nr);
    return static_cast<int64_t>(sizeof(float)) * blk.depth * width;
  }
  const float* base = out.b + blk.batch * out.b_batch_stride + blk.p0 * out.b_row_stride +
                      blk.j0 * out.b_col_stride;
  if (Transposed(out)) {
    PackColumnMajor(out, blk, base, nr, part, bp);
    const int64_t width = std::min<int64_t>(nr, blk.cols - part * nr);
    return static_cast<int64_t>(sizeof(float)) * blk.depth * width;
  }
  const int64_t first = part * kBRowsPerPart, last = std::min(first + kBRowsPerPart, blk.depth);
  PackRowMajor(out, blk, base, nr, first, last, bp);
  return static_cast<int64_t>(sizeof(float)) * (last - first) * blk.cols;
}

int64_t PackB(const GemmOutput& out, const BBlock& blk, int nr, float* bp) {
  int64_t bytes = 0;
  for (int64_t part = 0; part < BPackParts(out, blk, nr); ++part)
    bytes += PackBPart(out, blk, nr, part, bp);
  return bytes;
}

int64_t PrePackedBlockOffset(const GemmDesc& d, const GemmTiling& t, int64_t j0, int64_t p0) {
  return ((j0 / t.nc) * CeilDiv(d.k, t.kc) + p0 / t.kc) * PanelDepth(t.kc, t.precision) *
         RoundUp(t.nc, t.nr);
}

}  // namespace fusetune::kernels::gemm_internal

namespace fusetune::kernels {

int64_t PrePackedBFloats(const GemmDesc& d, int output, const GemmTiling& t) {
  // Where a block one past the last column block would start (bf16: even).
  const int64_t elements = gemm_internal::PrePackedBlockOffset(
      d, t, gemm_internal::RoundUp(d.outputs[output].n, t.nc), 0);
  return t.precision == Precision::kBf16 ? elements / 2 : elements;
}

void PrePackB(const GemmDesc& d, int output, const GemmTiling& t, float* dst) {
  GemmOutput out = d.outputs[output];
  out.b_packed = nullptr;  // pack from the source
  for (int64_t j0 = 0; j0 < out.n; j0 += t.nc)
    for (int64_t p0 = 0; p0 < d.k; p0 += t.kc) {
      const gemm_internal::BBlock blk{0, p0, std::min(t.kc, d.k - p0), j0,
                                      std::min(t.nc, out.n - j0)};
      const int64_t offset = gemm_internal::PrePackedBlockOffset(d, t, j0, p0);
      if (t.precision == Precision::kF32) {
        gemm_internal::PackB(out, blk, t.nr, dst + offset);
        continue;
      }
      Bf16* panel = reinterpret_cast<Bf16*>(dst) + offset;
      for (int64_t part = 0; part < gemm_internal::BPackParts(out, blk, t.nr); ++part)
        gemm_internal::PackBPartBf16(out, blk, t.nr, part, panel);
    }
}

}  // namespace fusetune::kernels

namespace fusetune::kernels::gemm_internal {

namespace {

// Copies A rows [i0, i0+rows), columns [p0, p0+depth) into stage (rows x
// depth) and applies the elementwise prologue. Returns bytes read.
int64_t Stage(const GemmDesc& d, int64_t batch, int64_t i0, int64_t rows, int64_t p0, int64_t depth,
              RunMode mode, float* stage) {
  const float* base = d.a + batch * d.a_batch_stride + i0 * d.a_row_stride + p0 * d.a_col_stride;
  if (mode != RunMode::kComputeOnly) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = base + r * d.a_row_stride;
      float* dst = stage + r * depth;
      if (d.a_col_stride == 1) {
        if (r + kPrefetchRowsAhead < rows)
          PrefetchRow(src + kPrefetchRowsAhead * d.a_row_stride, depth * 4);
        std::memcpy(dst, src, depth * sizeof(float));
      } else
        for (int64_t p = 0; p < depth; ++p) dst[p] = src[p * d.a_col_stride];
    }
  }
  int64_t bytes = mode == RunMode::kComputeOnly ? 0 : 4 * rows * depth;
  bytes += ApplyEpilogue(d.prologue.elementwise, stage, depth, rows, depth, batch, i0, p0, mode);
  return bytes;
}

void FinishStats(const GemmDesc& d, const double* sum, const double* sumsq, int64_t rows,
                 NormStats stats) {
  for (int64_t r = 0; r < rows; ++r) {
    const double mean = sum[r] / d.k;
    const double var =
        d.prologue.norm == NormKind::kLayerNorm ? sumsq[r] / d.k - mean * mean : sumsq[r] / d.k;
    stats.mean[r] = d.prologue.norm == NormKind::kLayerNorm ? static_cast<float>(mean) : 0.0f;
    stats.rstd[r] = static_cast<float>(1.0 / std::sqrt(std::max(var, 0.0) + d.prologue.epsilon));
  }
}

void Accumulate(const float* stage, int64_t rows, int64_t depth, double* sum, double* sumsq) {
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    const float* x = stage + r * depth;
    for (int64_t p = 0; p < depth; ++p) {
      s += x[p];
      q += static_cast<double>(x[p]) * x[p];
    }
    sum[r] += s;
    sumsq[r] += q;
  }
}

}  // namespace

int64_t ComputeNormStats(const GemmDesc& d, int64_t batch, int64_t i0, int64_t rows, int64_t chunk,
                         RunMode mode, float* stage, NormStats stats) {
  std::vector<double> sum(rows, 0.0), sumsq(rows, 0.0);
  int64_t bytes = 0;
  for (int64_t p0 = 0; p0 < d.k; p0 += chunk) {
    const int64_t depth = std::min(chunk, d.k - p0);
    bytes += Stage(d, batch, i0, rows, p0, depth, mode, stage);
    if (mode != RunMode::kCopyOnly) Accumulate(stage, rows, depth, sum.data(), sumsq.data());
  }
  if (mode != RunMode::kCopyOnly) FinishStats(d, sum.data(), sumsq.data(), rows, stats);
  return bytes;
}

int64_t StageWithPrologue(const GemmDesc& d, const ABlock& blk, RunMode mode, float* stage,
                          NormStats stats, bool stats_ready) {
  int64_t bytes = Stage(d, blk.batch, blk.i0, blk.rows, blk.p0, blk.depth, mode, stage);
  const GemmPrologue& pro = d.prologue;
  if (pro.norm != NormKind::kNone) {
    const int64_t vectors = pro.norm == NormKind::kLayerNorm && pro.beta ? 2 : 1;
    if (mode != RunMode::kComputeOnly) bytes += 4 * vectors * blk.depth;  // gamma (and beta)
    if (mode != RunMode::kCopyOnly) {
      if (!stats_ready) {  // the block holds whole rows
        std::vector<double> sum(blk.rows, 0.0), sumsq(blk.rows, 0.0);
        Accumulate(stage, blk.rows, blk.depth, sum.data(), sumsq.data());
        FinishStats(d, sum.data(), sumsq.data(), blk.rows, stats);
      }
      const float* gamma = pro.gamma + blk.p0;
      const float* beta = pro.beta ? pro.beta + blk.p0 : nullptr;
      for (int64_t r = 0; r < blk.rows; ++r) {
        float* x = stage + r * blk.depth;
        const float mean = stats.mean[r], rstd = stats.rstd[r];
        if (beta)
          for (int64_t p = 0; p < blk.depth; ++p) x[p] = (x[p] - mean) * rstd * gamma[p] + beta[p];
        else
          for (int64_t p = 0; p < blk.depth; ++p) x[p] = (x[p] - mean) * rstd * gamma[p];
      }
    }
  }
  return bytes;
}

int64_t PackAWithPrologue(const GemmDesc& d, const ABlock& blk, int mr, RunMode mode, float* stage,
                          NormStats stats, bool stats_ready, float* ap) {
  const int64_t bytes = StageWithPrologue(d, blk, mode, stage, stats, stats_ready);
  // Move the staged rows to the panel, zero-padding to whole micro-tiles
  // (local to local: not traffic).
  std::memcpy(ap, stage, sizeof(float) * blk.rows * blk.depth);
  std::fill(ap + blk.rows * blk.depth, ap + RoundUp(blk.rows, mr) * blk.depth, 0.0f);
  return bytes;
}

}  // namespace fusetune::kernels::gemm_internal
