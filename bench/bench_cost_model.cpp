// cost_model/ benchmarks (issue 7): prediction throughput on 2 threads.
//   cost_model/features  feature extraction of sampled tilings of a BERT
//                        layer's tasks: candidates per second (1 thread)
//   cost_model/predict   a trained XGBoost model ("corrected" form, 3-member
//                        ensemble) predicting batches of 100,000 candidates:
//                        candidates per second
#include <benchmark/benchmark.h>

#include <chrono>

#include "common/rng.h"
#include "cost_model/xgboost_model.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "search/tasks.h"

namespace fusetune::bench {
namespace {

constexpr int kBatch = 100000;

struct Population {
  cost_model::Dataset data;  // features of kBatch candidates, synthetic labels
};

const Population& GetPopulation() {
  static const Population* p = [] {
    auto* pop = new Population;
    auto g =
        graph::ImportOnnxFile(std::string(FUSETUNE_TESTDATA_DIR) + "/encoder_postln_op13.onnx");
    if (!g.ok() || !graph::RunStandardPasses(*g).ok()) return pop;
    static graph::Graph graph = std::move(*g);
    static fusion_space::FusionSpace space(graph, kernels::KernelConfig{});
    static std::vector<search::Task> tasks = search::ExtractTasks(graph, space);
    Rng rng(1);
    cost_model::TargetFeatures target;
    for (int i = 0; i < kBatch; ++i) {
      const search::Task& t = tasks[static_cast<size_t>(i) % tasks.size()];
      static std::map<std::string, cost_model::GroupInfo> infos;
      auto it = infos.find(t.key.ToString());
      if (it == infos.end())
        it = infos.emplace(t.key.ToString(), cost_model::MakeGroupInfo(*t.graph, t.instance()))
                 .first;
      pop->data.x.Add(it->second, t.tilings().Sample(rng), target);
      cost_model::Sample s;
      s.workload = static_cast<int>(static_cast<size_t>(i) % tasks.size());
      const auto& a = pop->data.x.parts.back();
      s.seconds = a.compute + a.memory + a.overhead;
      s.traffic_bytes = a.traffic_bytes;
      s.overhead = a.overhead;
      s.eta = 0.5;
      pop->data.y.push_back(s);
    }
    for (size_t w = 0; w < tasks.size(); ++w) pop->data.workload_keys.push_back(std::to_string(w));
    return pop;
  }();
  return *p;
}

void Features(benchmark::State& state) {
  const Population& pop = GetPopulation();
  if (pop.data.size() == 0) return state.SkipWithError("model not found");
  // Re-extract the population's first 10,000 rows through the public path.
  auto g = graph::ImportOnnxFile(std::string(FUSETUNE_TESTDATA_DIR) + "/encoder_postln_op13.onnx");
  (void)graph::RunStandardPasses(*g);
  fusion_space::FusionSpace space(*g, kernels::KernelConfig{});
  const std::vector<search::Task> tasks = search::ExtractTasks(*g, space);
  std::vector<cost_model::GroupInfo> infos;
  for (const search::Task& t : tasks)
    infos.push_back(cost_model::MakeGroupInfo(*t.graph, t.instance()));
  Rng rng(2);
  std::vector<fusion_space::Tiling> tilings;
  for (int i = 0; i < 10000; ++i) tilings.push_back(tasks[i % tasks.size()].tilings().Sample(rng));
  int64_t n = 0;
  for (auto _ : state) {
    cost_model::FeatureMatrix x;
    for (int i = 0; i < 10000; ++i) x.Add(infos[i % infos.size()], tilings[i], {});
    benchmark::DoNotOptimize(x.values.data());
    n += 10000;
  }
  state.counters["candidates_per_second"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

void Predict(benchmark::State& state) {
  const Population& pop = GetPopulation();
  if (pop.data.size() == 0) return state.SkipWithError("model not found");
  cost_model::XgboostOptions o;
  o.rounds = 300;
  auto model = cost_model::TrainXgboostModel(pop.data.Subset({0, 1, 2, 3, 4, 5, 6, 7}), o);
  if (!model.ok()) return state.SkipWithError(model.error().message().c_str());
  int64_t n = 0;
  for (auto _ : state) {
    auto p = (*model)->Predict(pop.data.x);
    benchmark::DoNotOptimize(p.data());
    n += pop.data.size();
  }
  state.counters["candidates_per_second"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}

}  // namespace
}  // namespace fusetune::bench

BENCHMARK(fusetune::bench::Features)->Name("cost_model/features")->Unit(benchmark::kMillisecond);
BENCHMARK(fusetune::bench::Predict)
    ->Name("cost_model/predict")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();  // XGBoost predicts on its own threads
BENCHMARK_MAIN();
