// Kernel benchmarks (issue 3). So far: GEMM 384x768x3072 with a bias + GELU
// epilogue at several tilings and in the three run modes (0 full, 1 copy
// only, 2 compute only), reporting GFLOP/s and the bytes the kernel copied
// between global and local memory.
//
//   build/bench/bench_kernels [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include <vector>

#include "common/rng.h"
#include "kernels/gemm.h"

namespace fusetune::kernels {
namespace {

struct GemmData {
  int64_t m = 384, n = 3072, k = 768;
  std::vector<float> a, b, bias, c;
  GemmData() : a(m * k), b(k * n), bias(n), c(m * n) {
    Rng rng(1);
    for (float& x : a) x = static_cast<float>(rng.Normal());
    for (float& x : b) x = static_cast<float>(rng.Normal());
    for (float& x : bias) x = static_cast<float>(rng.Normal());
  }
  GemmDesc Desc() {
    GemmDesc d;
    d.m = m;
    d.k = k;
    d.a = a.data();
    d.a_row_stride = k;
    GemmOutput& out = d.outputs.emplace_back();
    out.n = n;
    out.b = b.data();
    out.b_row_stride = n;
    out.c = c.data();
    out.c_row_stride = n;
    out.epilogue = {EpilogueOp::Bias(bias.data()), EpilogueOp::Act(EpilogueKind::kGeluErf)};
    return d;
  }
};

void BM_GemmBiasGelu(benchmark::State& state) {
  static GemmData data;
  GemmTiling t;
  t.mr = static_cast<int>(state.range(0));
  t.nr = static_cast<int>(state.range(1));
  t.mc = state.range(2);
  t.nc = state.range(3);
  t.kc = state.range(4);
  t.split = ParallelSplit::kN;
  KernelConfig config;
  const auto mode = static_cast<RunMode>(state.range(5));
  const GemmDesc d = data.Desc();
  KernelStats stats;
  for (auto _ : state) {
    auto r = RunGemm(d, t, config, mode);
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    stats = *r;
  }
  const double flops = 2.0 * data.m * data.n * data.k;
  state.counters["gflops"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["traffic_mb"] = (stats.bytes_global_to_local + stats.bytes_local_to_global) / 1e6;
  state.SetLabel(t.ToString());
}
BENCHMARK(BM_GemmBiasGelu)
    ->ArgNames({"mr", "nr", "mc", "nc", "kc", "mode"})
    ->Args({8, 32, 96, 256, 256, 0})
    ->Args({8, 32, 96, 256, 256, 1})
    ->Args({8, 32, 96, 256, 256, 2})
    ->Args({8, 32, 128, 384, 192, 0})
    ->Args({8, 32, 64, 768, 192, 0})
    ->Args({14, 16, 112, 256, 256, 0})
    ->Args({6, 16, 96, 256, 256, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace fusetune::kernels

BENCHMARK_MAIN();
