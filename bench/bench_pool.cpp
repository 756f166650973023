// The pooling template (kernels/pool.h) on ResNet's stem max pool
// (1x64x112x112, 3x3 stride 2 pad 1) and ResNet-50's GlobalAveragePool
// (1x2048x7x7), a handful of tilings on 1 and 2 threads, and the stem pool's
// copy-only and compute-only parts: per call the best and median wall time
// over 200 calls, the best busy time (the longest thread, without the
// launch), the process CPU time, GB/s of the compulsory bytes (input and
// output once) and the counted traffic over them. Then ResNet-50's last
// conv (1x1, 512 -> 2048 at 7x7, bias, residual Add, ReLU) with its
// GlobalAveragePool fused (ConvDesc::global_pool: only the pooled values
// are written) against the same conv writing its output and the pool
// kernel after it, the best of a few tilings each; and ResNet's stem conv
// with its 3x3/2 MaxPool fused (ConvDesc::max_pool) against conv then pool
// kernel, the best of a grid each. No google-benchmark: it
// builds with ft_kernels alone.
//   build/bench/bench_pool [--conv-only]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "kernels/conv.h"
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

// Best and median wall time of `run` over `reps` calls.
template <typename F>
std::pair<double, double> Time(int reps, F&& run) {
  std::vector<double> wall;
  for (int r = 0; r < reps; ++r) {
    const auto a = std::chrono::steady_clock::now();
    run();
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(wall.begin(), wall.end());
  return {wall[0], wall[reps / 2]};
}

// A conv's data (fixed patterns, no RNG) and its descriptor with a bias and
// no epilogue, shared by the fused-pool comparisons below.
struct ConvData {
  std::vector<float> x, w, b, y;
  ConvDesc conv;
  explicit ConvData(const ConvShape& s)
      : x(s.in_channels * s.in_h * s.in_w),
        w(s.out_channels * s.in_channels * s.kernel_h * s.kernel_w),
        b(s.out_channels, 0.1f),
        y(s.out_channels * s.pixels()) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97) * 0.01f - 0.4f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i % 89) * 0.001f - 0.04f;
    conv.shape = s;
    conv.x = x.data();
    conv.w = w.data();
    conv.bias = b.data();
    conv.y = y.data();
  }
};

void BenchConvPool(int threads) {
  ConvShape s;
  s.in_channels = 512;
  s.in_h = s.in_w = s.out_h = s.out_w = 7;
  s.out_channels = 2048;
  ConvData data(s);
  std::vector<float> r(2048 * 49), pooled(2048), packed;
  for (size_t i = 0; i < r.size(); ++i) r[i] = float(i % 13) * 0.1f - 0.5f;
  std::vector<float>& y = data.y;
  ConvDesc& conv = data.conv;
  conv.epilogue = {EpilogueOp::Residual(r.data(), 49, 2048 * 49),
                   EpilogueOp::Act(EpilogueKind::kRelu)};
  ConvDesc fused = conv;
  fused.y = pooled.data();
  fused.global_pool = ConvGlobalPool::kAverage;
  PoolDesc gap;
  gap.kind = PoolKind::kGlobalAverage;
  gap.channels = 2048;
  gap.in_h = gap.in_w = 7;
  gap.x = y.data();
  gap.y = pooled.data();
  KernelConfig config;
  config.threads = threads;
  const int reps = 300;
  double best_fused = 1e9, best_unfused = 1e9;
  for (int64_t oc : {64, 128, 256})
    for (int64_t k : {128, 256, 512}) {
      ConvTiling t;
      t.oc_block = oc;
      t.pixel_block = 64;
      t.k_block = k;
      if (!ConvTilingFits(conv, t, config) || !ConvTilingFits(fused, t, config)) continue;
      packed.assign(PrePackedConvWeightFloats(conv, t), 0.0f);
      PrePackConvWeights(conv, t, packed.data());
      conv.w_packed = fused.w_packed = packed.data();
      const auto f = Time(reps, [&] { (void)RunConv(fused, t, config); });
      double best_pool = 1e9;
      for (int64_t cb : {64, 256, 1024})
        best_pool = std::min(best_pool, Time(reps, [&] {
                                          (void)RunPool(gap, PoolTiling{cb, 1}, config);
                                        }).first);
      const auto c = Time(reps, [&] { (void)RunConv(conv, t, config); });
      const auto u = Time(reps, [&] {
        (void)RunConv(conv, t, config);
        (void)RunPool(gap, PoolTiling{256, 1}, config);
      });
      const KernelStats fs = *RunConv(fused, t, config);
      const KernelStats cs = *RunConv(conv, t, config);
      std::printf(
          "resnet50 last conv+gap t%d %-40s fused best %6.1f us median %6.1f us | conv %6.1f us "
          "(median %6.1f) + gap alone %5.1f us | conv then gap best %6.1f us median %6.1f us | "
          "conv out bytes fused %lld unfused %lld\n",
          threads, t.ToString().c_str(), f.first * 1e6, f.second * 1e6, c.first * 1e6,
          c.second * 1e6, best_pool * 1e6, u.first * 1e6, u.second * 1e6,
          static_cast<long long>(fs.bytes_local_to_global),
          static_cast<long long>(cs.bytes_local_to_global));
      best_fused = std::min(best_fused, f.first);
      best_unfused = std::min(best_unfused, u.first);
    }
  std::printf("resnet50 last conv+gap t%d best fused %.1f us, best conv then gap %.1f us (%.3fx)\n",
              threads, best_fused * 1e6, best_unfused * 1e6, best_unfused / best_fused);
}

