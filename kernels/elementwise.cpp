#include "kernels/elementwise.h"

#include "kernels/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace fusetune::kernels {

std::string ElementwiseTiling::ToString() const { return fmt::format("tile={}", tile); }

namespace {

int64_t Volume(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Every operand is gathered into a full-length tile, so all values are wide
// except constants.
std::vector<ValueShape> InputShapes(const ElementwiseDesc& d) {
  return std::vector<ValueShape>(d.inputs.size(), ValueShape::kWide);
}

// Gathers elements [begin, begin + count) of the iteration space into dst,
// one run along the innermost dimension at a time; returns bytes read (a
// broadcast run reads one element).
int64_t Gather(const std::vector<int64_t>& dims, const StridedOperand& op, int64_t begin,
               int64_t count, float* dst) {
  const int nd = static_cast<int>(dims.size());
  std::vector<int64_t> index(nd);
  int64_t rest = begin, offset = 0;
  for (int i = nd - 1; i >= 0; --i) {
    index[i] = rest % dims[i];
    rest /= dims[i];
    offset += index[i] * op.strides[i];
  }
  const int64_t inner = dims[nd - 1], stride = op.strides[nd - 1];
  int64_t bytes = 0;
  while (count > 0) {
    const int64_t run = std::min(count, inner - index[nd - 1]);
    const float* src = op.data + offset;
    if (stride == 1) {
      std::memcpy(dst, src, run * sizeof(float));
      bytes += run * static_cast<int64_t>(sizeof(float));
    } else if (stride == 0) {
      std::fill(dst, dst + run, *src);
      bytes += sizeof(float);
    } else {
      for (int64_t j = 0; j < run; ++j) dst[j] = src[j * stride];
      bytes += run * static_cast<int64_t>(sizeof(float));
    }
    dst += run;
    count -= run;
    // Advance the index to the start of the next run.
    offset += (run - 1) * stride;
    index[nd - 1] += run - 1;
    for (int i = nd - 1; i >= 0; --i) {
      if (++index[i] < dims[i]) {
        offset += op.strides[i];
        break;
      }
      offset -= (dims[i] - 1) * op.strides[i];
      index[i] = 0;
    }
  }
  return bytes;
}

}  // namespace

namespace {
// The frame plus alignment padding of each slot.
int64_t FrameBytes(const TileSchedule& schedule, int64_t tile) {
  return static_cast<int64_t>(sizeof(float)) * schedule.FrameFloats(1, tile) +
         64 * schedule.num_slots();
}
}  // namespace

int64_t ElementwiseLocalBytes(const ElementwiseDesc& d, const ElementwiseTiling& t) {
  auto schedule = TileSchedule::Make(d.program, InputShapes(d), "elementwise.program");
  return schedule.ok() ? FrameBytes(*schedule, t.tile) : 0;
}

Status ValidateElementwise(const ElementwiseDesc& d, const ElementwiseTiling& t,
                           const KernelConfig& config) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (d.dims.empty()) return bad("elementwise: descriptor.dims is empty (use [1] for a scalar)");
  for (size_t i = 0; i < d.dims.size(); ++i)
    if (d.dims[i] < 1)
      return bad(fmt::format("elementwise: descriptor.dims[{}] {} must be positive", i, d.dims[i]));
  for (size_t i = 0; i < d.inputs.size(); ++i)
    if (!d.inputs[i].data || d.inputs[i].strides.size() != d.dims.size())
      return bad(fmt::format("elementwise: descriptor.inputs[{}] needs data and {} strides", i,
                             d.dims.size()));
  if (d.program.has_reductions())
    return bad("elementwise: the program has a reduction; use the row-reduction template");
  if (d.outputs.size() != d.program.outputs().size())
    return bad(fmt::format("elementwise: descriptor.outputs has {} entries, the program {} outputs",
                           d.outputs.size(), d.program.outputs().size()));
  for (size_t i = 0; i < d.outputs.size(); ++i)
    if (!d.outputs[i]) return bad(fmt::format("elementwise: descriptor.outputs[{}] is null", i));
  auto schedule = TileSchedule::Make(d.program, InputShapes(d), "elementwise.program");
  if (!schedule.ok()) return schedule.error();
  if (t.tile < 1) return bad(fmt::format("tiling.tile: {} must be positive", t.tile));
  if (config.threads < 1)
    return bad(fmt::format("config.threads: {} must be positive", config.threads));
  const int64_t need = FrameBytes(*schedule, t.tile);
  if (need > static_cast<int64_t>(config.local_buffer_bytes))
    return bad(fmt::format("tiling.tile: {} elements need {} bytes of local buffer, capacity is {}",
                           t.tile, need, config.local_buffer_bytes));
  return Status::Ok();
}

