// Winograd convolution (kernels/conv_winograd.cpp) on ResNet-50's 3x3
// stride-1 layers, pre-packed weights, a handful of tilings per layer, on 2
// threads and on 1. Counters: `eff_gflops` = 2 * the direct definition's
// MACs / time (what a direct kernel would have to reach to be as fast) and
// `frac_peak`, that rate over the FMA peak calibrated on the Zen 5 guest
// (519 GFLOP/s on 2 threads, 286 on 1, bench/README.md); `traffic_mb` the
// bytes the kernel copied.
// F(2x2) runs in bf16 as well (its name ends in "bf16"), beside its f32 form.
// Times are each benchmark's fastest iteration. reference/gemm_512 is the
// GEMM template timed alike, the yardstick when the guest is busy.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/conv.h"
#include "kernels/gemm.h"

namespace fusetune::bench {
namespace {

using kernels::ConvAlgorithm;
using kernels::ConvDesc;
using kernels::ConvShape;
using kernels::ConvTiling;

// The Zen 5 guest's calibrated FMA peak (bench/README.md).
double PeakGflops(int threads) { return threads == 1 ? 286 : 519; }

ConvShape Layer(int64_t c, int64_t hw) {
  ConvShape s;
  s.in_channels = s.out_channels = c;
  s.in_h = s.in_w = s.out_h = s.out_w = hw;
  s.kernel_h = s.kernel_w = 3;
  s.pad_top = s.pad_left = 1;
  return s;
}

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

void Run(benchmark::State& state, ConvShape s, ConvTiling t, int threads) {
  std::vector<float> x = Random(s.in_channels * s.in_h * s.in_w, 1);
  std::vector<float> w = Random(s.out_channels * s.in_channels * 9, 2);
  std::vector<float> b = Random(s.out_channels, 3);
  std::vector<float> y(s.out_channels * s.pixels());
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.bias = b.data();
  d.y = y.data();
  d.epilogue.push_back(kernels::EpilogueOp::Act(kernels::EpilogueKind::kRelu));
  std::vector<float> packed(kernels::PrePackedConvWeightFloats(d, t));
  kernels::PrePackConvWeights(d, t, packed.data());
  d.w_packed = packed.data();
  kernels::KernelConfig config;
  config.threads = threads;
  kernels::KernelStats stats;
  // The fastest iteration: the guest's two cores are shared, and a run that
  // lost its core for a while says nothing about the kernel.
  double best = 1e30;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto r = kernels::RunConv(d, t, config);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    stats = *r;
    best = std::min(best, seconds);
  }
  const double gflops = 2 * s.Macs() / best * 1e-9;
  state.counters["best_us"] = best * 1e6;
  state.counters["eff_gflops"] = gflops;
  state.counters["frac_peak"] = gflops / PeakGflops(threads);
  state.counters["traffic_mb"] = (stats.bytes_global_to_local + stats.bytes_local_to_global) / 1e6;
}

// The GEMM template on 512x512x512 (default tiling), timed the same way: on a
// shared guest its rate in the same run is the yardstick for the effective
// rates (the direct kernel is expected near the GEMM's efficiency).
void RunGemm512(benchmark::State& state, int threads) {
  const int64_t n = 512;
  std::vector<float> a = Random(n * n, 4), b = Random(n * n, 5), c(n * n);
  kernels::GemmDesc d;
  d.m = d.k = n;
  d.a = a.data();
  d.a_row_stride = n;
  kernels::GemmOutput out;
  out.n = n;
  out.b = b.data();
  out.b_row_stride = n;
  out.c = c.data();
  out.c_row_stride = n;
  d.outputs.push_back(out);
  kernels::KernelConfig config;
  config.threads = threads;
  double best = 1e30;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    auto r = kernels::RunGemm(d, kernels::GemmTiling{}, config);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
  }
  state.counters["best_us"] = best * 1e6;
  state.counters["gflops"] = 2.0 * n * n * n / best * 1e-9;
  state.counters["frac_peak"] = 2.0 * n * n * n / best * 1e-9 / PeakGflops(threads);
}

// A handful of tilings per layer (algorithm, oc_block, output rows per band,
// k_block, mr, nr), chosen from a wider sweep on this guest: F(4x4) where
// the tiles fill the nr panels, F(2x2) and 14x16 micro-tiles where a layer
// has few tiles per image.
struct Case {
  int64_t channels, hw;
  std::vector<std::tuple<int, int64_t, int64_t, int64_t, int, int>> tilings;
};

void Register() {
  const std::vector<Case> cases = {
      {64,
       56,
       {{4, 64, 8, 32, 8, 32},
        {4, 32, 8, 64, 8, 32},
        {4, 16, 8, 64, 8, 32},
        {2, 64, 4, 64, 8, 32},
        {2, 32, 4, 64, 8, 32}}},
      {128,
       28,
       {{4, 64, 16, 32, 8, 32},
        {4, 112, 8, 32, 14, 16},
        {4, 32, 16, 64, 8, 32},
        {2, 64, 8, 32, 8, 32},
        {2, 64, 4, 64, 8, 32}}},
      {256,
       14,
       {{4, 56, 14, 32, 14, 16},
        {4, 28, 14, 64, 14, 16},
        {2, 64, 14, 32, 8, 32},
        {2, 56, 14, 32, 14, 16},
        {2, 32, 14, 64, 8, 32}}},
      {512,
       7,
       {{2, 56, 7, 32, 14, 16},
        {2, 112, 7, 64, 14, 16},
        {2, 28, 7, 128, 14, 16},
        {4, 56, 7, 32, 14, 16}}},
  };
  for (const Case& c : cases)
    for (auto [m, oc, rows, k, mr, nr] : c.tilings) {
      ConvTiling t;
      t.algorithm = m == 4 ? ConvAlgorithm::kWinograd4 : ConvAlgorithm::kWinograd2;
      t.oc_block = oc;
      t.pixel_block = rows * c.hw;
      t.k_block = k;
      t.mr = mr;
      t.nr = nr;
      const ConvShape s = Layer(c.channels, c.hw);
      // F(2x2) in bf16 too, beside its f32 form (F(4x4) stays f32: conv.h).
      std::vector<ConvTiling> forms = {t};
      if (m == 2) {
        forms.push_back(t);
        forms.back().precision = kernels::Precision::kBf16;
      }
      for (const ConvTiling& form : forms)
        for (int threads : {2, 1})
          benchmark::RegisterBenchmark(
              fmt::format("winograd/{}/{}/threads:{}", s.ToString(), form.ToString(), threads)
                  .c_str(),
              [s, form, threads](benchmark::State& st) { Run(st, s, form, threads); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
    }
  for (int threads : {2, 1})
    benchmark::RegisterBenchmark(fmt::format("reference/gemm_512/threads:{}", threads).c_str(),
                                 [threads](benchmark::State& st) { RunGemm512(st, threads); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace fusetune::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  fusetune::bench::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
