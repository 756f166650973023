#include "kernels/gemm.h"
#include "kernels/estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "kernels/activation_simd.h"
#include "kernels/gemm_pack.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::kernels {

using gemm_internal::ABlock;
using gemm_internal::CeilDiv;
using gemm_internal::PanelDepth;
using gemm_internal::RoundUp;

const char* NormKindName(NormKind kind) {
  switch (kind) {
    case NormKind::kNone:
      return "none";
    case NormKind::kLayerNorm:
      return "layer_norm";
    case NormKind::kRmsNorm:
      return "rms_norm";
  }
  return "?";
}
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
  return fmt::format("mc={} nc={} kc={} micro={}x{} order={} split={}{}{}{}", mc, nc, kc, mr, nr,
                     LoopOrderName(order), ParallelSplitName(split),
                     double_buffer ? " double_buffer" : "", refill ? " refill" : "",
                     precision == Precision::kBf16 ? " bf16" : "");
}

namespace {

// The local buffer's regions for one thread. Panels count elements of the
// tiling's precision (bf16 panels: half the bytes, k padded to pairs); the C
// tile and the prologue's stage are float.
struct LocalLayout {
  int64_t mc_pad, nc_pad, a_panel, b_panel, c_tile, stage;
  int buffers, b_operands;  // 2 with double buffering; 2 B operands for SwiGLU
  int element_bytes;
  // Floats of local buffer a panel takes (LocalBuffer hands out floats).
  int64_t PanelFloats(int64_t elements) const { return CeilDiv(elements * element_bytes, 4); }
  int64_t floats() const {
    return buffers * (PanelFloats(a_panel) + b_operands * PanelFloats(b_panel)) +
           b_operands * c_tile + stage;
  }
};

LocalLayout Layout(const GemmDesc& d, const GemmTiling& t) {
  LocalLayout l;
  l.mc_pad = RoundUp(t.mc, t.mr);
  l.nc_pad = RoundUp(t.nc, t.nr);
  l.element_bytes = t.precision == Precision::kBf16 ? 2 : 4;
  l.a_panel = l.mc_pad * PanelDepth(t.kc, t.precision);
  l.b_panel = PanelDepth(t.kc, t.precision) * l.nc_pad;
  l.c_tile = l.mc_pad * l.nc_pad;
  l.stage = d.prologue.empty() ? 0 : t.mc * t.kc + 2 * t.mc;  // staged A block and row stats
  l.buffers = t.double_buffer ? 2 : 1;
  l.b_operands = d.swiglu ? 2 : 1;
  return l;
}

// `output` is the index of the output whose epilogue this is, or -1 for the
// prologue; the field's name is formatted only on an error (a tiling space
// validates its descriptor at every point it enumerates).
Status CheckEpilogue(const std::vector<EpilogueOp>& ops, int output) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const EpilogueKind kind = ops[i].kind;
    const bool needs_data = kind == EpilogueKind::kBiasAdd || kind == EpilogueKind::kResidualAdd ||
                            kind == EpilogueKind::kMultiply || kind == EpilogueKind::kLayerNorm;
    if (needs_data && !ops[i].data)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("gemm: descriptor.{}[{}] ({}) has no operand",
                               output < 0 ? std::string("prologue.elementwise")
                                          : fmt::format("outputs[{}].epilogue", output),
                               i, EpilogueKindName(kind)));
  }
  return Status::Ok();
}

