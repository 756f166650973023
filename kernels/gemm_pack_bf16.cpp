// The bf16 panels of the GEMM template (gemm_pack.h): A rows converted as
// they are copied, B packed in k-pairs (microkernel_bf16.h), and B
// pre-packed in bf16 once for constant weights.
#include "kernels/gemm_pack.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace fusetune::kernels::gemm_internal {

namespace {

constexpr int64_t kPrefetchRowsAhead = 8;  // as gemm_pack.cpp, for the same reason
constexpr int64_t kBRowsPerPart = 16;      // even: a part never splits a k-pair

void PrefetchRow(const float* row, int64_t bytes) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

// One row of A (depth elements through `col_stride`) to a bf16 panel row of
// PairPadded(depth), the pad zero.
void RowToBf16(const float* src, int64_t col_stride, int64_t depth, Bf16* dst) {
  if (col_stride == 1) {
    ConvertToBf16(src, depth, dst);
  } else {
    thread_local std::vector<float> gathered;
    gathered.resize(depth);
    for (int64_t p = 0; p < depth; ++p) gathered[p] = src[p * col_stride];
    ConvertToBf16(gathered.data(), depth, dst);
  }
  if (depth % 2) dst[depth] = 0;
}

bool Transposed(const GemmOutput& out) { return out.b_col_stride != 1; }

// Rows [first, last) of a row-major B block, a pair of rows at a time, into
// every sliver's k-pairs.
void PackRowMajorBf16(const GemmOutput& out, const BBlock& blk, const float* base, int nr,
                      int64_t first, int64_t last, Bf16* bp) {
  const int64_t slivers = CeilDiv(blk.cols, nr), sliver_halves = PairPadded(blk.depth) * nr;
  for (int64_t p = first; p < last; p += 2) {
    const float* r0 = base + p * out.b_row_stride;
    const float* r1 = p + 1 < blk.depth ? r0 + out.b_row_stride : nullptr;
    if (p + kPrefetchRowsAhead < blk.depth)
      PrefetchRow(r0 + kPrefetchRowsAhead * out.b_row_stride, 2 * blk.cols * 4);
    for (int64_t s = 0; s < slivers; ++s) {
      const int64_t width = std::min<int64_t>(nr, blk.cols - s * nr);
      Bf16* dst = bp + s * sliver_halves + p / 2 * nr * 2;
      InterleaveToBf16Pairs(r0 + s * nr, r1 ? r1 + s * nr : nullptr, width, dst);
      std::fill(dst + 2 * width, dst + 2 * nr, Bf16{0});
    }
  }
}

// Sliver s of a B read column by column (transposed or strided): each
// column's k-pairs gathered, then stored at the sliver's pair stride.
void PackColumnsBf16(const GemmOutput& out, const BBlock& blk, const float* base, int nr,
                     int64_t s, Bf16* bp) {
  const int64_t depth2 = PairPadded(blk.depth);
  Bf16* sliver = bp + s * depth2 * nr;
  thread_local std::vector<float> column;
  thread_local std::vector<Bf16> halves;
  column.assign(depth2, 0.0f);
  halves.resize(depth2);
  for (int64_t jj = 0; jj < nr; ++jj) {
    const int64_t j = s * nr + jj;
    if (j >= blk.cols) {
      for (int64_t q = 0; q < depth2 / 2; ++q) std::memset(sliver + (q * nr + jj) * 2, 0, 4);
      continue;
    }
    const float* col = base + j * out.b_col_stride;
    for (int64_t p = 0; p < blk.depth; ++p) column[p] = col[p * out.b_row_stride];
    ConvertToBf16(column.data(), depth2, halves.data());
    for (int64_t q = 0; q < depth2 / 2; ++q)
      std::memcpy(sliver + (q * nr + jj) * 2, halves.data() + 2 * q, 4);
  }
}

}  // namespace

int64_t PackASliverBf16(const GemmDesc& d, const ABlock& blk, int mr, int64_t s, Bf16* ap) {
  const int64_t depth2 = PairPadded(blk.depth);
  const float* base =
      d.a + blk.batch * d.a_batch_stride + blk.i0 * d.a_row_stride + blk.p0 * d.a_col_stride;
  int64_t copied_rows = 0;
  for (int i = 0; i < mr; ++i) {
    const int64_t row = s * mr + i;
    Bf16* dst = ap + row * depth2;
    if (row >= blk.rows) {
      std::fill(dst, dst + depth2, Bf16{0});
      continue;
    }
    const float* src = base + row * d.a_row_stride;
    if (d.a_col_stride == 1 && row + kPrefetchRowsAhead < blk.rows)
      PrefetchRow(src + kPrefetchRowsAhead * d.a_row_stride, blk.depth * 4);
    RowToBf16(src, d.a_col_stride, blk.depth, dst);
    ++copied_rows;
  }
  return static_cast<int64_t>(sizeof(float)) * copied_rows * blk.depth;
}

void StagedRowsToBf16(const float* stage, int64_t rows, int64_t depth, int mr, Bf16* ap) {
  const int64_t depth2 = PairPadded(depth);
  for (int64_t r = 0; r < rows; ++r) RowToBf16(stage + r * depth, 1, depth, ap + r * depth2);
  std::fill(ap + rows * depth2, ap + RoundUp(rows, mr) * depth2, Bf16{0});
}

int64_t PackBPartBf16(const GemmOutput& out, const BBlock& blk, int nr, int64_t part, Bf16* bp) {
  const int64_t width = std::min<int64_t>(nr, blk.cols - part * nr);
  if (out.b_packed) {
    const int64_t halves = PairPadded(blk.depth) * nr;  // sliver `part`, padding included
    const Bf16* packed = reinterpret_cast<const Bf16*>(out.b_packed) + blk.packed_offset;
    std::memcpy(bp + part * halves, packed + part * halves, halves * sizeof(Bf16));
    return static_cast<int64_t>(sizeof(Bf16)) * blk.depth * width;
  }
  const float* base = out.b + blk.batch * out.b_batch_stride + blk.p0 * out.b_row_stride +
                      blk.j0 * out.b_col_stride;
  if (Transposed(out)) {
    PackColumnsBf16(out, blk, base, nr, part, bp);
    return static_cast<int64_t>(sizeof(float)) * blk.depth * width;
  }
  const int64_t first = part * kBRowsPerPart, last = std::min(first + kBRowsPerPart, blk.depth);
  PackRowMajorBf16(out, blk, base, nr, first, last, bp);
  return static_cast<int64_t>(sizeof(float)) * (last - first) * blk.cols;
}

}  // namespace fusetune::kernels::gemm_internal
