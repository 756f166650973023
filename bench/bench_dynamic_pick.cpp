// bench_dynamic_pick: what picking a size's program costs a run of an
// executable with dynamic dimensions (compiler/shape_instances.h; issue 39
// asks for < 10 us a call). Four sizes of a two-input model are made
// first; each iteration then picks the program for the next of them (a
// switch every call, the worst case) or for the same one (a run at the
// size of the last), from the feeds' shapes as a run gives them. Making
// an instance (import and compile at a new size) is timed separately.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>

#include "compiler/shape_instances.h"
#include "graph/text_format.h"

namespace fusetune::compiler {
namespace {

std::string Model(int64_t seq) {
  return fmt::format(R"(graph g {{ input x: f32[1, seq={0}, 256]  input mask: f32[1, seq={0}]
    const w: f32[256, 256]  h = MatMul(x, w)  r = Relu(h)  output r  output mask }})",
                     seq);
}

std::unique_ptr<TuningIndex>& Index() {
  static std::unique_ptr<TuningIndex> index = TuningIndex::Empty({});
  return index;
}

Result<std::unique_ptr<CompiledModel>> CompileAt(const ShapeInstances::Dims& dims) {
  FT_ASSIGN_OR_RETURN(graph::Graph g, graph::ParseGraphText(Model(dims.at("seq"))));
  return CompiledModel::Compile(std::move(g), {}, *Index(), {});
}

std::unique_ptr<ShapeInstances> FourSizes() {
  auto s = ShapeInstances::Make(std::move(CompileAt({{"seq", 1}}).value()), {{"seq", 1}}, {"seq"},
                                CompileAt)
               .value();
  for (int64_t seq : {16, 64, 256}) {
    const std::vector<int64_t> x = {1, seq, 256}, mask = {1, seq};
    (void)s->Pick([&](const std::string& n) { return n == "x" ? &x : &mask; }).value();
  }
  return s;
}

void BM_Pick(benchmark::State& state) {
  auto s = FourSizes();
  const bool switching = state.range(0) != 0;
  std::vector<std::vector<int64_t>> xs, masks;
  for (int64_t seq : {1, 16, 64, 256}) {
    xs.push_back({1, seq, 256});
    masks.push_back({1, seq});
  }
  size_t i = 0;
  for (auto _ : state) {
    if (switching) i = (i + 1) % 4;
    auto picked = s->Pick([&](const std::string& n) { return n == "x" ? &xs[i] : &masks[i]; });
    benchmark::DoNotOptimize(picked);
  }
  state.SetLabel(switching ? "another size every call" : "the last call's size");
}
BENCHMARK(BM_Pick)->Arg(0)->Arg(1);

void BM_MakeInstance(benchmark::State& state) {
  int64_t seq = 2;
  for (auto _ : state) {
    auto model = CompileAt({{"seq", ++seq}});
    benchmark::DoNotOptimize(model);
  }
  state.SetLabel("parse and compile a 2-group model at a new size");
}
BENCHMARK(BM_MakeInstance)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fusetune::compiler

BENCHMARK_MAIN();