Status ValidateDesc(const GemmDesc& d) {
  auto bad = [](const std::string& msg) { return Status(Error(ErrorCode::kInvalidArgument, msg)); };
  if (d.batch < 1 || d.m < 1 || d.k < 1)
    return bad(
        fmt::format("gemm: batch, m, k must be positive (got {}, {}, {})", d.batch, d.m, d.k));
  if (!d.a) return bad("gemm: descriptor.a must point to data");
  if (d.outputs.empty()) return bad("gemm: descriptor.outputs is empty");
  if (d.swiglu && (d.outputs.size() != 2 || d.outputs[0].n != d.outputs[1].n))
    return bad("gemm: descriptor.swiglu needs exactly two outputs (gate, up) of the same n");
  for (size_t o = 0; o < d.outputs.size(); ++o) {
    const GemmOutput& out = d.outputs[o];
    if (out.n < 1) return bad(fmt::format("gemm: descriptor.outputs[{}].n {} < 1", o, out.n));
    const bool writes = !(d.swiglu && o == 1);
    if (out.b_packed && d.batch > 1 && out.b_batch_stride != 0)
      return bad(fmt::format(
          "gemm: descriptor.outputs[{}].b_packed needs an unbatched B (b_batch_stride {})", o,
          out.b_batch_stride));
    if (!out.b || (writes && !out.c))
      return bad(fmt::format("gemm: descriptor.outputs[{}].b and .c must point to data", o));
    if (writes && out.c_row_stride < out.n)
      return bad(fmt::format("gemm: descriptor.outputs[{}].c_row_stride {} < n {}", o,
                             out.c_row_stride, out.n));
    FT_RETURN_IF_ERROR(CheckEpilogue(out.epilogue, static_cast<int>(o)));
  }
  FT_RETURN_IF_ERROR(CheckEpilogue(d.prologue.elementwise, -1));
  if (HasRowNorm(d.prologue.elementwise))
    return bad(
        "gemm: descriptor.prologue.elementwise holds a layer_norm; the prologue's norm "
        "is descriptor.prologue.norm");
  if (d.prologue.norm != NormKind::kNone && !d.prologue.gamma)
    return bad(fmt::format("gemm: descriptor.prologue.gamma is required by {}",
                           NormKindName(d.prologue.norm)));
  return Status::Ok();
}

}  // namespace

int64_t GemmLocalBytes(const GemmDesc& d, const GemmTiling& t) {
  const LocalLayout l = Layout(d, t);
  return static_cast<int64_t>(sizeof(float)) * l.floats() + 8 * 64;
}

namespace {

// The tiling's own rules, in order. `broken(describe)` (a KeepReason or IgnoreReason) hears of the
// first one broken (describe() says why) and returns false: ValidateGemm formats the message,
// GemmTilingFits never does.
template <typename Broken>
bool TilingRulesHold(const GemmDesc& d, const GemmTiling& t, const KernelConfig& config,
                     Broken&& broken) {
  if (t.mc < 1) return broken([&] { return fmt::format("tiling.mc: {} must be positive", t.mc); });
  if (t.nc < 1) return broken([&] { return fmt::format("tiling.nc: {} must be positive", t.nc); });
  if (t.kc < 1) return broken([&] { return fmt::format("tiling.kc: {} must be positive", t.kc); });
  for (size_t o = 0; o < d.outputs.size(); ++o)
    if (HasRowNorm(d.outputs[o].epilogue) && t.nc < d.outputs[o].n)
      return broken([&] {
        return fmt::format(
            "tiling.nc: {} is narrower than output {}'s rows ({}); its layer_norm epilogue "
            "needs whole rows in one tile",
            t.nc, o, d.outputs[o].n);
      });
  if (t.refill && t.double_buffer)
    return broken([] {
      return std::string(
          "tiling.refill: refilling B in place is single buffering; it excludes "
          "double_buffer");
    });
  if (t.precision == Precision::kBf16 && !FindBf16MicroKernel(t.mr, t.nr))
    return broken([&] { return NoBf16MicroKernel(t.mr, t.nr); });
  const int64_t local_bytes = GemmLocalBytes(d, t);
  if (!MicroTileAndBufferFit(t.mr, t.nr, local_bytes, config))
    return broken([&] {
      return CheckMicroTileAndBuffer(t.mr, t.nr, local_bytes, config,
                                     [&] {
                                       return fmt::format(
                                           "mc={} nc={} kc={}{}", t.mc, t.nc, t.kc,
                                           t.double_buffer ? ", double buffered" : "");
                                     })
          .error()
          .message();
    });
  return true;
}

}  // namespace

Status ValidateGemm(const GemmDesc& d, const GemmTiling& t, const KernelConfig& config) {
  FT_RETURN_IF_ERROR(ValidateDesc(d));
  std::string why;
  if (!TilingRulesHold(d, t, config, KeepReason{&why}))
    return Error(ErrorCode::kInvalidArgument, why);
  return Status::Ok();
}

bool GemmTilingFits(const GemmDesc& d, const GemmTiling& t, const KernelConfig& config) {
  return ValidateDesc(d).ok() && TilingRulesHold(d, t, config, IgnoreReason{});
}