Result<KernelStats> RunElementwise(const ElementwiseDesc& d, const ElementwiseTiling& t,
                                   const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateElementwise(d, t, config));
  FT_ASSIGN_OR_RETURN(TileSchedule schedule,
                      TileSchedule::Make(d.program, InputShapes(d), "elementwise.program"));
  const int64_t total = Volume(d.dims), tiles = (total + t.tile - 1) / t.tile;
  const auto& instrs = d.program.instrs();
  return RunThreadShares(config.threads, [&](int th) {
    KernelStats stats;
    const int64_t first = tiles * th / config.threads, last = tiles * (th + 1) / config.threads;
    if (first >= last) return stats;
    LocalBuffer local(static_cast<size_t>(FrameBytes(schedule, t.tile)));
    const int64_t frame_floats = schedule.FrameFloats(1, t.tile);
    float* frame = local.Take(frame_floats);
    if (mode == RunMode::kComputeOnly) std::fill(frame, frame + frame_floats, 0.5f);
    const TileSchedule::Frame f = schedule.Bind(frame, 1, t.tile);
    for (int64_t tile = first; tile < last; ++tile) {
      const int64_t begin = tile * t.tile, count = std::min(t.tile, total - begin);
      if (mode != RunMode::kComputeOnly)
        for (size_t v = 0; v < instrs.size(); ++v)
          if (instrs[v].op == TileOp::kInput)
            stats.bytes_global_to_local +=
                Gather(d.dims, d.inputs[instrs[v].input], begin, count, f.value[v]);
      if (mode != RunMode::kCopyOnly) schedule.Compute(f, 1, count, 1);
      if (mode != RunMode::kComputeOnly)
        for (size_t o = 0; o < d.outputs.size(); ++o) {
          const int v = d.program.outputs()[o];
          if (schedule.shape(v) == ValueShape::kNarrow)  // a constant output
            std::fill(d.outputs[o] + begin, d.outputs[o] + begin + count, f.value[v][0]);
          else
            StreamOut(d.outputs[o] + begin, f.value[v], count);
          stats.bytes_local_to_global += count * static_cast<int64_t>(sizeof(float));
        }
      ++stats.tiles;
    }
    StreamFence();
    return stats;
  });
}

}  // namespace fusetune::kernels

namespace fusetune::kernels {

TilingEstimate EstimateElementwise(const ElementwiseDesc& d, const ElementwiseTiling& t,
                                   int threads) {
  TilingEstimate e;
  e.local_bytes = ElementwiseLocalBytes(d, t);
  if (d.dims.empty() || t.tile < 1 || threads < 1) return e;
  const int64_t total = Volume(d.dims), inner = d.dims.back();
  e.tiles = (total + t.tile - 1) / t.tile;
  // A gather copies run by run along the innermost dimension; a run of a
  // broadcast (stride 0) operand is one element. Runs: one per row of the
  // innermost dimension, plus one more wherever a tile boundary cuts a row.
  const double runs = static_cast<double>(total) / inner + static_cast<double>(e.tiles);
  for (const TileInstr& instr : d.program.instrs()) {
    if (instr.op != TileOp::kInput) continue;
    const StridedOperand& op = d.inputs[instr.input];
    e.bytes_in += op.strides.back() == 0 ? 4.0 * std::min<double>(runs, total) : 4.0 * total;
  }
  e.bytes_out = 4.0 * total * static_cast<double>(d.outputs.size());
  SetEvenSplit(&e, e.tiles, threads);
  e.lane_utilisation = static_cast<double>(t.tile) / static_cast<double>((t.tile + 15) / 16 * 16);
  return e;
}

}  // namespace fusetune::kernels
