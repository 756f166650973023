// The im2col (implicit GEMM) convolution on ResNet-50's layer shapes, batch
// 1, bias + ReLU epilogue, pre-packed weights, 2 threads, at a handful of
// tilings each. Reports `gflops` (2 x MACs per second) and `frac_peak`,
// against this machine's FMA rate measured at start-up with the same 8x32
// micro-kernel on L1-resident panels on every thread (the ceiling a
// convolution built from these micro-kernels can reach). Needs only
// ft_kernels, so that it builds without the peers of bench_kernels.
//
// `bench_conv --sweep [THREADS] [--bf16] [--direct]` instead searches a grid
// of tilings per layer and prints the best, timed by each thread's CPU clock
// (every thread's share on its own thread, the longest share counts) against
// the micro-kernel's rate timed the same way: figures that stay meaningful on
// a shared host, where wall-clock times measure the neighbours. With --bf16
// the layers run in bf16 against the bf16 micro-kernel's rate (vdpbf16ps);
// with --direct the direct convolution's tilings are swept instead of im2col's.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_algorithm.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::bench {
namespace {

using namespace kernels;
constexpr int kThreads = 2;

double MicroKernelPeak(int threads) {
  const MicroKernel* mk = FindMicroKernel(8, 32);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    constexpr int64_t kc = 128, calls = 20000;
    const auto start = std::chrono::steady_clock::now();
    ForEachThread(threads, [&](int) {
      alignas(64) static thread_local float a[8 * kc], b[32 * kc], c[8 * 32];
      std::fill(a, a + 8 * kc, 0.001f);
      std::fill(b, b + 32 * kc, 0.001f);
      for (int64_t i = 0; i < calls; ++i) mk->fn(kc, a, b, c, 32, i > 0);
    });
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, threads * 2.0 * 8 * 32 * kc * calls / s / 1e9);
  }
  return best;
}

double Peak() {
  static const double peak = MicroKernelPeak(kThreads);
  return peak;
}

ConvShape Layer(int64_t channels, int64_t size, int64_t out_channels, int64_t k) {
  ConvShape s;
  s.in_channels = channels;
  s.in_h = s.in_w = size;
  s.out_channels = out_channels;
  s.kernel_h = s.kernel_w = k;
  s.pad_top = s.pad_left = k / 2;
  s.out_h = s.out_w = size;
  return s;
}

