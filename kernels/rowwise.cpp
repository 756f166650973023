#include "kernels/rowwise.h"

#include "kernels/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace fusetune::kernels {

std::string RowwiseTiling::ToString() const {
  return fmt::format("rows={} unroll={} prefetch={}", rows_per_tile, unroll, prefetch);
}

namespace {

// With a single row (a decode step's [1, 1, d]) every operand's row
// strides are 0, yet the row operands are rows to reduce, not vectors
// shared by rows: they count as wide.
ValueShape OperandShape(const RowOperand& op, bool one_row) {
  if (op.col_stride == 0) return ValueShape::kNarrow;
  const bool shared =
      std::all_of(op.row_strides.begin(), op.row_strides.end(), [](int64_t s) { return s == 0; });
  return shared && !one_row ? ValueShape::kVector : ValueShape::kWide;
}

std::vector<ValueShape> InputShapes(const RowwiseDesc& d) {
  int64_t rows = 1;
  for (int64_t r : d.row_dims) rows *= r;
  std::vector<ValueShape> shapes;
  for (const RowOperand& op : d.inputs) shapes.push_back(OperandShape(op, rows == 1));
  return shapes;
}

int64_t TotalRows(const RowwiseDesc& d) {
  int64_t n = 1;
  for (int64_t r : d.row_dims) n *= r;
  return n;
}

// Element offset of flat row `row` through per-dimension strides.
int64_t RowOffset(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                  int64_t row) {
  int64_t offset = 0;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    offset += (row % dims[i]) * strides[i];
    row /= dims[i];
  }
  return offset;
}

}  // namespace

namespace {
// The frame plus alignment padding of each slot.
int64_t FrameBytes(const TileSchedule& schedule, int64_t rows, int64_t cols) {
  return static_cast<int64_t>(sizeof(float)) * schedule.FrameFloats(rows, cols) +
         64 * schedule.num_slots();
}
}  // namespace

int64_t RowwiseLocalBytes(const RowwiseDesc& d, const RowwiseTiling& t) {
  auto schedule = TileSchedule::Make(d.program, InputShapes(d), "rowwise.program");
  return schedule.ok() ? FrameBytes(*schedule, t.rows_per_tile, d.cols) : 0;
}

Status ValidateRowwise(const RowwiseDesc& d, const RowwiseTiling& t, const KernelConfig& config) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (d.cols < 1) return bad(fmt::format("rowwise: descriptor.cols {} must be positive", d.cols));
  for (size_t i = 0; i < d.row_dims.size(); ++i)
    if (d.row_dims[i] < 1)
      return bad(
          fmt::format("rowwise: descriptor.row_dims[{}] {} must be positive", i, d.row_dims[i]));
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    if (!d.inputs[i].data) return bad(fmt::format("rowwise: descriptor.inputs[{}] has no data", i));
    if (d.inputs[i].row_strides.size() != d.row_dims.size())
      return bad(fmt::format("rowwise: descriptor.inputs[{}] has {} row strides for {} row dims", i,
                             d.inputs[i].row_strides.size(), d.row_dims.size()));
  }
  if (d.outputs.size() != d.program.outputs().size())
    return bad(fmt::format("rowwise: descriptor.outputs has {} entries, the program {} outputs",
                           d.outputs.size(), d.program.outputs().size()));
  auto schedule = TileSchedule::Make(d.program, InputShapes(d), "rowwise.program");
  if (!schedule.ok()) return schedule.error();
  for (size_t i = 0; i < d.outputs.size(); ++i) {
    if (!d.outputs[i].data || d.outputs[i].row_strides.size() != d.row_dims.size())
      return bad(fmt::format("rowwise: descriptor.outputs[{}] needs data and {} row strides", i,
                             d.row_dims.size()));
    if (schedule->shape(d.program.outputs()[i]) == ValueShape::kVector)
      return bad(fmt::format("rowwise: program output {} does not depend on the row", i));
  }
  if (t.rows_per_tile < 1)
    return bad(fmt::format("tiling.rows_per_tile: {} must be positive", t.rows_per_tile));
  if (t.unroll != 1 && t.unroll != 2 && t.unroll != 4)
    return bad(fmt::format("tiling.unroll: {} must be 1, 2 or 4", t.unroll));
  if (t.prefetch < 0) return bad(fmt::format("tiling.prefetch: {} must be >= 0", t.prefetch));
  if (config.threads < 1)
    return bad(fmt::format("config.threads: {} must be positive", config.threads));
  const int64_t need = FrameBytes(*schedule, t.rows_per_tile, d.cols);
  if (need > static_cast<int64_t>(config.local_buffer_bytes))
    return bad(
        fmt::format("tiling.rows_per_tile: {} rows need {} bytes of local buffer, capacity "
                    "is {}",
                    t.rows_per_tile, need, config.local_buffer_bytes));
  return Status::Ok();
}