namespace {

struct Block {
  int64_t batch, ic, jc;  // jc counts N blocks over all outputs
  int output;
  int64_t j0, cols;  // within the output
};

// One thread's share of the output blocks, in loop order.
std::vector<Block> BlocksForThread(const GemmDesc& d, const GemmTiling& t, int thread,
                                   int threads) {
  std::vector<Block> columns;  // the N blocks, over all outputs (SwiGLU: the gate's only)
  const size_t outputs = d.swiglu ? 1 : d.outputs.size();
  for (size_t o = 0; o < outputs; ++o)
    for (int64_t j0 = 0; j0 < d.outputs[o].n; j0 += t.nc)
      columns.push_back({0, 0, static_cast<int64_t>(columns.size()), static_cast<int>(o), j0,
                         std::min(t.nc, d.outputs[o].n - j0)});
  const int64_t mb = CeilDiv(d.m, t.mc), nb = static_cast<int64_t>(columns.size());
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
        if (!mine(ic, jc, flat)) continue;
        Block blk = columns[jc];
        blk.batch = b;
        blk.ic = ic;
        blocks.push_back(blk);
      }
  }
  return blocks;
}

}  // namespace

namespace {

// One kc slice of one block: which panels must be packed for it (those not
// already in the local buffer) and in which buffer each panel lives.
struct Step {
  int block;
  int64_t slice, p0, depth;
  bool pack_a, pack_b;
  int a_slot, b_slot;
};

std::vector<Step> PlanSteps(const GemmDesc& d, const GemmTiling& t,
                            const std::vector<Block>& blocks) {
  std::vector<Step> steps;
  int64_t a_key[3] = {-1, -1, -1}, b_key[3] = {-1, -1, -1};  // (batch, block, slice) resident
  int a_slot = 1, b_slot = 1;
  const int flip = t.double_buffer ? 1 : 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& blk = blocks[i];
    for (int64_t p0 = 0, slice = 0; p0 < d.k; p0 += t.kc, ++slice) {
      Step s{static_cast<int>(i), slice, p0, std::min(t.kc, d.k - p0), false, false, 0, 0};
      const int64_t a_now[3] = {blk.batch, blk.ic, slice}, b_now[3] = {blk.batch, blk.jc, slice};
      s.pack_a = !std::equal(a_now, a_now + 3, a_key);
      s.pack_b = !std::equal(b_now, b_now + 3, b_key);
      if (s.pack_a) a_slot = steps.empty() ? 0 : a_slot ^ flip;
      if (s.pack_b) b_slot = steps.empty() ? 0 : b_slot ^ flip;
      s.a_slot = a_slot;
      s.b_slot = b_slot;
      std::copy(a_now, a_now + 3, a_key);
      std::copy(b_now, b_now + 3, b_key);
      steps.push_back(s);
    }
  }
  return steps;
}

// Contiguous runs still to be copied, handed out in chunks that never cross
// a run's end.
class CopyStream {
 public:
  struct Chunk {
    const float* src;
    float* dst;
    int64_t floats;
  };
  void Add(const float* src, float* dst, int64_t floats) {
    if (floats > 0) runs_.push_back({src, dst, floats});
    left_ += floats;
  }
  bool empty() const { return left_ == 0; }
  int64_t left() const { return left_; }
  Chunk Take(int64_t floats) {
    while (next_ < runs_.size() && runs_[next_].floats == 0) ++next_;
    if (next_ == runs_.size()) return {nullptr, nullptr, 0};
    Chunk& run = runs_[next_];
    const Chunk chunk{run.src, run.dst, std::min(floats, run.floats)};
    run.src += chunk.floats;
    run.dst += chunk.floats;
    run.floats -= chunk.floats;
    left_ -= chunk.floats;
    return chunk;
  }
  void Drain() {  // what the micro-kernel calls did not carry
    for (; next_ < runs_.size(); ++next_) {
      Chunk& run = runs_[next_];
      if (run.floats > 0) std::memcpy(run.dst, run.src, run.floats * sizeof(float));
      run.floats = 0;
    }
    left_ = 0;
  }

 private:
  std::vector<Chunk> runs_;
  size_t next_ = 0;
  int64_t left_ = 0;
};

class ThreadRunner {
 public:
  ThreadRunner(const GemmDesc& d, const GemmTiling& t, RunMode mode, std::vector<Block> blocks)
      : d_(d),
        t_(t),
        mode_(mode),
        l_(Layout(d, t)),
        mk_(FindMicroKernel(t.mr, t.nr)),
        bf16_(t.precision == Precision::kBf16 ? FindBf16MicroKernel(t.mr, t.nr) : nullptr),
        blocks_(std::move(blocks)),
        steps_(PlanSteps(d, t, blocks_)),
        local_(static_cast<size_t>(GemmLocalBytes(d, t))) {
    for (int s = 0; s < l_.buffers; ++s) {
      a_[s] = local_.Take(l_.PanelFloats(l_.a_panel));
      for (int o = 0; o < l_.b_operands; ++o) b_[s][o] = local_.Take(l_.PanelFloats(l_.b_panel));
    }
    for (int o = 0; o < l_.b_operands; ++o) c_[o] = local_.Take(l_.c_tile);
    if (l_.stage > 0) {
      stage_ = local_.Take(t.mc * t.kc);
      norm_ = {local_.Take(t.mc), local_.Take(t.mc)};
    }
    if (mode == RunMode::kComputeOnly) FillForComputeOnly();
  }

