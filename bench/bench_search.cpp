// bench_search: how efficiently the tuner's tiling search finds the best
// tiling (issue 8, point 7), and what 64 trials reach on a large GEMM.
//
// Part 1, search efficiency: for group workloads whose tiling spaces are
// small enough to measure exhaustively, every tiling is measured once on
// this machine; the tuner's search (evolution.h: rounds of the predicted
// best plus epsilon random picks, analytical cost model) and random search
// are then replayed against that table, so both see the same measurements.
// Reported per workload: the best after 64 trials over the exhaustive best
// (median of 5 seeds), and the trials each needs to get within 5% of the
// exhaustive best (tuner: median of 5 seeds; random: median of 1,000 draws).
//
// Part 2: relu(A x B + bias) at 384x768x3072, 64 trials measured live, with
// caches flushed and warm: the best time as a fraction of the FMA peak, and
// the wall time spent.
//
// Usage: bench_search [--quick] [--json FILE] [--tables FILE] [--replay FILE] [--ranks FILE]
// --tables writes every measured time (workload -> tiling -> seconds);
// --replay reads such a file instead of measuring part 1 and skips part 2,
// so that search and cost-model changes can be compared on the same times;
// --ranks writes, per workload, every tiling's measured and analytical
// seconds (workload -> tiling -> [measured, analytical]): where the
// analytical ranking and the measurements disagree is where search spends
// its trials.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "graph/text_format.h"
#include "measure/calibrate.h"
#include "measure/measurer.h"
#include "search/evolution.h"
#include "target/calibration.h"
#include "target/target.h"

