// The kernel benchmarks' entry point: measures the roofline first, records it
// in the run's context, then runs every registered benchmark.
//
//   build/bench/bench_kernels [--benchmark_format=json] [--benchmark_filter=REGEX]
#include "bench/bench_common.h"

#include <fmt/format.h>

#include "common/rng.h"

namespace fusetune::bench {

const target::Roofline& Roof() {
  static const target::Roofline roof = measure::MeasureRoofline(kThreads);
  return roof;
}

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.Normal()) * scale;
  return v;
}

kernels::GemmDesc DenseGemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                            float* c) {
  kernels::GemmDesc d;
  d.m = m;
  d.k = k;
  d.a = a;
  d.a_row_stride = k;
  kernels::GemmOutput& out = d.outputs.emplace_back();
  out.n = n;
  out.b = b;
  out.b_row_stride = n;
  out.c = c;
  out.c_row_stride = n;
  return d;
}

kernels::GemmTiling GemmTilingOf(int mr, int nr, int64_t mc, int64_t nc, int64_t kc,
                                 kernels::ParallelSplit split, bool double_buffer,
                                 kernels::Precision precision) {
  kernels::GemmTiling t;
  t.mr = mr;
  t.nr = nr;
  t.mc = mc;
  t.nc = nc;
  t.kc = kc;
  t.split = split;
  t.double_buffer = double_buffer;
  t.precision = precision;
  return t;
}

void ReportFlops(benchmark::State& state, double flops, double seconds) {
  if (seconds <= 0) return;
  const double gflops = flops * static_cast<double>(state.iterations()) / seconds * 1e-9;
  state.counters["gflops"] = gflops;
  state.counters["frac_roofline"] = gflops / Roof().fma_gflops;
}

void ReportBytes(benchmark::State& state, double bytes, double seconds) {
  if (seconds <= 0) return;
  const double gbps = bytes * static_cast<double>(state.iterations()) / seconds * 1e-9;
  state.counters["gbps"] = gbps;
  state.counters["frac_roofline"] = gbps / Roof().copy_gbps;
}

void ReportTraffic(benchmark::State& state, const kernels::KernelStats& stats) {
  state.counters["traffic_mb"] = (stats.bytes_global_to_local + stats.bytes_local_to_global) / 1e6;
}

}  // namespace fusetune::bench

int main(int argc, char** argv) {
  using namespace fusetune::bench;
  benchmark::Initialize(&argc, argv);
  const auto& roof = Roof();
  benchmark::AddCustomContext("roofline", roof.ToString());
  benchmark::AddCustomContext("fma_peak_gflops", fmt::format("{:.1f}", roof.fma_gflops));
  benchmark::AddCustomContext("dram_copy_gbps", fmt::format("{:.1f}", roof.copy_gbps));
  RegisterGemmBenchmarks();
  RegisterGemmBf16Benchmarks();
  RegisterGemmDecodeBenchmarks();
  RegisterRowwiseBenchmarks();
  RegisterAttentionBenchmarks();
  RegisterFfnBenchmarks();
  RegisterPeerBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