  KernelStats Run() {
    if (steps_.empty()) return stats_;
    if (t_.double_buffer) RunJobs(steps_[0], 0, SIZE_MAX);  // prime the first buffers
    int64_t ready = 0;  // leading slivers of the step's B panels refilled by the step before
    for (size_t s = 0; s < steps_.size(); ++s) {
      const Step& step = steps_[s];
      const Step* next = s + 1 < steps_.size() ? &steps_[s + 1] : nullptr;
      if (t_.double_buffer) {
        Compute(step, next);
      } else if (const bool refill_next = next && Refills(step, *next); ready > 0 || refill_next) {
        ready = ComputeRefilling(step, refill_next ? next : nullptr, ready);
      } else {
        RunJobs(step, 0, SIZE_MAX);
        Compute(step, nullptr);
      }
      if (step.p0 + step.depth == d_.k) Finish(blocks_[step.block]);
    }
    return stats_;
  }

 private:
  // Panels are never packed in compute-only runs. Ordinary non-zero values
  // keep the epilogue's transcendentals representative.
  void FillForComputeOnly() {
    for (int s = 0; s < l_.buffers; ++s) {
      FillPanel(a_[s], l_.a_panel, 0.5f);
      for (int o = 0; o < l_.b_operands; ++o) FillPanel(b_[s][o], l_.b_panel, 0.25f);
    }
    if (stage_) std::fill(stage_, stage_ + t_.mc * t_.kc, 0.5f);
  }

  void FillPanel(float* panel, int64_t elements, float value) {
    if (!bf16_) return std::fill(panel, panel + elements, value);
    Bf16* halves = reinterpret_cast<Bf16*>(panel);
    std::fill(halves, halves + elements, FloatToBf16(value));
  }
  Bf16* Halves(float* panel) const { return reinterpret_cast<Bf16*>(panel); }

  // The copies a step needs, as jobs: A slivers (or the whole A block when it
  // has a prologue), then the parts of the B panel per operand unless the
  // micro-kernels carry the B panels (`b_streamed`).
  size_t JobCount(const Step& s, bool b_streamed = false) const {
    size_t n = AJobs(s);
    if (s.pack_b && !b_streamed)
      for (int o = 0; o < l_.b_operands; ++o) n += BParts(s, o);
    return n;
  }
  int64_t AJobs(const Step& s) const {
    if (!s.pack_a) return 0;
    const int64_t rows = std::min(t_.mc, d_.m - blocks_[s.block].ic * t_.mc);
    return d_.prologue.empty() ? CeilDiv(rows, t_.mr) : 1;
  }
  ABlock BlockOfA(const Step& s) const {
    const Block& blk = blocks_[s.block];
    return {blk.batch, blk.ic * t_.mc, std::min(t_.mc, d_.m - blk.ic * t_.mc), s.p0, s.depth};
  }
  // The output whose B is operand o (SwiGLU: gate, up) of step s's block.
  const GemmOutput& BOperand(const Step& s, int o) const {
    return d_.outputs[d_.swiglu ? o : blocks_[s.block].output];
  }
  int64_t BParts(const Step& s, int o) const {
    return gemm_internal::BPackParts(BOperand(s, o), BlockOfB(s), t_.nr);
  }
  gemm_internal::BBlock BlockOfB(const Step& s) const {
    const Block& blk = blocks_[s.block];
    return {blk.batch, s.p0,     s.depth,
            blk.j0,    blk.cols, gemm_internal::PrePackedBlockOffset(d_, t_, blk.j0, s.p0)};
  }

