#include "measure/measurement.h"

#include <cpuid.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "graph/analysis.h"

namespace fusetune::measure {

namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CLFLUSHOPT evicts lines without ordering them against each other; the
// fence after the last one completes them all. On the Intel guest it flushes
// 16 MB in 0.7 ms where CLFLUSH took 36 ms (CLFLUSH serialises each line):
// flushing took two thirds of a tuning job there.
__attribute__((target("clflushopt"))) void FlushLinesOpt(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = begin; line < end; line += 64)
    _mm_clflushopt(reinterpret_cast<void*>(line));
}

void FlushLines(uintptr_t begin, uintptr_t end) {
  for (uintptr_t line = begin; line < end; line += 64)
    _mm_clflush(reinterpret_cast<const void*>(line));
}

bool HasClflushopt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 23)) != 0;
}

void FlushRegion(const std::byte* data, size_t bytes) {
  if (!data) return;
  static const bool opt = HasClflushopt();
  const auto begin = reinterpret_cast<uintptr_t>(data) & ~uintptr_t{63};
  const auto end = reinterpret_cast<uintptr_t>(data) + bytes;
  if (opt)
    FlushLinesOpt(begin, end);
  else
    FlushLines(begin, end);
}

// What `caches` evicts before a run: everything, the weights only, or nothing.
void FlushCaches(const runtime::KernelProgram& exe, const graph::TensorMap& feeds,
                 target::CacheProtocol caches) {
  using Scope = runtime::KernelProgram::MemoryScope;
  switch (caches) {
    case target::CacheProtocol::kWarm: return;
    case target::CacheProtocol::kColdWeights: exe.VisitMemory(FlushRegion, Scope::kWeights); break;
    case target::CacheProtocol::kFlushed:
      exe.VisitMemory(FlushRegion, Scope::kAll);
      for (const auto& [name, t] : feeds) FlushRegion(t.raw(), t.nbytes());
      break;
  }
  _mm_mfence();
}

std::vector<int64_t> Unravel(int64_t index, const graph::Dims& dims) {
  std::vector<int64_t> position(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    position[d] = dims[d] ? index % dims[d] : 0;
    index = dims[d] ? index / dims[d] : 0;
  }
  return position;
}

struct RunSamples {
  std::vector<double> wall, busy, overhead;
  double total = 0;
  graph::TensorMap outputs;
  kernels::KernelStats stats;
};

// A group measured alone: its edge transforms out of the run's time and
// traffic (MeasureOptions::time_layout_transforms).
void SubtractLayoutTransforms(runtime::RunReport* report) {
  for (const runtime::StepReport& step : report->steps) {
    if (!step.layout_transform) continue;
    report->seconds -= step.seconds;
    report->total.busy_seconds -= step.stats.busy_seconds;
    report->total.bytes_global_to_local -= step.stats.bytes_global_to_local;
    report->total.bytes_local_to_global -= step.stats.bytes_local_to_global;
    report->total.tiles -= step.stats.tiles;
  }
}

// Runs in `mode` until the options' minimum count and time are reached.
Result<RunSamples> Repeat(runtime::KernelProgram& exe, const graph::TensorMap& feeds,
                          const MeasureOptions& options, const MeasureHooks& hooks,
                          kernels::RunMode mode) {
  RunSamples samples;
  for (int i = 0; i < options.max_repeats; ++i) {
    if (i >= options.min_repeats && samples.total >= options.min_seconds) break;
    if (hooks.before_run) hooks.before_run(exe.graph());
    // The last run's outputs let go first, so that this run writes into
    // them as a caller's loop does (a fresh output costs page faults).
    samples.outputs.clear();
    FlushCaches(exe, feeds, options.caches);
    runtime::RunReport report;
    FT_ASSIGN_OR_RETURN(samples.outputs, exe.Run(feeds, &report, mode));
    if (!options.time_layout_transforms) SubtractLayoutTransforms(&report);
    samples.wall.push_back(report.seconds);
    samples.busy.push_back(report.total.busy_seconds);
    samples.overhead.push_back(std::max(0.0, report.seconds - report.total.busy_seconds));
    samples.stats = report.total;
    samples.total += report.seconds;
  }
  return samples;
}

double Median(std::vector<double> v) { return Summarize(std::move(v)).median; }

}  // namespace

target::CacheProtocol CacheProtocolOf(const MeasureOptions& o) {
  return o.caches;
}

double CompareOutputs(const graph::TensorMap& got, const graph::TensorMap& want,
                      std::optional<WorstElement>* worst) {
  std::optional<WorstElement> unused;
  if (!worst) worst = &unused;
  double max_error = 0;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.numel() != w.numel()) {
      *worst = WorstElement{name, {}, 0, 0, INFINITY};
      return INFINITY;
    }
    const graph::Tensor& g = it->second;
    double scale = 1e-30;
    for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::abs(w.GetAsDouble(i)));
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double gi = g.GetAsDouble(i), wi = w.GetAsDouble(i);
      double e = std::abs(gi - wi) / scale;
      if (!std::isfinite(gi) && std::isfinite(wi)) e = INFINITY;
      if (e > max_error || (!worst->has_value() && i == 0)) {
        if (e > max_error) max_error = e;
        *worst = WorstElement{name, Unravel(i, w.dims()), gi, wi, e};
      }
    }
  }
  return max_error;
}