namespace {

// Copies one operand's rows [row0, row0 + rows) into `dst`; returns bytes read.
int64_t LoadOperand(const RowwiseDesc& d, const RowOperand& op, ValueShape shape, int64_t row0,
                    int64_t rows, float* dst) {
  const int64_t cols = d.cols;
  if (shape == ValueShape::kVector) rows = 1;
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = op.data + RowOffset(d.row_dims, op.row_strides, row0 + r);
    if (shape == ValueShape::kNarrow) {
      dst[r] = *src;
    } else if (op.col_stride == 1) {
      std::memcpy(dst + r * cols, src, cols * sizeof(float));
    } else {
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[c * op.col_stride];
    }
  }
  return static_cast<int64_t>(sizeof(float)) * rows * (shape == ValueShape::kNarrow ? 1 : cols);
}

int64_t StoreResult(const RowwiseDesc& d, const RowResult& out, ValueShape shape, int64_t row0,
                    int64_t rows, const float* src) {
  const int64_t cols = d.cols;
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = out.data + RowOffset(d.row_dims, out.row_strides, row0 + r);
    if (shape == ValueShape::kNarrow) {
      *dst = src[r];
    } else if (out.col_stride == 1) {
      StreamOut(dst, src + r * cols, cols);
    } else {
      for (int64_t c = 0; c < cols; ++c) dst[c * out.col_stride] = src[r * cols + c];
    }
  }
  return static_cast<int64_t>(sizeof(float)) * rows * (shape == ValueShape::kNarrow ? 1 : cols);
}

void PrefetchRows(const RowwiseDesc& d, const std::vector<ValueShape>& shapes, int64_t row0,
                  int64_t rows) {
  for (size_t i = 0; i < d.inputs.size(); ++i) {
    const RowOperand& op = d.inputs[i];
    if (shapes[i] != ValueShape::kWide || op.col_stride != 1) continue;
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = op.data + RowOffset(d.row_dims, op.row_strides, row0 + r);
      for (int64_t c = 0; c < d.cols; c += 16) __builtin_prefetch(src + c);
    }
  }
}

KernelStats RunRowsOnThread(const RowwiseDesc& d, const RowwiseTiling& t,
                            const TileSchedule& schedule, RunMode mode, int64_t tile_begin,
                            int64_t tile_end) {
  KernelStats stats;
  if (tile_begin >= tile_end) return stats;
  const int64_t total_rows = TotalRows(d);
  const std::vector<ValueShape> shapes = InputShapes(d);
  LocalBuffer local(static_cast<size_t>(FrameBytes(schedule, t.rows_per_tile, d.cols)));
  const int64_t frame_floats = schedule.FrameFloats(t.rows_per_tile, d.cols);
  float* frame = local.Take(frame_floats);
  // Compute-only runs never load; ordinary values keep transcendentals representative.
  if (mode == RunMode::kComputeOnly) std::fill(frame, frame + frame_floats, 0.5f);
  const auto& instrs = schedule.program().instrs();
  for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
    const int64_t row0 = tile * t.rows_per_tile;
    const int64_t rows = std::min(t.rows_per_tile, total_rows - row0);
    // Binding per tile: a short last tile packs its values densely.
    const TileSchedule::Frame f = schedule.Bind(frame, rows, d.cols);
    if (t.prefetch > 0 && tile + t.prefetch < tile_end && mode != RunMode::kComputeOnly) {
      const int64_t ahead = (tile + t.prefetch) * t.rows_per_tile;
      PrefetchRows(d, shapes, ahead, std::min(t.rows_per_tile, total_rows - ahead));
    }
    if (mode != RunMode::kComputeOnly)
      for (size_t v = 0; v < instrs.size(); ++v)
        if (instrs[v].op == TileOp::kInput)
          stats.bytes_global_to_local += LoadOperand(
              d, d.inputs[instrs[v].input], shapes[instrs[v].input], row0, rows, f.value[v]);
    if (mode != RunMode::kCopyOnly) schedule.Compute(f, rows, d.cols, t.unroll);
    if (mode != RunMode::kComputeOnly)
      for (size_t o = 0; o < d.outputs.size(); ++o) {
        const int v = schedule.program().outputs()[o];
        stats.bytes_local_to_global +=
            StoreResult(d, d.outputs[o], schedule.shape(v), row0, rows, f.value[v]);
      }
    ++stats.tiles;
  }
  StreamFence();
  return stats;
}

}  // namespace