  // Runs jobs [first, last) of step s; returns the index after the last one run.
  size_t RunJobs(const Step& s, size_t first, size_t last, bool b_streamed = false) {
    if (mode_ == RunMode::kComputeOnly) return SIZE_MAX;
    const ABlock a = BlockOfA(s);
    const int64_t a_jobs = AJobs(s);
    last = std::min(last, JobCount(s, b_streamed));
    for (size_t j = first; j < last; ++j) {
      const int64_t job = static_cast<int64_t>(j);
      if (job < a_jobs) {
        stats_.bytes_global_to_local +=
            !d_.prologue.empty() ? PackPrologueBlock(a, a_[s.a_slot])
            : bf16_ ? gemm_internal::PackASliverBf16(d_, a, t_.mr, job, Halves(a_[s.a_slot]))
                    : gemm_internal::PackASliver(d_, a, t_.mr, job, a_[s.a_slot]);
      } else {
        int o = 0;
        int64_t part = job - a_jobs;
        while (part >= BParts(s, o)) part -= BParts(s, o++);
        float* panel = b_[s.b_slot][o];
        stats_.bytes_global_to_local +=
            bf16_ ? gemm_internal::PackBPartBf16(BOperand(s, o), BlockOfB(s), t_.nr, part,
                                                 Halves(panel))
                  : gemm_internal::PackBPart(BOperand(s, o), BlockOfB(s), t_.nr, part, panel);
      }
    }
    return last;
  }

  // Puts step s's B panels into `stream` when every operand is pre-packed
  // (a pre-packed block's slivers lie in the local panel's order, so each
  // panel is one run) and counts the bytes; returns whether it did. A's rows
  // stay copy jobs: carried row by row without the jobs' prefetch of rows
  // ahead they made a 128x3072x768 GEMM 3-5% slower (measured).
  bool StreamB(const Step& s, CopyStream& stream) {
    if (mode_ == RunMode::kComputeOnly || !s.pack_b) return false;
    for (int o = 0; o < l_.b_operands; ++o)
      if (!BOperand(s, o).b_packed) return false;
    const gemm_internal::BBlock blk = BlockOfB(s);
    const int64_t elements = CeilDiv(blk.cols, t_.nr) * t_.nr * PanelDepth(blk.depth, t_.precision);
    for (int o = 0; o < l_.b_operands; ++o) {  // bf16: whole k-pairs, so an even count
      stream.Add(BOperand(s, o).b_packed + blk.packed_offset * l_.element_bytes / 4,
                 b_[s.b_slot][o], elements * l_.element_bytes / 4);
      stats_.bytes_global_to_local += BBlockBytes(s);
    }
    return true;
  }

  int64_t PackPrologueBlock(const ABlock& a, float* ap) {
    int64_t bytes = 0;
    const bool whole_rows = a.depth == d_.k;
    if (d_.prologue.norm != NormKind::kNone && !whole_rows &&
        !(norm_batch_ == a.batch && norm_i0_ == a.i0)) {
      bytes +=
          gemm_internal::ComputeNormStats(d_, a.batch, a.i0, a.rows, t_.kc, mode_, stage_, norm_);
      norm_batch_ = a.batch;
      norm_i0_ = a.i0;
    }
    if (bf16_) {
      bytes += gemm_internal::StageWithPrologue(d_, a, mode_, stage_, norm_, !whole_rows);
      gemm_internal::StagedRowsToBf16(stage_, a.rows, a.depth, t_.mr, Halves(ap));
      return bytes;
    }
    return bytes +
           gemm_internal::PackAWithPrologue(d_, a, t_.mr, mode_, stage_, norm_, !whole_rows, ap);
  }

  // The micro-kernel calls of step s, with the copies of `next` interleaved
  // after each column of micro-tiles (double buffering); the panels of `next`
  // that are contiguous runs are carried by the micro-kernels themselves, an
  // equal share per call.
  void Compute(const Step& s, const Step* next) {
    const Block& blk = blocks_[s.block];
    const int64_t rows = std::min(t_.mc, d_.m - blk.ic * t_.mc);
    const int64_t columns = CeilDiv(blk.cols, t_.nr);
    CopyStream stream;
    const bool b_streamed = next && StreamB(*next, stream);
    const size_t jobs = next ? JobCount(*next, b_streamed) : 0;
    const size_t quota = (jobs + columns - 1) / columns;
    const int64_t calls = columns * l_.b_operands * CeilDiv(rows, t_.mr);
    const int64_t share = RoundUp(CeilDiv(stream.left(), calls), 16);
    size_t done = 0;
    for (int64_t q = 0; q < columns; ++q) {
      if (mode_ != RunMode::kCopyOnly) ComputeColumn(s, q, rows, stream, share);
      if (next && done < jobs) done = RunJobs(*next, done, done + quota, b_streamed);
    }
    if (next && done < jobs) RunJobs(*next, done, jobs, b_streamed);
    stream.Drain();
  }

