// The direct and depthwise convolution algorithms (kernels/conv_direct.cpp,
// kernels/conv_depthwise.cpp) on ResNet-50's and MobileNetV2's layers, 1 and
// 2 threads, a few tilings (and activation layouts) each. Direct reports `gflops` (2 x the direct
// definition's multiply-adds per second), depthwise `gbps` (input + output
// bytes per second). Both report `traffic_mb`, what the kernel copied.
// On a machine shared with other work the wall-clock rates fall with the
// load; `*_cpu` divides by the process's CPU time per thread instead, and
// peak/fma (an FMA loop on 24 chains) gives what a core delivers meanwhile.
//   build/bench/bench_conv_direct [--benchmark_filter=REGEX]
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <time.h>

#include <chrono>
#include <random>
#include <vector>

#include "bench/conv_shapes.h"
#include "kernels/conv.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace fusetune {
namespace {

using kernels::ConvAlgorithm;
using kernels::ConvDesc;
using kernels::ConvShape;
using kernels::ConvTiling;

ConvShape Shape(int64_t c, int64_t size, int64_t out, int64_t k, int64_t stride, int64_t groups) {
  return bench::SquareConvShape(c, size, out, k, stride, groups);
}

std::vector<float> Random(int64_t n) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& f : v) f = dist(gen);
  return v;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void Run(benchmark::State& state, ConvShape s, ConvTiling t, int threads, bool flops) {
  std::vector<float> x = Random(s.batch * s.in_channels * s.in_h * s.in_w);
  std::vector<float> w = Random(s.out_channels * s.in_per_group() * s.kernel_h * s.kernel_w);
  std::vector<float> b = Random(s.out_channels);
  std::vector<float> y(s.batch * s.out_channels * s.pixels());
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.bias = b.data();
  d.y = y.data();
  std::vector<float> packed(std::max<int64_t>(1, kernels::PrePackedConvWeightFloats(d, t)));
  if (kernels::PrePackedConvWeightFloats(d, t) > 0) {
    kernels::PrePackConvWeights(d, t, packed.data());
    d.w_packed = packed.data();
  }
  kernels::KernelConfig config;
  config.threads = threads;
  kernels::KernelStats stats;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    Result<kernels::KernelStats> r = kernels::RunConv(d, t, config);
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
    stats = *r;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
      static_cast<double>(state.iterations());
  const double cpu_seconds =
      (ProcessCpuSeconds() - cpu_start) / threads / static_cast<double>(state.iterations());
  if (flops) {
    state.counters["gflops"] = 2.0 * s.Macs() / seconds * 1e-9;
    state.counters["gflops_cpu"] = 2.0 * s.Macs() / cpu_seconds * 1e-9;
  } else {
    const double bytes = 4.0 * (x.size() + y.size());
    state.counters["gbps"] = bytes / seconds * 1e-9;
    state.counters["gbps_cpu"] = bytes / cpu_seconds * 1e-9;
  }
  state.counters["traffic_mb"] = (stats.bytes_global_to_local + stats.bytes_local_to_global) * 1e-6;
}

ConvTiling Tiling(ConvAlgorithm a, int64_t oc, int64_t px, int64_t k) {
  ConvTiling t;
  t.algorithm = a;
  t.oc_block = oc;
  t.pixel_block = px;
  t.k_block = k;
  return t;
}

ConvTiling Laid(ConvTiling t, kernels::ActivationLayout in, kernels::ActivationLayout out) {
  t.in_layout = in;
  t.out_layout = out;
  return t;
}

#if defined(__AVX512F__)
// This thread's FP32 FMA peak now (24 independent chains), so that the
// direct figures can be read against what the core gives under the same load.
void FmaPeak(benchmark::State& state) {
  constexpr int kChains = 24, kSteps = 1 << 16;
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(1.0f + i * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  const double cpu_start = ProcessCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state)
    for (int s = 0; s < kSteps; ++s)
#pragma GCC unroll 24
      for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int i = 0; i < kChains; ++i) benchmark::DoNotOptimize(a[i]);
  const double flops = 32.0 * kChains * kSteps * static_cast<double>(state.iterations());
  state.counters["gflops"] = flops / seconds * 1e-9;
  state.counters["gflops_cpu"] = flops / (ProcessCpuSeconds() - cpu_start) * 1e-9;
}
#endif