// ResNet's stem: conv 7x7/2 (3 -> 64 at 224x224), bias, ReLU, then the
// 3x3/2 max pool, fused (ConvDesc::max_pool: only the 56x56 pooled map is
// written; bands recompute their halo row) against the conv writing its
// 112x112 output and the pool kernel after it. Each side is the best of a
// grid of tilings (direct and im2col, channel blocks, bands of rows).
void BenchStemPool(int threads) {
  ConvShape s;
  s.in_channels = 3;
  s.in_h = s.in_w = 224;
  s.out_channels = 64;
  s.out_h = s.out_w = 112;
  s.kernel_h = s.kernel_w = 7;
  s.stride_h = s.stride_w = 2;
  s.pad_top = s.pad_left = 3;
  ConvData data(s);
  std::vector<float> pooled(64 * 56 * 56), packed;
  std::vector<float>& y = data.y;
  ConvDesc& conv = data.conv;
  conv.epilogue = {EpilogueOp::Act(EpilogueKind::kRelu)};
  ConvDesc fused = conv;
  fused.y = pooled.data();
  fused.max_pool = ConvMaxPool{3, 3, 2, 2, 1, 1, 56, 56};
  PoolDesc pool;
  pool.kind = PoolKind::kMax;
  pool.channels = 64;
  pool.in_h = pool.in_w = 112;
  pool.out_h = pool.out_w = 56;
  pool.kernel_h = pool.kernel_w = 3;
  pool.stride_h = pool.stride_w = 2;
  pool.pad_top = pool.pad_left = pool.pad_bottom = pool.pad_right = 1;
  pool.x = y.data();
  pool.y = pooled.data();
  KernelConfig config;
  config.threads = threads;
  const int reps = 40;
  double best_fused = 1e9, best_conv = 1e9, best_pool = 1e9;
  ConvTiling fused_at, conv_at;
  for (PoolTiling pt : {PoolTiling{1, 28}, PoolTiling{1, 56}, PoolTiling{4, 28}, PoolTiling{16, 8}})
    if (PoolTilingFits(pool, pt, config))
      best_pool = std::min(best_pool, Time(reps, [&] { (void)RunPool(pool, pt, config); }).first);
  for (ConvAlgorithm a : {ConvAlgorithm::kDirect, ConvAlgorithm::kIm2colGemm})
    for (int64_t oc : {16, 32, 64})
      for (int64_t rows : {3, 5, 9, 17, 33}) {
        ConvTiling t;
        t.algorithm = a;
        t.oc_block = oc;
        t.pixel_block = a == ConvAlgorithm::kIm2colGemm ? rows * 112 / 32 * 32 + 32 : rows * 112;
        t.k_block = 160;
        packed.assign(PrePackedConvWeightFloats(conv, t), 0.0f);
        PrePackConvWeights(conv, t, packed.data());
        conv.w_packed = fused.w_packed = packed.empty() ? nullptr : packed.data();
        if (ConvTilingFits(fused, t, config)) {
          const double f = Time(reps, [&] { (void)RunConv(fused, t, config); }).first;
          if (f < best_fused) best_fused = f, fused_at = t;
        }
        if (ConvTilingFits(conv, t, config)) {
          const double c = Time(reps, [&] { (void)RunConv(conv, t, config); }).first;
          if (c < best_conv) best_conv = c, conv_at = t;
        }
      }
  std::printf(
      "resnet stem conv+maxpool t%d best fused %.1f us (%s) | conv %.1f us (%s) + pool %.1f us = "
      "%.1f us (%.3fx)\n",
      threads, best_fused * 1e6, fused_at.ToString().c_str(), best_conv * 1e6,
      conv_at.ToString().c_str(), best_pool * 1e6, (best_conv + best_pool) * 1e6,
      (best_conv + best_pool) / best_fused);
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--conv-only") == 0) {
    for (int threads : {1, 2}) BenchConvPool(threads);
    for (int threads : {1, 2}) BenchStemPool(threads);
    return 0;
  }
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
  for (int threads : {1, 2}) BenchConvPool(threads);
}