  // Column q of step s's micro-tiles, carrying `share` floats of `stream` per call.
  void ComputeColumn(const Step& s, int64_t q, int64_t rows, CopyStream& stream, int64_t share) {
    if (bf16_) return ComputeColumnBf16(s, q, rows, stream, share);
    for (int o = 0; o < l_.b_operands; ++o)
      for (int64_t ir = 0; ir < rows; ir += t_.mr) {
        const float* a = a_[s.a_slot] + ir * s.depth;
        const float* b = b_[s.b_slot][o] + q * s.depth * t_.nr;
        float* c = c_[o] + ir * l_.nc_pad + q * t_.nr;
        if (stream.empty()) {
          mk_->fn_rows(s.depth, a, s.depth, b, c, l_.nc_pad, s.slice > 0);
          continue;
        }
        const CopyStream::Chunk chunk = stream.Take(share);
        mk_->fn_rows_copy(s.depth, a, s.depth, b, c, l_.nc_pad, s.slice > 0, chunk.src, chunk.dst,
                          chunk.floats);
      }
  }

  // Refilling (GemmTiling::refill). Once column q of a step's micro-tiles is done,
  // its B sliver is not read again, so the next step's sliver q can take its
  // place while column q + 1 computes, carried by those micro-kernel calls:
  // the B copies hide behind the compute without a second buffer, so the
  // blocks stay as large as one buffer allows (double buffering halves them;
  // a 384x768x3072 bf16 GEMM's B copies were 9% of its time, exposed). The
  // next step's last sliver has no free column left: it is carried by that
  // step's own columns before its last. Needs pre-packed B (a sliver is one
  // contiguous run) and a next step no deeper than this one (its slivers then
  // lie within this step's done ones); copy-only and compute-only runs copy
  // as without it.
  bool Refills(const Step& s, const Step& next) const {
    if (!t_.refill || mode_ != RunMode::kFull || !next.pack_b || next.b_slot != s.b_slot)
      return false;
    if (PanelDepth(next.depth, t_.precision) > PanelDepth(s.depth, t_.precision)) return false;
    if (Columns(s) < 2 || Columns(next) < 2) return false;
    for (int o = 0; o < l_.b_operands; ++o)
      if (!BOperand(next, o).b_packed) return false;
    return true;
  }
  // Bytes of one operand's B block of step s, as its copy counts them.
  int64_t BBlockBytes(const Step& s) const {
    const gemm_internal::BBlock blk = BlockOfB(s);
    return int64_t{l_.element_bytes} * blk.depth * blk.cols;
  }
  int64_t Columns(const Step& s) const { return CeilDiv(blocks_[s.block].cols, t_.nr); }
  int64_t SliverFloats(const Step& s) const {
    return PanelDepth(s.depth, t_.precision) * t_.nr * l_.element_bytes / 4;
  }
  // Floats [from, to) of step s's sliver q of operand o, into `stream`.
  void AddSliver(const Step& s, int o, int64_t q, int64_t from, int64_t to, CopyStream& stream) {
    const int64_t at = q * SliverFloats(s) + from;
    stream.Add(BOperand(s, o).b_packed + BlockOfB(s).packed_offset * l_.element_bytes / 4 + at,
               b_[s.b_slot][o] + at, to - from);
  }

  // Step s with its first `ready` slivers in place, refilling `next`'s (null:
  // none); returns how many of them it refilled.
  int64_t ComputeRefilling(const Step& s, const Step* next, int64_t ready) {
    const int64_t columns = Columns(s), sliver = SliverFloats(s);
    const int64_t rows = std::min(t_.mc, d_.m - blocks_[s.block].ic * t_.mc);
    RunJobs(s, 0, ready > 0 ? AJobs(s) : SIZE_MAX);  // A, and B too when none is in place
    const bool late = ready > 0;  // the last sliver, carried by the columns before it
    if (late) {
      CopyStream early;  // slivers a shorter step before did not refill (rare)
      for (int o = 0; o < l_.b_operands; ++o)
        for (int64_t q = ready; q + 1 < columns; ++q) AddSliver(s, o, q, 0, sliver, early);
      early.Drain();
      stats_.bytes_global_to_local += BBlockBytes(s) * l_.b_operands;
    }
    const int64_t refills = next ? std::min(columns, Columns(*next)) - 1 : 0;
    const int64_t piece = RoundUp(CeilDiv(sliver, columns - 1), 16);
    const int64_t calls = l_.b_operands * CeilDiv(rows, t_.mr);
    for (int64_t q = 0; q < columns; ++q) {
      CopyStream stream;
      for (int o = 0; o < l_.b_operands; ++o) {
        if (late && q + 1 < columns)
          AddSliver(s, o, columns - 1, std::min(sliver, q * piece),
                    std::min(sliver, (q + 1) * piece), stream);
        if (q >= 1 && q - 1 < refills) AddSliver(*next, o, q - 1, 0, SliverFloats(*next), stream);
      }
      ComputeColumn(s, q, rows, stream, RoundUp(CeilDiv(stream.left(), calls), 16));
      stream.Drain();
    }
    return refills;
  }