void Register() {
#if defined(__AVX512F__)
  benchmark::RegisterBenchmark("peak/fma/t1", FmaPeak)->UseRealTime();
#endif
  struct Case {
    ConvShape shape;
    std::vector<ConvTiling> tilings;
  };
  const ConvAlgorithm kD = ConvAlgorithm::kDirect;
  constexpr auto kNCHW = kernels::ActivationLayout::kNCHW;
  constexpr auto kNCHWc = kernels::ActivationLayout::kNCHWc;
  const std::vector<Case> direct = {
      {Shape(64, 56, 64, 3, 1, 1), {Tiling(kD, 64, 224, 64), Tiling(kD, 64, 448, 32)}},
      {Shape(128, 28, 128, 3, 1, 1), {Tiling(kD, 64, 112, 128), Tiling(kD, 128, 112, 64)}},
      {Shape(256, 14, 256, 3, 1, 1), {Tiling(kD, 64, 196, 128), Tiling(kD, 128, 98, 64)}},
      {Shape(512, 7, 512, 3, 1, 1), {Tiling(kD, 64, 49, 256), Tiling(kD, 32, 49, 512)}},
      {Shape(256, 56, 64, 1, 1, 1),
       {Tiling(kD, 64, 224, 256), Tiling(kD, 64, 448, 64), Tiling(kD, 64, 112, 32)}},
      {Shape(1024, 14, 256, 1, 1, 1),
       {Tiling(kD, 64, 196, 256), Tiling(kD, 128, 98, 512), Tiling(kD, 256, 196, 64)}},
      // MobileNetV2's stem: 3 input channels, stride 2 (27 taps a sum).
      {Shape(3, 224, 32, 3, 2, 1),
       {Tiling(kD, 16, 448, 16), Tiling(kD, 32, 448, 16), Tiling(kD, 32, 224, 16)}},
      // MobileNetV2's 576 -> 96 project after its 14x14 depthwise: X in
      // NCHW, or in NCHW16c read as its blocks lie; Y in NCHW (the blocks
      // transposed as they are copied out) or NCHW16c.
      {Shape(576, 14, 96, 1, 1, 1),
       {Tiling(kD, 32, 196, 576), Laid(Tiling(kD, 32, 196, 576), kNCHWc, kNCHW),
        Laid(Tiling(kD, 32, 196, 576), kNCHWc, kNCHWc)}}};
  for (const Case& c : direct)
    for (const ConvTiling& t : c.tilings)
      for (int threads : {1, 2})
        benchmark::RegisterBenchmark(
            fmt::format("direct/{}/{}/t{}", c.shape.ToString(), t.ToString(), threads).c_str(),
            [=](benchmark::State& st) { Run(st, c.shape, t, threads, true); })
            ->UseRealTime();
  const ConvAlgorithm kW = ConvAlgorithm::kDepthwise;
  const std::vector<ConvShape> depthwise = {
      Shape(32, 112, 32, 3, 1, 32),   Shape(96, 112, 96, 3, 2, 96),
      Shape(144, 56, 144, 3, 1, 144), Shape(144, 56, 144, 3, 2, 144),
      Shape(192, 28, 192, 3, 1, 192), Shape(384, 14, 384, 3, 1, 384),
      Shape(576, 14, 576, 3, 1, 576), Shape(576, 14, 576, 3, 2, 576),
      Shape(960, 7, 960, 3, 1, 960)};
  // The NCHW form's tilings, then NCHW16c in (16 channels a vector) with Y
  // in NCHW16c or in NCHW (transposed as it is copied out).
  for (const ConvShape& s : depthwise)
    for (const ConvTiling& t :
         {Tiling(kW, 1, 1024, 1), Tiling(kW, 4, 448, 1), Tiling(kW, 8, 224, 1),
          Tiling(kW, 16, 1024, 1), Laid(Tiling(kW, 32, 448, 1), kNCHWc, kNCHWc),
          Laid(Tiling(kW, 32, 448, 1), kNCHWc, kNCHW)})
      for (int threads : {1, 2})
        benchmark::RegisterBenchmark(
            fmt::format("depthwise/{}/{}/t{}", s.ToString(), t.ToString(), threads).c_str(),
            [=](benchmark::State& st) { Run(st, s, t, threads, false); })
            ->UseRealTime();
}

}  // namespace
}  // namespace fusetune

int main(int argc, char** argv) {
  fusetune::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