namespace fusetune {
namespace {

struct Workload {
  std::string name, text;
};

std::string Gemm(const std::string& name, int m, int k, int n, const std::string& epilogue) {
  std::string t = fmt::format(
      "graph {} opset 17 {{ input x: f32[{}, {}]\nconst w: f32[{}, {}]\nconst b: f32[{}]\n"
      "h = MatMul(x, w)\na = Add(h, b)\n",
      name, m, k, k, n, n);
  return t + (epilogue.empty() ? "output a }" : "y = " + epilogue + "(a)\noutput y }");
}

std::vector<Workload> Workloads() {
  return {
      {"layernorm 2048x768",
       "graph ln opset 17 { input x: f32[2048, 768]\nconst g: f32[768]\nconst b: f32[768]\n"
       "y = LayerNormalization(x, g, b) {axis=-1, epsilon=1e-5}\noutput y }"},
      {"softmax 4096x384",
       "graph sm opset 17 { input x: f32[4096, 384]\ny = Softmax(x) {axis=-1}\noutput y }"},
      // GEMM tiling spaces grow fast with the shape (7 parameters): these
      // have 5,000-6,500 legal tilings, about a minute each to measure
      // exhaustively. Smaller GEMMs run in a few microseconds, where the
      // timing noise is as large as the 5% the benchmark asks for; on 63
      // tilings (the row-wise kernels above) random search needs about 10
      // trials, so a 10x ratio is not possible there.
      {"gemm 64x128x256 +bias+relu", Gemm("g4", 64, 128, 256, "Relu")},
      {"gemm 128x128x128 +bias+sigmoid", Gemm("g5", 128, 128, 128, "Sigmoid")},
      {"gemm 128x256x64 +bias+relu", Gemm("g6", 128, 256, 64, "Relu")},
      {"gemm 32x256x256 +bias+relu", Gemm("g7", 32, 256, 256, "Relu")},
      {"gemm 64x256x128 +bias+sigmoid", Gemm("g8", 64, 256, 128, "Sigmoid")},
  };
}

struct Prepared {
  std::shared_ptr<const graph::Graph> graph;
  std::unique_ptr<fusion_space::FusionSpace> space;
  std::vector<search::Task> tasks;
  const search::Task* task = nullptr;  // the group of the whole graph
};

Prepared Prepare(const std::string& text) {
  Prepared p;
  auto g = graph::ParseGraphText(text);
  if (!g.ok()) {
    fmt::print(stderr, "bench_search: {}\n", g.error().ToString());
    std::exit(1);
  }
  p.graph = std::make_shared<const graph::Graph>(std::move(*g));
  p.space = std::make_unique<fusion_space::FusionSpace>(*p.graph, kernels::KernelConfig{});
  p.tasks = search::ExtractTasks(*p.graph, *p.space);
  for (const search::Task& t : p.tasks)
    if (!p.task || t.graph->nodes.size() > p.task->graph->nodes.size()) p.task = &t;
  return p;
}

measure::MeasureOptions Options(const cost_model::TargetFeatures& target) {
  measure::MeasureOptions o;
  o.min_seconds = 0.01;
  o.min_repeats = 5;
  o.measure_overlap = false;
  o.peak_gflops = target.peak_gflops;
  o.dram_gbps = target.dram_gbps;
  return o;
}

// Trials the tuner's search needs to get within `within` of `best`, and its
// best after `budget` trials, replayed against `table`.
std::pair<int64_t, double> ReplayTuner(const search::Task& task,
                                       const std::map<std::string, double>& table, double best,
                                       double within, int budget, uint64_t seed,
                                       const cost_model::TargetFeatures& target) {
  auto model = cost_model::MakeAnalyticalModel();
  search::TaskSearch search(task, {}, seed);
  int64_t trials = 0, reached = -1;
  double best_at_budget = INFINITY, found = INFINITY;
  while (!search.exhausted() && reached < 0) {
    const int count = search.rounds() == 0 ? 2 : 8;
    for (const search::Proposal& p : search.Propose(count, *model, target)) {
      const double t = table.at(fusion_space::TilingToString(p.tiling));
      search.AddMeasured(p.tiling, std::isfinite(t) ? std::optional<double>(t) : std::nullopt);
      found = std::min(found, t);
      if (++trials == budget) best_at_budget = found;
      if (reached < 0 && found <= best * within) reached = trials;
    }
    search.EndRound();
  }
  if (trials < budget) best_at_budget = found;
  return {reached, best_at_budget};
}

int64_t RandomTrials(const std::vector<double>& times, double best, double within, Rng& rng) {
  std::vector<double> order = times;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] <= best * within) return static_cast<int64_t>(i) + 1;
  return static_cast<int64_t>(order.size());
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace fusetune

int main(int argc, char** argv) {
  using namespace fusetune;
  bool quick = false;
  std::string json_path, tables_path, replay_path, ranks_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--sizes") {
      for (int m : {32, 64, 128, 256})
        for (int k : {64, 128, 256, 512})
          for (int n : {64, 128, 256, 512}) {
            Prepared p = Prepare(Gemm("s", m, k, n, "Relu"));
            fmt::print("{}x{}x{}: {}\n", m, k, n, p.task->tilings().size());
          }
      return 0;
    } else if (a == "--json" && i + 1 < argc)
      json_path = argv[++i];
    else if (a == "--tables" && i + 1 < argc)
      tables_path = argv[++i];
    else if (a == "--replay" && i + 1 < argc)
      replay_path = argv[++i];
    else if (a == "--ranks" && i + 1 < argc)
      ranks_path = argv[++i];
    else {
      fmt::print(stderr,
                 "usage: bench_search [--quick] [--json FILE] [--tables FILE] [--replay FILE] "
                 "[--ranks FILE]\n");
      return 2;
    }
  }
  // workload -> tiling -> seconds, and the calibration the ranking used
  nlohmann::json tables = nlohmann::json::object();
  if (!replay_path.empty()) {
    std::ifstream in(replay_path);
    tables = nlohmann::json::parse(in, nullptr, false);
    if (!in || tables.is_discarded() || !tables.is_object()) {
      fmt::print(stderr, "bench_search: {} is not a tables file written by --tables\n",
                 replay_path);
      return 2;
    }
  }
  if (!tables.contains("_calibration")) {
    fmt::print(stderr, "calibrating...\n");
    tables["_calibration"] = target::CalibrationToJson(measure::Calibrate(2));
  }
  const cost_model::TargetFeatures target = cost_model::TargetFeaturesFromCalibration(
      tables["_calibration"], target::CacheProtocol::kFlushed);
  auto measurer = measure::Measurer::Create(FUSETUNE_WORKER);
  if (!measurer.ok()) {
    fmt::print(stderr, "bench_search: {}\n", measurer.error().ToString());
    return 1;
  }
  nlohmann::json out{{"peak_gflops", target.peak_gflops}, {"workloads", nlohmann::json::array()}};
  nlohmann::json ranks = nlohmann::json::object();
  fmt::print("{:<32} {:>6} {:>10} {:>12} {:>12} {:>12} {:>7}\n", "workload", "space", "best ms",
             "64 trials", "tuner to 5%", "random to 5%", "ratio");
  for (const Workload& w : Workloads()) {
    Prepared p = Prepare(w.text);
    if (!p.task) continue;
    std::vector<fusion_space::Tiling> all = p.task->tilings().Enumerate();
    if (quick && all.size() > 200) all.resize(200);
    std::map<std::string, double> table;
    std::vector<double> times;
    const auto options = Options(target);
    if (!replay_path.empty()) {
      if (!tables.contains(w.name)) continue;
      for (const fusion_space::Tiling& t : all) {
        const auto& v =
            tables[w.name].value(fusion_space::TilingToString(t), nlohmann::json(nullptr));
        table[fusion_space::TilingToString(t)] = v.is_number() ? v.get<double>() : INFINITY;
        times.push_back(table[fusion_space::TilingToString(t)]);
      }
    }
    for (size_t i = 0; replay_path.empty() && i < all.size(); ++i) {
      auto c = measure::GroupCandidate(p.task->graph, *p.task->space, all[i], w.name);
      const auto r = c.ok() ? (*measurer)->Measure(*c, options)
                            : measure::MeasureResult::Failure(measure::MeasureStatus::kFailed, "");
      const double t = r.ok() ? r.time.median : INFINITY;
      table[fusion_space::TilingToString(all[i])] = t;
      times.push_back(t);
      if (i % 50 == 0) fmt::print(stderr, "\r{}: {}/{} measured", w.name, i, all.size());
    }
    fmt::print(stderr, "\r\033[K");
    if (quick && p.task->tilings().size() > 200) continue;  // replay needs the whole table
    for (const auto& [tiling, t] : table)
      tables[w.name][tiling] = std::isfinite(t) ? nlohmann::json(t) : nlohmann::json(nullptr);
    const double best = *std::min_element(times.begin(), times.end());
    const cost_model::GroupInfo info =
        cost_model::MakeGroupInfo(*p.task->graph, p.task->instance());
    if (!ranks_path.empty())
      for (const fusion_space::Tiling& t : all)
        ranks[w.name][fusion_space::TilingToString(t)] = {
            std::isfinite(table[fusion_space::TilingToString(t)])
                ? nlohmann::json(table[fusion_space::TilingToString(t)])
                : nlohmann::json(nullptr),
            cost_model::AnalyticalSeconds(info, t, target)};
    std::vector<int64_t> tuner_trials;
    std::vector<double> at64;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      auto [reached, b64] = ReplayTuner(*p.task, table, best, 1.05, 64, seed, target);
      tuner_trials.push_back(reached);
      at64.push_back(b64 / best);
    }
    Rng rng(7);
    std::vector<int64_t> random_trials;
    for (int d = 0; d < 1000; ++d) random_trials.push_back(RandomTrials(times, best, 1.05, rng));
    const int64_t tt = Median(tuner_trials), rt = Median(random_trials);
    const double ratio = static_cast<double>(rt) / static_cast<double>(std::max<int64_t>(tt, 1));
    fmt::print("{:<32} {:>6} {:>10.3f} {:>11.3f}x {:>12} {:>12} {:>6.1f}x\n", w.name, all.size(),
               best * 1e3, Median(at64), tt, rt, ratio);
    out["workloads"].push_back({{"name", w.name},
                                {"space", all.size()},
                                {"best_seconds", best},
                                {"best_after_64_over_exhaustive", Median(at64)},
                                {"tuner_trials_to_5pct", tt},
                                {"random_trials_to_5pct", rt}});
  }
  if (!ranks_path.empty()) std::ofstream(ranks_path) << ranks.dump(1) << "\n";
  if (!replay_path.empty()) {  // part 2 measures live
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
  }
  // Part 2: the large GEMM, 64 live trials, searched twice: with caches
  // flushed before each run (how the tuner measures) and with warm caches
  // (how TVM's auto-scheduler measures by default: enable_cpu_cache_flush is
  // off), so that the figures compare with its 61% after 64 trials.
  Prepared big = Prepare(Gemm("big", 384, 768, 3072, "Relu"));
  auto model = cost_model::MakeAnalyticalModel();
  const double flops = 2.0 * 384 * 768 * 3072;
  for (const bool flush : {true, false}) {
    search::TaskSearch search(*big.task, {}, 1);
    auto options = Options(target);
    options.caches = flush ? target::CacheProtocol::kFlushed : target::CacheProtocol::kWarm;
    cost_model::TargetFeatures protocol_target = target;
    protocol_target.warm_weights = protocol_target.warm_activations = !flush;
    const auto start = std::chrono::steady_clock::now();
    int trials = 0;
    double found = INFINITY;
    while (trials < 64) {
      const int count = search.rounds() == 0 ? 2 : 8;
      for (const search::Proposal& p : search.Propose(count, *model, protocol_target)) {
        auto c = measure::GroupCandidate(big.task->graph, *big.task->space, p.tiling, "big");
        const auto r = (*measurer)->Measure(*c, options);
        search.AddMeasured(p.tiling, r.ok() ? std::optional<double>(r.time.median) : std::nullopt);
        if (r.ok()) found = std::min(found, r.time.median);
        if (++trials == 64) break;
      }
      search.EndRound();
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double fraction = flops / found / (target.peak_gflops * 1e9);
    fmt::print(
        "{}relu(A x B + bias) 384x768x3072, caches {}: 64 trials in {:.1f} s, best {:.3f} ms = "
        "{:.0f} GFLOP/s, {:.0f}% of the FMA peak ({:.0f} GFLOP/s)\n",
        flush ? "\n" : "", flush ? "flushed" : "warm", wall, found * 1e3, flops / found / 1e9,
        100 * fraction, target.peak_gflops);
    out[flush ? "gemm_384x768x3072" : "gemm_384x768x3072_warm"] = {{"trials", 64},
                                                                   {"caches_flushed", flush},
                                                                   {"wall_seconds", wall},
                                                                   {"best_seconds", found},
                                                                   {"fraction_of_peak", fraction}};
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  if (!tables_path.empty()) std::ofstream(tables_path) << tables.dump() << "\n";
  return 0;
}