  // Column q of step s's micro-tiles on the bf16 micro-kernels.
  void ComputeColumnBf16(const Step& s, int64_t q, int64_t rows, CopyStream& stream,
                         int64_t share) {
    const int64_t depth2 = PanelDepth(s.depth, Precision::kBf16);
    for (int o = 0; o < l_.b_operands; ++o)
      for (int64_t ir = 0; ir < rows; ir += t_.mr) {
        const Bf16* a = Halves(a_[s.a_slot]) + ir * depth2;
        const Bf16* b = Halves(b_[s.b_slot][o]) + q * depth2 * t_.nr;
        float* c = c_[o] + ir * l_.nc_pad + q * t_.nr;
        if (stream.empty()) {
          bf16_->fn(depth2 / 2, a, depth2, b, c, l_.nc_pad, s.slice > 0);
          continue;
        }
        const CopyStream::Chunk chunk = stream.Take(share);
        bf16_->fn_copy(depth2 / 2, a, depth2, b, c, l_.nc_pad, s.slice > 0, chunk.src, chunk.dst,
                       chunk.floats);
      }
  }

  // Epilogue and copy-out of a finished block.
  void Finish(const Block& blk) {
    const int64_t i0 = blk.ic * t_.mc, rows = std::min(t_.mc, d_.m - i0);
    float* c = c_[0];
    if (mode_ == RunMode::kCopyOnly) std::memset(c, 0, sizeof(float) * l_.c_tile);
    if (d_.swiglu && mode_ != RunMode::kCopyOnly)
      for (int64_t r = 0; r < rows; ++r)
        SiluTimes(c + r * l_.nc_pad, c_[1] + r * l_.nc_pad, blk.cols);
    const GemmOutput& out = d_.outputs[blk.output];
    stats_.bytes_global_to_local += ApplyEpilogue(out.epilogue, c, l_.nc_pad, rows, blk.cols,
                                                  blk.batch, i0, blk.j0, mode_, t_.precision);
    if (mode_ != RunMode::kComputeOnly) {
      float* dst = out.c + blk.batch * out.c_batch_stride + i0 * out.c_row_stride + blk.j0;
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dst + r * out.c_row_stride, c + r * l_.nc_pad, blk.cols * sizeof(float));
      stats_.bytes_local_to_global += static_cast<int64_t>(sizeof(float)) * rows * blk.cols;
    }
    ++stats_.tiles;
  }

  const GemmDesc& d_;
  const GemmTiling& t_;
  RunMode mode_;
  LocalLayout l_;
  const MicroKernel* mk_;
  const Bf16MicroKernel* bf16_;  // set for a bf16 tiling
  std::vector<Block> blocks_;
  std::vector<Step> steps_;
  LocalBuffer local_;
  float* a_[2] = {};
  float* b_[2][2] = {};
  float* c_[2] = {};
  float* stage_ = nullptr;
  gemm_internal::NormStats norm_{nullptr, nullptr};
  int64_t norm_batch_ = -1, norm_i0_ = -1;
  KernelStats stats_;
};

}  // namespace

Result<KernelStats> RunGemm(const GemmDesc& desc, const GemmTiling& tiling,
                            const KernelConfig& config, RunMode mode) {
  FT_RETURN_IF_ERROR(ValidateGemm(desc, tiling, config));
  return RunThreadShares(config.threads, [&](int t) {
    std::vector<Block> blocks = BlocksForThread(desc, tiling, t, config.threads);
    if (blocks.empty()) return KernelStats{};
    return ThreadRunner(desc, tiling, mode, std::move(blocks)).Run();
  });
}

}  // namespace fusetune::kernels