TimeStats Summarize(std::vector<double> seconds) {
  TimeStats s;
  if (seconds.empty()) return s;
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  s.count = static_cast<int64_t>(n);
  s.min = seconds.front();
  s.max = seconds.back();
  s.median = n % 2 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  // Interquartile range: one preempted run should not make a stable
  // measurement look noisy (min and max show the extremes).
  auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(n - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, n - 1);
    return seconds[lo] + (pos - static_cast<double>(lo)) * (seconds[hi] - seconds[lo]);
  };
  s.spread = s.median > 0 ? (quantile(0.75) - quantile(0.25)) / s.median : 0;
  return s;
}

MeasureResult MeasureResult::Failure(MeasureStatus status, std::string why) {
  MeasureResult r;
  r.status = status;
  r.error = std::move(why);
  return r;
}

Result<ReferenceData> ComputeReference(const graph::Graph& graph, uint64_t seed) {
  ReferenceData data;
  data.feeds = graph::RandomFeeds(graph, seed);
  FT_ASSIGN_OR_RETURN(graph::ReferenceResult ref, graph::RunReference(graph, data.feeds));
  data.expected = std::move(ref.outputs);
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n)
    data.flops += graph::ComputeNodeCost(graph, n).flops;
  for (graph::ValueId v = 0; v < static_cast<graph::ValueId>(graph.values.size()); ++v) {
    const graph::Value& value = graph.value(v);
    if (value.is_input || value.is_constant()) data.compulsory_bytes += value.type.nbytes();
  }
  for (graph::ValueId v : graph.outputs) data.compulsory_bytes += graph.type(v).nbytes();
  return data;
}

MeasureResult MeasureProgram(runtime::KernelProgram& exe, const ReferenceData& reference,
                             const MeasureOptions& options, const MeasureHooks& hooks) {
  const auto start = std::chrono::steady_clock::now();
  const graph::TensorMap& feeds = reference.feeds;
  double warmup_seconds = 0;
  for (int i = 0; i < options.warmup_runs; ++i) {
    if (hooks.before_run) hooks.before_run(exe.graph());
    runtime::RunReport report;
    if (auto warm = exe.Run(feeds, &report); !warm.ok())
      return MeasureResult::Failure(MeasureStatus::kFailed, warm.error().ToString());
    warmup_seconds += report.seconds;
  }
  auto full = Repeat(exe, feeds, options, hooks, kernels::RunMode::kFull);
  if (!full.ok()) return MeasureResult::Failure(MeasureStatus::kFailed, full.error().ToString());

  MeasureResult r;
  r.status = MeasureStatus::kOk;
  r.threads = options.threads;
  r.caches_flushed = options.caches == target::CacheProtocol::kFlushed;
  r.launches = exe.num_steps() - (options.time_layout_transforms ? 0 : exe.layout_transforms());
  r.run_seconds = warmup_seconds + full->total;
  r.time = Summarize(full->wall);
  r.busy = Summarize(full->busy);
  r.bytes_in = full->stats.bytes_global_to_local;
  r.bytes_out = full->stats.bytes_local_to_global;
  r.overhead_seconds = Median(full->overhead);
  r.overhead_per_launch_seconds = r.launches ? r.overhead_seconds / r.launches : 0;
  if (r.time.median > 0)
    r.bandwidth_gbps = static_cast<double>(r.bytes_in + r.bytes_out) / r.time.median * 1e-9;
  r.flops = reference.flops;
  r.compulsory_bytes = reference.compulsory_bytes;
  if (options.peak_gflops > 0 && options.dram_gbps > 0 && r.time.median > 0) {
    const double bound = std::max(r.flops / (options.peak_gflops * 1e9),
                                  r.compulsory_bytes / (options.dram_gbps * 1e9));
    r.roofline_fraction = bound / r.time.median;
  }

  if (hooks.on_outputs) hooks.on_outputs(exe.graph(), full->outputs);
  if (options.verify) {
    r.max_error = CompareOutputs(full->outputs, reference.expected, &r.worst);
    if (!(r.max_error <= options.tolerance)) {
      r.status = MeasureStatus::kWrong;
      const WorstElement& w = *r.worst;
      r.error = fmt::format(
          "output '{}' differs from the reference executor at [{}]: got {:.6g}, want {:.6g} "
          "(error {:.3g} of the output's scale, tolerance {:.3g})",
          w.output, fmt::join(w.position, ", "), w.got, w.want, w.error, options.tolerance);
      r.measure_seconds = Since(start);
      return r;
    }
  }

  if (options.measure_overlap) {
    auto copy = Repeat(exe, feeds, options, hooks, kernels::RunMode::kCopyOnly);
    auto compute = Repeat(exe, feeds, options, hooks, kernels::RunMode::kComputeOnly);
    if (!copy.ok() || !compute.ok())
      return MeasureResult::Failure(MeasureStatus::kFailed,
                                    (copy.ok() ? compute.error() : copy.error()).ToString());
    r.run_seconds += copy->total + compute->total;
    r.copy_busy = Summarize(copy->busy);
    r.compute_busy = Summarize(compute->busy);
    // Inside-kernel times, so that the launch overhead common to all three
    // modes does not count as overlap.
    const double t_copy = r.copy_busy.median, t_compute = r.compute_busy.median;
    const double shorter = std::min(t_copy, t_compute);
    r.overlap =
        shorter > 0 ? std::clamp((t_copy + t_compute - r.busy.median) / shorter, 0.0, 1.0) : 0.0;
  }
  r.measure_seconds = Since(start);
  return r;
}

}  // namespace fusetune::measure
