// Weight-streaming GEMMs of a decode step (issue 39): one token's row times
// a LLaMA layer's gate and up weights side by side (2048 x 11264: 92 MB in
// f32, 46 MB in bf16, more than the last-level cache holds, so every run
// streams them from DRAM), pre-packed as a compiled program holds them.
//   fusetune/gemm_decode/<precision>/<mr>x<nr>_nc<nc>_kc<kc>[_db|_refill]
// (B's copies after each step's compute; _db double buffered, carried by the
// micro-kernels, kc halved to fit; _refill: refilled in place, GemmTiling)
// gbps is the weight bytes per run over its time; frac_dram_read the share
// of the DRAM read bandwidth `fusetune calibrate` measures (issue 39's goal:
// 85%). The 8-row tiles compute 8 rows for the one there is; the thin ones
// (kernels/microkernel.cpp) compute it alone.
//   reference/gemv_in_place/f32
// is the bound the copies cost: the same product over the same bytes, packed
// as 128-column panels, read in place by 2 threads (no local buffer), as a
// runtime that streams weights straight from DRAM does (bench/README.md).
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "bench/bench_common.h"
#include "kernels/gemm.h"

namespace fusetune::bench {
namespace {

using namespace kernels;

constexpr int64_t kRows = 1, kK = 2048, kN = 11264;

struct DecodeData {
  std::vector<float> a = RandomVector(kRows * kK, 1), b = RandomVector(kK * kN, 2, 0.05f),
                     c = std::vector<float>(kRows * kN);
};
DecodeData& TheData() {
  static DecodeData data;
  return data;
}

GemmDesc Describe(DecodeData& data) {
  return DenseGemm(kRows, kN, kK, data.a.data(), data.b.data(), data.c.data());
}

void RunDecodeGemm(benchmark::State& state, GemmTiling t) {
  GemmDesc d = Describe(TheData());
  std::vector<float> packed(PrePackedBFloats(d, 0, t));
  PrePackB(d, 0, t, packed.data());
  d.outputs[0].b_packed = packed.data();
  KernelConfig config;
  config.threads = kThreads;
  const double seconds = TimedLoop(state, [&] { return RunGemm(d, t, config, RunMode::kFull); });
  if (seconds <= 0) return;
  const double weight_bytes = (t.precision == Precision::kBf16 ? 2.0 : 4.0) * kK * kN;
  const double gbps = weight_bytes * static_cast<double>(state.iterations()) / seconds * 1e-9;
  state.counters["gbps"] = gbps;
  state.counters["frac_dram_read"] = gbps / Roof().read_gbps;
  state.SetLabel(t.ToString());
}

// y[128 columns] = x[0, K) times one K x 128 panel, read in place.
__attribute__((target("avx512f,fma"))) void PanelInPlace(const float* x, const float* panel,
                                                         float* y) {
  __m512 acc[8];
  for (int v = 0; v < 8; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kK; ++p) {
    const __m512 a = _mm512_set1_ps(x[p]);
    for (int v = 0; v < 8; ++v)
      acc[v] = _mm512_fmadd_ps(a, _mm512_load_ps(panel + p * 128 + v * 16), acc[v]);
  }
  for (int v = 0; v < 8; ++v) _mm512_storeu_ps(y + v * 16, acc[v]);
}

// Whether data.c holds a x b: every 97th column against a sum in double.
bool HoldsTheProduct(const DecodeData& data) {
  for (int64_t j = 0; j < kN; j += 97) {
    double want = 0, scale = 0;
    for (int64_t p = 0; p < kK; ++p) {
      want += static_cast<double>(data.a[p]) * data.b[p * kN + j];
      scale += std::abs(static_cast<double>(data.a[p]) * data.b[p * kN + j]);
    }
    if (std::abs(data.c[j] - want) > 1e-5 * scale) return false;
  }
  return true;
}

void RunGemvInPlace(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) return state.SkipWithError("needs AVX-512");
  DecodeData& data = TheData();
  constexpr int64_t kPanels = kN / 128;
  float* packed = static_cast<float*>(std::aligned_alloc(64, kK * kN * sizeof(float)));
  for (int64_t q = 0; q < kPanels; ++q)
    for (int64_t p = 0; p < kK; ++p)
      std::copy_n(data.b.data() + p * kN + q * 128, 128, packed + (q * kK + p) * 128);
  auto run = [&] {
    kernels::ForEachThread(kThreads, [&](int t) {
      for (int64_t q = kPanels * t / kThreads; q < kPanels * (t + 1) / kThreads; ++q)
        PanelInPlace(data.a.data(), packed + q * kK * 128, data.c.data() + q * 128);
    });
    return Status::Ok();
  };
  std::fill(data.c.begin(), data.c.end(), 0.0f);
  (void)run();
  const bool right = HoldsTheProduct(data);
  const double seconds = right ? TimedLoop(state, run) : -1;
  std::free(packed);
  if (!right) return state.SkipWithError("the in-place GEMV does not compute a x b");
  if (seconds <= 0) return;
  const double gbps = 4.0 * kK * kN * static_cast<double>(state.iterations()) / seconds * 1e-9;
  state.counters["gbps"] = gbps;
  state.counters["frac_dram_read"] = gbps / Roof().read_gbps;
}

}  // namespace

void RegisterGemmDecodeBenchmarks() {
  benchmark::RegisterBenchmark("reference/gemv_in_place/f32", RunGemvInPlace)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (Precision precision : {Precision::kF32, Precision::kBf16})
    for (auto [mr, nr] : {std::pair{8, 32}, std::pair{6, 32}, std::pair{1, 128}, std::pair{2, 64},
                          std::pair{4, 64}})
      for (auto [nc, kc] : {std::pair{128, 1024}, std::pair{256, 512}, std::pair{512, 256}}) {
        GemmTiling t;
        t.mr = mr;
        t.nr = nr;
        t.mc = 8;
        t.nc = nc;
        t.kc = kc;
        t.split = ParallelSplit::kN;
        t.precision = precision;
        // The B copies after each step's compute, double buffered (carried
        // by the micro-kernels, blocks halved) or refilled in place.
        for (const char* copies : {"", "_db", "_refill"}) {
          t.double_buffer = std::string(copies) == "_db";
          t.refill = std::string(copies) == "_refill";
          t.kc = t.double_buffer ? kc / 2 : kc;  // two buffers in the same local buffer
          benchmark::RegisterBenchmark(
              fmt::format("fusetune/gemm_decode/{}/{}x{}_nc{}_kc{}{}",
                          precision == Precision::kBf16 ? "bf16" : "f32", mr, nr, nc, t.kc, copies)
                  .c_str(),
              [t](benchmark::State& s) { RunDecodeGemm(s, t); })
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
      }
}

}  // namespace fusetune::bench
