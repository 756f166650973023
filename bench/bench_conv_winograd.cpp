// Winograd convolution (kernels/conv_winograd.cpp) on ResNet-50's 3x3
// stride-1 layers, 2 threads, pre-packed weights, a handful of tilings per
// layer. Counters: `eff_gflops` = 2 * the direct definition's MACs / time
// (what a direct kernel would have to reach to be as fast) and `frac_peak`,
// that rate over the 2-thread FMA peak calibrated on the Zen 5 guest
// (519 GFLOP/s, bench/README.md); `traffic_mb` the bytes the kernel copied.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <random>
#include <vector>

#include "kernels/conv.h"

namespace fusetune::bench {
namespace {

using kernels::ConvAlgorithm;
using kernels::ConvDesc;
using kernels::ConvShape;
using kernels::ConvTiling;

constexpr double kPeakGflops = 519;  // 2 threads, Zen 5 guest (bench/README.md)

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

void Run(benchmark::State& state, ConvShape s, ConvTiling t) {
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
  config.threads = 2;
  kernels::KernelStats stats;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto r = kernels::RunConv(d, t, config);
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    stats = *r;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gflops = 2 * s.Macs() * state.iterations() / seconds * 1e-9;
  state.counters["eff_gflops"] = gflops;
  state.counters["frac_peak"] = gflops / kPeakGflops;
  state.counters["traffic_mb"] = (stats.bytes_global_to_local + stats.bytes_local_to_global) / 1e6;
}

void Register() {
  struct LayerCase {
    int64_t c, hw;
  };
  for (LayerCase l : {LayerCase{64, 56}, {128, 28}, {256, 14}, {512, 7}})
    for (ConvAlgorithm a : {ConvAlgorithm::kWinograd2, ConvAlgorithm::kWinograd4})
      for (int64_t oc : {32, 64, 128})
        for (int64_t k : {32, 64, 128})
          for (int64_t rows : {2, 4, 8, 16})
            for (auto [mr, nr] : {std::pair{8, 32}, {14, 16}}) {
              ConvTiling t;
              t.algorithm = a;
              t.oc_block = oc / mr * mr;
              t.k_block = k;
              t.pixel_block = rows * l.hw;
              t.mr = mr;
              t.nr = nr;
              const ConvShape s = Layer(l.c, l.hw);
              kernels::ConvDesc probe;
              probe.shape = s;
              static float dummy[1];
              probe.x = probe.w = probe.y = dummy;  // only checked for being set
              if (!kernels::ConvTilingFits(probe, t, kernels::KernelConfig{})) continue;
              benchmark::RegisterBenchmark(
                  fmt::format("winograd/{}/{}", s.ToString(), t.ToString()).c_str(),
                  [s, t](benchmark::State& st) { Run(st, s, t); })
                  ->UseRealTime()
                  ->Unit(benchmark::kMicrosecond);
            }
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
