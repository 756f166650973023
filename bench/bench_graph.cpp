// Front-end costs on the bundled example (a 2-layer BERT-style encoder):
// ONNX import with shape inference and folding, the standard passes,
// canonical workload keys, and one reference-executor run.
//
//   build/bench/bench_graph [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include "graph/analysis.h"
#include "graph/npy.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "graph/reference_executor.h"
#include "graph/workload_key.h"

namespace fusetune {
namespace {

const std::string kModel = std::string(FUSETUNE_SOURCE_DIR) + "/examples/encoder_small.onnx";

graph::Graph LoadOrDie() {
  auto g = graph::ImportOnnxFile(kModel);
  if (!g.ok()) std::abort();
  if (!graph::RunStandardPasses(*g).ok()) std::abort();
  return std::move(*g);
}

void BM_ImportAndPasses(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(LoadOrDie());
}
BENCHMARK(BM_ImportAndPasses)->Unit(benchmark::kMillisecond);

void BM_WholeGraphKey(benchmark::State& state) {
  const graph::Graph g = LoadOrDie();
  for (auto _ : state) benchmark::DoNotOptimize(graph::CanonicalizeGraph(g));
  state.counters["nodes"] = static_cast<double>(g.nodes.size());
}
BENCHMARK(BM_WholeGraphKey)->Unit(benchmark::kMicrosecond);

void BM_FindLayers(benchmark::State& state) {
  const graph::Graph g = LoadOrDie();
  for (auto _ : state) benchmark::DoNotOptimize(graph::FindLayers(g));
}
BENCHMARK(BM_FindLayers)->Unit(benchmark::kMicrosecond);

void BM_ReferenceRun(benchmark::State& state) {
  const graph::Graph g = LoadOrDie();
  const graph::TensorMap feeds = graph::RandomFeeds(g, 1);
  for (auto _ : state) benchmark::DoNotOptimize(graph::RunReference(g, feeds));
  const double flops = graph::SummarizeGraph(g).flops;
  state.counters["gflops"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ReferenceRun)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fusetune

BENCHMARK_MAIN();
