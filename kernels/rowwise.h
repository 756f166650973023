// Row-reduction fusion: a tile program (elementwise ops and last-axis
// reductions: softmax, LayerNorm, RMSNorm, residual add + LayerNorm and their
// decomposed ONNX forms) over every row of a tensor.
//
// Per tile of `rows_per_tile` rows a thread copies its operands' rows into the
// local buffer, evaluates the program there and copies the outputs back. Rows
// are indexed by several dimensions (batch, head, query, ...) so that an
// operand broadcast over some of them, such as an attention mask [1, 1, S, S]
// added to scores [B, H, S, S], is read through strides without a copy.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "kernels/tile_program.h"
#include "kernels/traffic.h"

namespace fusetune::kernels {

// An operand: element (row index r_0..r_{d-1}, column c) at
// data[sum r_i * row_strides[i] + c * col_stride]. col_stride 0 makes it one
// value per row; all row strides 0 makes it one row shared by all rows.
struct RowOperand {
  const float* data = nullptr;
  std::vector<int64_t> row_strides;
  int64_t col_stride = 1;
};

// An output: a wide result is written as rows x cols, a narrow one (a per-row
// statistic) as one value per row, each through its strides.
struct RowResult {
  float* data = nullptr;
  std::vector<int64_t> row_strides;
  int64_t col_stride = 1;
};

struct RowwiseDesc {
  std::vector<int64_t> row_dims;  // the iteration space of rows
  int64_t cols = 0;               // the reduced (last) axis
  std::vector<RowOperand> inputs;
  std::vector<RowResult> outputs;  // one per program output
  TileProgram program;
};

struct RowwiseTiling {
  int64_t rows_per_tile = 4;
  int unroll = 2;    // independent 16-lane accumulators per reduction: 1, 2 or 4
  int prefetch = 1;  // software prefetch of operand rows this many tiles ahead (0: none)
  std::string ToString() const;
  bool operator==(const RowwiseTiling&) const = default;
};

int64_t RowwiseLocalBytes(const RowwiseDesc& desc, const RowwiseTiling& tiling);
Status ValidateRowwise(const RowwiseDesc& desc, const RowwiseTiling& tiling,
                       const KernelConfig& config);
Result<KernelStats> RunRowwise(const RowwiseDesc& desc, const RowwiseTiling& tiling,
                               const KernelConfig& config, RunMode mode = RunMode::kFull);

}  // namespace fusetune::kernels
