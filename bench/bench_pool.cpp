// The pooling template (kernels/pool.h) on ResNet's stem max pool
// (1x64x112x112, 3x3 stride 2 pad 1) and ResNet-50's GlobalAveragePool
// (1x2048x7x7), a handful of tilings on 1 and 2 threads, and the stem pool's
// copy-only and compute-only parts: per call the best and median wall time
// over 200 calls, the best busy time (the longest thread, without the
// launch), the process CPU time, GB/s of the compulsory bytes (input and
// output once) and the counted traffic over them. No google-benchmark: it
// builds with ft_kernels alone.
//   build/bench/bench_pool
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

#include "kernels/estimate.h"
#include "kernels/pool.h"

using namespace fusetune::kernels;

double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

void Bench(const char* name, PoolDesc d, const std::vector<PoolTiling>& tilings, int threads,
           RunMode mode = RunMode::kFull) {
  const int64_t out_plane = IsGlobalPool(d.kind) ? 1 : d.out_h * d.out_w;
  std::vector<float> x(d.batch * d.channels * d.in_h * d.in_w, 1.0f),
      y(d.batch * d.channels * out_plane);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97) * 0.01f;
  d.x = x.data();
  d.y = y.data();
  KernelConfig config;
  config.threads = threads;
  const double compulsory = 4.0 * (x.size() + y.size());
  for (const PoolTiling& t : tilings) {
    if (!PoolTilingFits(d, t, config)) continue;
    std::vector<double> wall, busy;
    KernelStats s;
    const double cpu0 = CpuNow();
    const int reps = 200;
    for (int r = 0; r < reps; ++r) {
      const auto a = std::chrono::steady_clock::now();
      s = *RunPool(d, t, config, mode);
      wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
      busy.push_back(s.busy_seconds);
    }
    const double cpu = (CpuNow() - cpu0) / reps;
    std::sort(wall.begin(), wall.end());
    std::sort(busy.begin(), busy.end());
    const double traffic = double(s.bytes_global_to_local + s.bytes_local_to_global);
    std::printf(
        "%-26s m%d t%d %-22s wall best %7.1f us median %7.1f us | busy best %7.1f us | CPU/call "
        "%7.1f us"
        " | GB/s (compulsory, best wall) %5.1f (median) %5.1f | traffic/compulsory %.3f\n",
        name, int(mode), threads, t.ToString().c_str(), wall[0] * 1e6, wall[reps / 2] * 1e6,
        busy[0] * 1e6, cpu * 1e6, compulsory / wall[0] / 1e9, compulsory / wall[reps / 2] / 1e9,
        traffic / compulsory);
  }
}

int main() {
  PoolDesc stem;
  stem.kind = PoolKind::kMax;
  stem.channels = 64;
  stem.in_h = stem.in_w = 112;
  stem.out_h = stem.out_w = 56;
  stem.kernel_h = stem.kernel_w = 3;
  stem.stride_h = stem.stride_w = 2;
  stem.pad_top = stem.pad_left = stem.pad_bottom = stem.pad_right = 1;
  PoolDesc gap;
  gap.kind = PoolKind::kGlobalAverage;
  gap.channels = 2048;
  gap.in_h = gap.in_w = 7;
  std::vector<PoolTiling> stem_tilings = {{1, 4},  {1, 8},  {2, 8},  {4, 4},  {1, 28},
                                          {16, 8}, {16, 9}, {8, 14}, {4, 28}, {64, 4},
                                          {32, 7}, {2, 56}, {16, 28}};
  std::vector<PoolTiling> gap_tilings = {{16, 1}, {64, 1}, {256, 1}, {1024, 1}};
  for (RunMode m : {RunMode::kFull, RunMode::kCopyOnly, RunMode::kComputeOnly})
    Bench("maxpool 1x64x112x112 s2", stem, {{4, 28}, {16, 8}}, 1, m);
  PoolDesc avg = stem;
  avg.kind = PoolKind::kAverage;
  Bench("avgpool 1x64x112x112 s2", avg, {{4, 28}, {16, 8}}, 1);
  for (int threads : {1, 2}) {
    Bench("maxpool 1x64x112x112 s2", stem, stem_tilings, threads);
    Bench("gap 1x2048x7x7", gap, gap_tilings, threads);
  }
}
