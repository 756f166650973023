// measure/ benchmarks (issue 5), through the worker process as the tuner uses it:
//   measure/fixed_cost      what measuring costs beyond the candidate's own
//                           runs, for the small groups of the example model
//   measure/repeatability   one candidate measured 10 times: spread of the medians
//   measure/retest          the example's group candidates measured in 5
//                           passes: how alike the passes order them
//   measure/double_buffer   eta and time with and without double buffering on a
//                           memory-bound and a compute-bound GEMM
//   measure/fresh_worker    the example's unfused plan (98 launches) as the
//                           first candidate of 5 new workers, against the
//                           same plan measured next in each
// Each benchmark runs once (Iterations(1)) and reports counters.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "common/rng.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "graph/reference_executor.h"
#include "measure/measurer.h"
#include "measure/roofline.h"

namespace fusetune::bench {
namespace {

measure::Measurer& SharedMeasurer() {
  static auto m = measure::Measurer::Create(FUSETUNE_WORKER);
  if (!m.ok()) std::abort();
  return **m;
}

std::vector<int32_t> AllNodes(const graph::Graph& g) {
  std::vector<int32_t> all(g.nodes.size());
  std::iota(all.begin(), all.end(), 0);
  return all;
}

graph::TensorType F32(int64_t rows, int64_t cols) {
  return {graph::DataType::kFloat32, {rows, cols}, {}};
}

// relu(A x W) with W a constant: M x K times K x N.
std::shared_ptr<const graph::Graph> GemmGraph(int64_t m, int64_t k, int64_t n) {
  auto g = std::make_shared<graph::Graph>();
  g->name = fmt::format("gemm_{}x{}x{}", m, k, n);
  graph::Tensor weights(graph::DataType::kFloat32, {k, n});
  Rng rng(2);
  for (int64_t i = 0; i < k * n; ++i) weights.data<float>()[i] = static_cast<float>(rng.Normal());
  const graph::ValueId a = g->AddInput("a", F32(m, k));
  const graph::ValueId w = g->AddConstant("w", std::move(weights));
  graph::ValueId x = a;
  for (const char* op : {"MatMul", "Relu"}) {
    const graph::ValueId y = g->AddValue(std::string(op) + "_out");
    g->value(y).type = F32(m, n);
    g->value(y).has_type = true;
    graph::Node node{op, "", op, {x}, {y}, {}};
    if (x == a) node.inputs.push_back(w);
    g->AddNode(std::move(node));
    x = y;
  }
  g->outputs = {x};
  return g;
}

measure::MeasureOptions Options() {
  measure::MeasureOptions o;
  o.peak_gflops = measure::MeasureFmaPeak(2);
  o.dram_gbps = measure::MeasureBandwidth(measure::StreamKind::kRead, 2);
  if (const char* s = std::getenv("FT_MIN_SECONDS")) o.min_seconds = std::atof(s);
  if (std::getenv("FT_WARM")) o.caches = target::CacheProtocol::kWarm;
  if (const char* t = std::getenv("FT_THREADS")) o.threads = std::atoi(t);
  return o;
}
const measure::MeasureOptions& SharedOptions() {
  static const measure::MeasureOptions o = Options();
  return o;
}

// Up to eight sampled tilings of each fused group (two nodes or more) of the
// example model's greedy plan, as a tuning job measures them; `group` gets
// each candidate's group index.
struct ExampleCandidates {
  std::vector<measure::Candidate> candidates;
  std::vector<int> group;
  std::vector<std::unique_ptr<fusion_space::FusionSpace>> spaces;
};
std::optional<ExampleCandidates> ExampleGroupCandidates() {
  auto g = graph::ImportOnnxFile(std::string(FUSETUNE_SOURCE_DIR) + "/examples/encoder_small.onnx");
  if (!g.ok() || !graph::RunStandardPasses(*g).ok()) return std::nullopt;
  kernels::KernelConfig config;
  fusion_space::FusionSpace space(*g, config);
  ExampleCandidates out;
  Rng rng(11);
  for (const fusion_space::PlanGroup& group : space.Greedy().groups) {
    if (group.nodes.size() < 2) continue;
    auto sub = measure::GroupGraph(*g, group.nodes);
    out.spaces.push_back(std::make_unique<fusion_space::FusionSpace>(*sub, config));
    for (int i = 0; i < 8; ++i) {
      auto c = measure::GroupCandidate(sub, *out.spaces.back(),
                                       out.spaces.back()->Tilings(AllNodes(*sub)).Sample(rng));
      if (!c.ok()) continue;
      out.candidates.push_back(std::move(*c));
      out.group.push_back(static_cast<int>(out.spaces.size()) - 1);
    }
  }
  return out;
}

void FixedCost(benchmark::State& state) {
  auto example = ExampleGroupCandidates();
  if (!example) return state.SkipWithError("cannot load the example");
  const std::vector<measure::Candidate>& candidates = example->candidates;
  std::vector<measure::MeasureResult> results;
  for (auto _ : state) results = SharedMeasurer().MeasureBatch(candidates, SharedOptions());
  // The first candidate of each group also loads its graph and runs the
  // reference executor once; the rest reuse both.
  std::vector<double> fixed_ms, run_ms;
  int failed = 0;
  for (const auto& r : results) {
    failed += !r.ok();
    fixed_ms.push_back((r.measure_seconds - r.run_seconds) * 1e3);
    run_ms.push_back(r.run_seconds * 1e3);
  }
  std::sort(fixed_ms.begin(), fixed_ms.end());
  state.counters["candidates"] = static_cast<double>(results.size());
  state.counters["failed"] = failed;
  state.counters["fixed_ms_median"] = fixed_ms[fixed_ms.size() / 2];
  state.counters["fixed_ms_max"] = fixed_ms.back();
  state.counters["fixed_ms_mean"] =
      std::accumulate(fixed_ms.begin(), fixed_ms.end(), 0.0) / fixed_ms.size();
  state.counters["own_runs_ms_mean"] =
      std::accumulate(run_ms.begin(), run_ms.end(), 0.0) / run_ms.size();
}

void Repeatability(benchmark::State& state, int64_t m, int64_t k, int64_t n) {
  auto g = GemmGraph(m, k, n);
  fusion_space::FusionSpace space(*g, kernels::KernelConfig{});
  auto c = measure::GroupCandidate(g, space, space.Tilings(AllNodes(*g)).Default());
  if (!c.ok()) return state.SkipWithError(c.error().message().c_str());
  std::vector<double> medians;
  for (auto _ : state)
    for (int i = 0; i < 10; ++i) {
      const auto r = SharedMeasurer().Measure(*c, SharedOptions());
      if (!r.ok()) return state.SkipWithError(r.error.c_str());
      medians.push_back(r.time.median);
      if (std::getenv("FUSETUNE_BENCH_VERBOSE"))
        std::fprintf(stderr, "  %s\n", measure::ResultSummary(r).c_str());
    }
  const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
  const double mean = std::accumulate(medians.begin(), medians.end(), 0.0) / medians.size();
  state.counters["median_ms"] = mean * 1e3;
  state.counters["medians_range_pct"] = (*hi - *lo) / mean * 100;  // goal: within 3%
}

// Of the pairs of candidates of one group (`group[i]`) and the pairs of
// passes, the share whose two passes order the pair alike by `stat`.
template <typename Stat>
double PairsOrderedAlike(const std::vector<std::vector<measure::MeasureResult>>& passes,
                         const std::vector<int>& group, Stat stat) {
  int64_t same = 0, pairs = 0;
  // Pairs tied in a pass (equal times: timer resolution) order neither way
  // and are left out, not counted as disagreeing.
  auto ordered = [&](const std::vector<measure::MeasureResult>& pass, size_t i, size_t j) {
    if (!pass[i].ok() || !pass[j].ok() || stat(pass[i]) == stat(pass[j]))
      return std::optional<bool>();
    return std::optional<bool>(stat(pass[i]) < stat(pass[j]));
  };
  for (size_t a = 0; a < passes.size(); ++a)
    for (size_t b = a + 1; b < passes.size(); ++b)
      for (size_t i = 0; i < group.size(); ++i)
        for (size_t j = i + 1; j < group.size(); ++j) {
          if (group[i] != group[j]) continue;
          const auto in_a = ordered(passes[a], i, j), in_b = ordered(passes[b], i, j);
          if (!in_a || !in_b) continue;
          ++pairs;
          same += *in_a == *in_b;
        }
  return pairs > 0 ? static_cast<double>(same) / static_cast<double>(pairs) : 0.0;
}

// The same candidates measured again: what a tuning label is worth. Every
// candidate of ExampleGroupCandidates measured in 5 passes (one batch each,
// as a tuning job measures). Counters: the spread of a candidate's medians
// over the passes ((max - min) / mean, its median over candidates) against
// the spread inside one measurement (interquartile range / median); and the
// share of a group's candidate pairs that two passes order alike, by the
// medians and by the fastest repeats (1: the passes agree; 0.5: chance).
void Retest(benchmark::State& state) {
  auto example = ExampleGroupCandidates();
  if (!example) return state.SkipWithError("cannot load the example");
  constexpr int kPasses = 5;
  std::vector<std::vector<measure::MeasureResult>> passes;
  for (auto _ : state)
    for (int p = 0; p < kPasses; ++p)
      passes.push_back(SharedMeasurer().MeasureBatch(example->candidates, SharedOptions()));
  const size_t n = example->candidates.size();
  std::vector<double> between, within;
  for (size_t c = 0; c < n; ++c) {
    std::vector<double> medians;
    for (const auto& pass : passes)
      if (pass[c].ok()) {
        medians.push_back(pass[c].time.median);
        within.push_back(pass[c].time.spread);
      }
    if (medians.size() < 2) continue;
    const auto [lo, hi] = std::minmax_element(medians.begin(), medians.end());
    between.push_back((*hi - *lo) / (std::accumulate(medians.begin(), medians.end(), 0.0) /
                                     static_cast<double>(medians.size())));
  }
  auto median_of = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  state.counters["candidates"] = static_cast<double>(n);
  state.counters["between_passes_range_pct"] = median_of(between) * 100;
  state.counters["within_iqr_pct"] = median_of(within) * 100;
  state.counters["pairs_agree_median"] = PairsOrderedAlike(
      passes, example->group, [](const measure::MeasureResult& r) { return r.time.median; });
  state.counters["pairs_agree_fastest"] = PairsOrderedAlike(
      passes, example->group, [](const measure::MeasureResult& r) { return r.time.min; });
}

// The machine's own noise: the FMA peak loop measured 10 times. When this
// varies as much as the kernels' medians, the spread is the machine's.
void FmaProbe(benchmark::State& state) {
  std::vector<double> gflops;
  for (auto _ : state)
    for (int i = 0; i < 10; ++i) gflops.push_back(measure::MeasureFmaPeak(2));
  const auto [lo, hi] = std::minmax_element(gflops.begin(), gflops.end());
  const double mean = std::accumulate(gflops.begin(), gflops.end(), 0.0) / gflops.size();
  state.counters["gflops"] = mean;
  state.counters["range_pct"] = (*hi - *lo) / mean * 100;
}

void DoubleBuffer(benchmark::State& state, int64_t m, int64_t k, int64_t n, bool on) {
  auto g = GemmGraph(m, k, n);
  fusion_space::FusionSpace space(*g, kernels::KernelConfig{});
  const fusion_space::TilingSpace& tilings = space.Tilings(AllNodes(*g));
  // The same blocks both ways: the blocks nearest the default's (same
  // micro-tile and loop order) that also fit twice over.
  const auto def = std::get<kernels::GemmTiling>(tilings.Default());
  auto distance = [&](const kernels::GemmTiling& t) {
    return std::abs(std::log(double(t.mc) / def.mc)) + std::abs(std::log(double(t.nc) / def.nc)) +
           std::abs(std::log(double(t.kc) / def.kc));
  };
  std::optional<fusion_space::Tiling> best;
  double best_distance = INFINITY;
  for (const fusion_space::Tiling& candidate : tilings.Enumerate()) {
    auto gt = std::get<kernels::GemmTiling>(candidate);
    if (!gt.double_buffer || gt.mr != def.mr || gt.nr != def.nr || gt.order != def.order ||
        gt.split != def.split)
      continue;
    gt.double_buffer = false;
    if (!tilings.Check(gt)) continue;
    if (distance(gt) < best_distance) {
      best_distance = distance(gt);
      best = candidate;
    }
  }
  if (!best) return state.SkipWithError("no tiling fits with double buffering");
  fusion_space::Tiling t = *best;
  std::get<kernels::GemmTiling>(t).double_buffer = on;
  auto c = measure::GroupCandidate(g, space, t);
  if (!c.ok()) return state.SkipWithError(c.error().message().c_str());
  measure::MeasureResult r;
  for (auto _ : state) r = SharedMeasurer().Measure(*c, SharedOptions());
  if (!r.ok()) return state.SkipWithError(r.error.c_str());
  state.SetLabel(std::get<kernels::GemmTiling>(t).ToString());
  state.counters["time_ms"] = r.time.median * 1e3;
  state.counters["eta"] = r.overlap;
  state.counters["copy_ms"] = r.copy_busy.median * 1e3;
  state.counters["compute_ms"] = r.compute_busy.median * 1e3;
  state.counters["frac_roofline"] = r.roofline_fraction;
}

// A tuning job's first candidate is the unfused plan, measured by a worker
// process that has just started: its time should be the worker's later time.
void FreshWorker(benchmark::State& state) {
  auto g = graph::ImportOnnxFile(std::string(FUSETUNE_SOURCE_DIR) + "/examples/encoder_small.onnx");
  if (!g.ok() || !graph::RunStandardPasses(*g).ok())
    return state.SkipWithError("cannot load the example");
  auto graph = std::make_shared<const graph::Graph>(std::move(*g));
  fusion_space::FusionSpace space(*graph, kernels::KernelConfig{});
  const measure::Candidate c = measure::PlanCandidate(graph, space, space.Unfused(), "unfused");
  std::vector<double> first_ms, next_ms, first_launch_us, next_launch_us;
  for (auto _ : state)
    for (int i = 0; i < 5; ++i) {
      auto measurer = measure::Measurer::Create(FUSETUNE_WORKER);
      if (!measurer.ok()) return state.SkipWithError(measurer.error().message().c_str());
      for (auto* out : {&first_ms, &next_ms}) {
        const auto r = (*measurer)->Measure(c, SharedOptions());
        if (!r.ok()) return state.SkipWithError(r.error.c_str());
        out->push_back(r.time.median * 1e3);
        (out == &first_ms ? first_launch_us : next_launch_us)
            .push_back(r.overhead_per_launch_seconds * 1e6);
      }
    }
  auto median = [](std::vector<double> v) { return measure::Summarize(std::move(v)).median; };
  state.counters["first_ms"] = median(first_ms);
  state.counters["next_ms"] = median(next_ms);
  state.counters["first_over_next"] = median(first_ms) / median(next_ms);
  state.counters["first_launch_us"] = median(first_launch_us);
  state.counters["next_launch_us"] = median(next_launch_us);
}

void Register() {
  benchmark::RegisterBenchmark("measure/fixed_cost/encoder_small_groups", FixedCost)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  for (auto [m, k, n] : {std::tuple{128, 768, 768}, std::tuple{384, 768, 3072}})
    benchmark::RegisterBenchmark(
        fmt::format("measure/repeatability/gemm_{}x{}x{}", m, k, n).c_str(),
        [=](benchmark::State& s) { Repeatability(s, m, k, n); })
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("measure/retest/encoder_small_groups", Retest)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("measure/repeatability/fma_peak_probe", FmaProbe)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
  struct Case {
    const char* bound;
    int64_t m, k, n;
  };
  for (const Case& c : {Case{"memory", 8, 3072, 3072}, Case{"compute", 384, 768, 3072}})
    for (bool on : {false, true})
      benchmark::RegisterBenchmark(fmt::format("measure/double_buffer/{}_gemm_{}x{}x{}/{}", c.bound,
                                               c.m, c.k, c.n, on ? "on" : "off")
                                       .c_str(),
                                   [=](benchmark::State& s) { DoubleBuffer(s, c.m, c.k, c.n, on); })
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("measure/fresh_worker/encoder_small_unfused", FreshWorker)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace fusetune::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  fusetune::bench::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