void RunLayer(benchmark::State& state, ConvShape s, ConvTiling t) {
  std::vector<float> x(s.in_channels * s.in_h * s.in_w, 0.5f);
  std::vector<float> w(s.out_channels * s.in_channels * s.kernel_h * s.kernel_w, 0.01f);
  std::vector<float> bias(s.out_channels, 0.1f), y(s.out_channels * s.pixels());
  ConvDesc d;
  d.shape = s;
  d.x = x.data();
  d.w = w.data();
  d.bias = bias.data();
  d.y = y.data();
  d.epilogue.push_back(EpilogueOp::Act(EpilogueKind::kRelu));
  std::vector<float> packed(PrePackedConvWeightFloats(d, t));
  PrePackConvWeights(d, t, packed.data());
  d.w_packed = packed.data();
  KernelConfig config;
  config.threads = kThreads;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const Result<KernelStats> r = RunConv(d, t, config);
    if (!r.ok()) {
      state.SkipWithError(r.error().message().c_str());
      return;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gflops = 2.0 * s.Macs() * state.iterations() / seconds / 1e9;
  state.counters["gflops"] = gflops;
  state.counters["frac_peak"] = gflops / Peak();
  state.counters["peak_gflops"] = Peak();
  state.SetLabel(s.ToString() + " " + t.ToString());
}

ConvTiling Tiling(int64_t oc_block, int64_t pixel_block, int64_t k_block, int mr, int nr) {
  ConvTiling t;
  t.oc_block = oc_block;
  t.pixel_block = pixel_block;
  t.k_block = k_block;
  t.mr = mr;
  t.nr = nr;
  return t;
}

struct Named {
  const char* name;
  ConvShape shape;
};

std::vector<Named> Layers() {
  return {
      {"64x56x56_64_k1", Layer(64, 56, 64, 1)},       {"64x56x56_64_k3", Layer(64, 56, 64, 3)},
      {"256x56x56_64_k1", Layer(256, 56, 64, 1)},     {"128x28x28_128_k3", Layer(128, 28, 128, 3)},
      {"256x14x14_256_k3", Layer(256, 14, 256, 3)},   {"512x7x7_512_k3", Layer(512, 7, 512, 3)},
      {"1024x14x14_256_k1", Layer(1024, 14, 256, 1)},
  };
}

void Register() {
  // Tilings that were among the best on some layer in `--sweep` (the tuner
  // searches the rest); blocks beyond the layer are clamped to it, and a
  // tiling whose blocks do not fit the local buffer reports the error.
  const ConvTiling tilings[] = {
      Tiling(64, 128, 4608, 8, 32), Tiling(128, 128, 192, 8, 32), Tiling(256, 512, 128, 8, 32),
      Tiling(128, 512, 128, 8, 32), Tiling(256, 512, 256, 8, 32), Tiling(252, 512, 128, 14, 16),
  };
  for (const Named& layer : Layers())
    for (const ConvTiling& t : tilings)
      benchmark::RegisterBenchmark(
          fmt::format("conv_im2col/{}/oc{}_px{}_k{}_{}x{}", layer.name, t.oc_block, t.pixel_block,
                      t.k_block, t.mr, t.nr)
              .c_str(),
          [s = layer.shape, t](benchmark::State& state) { RunLayer(state, s, t); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
}

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Runs fn(thread) on `threads` std::threads; returns the longest thread CPU time.
template <typename Fn>
double LongestThreadCpu(int threads, Fn&& fn) {
  std::vector<double> seconds(threads);
  std::vector<std::thread> pool;
  for (int th = 0; th < threads; ++th)
    pool.emplace_back([&, th] {
      const double start = ThreadSeconds();
      fn(th);
      seconds[th] = ThreadSeconds() - start;
    });
  for (std::thread& t : pool) t.join();
  return *std::max_element(seconds.begin(), seconds.end());
}

// The 8x32 micro-kernel's rate on L1-resident panels, per-thread CPU clocks:
// the f32 FMA one, or with `precision` bf16 the vdpbf16ps one.
double CpuClockPeak(int threads, Precision precision) {
  const MicroKernel* mk = FindMicroKernel(8, 32);
  const Bf16MicroKernel* bf = FindBf16MicroKernel(8, 32);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    constexpr int64_t kc = 128, calls = 20000;
    const double s = LongestThreadCpu(threads, [&](int) {
      alignas(64) static thread_local float a[8 * kc], b[32 * kc], c[8 * 32];
      alignas(64) static thread_local Bf16 ah[8 * kc], bh[32 * kc];
      std::fill(a, a + 8 * kc, 0.001f);
      std::fill(b, b + 32 * kc, 0.001f);
      std::fill(ah, ah + 8 * kc, FloatToBf16(0.001f));
      std::fill(bh, bh + 32 * kc, FloatToBf16(0.001f));
      for (int64_t i = 0; i < calls; ++i) {
        if (precision == Precision::kBf16)
          bf->fn(kc / 2, ah, kc, bh, c, 32, i > 0);
        else
          mk->fn(kc, a, b, c, 32, i > 0);
      }
    });
    best = std::max(best, threads * 2.0 * 8 * 32 * kc * calls / s / 1e9);
  }
  return best;
}

// The tilings a sweep tries on `s`: im2col's over the wide AVX-512
// micro-tiles (those with a bf16 kernel in bf16), or direct's channel
// blocks, bands and slices.
std::vector<ConvTiling> SweepTilings(const ConvShape& s, ConvAlgorithm algorithm,
                                     Precision precision) {
  std::vector<ConvTiling> tilings;
  const int64_t k = s.in_channels * s.kernel_h * s.kernel_w;
  if (algorithm == ConvAlgorithm::kDirect) {
    for (int64_t oc : {16, 32, 48, 64, 128})
      for (int64_t px : {56, 112, 224, 448, 896, 3136})
        for (int64_t kb :
             {s.in_channels, int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}}) {
          if (kb > s.in_channels || oc > (s.out_channels + 15) / 16 * 16) continue;
          ConvTiling t = Tiling(oc, px, kb, 8, 32);
          t.algorithm = ConvAlgorithm::kDirect;
          t.precision = precision;
          tilings.push_back(t);
        }
    return tilings;
  }
  for (auto [mr, nr] : MicroTileShapes()) {
    if (nr % 16 != 0 || (mr == 6 && nr == 16) || IsThinMicroTile(mr, nr))
      continue;  // the wide AVX-512 shapes
    if (precision == Precision::kBf16 && FindBf16MicroKernel(mr, nr) == nullptr) continue;
    for (int64_t oc : {32, 64, 128, 256})
      for (int64_t px : {64, 128, 256, 512})
        for (int64_t kb : {k, int64_t{128}, int64_t{192}, int64_t{256}, int64_t{512}}) {
          if (kb > k) continue;
          ConvTiling t = Tiling(oc >= s.out_channels ? oc : oc / mr * mr, px / nr * nr, kb, mr, nr);
          t.precision = precision;
          tilings.push_back(t);
        }
  }
  return tilings;
}

void Sweep(int threads, Precision precision, ConvAlgorithm algorithm) {
  const double peak = CpuClockPeak(threads, precision);
  fmt::print("{} {}: micro-kernel peak {:.1f} GFLOP/s on {} thread(s), per-thread CPU clocks\n",
             ConvAlgorithmName(algorithm), PrecisionName(precision), peak, threads);
  for (const Named& layer : Layers()) {
    const ConvShape& s = layer.shape;
    std::vector<float> x(s.in_channels * s.in_h * s.in_w, 0.5f);
    std::vector<float> w(s.out_channels * s.in_channels * s.kernel_h * s.kernel_w, 0.01f);
    std::vector<float> bias(s.out_channels, 0.1f), y(s.out_channels * s.pixels());
    ConvDesc d;
    d.shape = s;
    d.x = x.data();
    d.w = w.data();
    d.bias = bias.data();
    d.y = y.data();
    d.epilogue.push_back(EpilogueOp::Act(EpilogueKind::kRelu));
    KernelConfig config;
    config.threads = threads;
    double best = 0;
    ConvTiling best_tiling;
    for (const ConvTiling& t : SweepTilings(s, algorithm, precision)) {
      if (!ConvTilingFits(d, t, config)) continue;
      std::vector<float> packed(PrePackedConvWeightFloats(d, t));
      PrePackConvWeights(d, t, packed.data());
      d.w_packed = packed.data();
      double seconds = 1e9;
      for (int rep = 0; rep < 7; ++rep)
        seconds = std::min(seconds, LongestThreadCpu(threads, [&](int th) {
                             conv_detail::OpsOf(t).run_share(d, t, config, RunMode::kFull, th);
                           }));
      const double gflops = 2.0 * s.Macs() / seconds / 1e9;
      if (gflops > best) {
        best = gflops;
        best_tiling = t;
      }
    }
    fmt::print("{:<38} {:6.1f} GFLOP/s {:5.1f}% of peak  {}\n", s.ToString(), best,
               100 * best / peak, best_tiling.ToString());
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace fusetune::bench

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--sweep") == 0) {
    int threads = fusetune::bench::kThreads;
    auto precision = fusetune::kernels::Precision::kF32;
    auto algorithm = fusetune::kernels::ConvAlgorithm::kIm2colGemm;
    for (int i = 2; i < argc; ++i) {
      if (std::strcmp(argv[i], "--bf16") == 0)
        precision = fusetune::kernels::Precision::kBf16;
      else if (std::strcmp(argv[i], "--direct") == 0)
        algorithm = fusetune::kernels::ConvAlgorithm::kDirect;
      else
        threads = std::atoi(argv[i]);
    }
    fusetune::bench::Sweep(threads, precision, algorithm);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  fusetune::bench::Register();
  benchmark::AddCustomContext("micro_kernel_peak_gflops_2_threads",
                              fmt::format("{:.1f}", fusetune::bench::Peak()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