Result<KernelStats> RunRowwise(const RowwiseDesc& d, const RowwiseTiling& t,
                               const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateRowwise(d, t, config));
  FT_ASSIGN_OR_RETURN(TileSchedule schedule,
                      TileSchedule::Make(d.program, InputShapes(d), "rowwise.program"));
  const int64_t tiles = (TotalRows(d) + t.rows_per_tile - 1) / t.rows_per_tile;
  return RunThreadShares(config.threads, [&](int th) {
    return RunRowsOnThread(d, t, schedule, mode, tiles * th / config.threads,
                           tiles * (th + 1) / config.threads);
  });
}

}  // namespace fusetune::kernels

namespace fusetune::kernels {

TilingEstimate EstimateRowwise(const RowwiseDesc& d, const RowwiseTiling& t, int threads) {
  TilingEstimate e;
  e.local_bytes = RowwiseLocalBytes(d, t);
  auto schedule = TileSchedule::Make(d.program, InputShapes(d), "rowwise.program");
  if (!schedule.ok() || t.rows_per_tile < 1 || threads < 1) return e;
  const std::vector<ValueShape> shapes = InputShapes(d);
  const int64_t total_rows = TotalRows(d);
  e.tiles = (total_rows + t.rows_per_tile - 1) / t.rows_per_tile;
  // Per tile: wide operands rows x cols, vector ones one row, narrow ones a value per row.
  double wide_in = 0, vector_in = 0, narrow_in = 0, wide_out = 0, narrow_out = 0;
  for (const TileInstr& instr : d.program.instrs()) {
    if (instr.op != TileOp::kInput) continue;
    const ValueShape s = shapes[instr.input];
    (s == ValueShape::kWide ? wide_in : s == ValueShape::kVector ? vector_in : narrow_in) += 1;
  }
  for (int v : d.program.outputs())
    (schedule->shape(v) == ValueShape::kNarrow ? narrow_out : wide_out) += 1;
  e.bytes_in =
      4.0 * (total_rows * d.cols * wide_in + e.tiles * d.cols * vector_in + total_rows * narrow_in);
  e.bytes_out = 4.0 * (total_rows * d.cols * wide_out + total_rows * narrow_out);
  SetEvenSplit(&e, e.tiles, threads);
  e.lane_utilisation = static_cast<double>(d.cols) / static_cast<double>((d.cols + 15) / 16 * 16);
  return e;
}

void SetEvenSplit(TilingEstimate* e, int64_t tiles, int threads) {
  e->tiles = tiles;
  e->max_thread_tiles = 0;
  for (int th = 0; th < threads; ++th)
    e->max_thread_tiles =
        std::max(e->max_thread_tiles, tiles * (th + 1) / threads - tiles * th / threads);
  e->max_thread_work = tiles > 0 ? static_cast<double>(e->max_thread_tiles) / tiles : 1;
  e->steps = e->max_thread_tiles;
}

}  // namespace fusetune::kernels