namespace fusetune::kernels {

namespace {

// Bytes the prologue packing of one A block reads (the block, its
// elementwise operands, gamma/beta) and, when a slice does not cover K, the
// extra pass that computes the norm's row statistics once per row block.
double PrologueBlockBytes(const GemmDesc& d, int64_t rows, int64_t depth, bool stats_pass) {
  double bytes = 4.0 * rows * depth;
  for (const EpilogueOp& op : d.prologue.elementwise)
    if (op.data) bytes += 4.0 * depth * (op.row_stride == 0 ? 1 : rows);
  if (d.prologue.norm != NormKind::kNone) {
    bytes += 4.0 * depth * (d.prologue.beta ? 2 : 1);
    if (stats_pass) bytes += 4.0 * rows * d.k;
  }
  return bytes;
}

double EpilogueBlockBytes(const std::vector<EpilogueOp>& ops, int64_t rows, int64_t cols) {
  double bytes = 0;
  for (const EpilogueOp& op : ops)
    if (op.data) bytes += 4.0 * cols * (op.row_stride == 0 ? 1 : rows);
  return bytes;
}

}  // namespace

// The fixed cost of a micro-kernel call, in k-steps of its FMAs: 4 to store
// its C micro-tile to the local buffer (which lives in L2, not L1), 8 more
// after a block's first k-slice to load it first. Without it every kc ties
// with kc = K, where bench_search's exhaustive tables measure kc = K/4 1.27x
// slower on 128x128x128, and the search spends its trials telling them
// apart (bench/README.md, bench_search's fourth version).
constexpr double kCallSteps = 4, kAccumulateSteps = 8;

TilingEstimate EstimateGemm(const GemmDesc& d, const GemmTiling& t, int threads) {
  TilingEstimate e;
  e.local_bytes = GemmLocalBytes(d, t);
  const int b_operands = d.swiglu ? 2 : 1;
  // bf16: B streams as pre-packed bf16 (weights; an activation B is read as
  // f32 and converted, which this does not tell apart), and each
  // instruction takes a k-pair.
  const bool bf16 = t.precision == Precision::kBf16;
  const double b_bytes = bf16 ? 2.0 : 4.0;
  auto k_steps = [&](int64_t depth) { return bf16 ? CeilDiv(depth, 2) : depth; };
  double total_work = 0;
  std::vector<double> work(threads, 0);
  for (int th = 0; th < threads; ++th) {
    const std::vector<Block> blocks = BlocksForThread(d, t, th, threads);
    const std::vector<Step> steps = PlanSteps(d, t, blocks);
    int64_t last_stats_block = -1;
    for (const Step& s : steps) {
      const Block& blk = blocks[s.block];
      const int64_t rows = std::min(t.mc, d.m - blk.ic * t.mc);
      if (s.pack_a) {
        const bool stats_pass = d.prologue.norm != NormKind::kNone && s.depth < d.k &&
                                last_stats_block != blk.batch * 1000003 + blk.ic;
        if (stats_pass) last_stats_block = blk.batch * 1000003 + blk.ic;
        e.bytes_in += d.prologue.empty() ? 4.0 * rows * s.depth
                                         : PrologueBlockBytes(d, rows, s.depth, stats_pass);
      }
      if (s.pack_b) e.bytes_in += b_bytes * b_operands * s.depth * blk.cols;
      const double call_steps = kCallSteps + (s.slice > 0 ? kAccumulateSteps : 0);
      work[th] += static_cast<double>(RoundUp(rows, t.mr)) * RoundUp(blk.cols, t.nr) *
                  (k_steps(s.depth) + call_steps) * b_operands;
    }
    for (const Block& blk : blocks) {
      const int64_t rows = std::min(t.mc, d.m - blk.ic * t.mc);
      e.bytes_in += EpilogueBlockBytes(d.outputs[blk.output].epilogue, rows, blk.cols);
      e.bytes_out += 4.0 * rows * blk.cols;
    }
    e.tiles += static_cast<int64_t>(blocks.size());
    e.max_thread_tiles = std::max<int64_t>(e.max_thread_tiles, blocks.size());
    e.steps = std::max<int64_t>(e.steps, steps.size());
    total_work += work[th];
  }
  double useful = 0;
  const size_t outputs = d.swiglu ? 1 : d.outputs.size();
  for (size_t o = 0; o < outputs; ++o)
    useful +=
        static_cast<double>(d.batch) * d.m * d.outputs[o].n * (bf16 ? d.k / 2.0 : d.k) * b_operands;
  e.lane_utilisation = total_work > 0 ? useful / total_work : 1;
  e.max_thread_work = total_work > 0 ? *std::max_element(work.begin(), work.end()) / total_work : 1;
  return e;
}

}  // namespace fusetune::kernels
