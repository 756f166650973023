#include "measure/roofline.h"

#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/precision.h"
#include "kernels/traffic.h"

namespace fusetune::measure {

namespace {

double Seconds(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Independent FMA chains, enough to cover FMA latency x throughput on
// current cores and few enough to stay in registers. Returns the flops
// performed; `sink` defeats dead-code removal.
int64_t FmaChains(int64_t iterations, float* sink) {
#if defined(__AVX512F__)
  constexpr int kLanes = 16, kChains = 16;
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(0.001f * k);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], x, y);
  __m512 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm512_add_ps(s, acc[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);  // not _mm512_reduce_add_ps: GCC 12 warns falsely inside it
  *sink = lanes[0] + lanes[15];
#elif defined(__AVX2__) && defined(__FMA__)
  // 12 chains, not 16: AVX2 has 16 ymm registers, and 16 sums plus x and y
  // spill one sum to memory each iteration, which measured 58.7 GFLOP/s per
  // thread on a Zen 3 guest against 103 with 8 to 14 chains.
  constexpr int kLanes = 8, kChains = 12;
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(0.001f * k);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], x, y);
  float lanes[8];
  __m256 s = acc[0];
  for (int k = 1; k < kChains; ++k) s = _mm256_add_ps(s, acc[k]);
  _mm256_storeu_ps(lanes, s);
  *sink = lanes[0];
#else
  constexpr int kLanes = 1, kChains = 16;
  float acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = 0.001f * k;
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * 0.999999f + 1e-7f;
  *sink = acc[0];
#endif
  return iterations * kChains * kLanes * 2;
}

// The same 16 chains of vdpbf16ps: 16 lanes x 2 products x 2 flops each.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) int64_t Bf16DotChains(int64_t iterations,
                                                                             float* sink) {
  __m512 acc[16];
  for (int k = 0; k < 16; ++k) acc[k] = _mm512_set1_ps(0.001f * k);
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // the pair (1, 1)
  const __m512bh y = (__m512bh)_mm512_set1_epi32(0x33d633d6);  // (1e-7, 1e-7) roughly
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < 16; ++k) acc[k] = _mm512_dpbf16_ps(acc[k], x, y);
  __m512 s = acc[0];
  for (int k = 1; k < 16; ++k) s = _mm512_add_ps(s, acc[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  *sink = lanes[0] + lanes[15];
  return iterations * 16 * 16 * 4;
}

template <typename F>
double BestOf(int runs, F f) {
  double best = 0;
  for (int r = 0; r < runs; ++r) best = std::max(best, f());
  return best;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float, FreeDeleter>;
FloatBuffer Allocate(size_t bytes) {
  auto* p = static_cast<float*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  std::memset(p, 0, bytes);  // touch every page before timing
  return FloatBuffer(p);
}

}  // namespace

double MeasureFmaPeak(int threads) {
  const int64_t iterations = 2'000'000;
  std::vector<float> sinks(threads);
  // A peak is a maximum: noise only lowers a run. Runs spread over about a
  // quarter of a second, so that one burst of load on a shared host (it
  // lowered five back-to-back runs to 70% of the peak) misses some of them.
  return BestOf(12, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> flops(threads);
    kernels::ForEachThread(threads, [&](int t) { flops[t] = FmaChains(iterations, &sinks[t]); });
    const double s = Seconds(start);
    int64_t total = 0;
    for (int64_t f : flops) total += f;
    return total / s * 1e-9;
  });
}

double MeasureBf16DotPeak(int threads) {
  if (!kernels::CpuHasBf16Dot()) return 0;
  const int64_t iterations = 2'000'000;
  std::vector<float> sinks(threads);
  return BestOf(12, [&] {  // as MeasureFmaPeak
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> flops(threads);
    kernels::ForEachThread(threads,
                           [&](int t) { flops[t] = Bf16DotChains(iterations, &sinks[t]); });
    const double s = Seconds(start);
    int64_t total = 0;
    for (int64_t f : flops) total += f;
    return total / s * 1e-9;
  });
}

// Sums floats [lo, hi) of `a` as kStreams interleaved sweeps of equal parts
// (a tail of fewer than 32 * kStreams floats left out: nothing against the
// bytes counted). With two, each core keeps two sequential streams in
// flight: in a standalone test on the Zen 4 guest (2 threads, 512 MiB, the
// forms alternated) they read more from DRAM than one in 8 pairs of 8, by
// 4-21% (median 5%) where the host's load held still. A kernel can stream
// two weight panels at once, so the read bandwidth the figures are set
// against is the better of the two forms, not one stream's.
template <int kStreams>
float SumStreams(const float* a, size_t lo, size_t hi) {
  const size_t part = (hi - lo) / kStreams / 32 * 32;
  float acc[kStreams][32] = {};
  for (size_t i = 0; i < part; i += 32)
    for (int s = 0; s < kStreams; ++s)
      for (int k = 0; k < 32; ++k) acc[s][k] += a[lo + s * part + i + k];
  float sum = 0;
  for (const auto& row : acc)
    for (float v : row) sum += v;
  return sum;
}

double MeasureBandwidth(StreamKind kind, int threads, size_t bytes, int passes) {
  const size_t n = bytes / sizeof(float);
  FloatBuffer a = Allocate(bytes), b = Allocate(bytes), c = Allocate(bytes);
  std::vector<float> sums(threads);
  const double moved = passes * (kind == StreamKind::kRead   ? bytes
                                 : kind == StreamKind::kCopy ? 2.0 * bytes
                                                             : 3.0 * bytes);
  int run = 0;
  return BestOf(kind == StreamKind::kRead ? 8 : 4, [&] {
    const bool two_streams = run++ % 2 == 1;  // reads alternate one and two streams a thread
    const auto start = std::chrono::steady_clock::now();
    kernels::ForEachThread(threads, [&](int t) {
      const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
      float* pa = a.get();
      const float* pb = b.get();
      const float* pc = c.get();
      for (int pass = 0; pass < passes; ++pass) {
        if (kind == StreamKind::kRead) {
          sums[t] += two_streams ? SumStreams<2>(pa, lo, hi) : SumStreams<1>(pa, lo, hi);
        } else if (kind == StreamKind::kCopy) {
          std::memcpy(pa + lo, pb + lo, (hi - lo) * sizeof(float));
        } else {
          for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + 3.0f * pc[i];
        }
      }
    });
    return moved / Seconds(start) * 1e-9;
  });
}

target::Roofline MeasureRoofline(int threads) {
  target::Roofline r;
  r.threads = threads;
  r.fma_gflops_1t = MeasureFmaPeak(1);
  r.fma_gflops = MeasureFmaPeak(threads);
  r.bf16_dot_gflops = MeasureBf16DotPeak(threads);
  r.read_gbps = MeasureBandwidth(StreamKind::kRead, threads);
  r.copy_gbps = MeasureBandwidth(StreamKind::kCopy, threads);
  r.triad_gbps = MeasureBandwidth(StreamKind::kTriad, threads);
  return r;
}

}  // namespace fusetune::measure
