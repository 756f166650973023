// Shared by the kernel benchmarks: the roofline measured at start-up, the
// counters every benchmark reports, and random inputs.
//
// Counters: `gflops` (or `gbps`) and `frac_roofline`, the fraction of this
// machine's measured 2-thread FMA peak (or DRAM copy bandwidth); `traffic_mb`,
// the bytes the kernel copied between global and local memory. Peers are named
// peer/<library>/<case> so that ratios can be read from one run.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/traffic.h"
#include "measure/roofline.h"

namespace fusetune::bench {

const target::Roofline& Roof();
constexpr int kThreads = 2;

std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f);

// C[m x n] = A[m x k] B[k x n], all dense row-major, one output and no
// epilogue: the plain GEMM the kernel benchmarks start from.
kernels::GemmDesc DenseGemm(int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                            float* c);
// A GEMM tiling from its sizes, as the benchmarks' tables list them.
kernels::GemmTiling GemmTilingOf(int mr, int nr, int64_t mc, int64_t nc, int64_t kc,
                                 kernels::ParallelSplit split, bool double_buffer,
                                 kernels::Precision precision = kernels::Precision::kF32);

// Runs `body` (returning a Status-like object with ok()) once per iteration;
// returns the wall seconds of all iterations, or -1 after SkipWithError.
template <typename Body>
double TimedLoop(benchmark::State& state, Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto result = body();
    if (!result.ok()) {
      state.SkipWithError(result.error().message().c_str());
      return -1;
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What a peer's loop body returns: always ok.
struct LoopOk {
  struct Message {
    std::string message() const { return {}; }
  };
  bool ok() const { return true; }
  Message error() const { return {}; }
};

// Sets gflops and frac_roofline for `flops` per iteration, over `seconds` of
// all iterations (from TimedLoop).
void ReportFlops(benchmark::State& state, double flops, double seconds);
// Sets gbps and frac_roofline for `bytes` that must move per iteration.
void ReportBytes(benchmark::State& state, double bytes, double seconds);
void ReportTraffic(benchmark::State& state, const kernels::KernelStats& stats);

// Registration hooks, one per file, called from main.
void RegisterGemmBenchmarks();
void RegisterGemmBf16Benchmarks();
void RegisterGemmDecodeBenchmarks();
void RegisterRowwiseBenchmarks();
void RegisterAttentionBenchmarks();
void RegisterFfnBenchmarks();
void RegisterPeerBenchmarks();

}  // namespace fusetune::bench
