#include "kernels/elementwise.h"

#include "kernels/estimate.h"

#include <fmt/format.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

namespace fusetune::kernels {

std::string ElementwiseTiling::ToString() const { return fmt::format("tile={}", tile); }

std::vector<const ElementwiseDesc*> ElementwisePieces(const ElementwiseDesc& d) {
  std::vector<const ElementwiseDesc*> all = {&d};
  for (const ElementwiseDesc& p : d.pieces) all.push_back(&p);
  return all;
}

namespace {

int64_t Volume(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> RowMajor(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// Every operand is gathered into a full-length tile, so all values are wide
// except constants.
std::vector<ValueShape> InputShapes(const ElementwiseDesc& d) {
  return std::vector<ValueShape>(d.inputs.size(), ValueShape::kWide);
}

// Walks elements [begin, begin + count) of the iteration space `dims` in
// runs along the innermost dimension: fn(offset, run, position) for each,
// where `offset` is the run's first element through `strides` and
// `position` its place among the walked elements.
template <typename Fn>
void ForEachRun(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                int64_t begin, int64_t count, Fn&& fn) {
  const int nd = static_cast<int>(dims.size());
  std::vector<int64_t> index(nd);
  int64_t rest = begin, offset = 0, position = 0;
  for (int i = nd - 1; i >= 0; --i) {
    index[i] = rest % dims[i];
    rest /= dims[i];
    offset += index[i] * strides[i];
  }
  const int64_t inner = dims[nd - 1], stride = strides[nd - 1];
  while (count > 0) {
    const int64_t run = std::min(count, inner - index[nd - 1]);
    fn(offset, run, position);
    position += run;
    count -= run;
    // Advance the index to the start of the next run.
    offset += (run - 1) * stride;
    index[nd - 1] += run - 1;
    for (int i = nd - 1; i >= 0; --i) {
      if (++index[i] < dims[i]) {
        offset += strides[i];
        break;
      }
      offset -= (dims[i] - 1) * strides[i];
      index[i] = 0;
    }
  }
}

inline void PrefetchLine(const float* p) {
#if defined(__AVX512F__)
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
#else
  (void)p;
#endif
}

// Gathers elements [begin, begin + count) of an operand into dst; returns
// bytes read (a broadcast run reads one element).
int64_t Gather(const std::vector<int64_t>& dims, const StridedOperand& op, int64_t begin,
               int64_t count, float* dst) {
  const int64_t stride = op.strides.back();
  int64_t bytes = 0;
  ForEachRun(dims, op.strides, begin, count, [&](int64_t offset, int64_t run, int64_t at) {
    const float* src = op.data + offset;
    float* out = dst + at;
    if (stride == 1) {
      // The next tile's elements of this run lie `count` further on when
      // the run continues: fetched now, they arrive while this tile
      // computes (hardware prefetchers stop at page boundaries).
      for (int64_t line = 0; line < run; line += 16) PrefetchLine(src + count + line);
      std::memcpy(out, src, run * sizeof(float));
      bytes += run * static_cast<int64_t>(sizeof(float));
    } else if (stride == 0) {
      std::fill(out, out + run, *src);
      bytes += sizeof(float);
    } else {
      for (int64_t j = 0; j < run; ++j) out[j] = src[j * stride];
      bytes += run * static_cast<int64_t>(sizeof(float));
    }
  });
  return bytes;
}

// Writes elements [begin, begin + count) of an output from src through the
// output's strides (`strides` empty: contiguous); `broadcast`: every element
// is src[0] (a constant output).
void Scatter(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, float* data,
             int64_t begin, int64_t count, const float* src, bool broadcast) {
  if (strides.empty() && !broadcast) return StreamOut(data + begin, src, count);
  const std::vector<int64_t> contiguous = strides.empty() ? RowMajor(dims) : strides;
  const int64_t stride = contiguous.back();
  ForEachRun(dims, contiguous, begin, count, [&](int64_t offset, int64_t run, int64_t at) {
    if (broadcast) {
      for (int64_t j = 0; j < run; ++j) data[offset + j * stride] = src[0];
    } else if (stride == 1) {
      StreamOut(data + offset, src + at, run);
    } else {
      for (int64_t j = 0; j < run; ++j) data[offset + j * stride] = src[at + j];
    }
  });
}

}  // namespace

namespace {

// The frame plus alignment padding of each slot.
int64_t FrameBytes(const TileSchedule& schedule, int64_t tile) {
  return static_cast<int64_t>(sizeof(float)) * schedule.FrameFloats(1, tile) +
         64 * schedule.num_slots();
}

std::string PieceName(size_t i) { return i == 0 ? "descriptor" : fmt::format("pieces[{}]", i - 1); }

Status ValidatePiece(const ElementwiseDesc& d, const std::string& where) {
  auto bad = [&](const std::string& msg) {
    return Status(Error(ErrorCode::kInvalidArgument, "elementwise: " + where + msg));
  };
  if (d.dims.empty()) return bad(".dims is empty (use [1] for a scalar)");
  for (size_t i = 0; i < d.dims.size(); ++i)
    if (d.dims[i] < 1) return bad(fmt::format(".dims[{}] {} must be positive", i, d.dims[i]));
  for (size_t i = 0; i < d.inputs.size(); ++i)
    if (!d.inputs[i].data || d.inputs[i].strides.size() != d.dims.size())
      return bad(fmt::format(".inputs[{}] needs data and {} strides", i, d.dims.size()));
  if (d.program.has_reductions())
    return bad(".program has a reduction; use the row-reduction template");
  if (d.outputs.size() != d.program.outputs().size())
    return bad(fmt::format(".outputs has {} entries, the program {} outputs", d.outputs.size(),
                           d.program.outputs().size()));
  for (size_t i = 0; i < d.outputs.size(); ++i)
    if (!d.outputs[i]) return bad(fmt::format(".outputs[{}] is null", i));
  if (!d.output_strides.empty()) {
    if (d.output_strides.size() != d.outputs.size())
      return bad(fmt::format(".output_strides has {} entries for {} outputs",
                             d.output_strides.size(), d.outputs.size()));
    for (size_t i = 0; i < d.output_strides.size(); ++i)
      if (d.output_strides[i].size() != d.dims.size())
        return bad(fmt::format(".output_strides[{}] needs {} strides", i, d.dims.size()));
  }
  return Status::Ok();
}

// Checks every piece and prepares its program's schedule.
Result<std::vector<TileSchedule>> MakeSchedules(const ElementwiseDesc& d) {
  const std::vector<const ElementwiseDesc*> pieces = ElementwisePieces(d);
  std::vector<TileSchedule> schedules;
  for (size_t i = 0; i < pieces.size(); ++i) {
    FT_RETURN_IF_ERROR(ValidatePiece(*pieces[i], PieceName(i)));
    if (i > 0 && !pieces[i]->pieces.empty())
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("elementwise: {} has pieces of its own", PieceName(i)));
    FT_ASSIGN_OR_RETURN(
        TileSchedule s,
        TileSchedule::Make(pieces[i]->program, InputShapes(*pieces[i]), "elementwise.program"));
    schedules.push_back(std::move(s));
  }
  return schedules;
}

// The largest frame of any piece: the local buffer a thread needs.
int64_t LocalBytes(const std::vector<TileSchedule>& schedules, int64_t tile) {
  int64_t most = 0;
  for (const TileSchedule& s : schedules) most = std::max(most, FrameBytes(s, tile));
  return most;
}

// Validation that hands the schedules on, so that a launch makes them once.
Result<std::vector<TileSchedule>> Validate(const ElementwiseDesc& d, const ElementwiseTiling& t,
                                           const KernelConfig& config) {
  auto bad = [](const std::string& msg) { return Error(ErrorCode::kInvalidArgument, msg); };
  FT_ASSIGN_OR_RETURN(std::vector<TileSchedule> schedules, MakeSchedules(d));
  if (t.tile < 1) return bad(fmt::format("tiling.tile: {} must be positive", t.tile));
  if (config.threads < 1)
    return bad(fmt::format("config.threads: {} must be positive", config.threads));
  const int64_t need = LocalBytes(schedules, t.tile);
  if (need > static_cast<int64_t>(config.local_buffer_bytes))
    return bad(fmt::format("tiling.tile: {} elements need {} bytes of local buffer, capacity is {}",
                           t.tile, need, config.local_buffer_bytes));
  return schedules;
}

}  // namespace

int64_t ElementwiseLocalBytes(const ElementwiseDesc& d, const ElementwiseTiling& t) {
  auto schedules = MakeSchedules(d);
  return schedules.ok() ? LocalBytes(*schedules, t.tile) : 0;
}

Status ValidateElementwise(const ElementwiseDesc& d, const ElementwiseTiling& t,
                           const KernelConfig& config) {
  auto schedules = Validate(d, t, config);
  return schedules.ok() ? Status::Ok() : Status(schedules.error());
}

Result<KernelStats> RunElementwise(const ElementwiseDesc& d, const ElementwiseTiling& t,
                                   const KernelConfig& config, RunMode mode) {
  FT_ASSIGN_OR_RETURN(const std::vector<TileSchedule> schedules, Validate(d, t, config));
  const std::vector<const ElementwiseDesc*> pieces = ElementwisePieces(d);
  std::vector<int64_t> first_tile = {0};  // of each piece in the launch's tile order
  for (const ElementwiseDesc* p : pieces)
    first_tile.push_back(first_tile.back() + (Volume(p->dims) + t.tile - 1) / t.tile);
  const int64_t tiles = first_tile.back();
  const size_t local_bytes = static_cast<size_t>(LocalBytes(schedules, t.tile));
  int64_t frame_floats = 0;
  for (const TileSchedule& s : schedules)
    frame_floats = std::max(frame_floats, s.FrameFloats(1, t.tile));
  return RunThreadShares(config.threads, [&](int th) {
    KernelStats stats;
    const int64_t first = tiles * th / config.threads, last = tiles * (th + 1) / config.threads;
    if (first >= last) return stats;
    LocalBuffer local(local_bytes);
    float* frame = local.Take(static_cast<size_t>(frame_floats));
    if (mode == RunMode::kComputeOnly) std::fill(frame, frame + frame_floats, 0.5f);
    size_t piece = 0;
    for (int64_t tile = first; tile < last; ++tile) {
      while (tile >= first_tile[piece + 1]) ++piece;
      const ElementwiseDesc& p = *pieces[piece];
      const TileSchedule& schedule = schedules[piece];
      const TileSchedule::Frame f = schedule.Bind(frame, 1, t.tile);
      const int64_t total = Volume(p.dims), begin = (tile - first_tile[piece]) * t.tile;
      const int64_t count = std::min(t.tile, total - begin);
      const auto& instrs = p.program.instrs();
      if (mode != RunMode::kComputeOnly)
        for (size_t v = 0; v < instrs.size(); ++v)
          if (instrs[v].op == TileOp::kInput)
            stats.bytes_global_to_local +=
                Gather(p.dims, p.inputs[instrs[v].input], begin, count, f.value[v]);
      if (mode != RunMode::kCopyOnly) schedule.Compute(f, 1, count, 1);
      if (mode != RunMode::kComputeOnly)
        for (size_t o = 0; o < p.outputs.size(); ++o) {
          const int v = p.program.outputs()[o];
          const std::vector<int64_t> none;
          const std::vector<int64_t>& strides =
              p.output_strides.empty() ? none : p.output_strides[o];
          Scatter(p.dims, strides, p.outputs[o], begin, count, f.value[v],
                  schedule.shape(v) == ValueShape::kNarrow);
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
  for (const ElementwiseDesc* p : ElementwisePieces(d)) {
    const int64_t total = Volume(p->dims), inner = p->dims.back();
    const int64_t tiles = (total + t.tile - 1) / t.tile;
    e.tiles += tiles;
    // A gather copies run by run along the innermost dimension; a run of a
    // broadcast (stride 0) operand is one element. Runs: one per row of the
    // innermost dimension, plus one more wherever a tile boundary cuts a row.
    const double runs = static_cast<double>(total) / inner + static_cast<double>(tiles);
    for (const TileInstr& instr : p->program.instrs()) {
      if (instr.op != TileOp::kInput) continue;
      const StridedOperand& op = p->inputs[instr.input];
      e.bytes_in += op.strides.back() == 0 ? 4.0 * std::min<double>(runs, total) : 4.0 * total;
    }
    e.bytes_out += 4.0 * total * static_cast<double>(p->outputs.size());
  }
  SetEvenSplit(&e, e.tiles, threads);
  e.lane_utilisation = static_cast<double>(t.tile) / static_cast<double>((t.tile + 15) / 16 * 16);
  return e;
}

}  // namespace fusetune::kernels
