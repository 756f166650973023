#include "bench/fusetune_conv_layer.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "bench/conv_shapes.h"
#include "kernels/microkernel.h"

namespace fusetune::bench {
namespace {

using kernels::ConvAlgorithm;
using kernels::ConvDesc;
using kernels::ConvShape;
using kernels::ConvTiling;
using kernels::EpilogueKind;
using kernels::EpilogueOp;

ConvShape ShapeOf(const LayerSpec& l) {
  return SquareConvShape(l.cin, l.hw, l.cout, l.k, l.stride, l.groups);
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// The layer's data and descriptor, the post-ops as the epilogue.
struct LayerData {
  std::vector<float> x, w, bias, residual, y, packed;
  ConvDesc d;

  explicit LayerData(const LayerSpec& l) {
    const ConvShape s = ShapeOf(l);
    x = Random(static_cast<size_t>(s.in_channels * s.in_h * s.in_w), 1);
    w = Random(static_cast<size_t>(s.out_channels * s.in_per_group() * s.kernel_h * s.kernel_w), 2);
    bias = Random(static_cast<size_t>(s.out_channels), 3);
    y.assign(static_cast<size_t>(s.out_channels * s.pixels()), 0.0f);
    d.shape = s;
    d.x = x.data();
    d.w = w.data();
    d.bias = bias.data();
    d.y = y.data();
    if (l.post == LayerPost::kSum || l.post == LayerPost::kSumRelu) {
      residual = Random(y.size(), 4);
      d.epilogue.push_back(
          EpilogueOp::Residual(residual.data(), s.pixels(), s.out_channels * s.pixels()));
    }
    if (l.post == LayerPost::kRelu || l.post == LayerPost::kSumRelu)
      d.epilogue.push_back(EpilogueOp::Act(EpilogueKind::kRelu));
    if (l.post == LayerPost::kRelu6) d.epilogue.push_back(EpilogueOp::Clip(0.0f, 6.0f));
  }

  void PrePack(const ConvTiling& t) {
    packed.assign(static_cast<size_t>(kernels::PrePackedConvWeightFloats(d, t)), 0.0f);
    kernels::PrePackConvWeights(d, t, packed.data());
    d.w_packed = packed.empty() ? nullptr : packed.data();
  }
};

// Best and median milliseconds of `runs` calls; with `keep`, each after
// the caches were evicted and those regions read back.
std::pair<double, double> Time(const ConvDesc& d, const ConvTiling& t,
                               const kernels::KernelConfig& config, int runs,
                               const std::vector<std::pair<const void*, size_t>>* keep = nullptr) {
  std::vector<double> ms;
  for (int i = -1; i < runs; ++i) {  // one warm-up call
    if (keep) EvictCachesKeeping(*keep);
    const auto start = std::chrono::steady_clock::now();
    (void)kernels::RunConv(d, t, config);
    if (i >= 0)
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms.front(), ms[ms.size() / 2]};
}

// The grid one algorithm is searched over on `s`.
std::vector<ConvTiling> Grid(const ConvShape& s, ConvAlgorithm a, bool layouts) {
  std::vector<std::pair<int, int>> micro = {{8, 32}};
  if (kernels::ConvAlgorithmUsesMicroTile(a)) micro = {{8, 32}, {7, 32}, {14, 16}, {6, 32}};
  std::vector<ConvTiling> grid;
  for (auto [mr, nr] : micro)
    for (int64_t oc : {16, 32, 64, 128, 256, 512})
      for (int64_t px : {64, 128, 256, 512, 1024, 2048})
        for (int64_t kb : {32, 64, 256, 1024}) {
          ConvTiling t;
          t.algorithm = a;
          t.mr = mr;
          t.nr = nr;
          const bool gemm = a == ConvAlgorithm::kIm2colGemm;
          t.oc_block = gemm ? std::max<int64_t>(mr, oc / mr * mr) : oc;
          t.pixel_block = gemm ? std::max<int64_t>(nr, px / nr * nr) : px;
          t.k_block = kb;
          if (oc > 16 && oc / 2 >= s.out_per_group() && a != ConvAlgorithm::kDepthwise) continue;
          if (oc > 16 && oc / 2 >= s.out_channels) continue;
          if (px > 64 && px / 2 >= s.pixels()) continue;
          if (kb > 32 && kb / 4 >= s.in_per_group() * s.kernel_h * s.kernel_w) continue;
          for (int in = 0; in < (layouts ? kernels::kNumActivationLayouts : 1); ++in)
            for (int out = 0; out < (layouts ? kernels::kNumActivationLayouts : 1); ++out) {
              t.in_layout = static_cast<kernels::ActivationLayout>(in);
              t.out_layout = static_cast<kernels::ActivationLayout>(out);
              grid.push_back(t);
            }
        }
  return grid;
}

// The activations a layer reads and writes (not its weights).
std::vector<std::pair<const void*, size_t>> Activations(const LayerData& data) {
  std::vector<std::pair<const void*, size_t>> keep = {
      {data.x.data(), data.x.size() * sizeof(float)},
      {data.y.data(), data.y.size() * sizeof(float)}};
  if (!data.residual.empty())
    keep.emplace_back(data.residual.data(), data.residual.size() * sizeof(float));
  return keep;
}

}  // namespace

void EvictCachesKeeping(const std::vector<std::pair<const void*, size_t>>& keep) {
  static std::vector<float> scratch(size_t{16} << 20);
  for (size_t i = 0; i < scratch.size(); i += 16) scratch[i] += 1.0f;
  float sum = 0;
  for (const auto& [data, bytes] : keep) {
    const auto* f = static_cast<const float*>(data);
    for (size_t i = 0; i < bytes / sizeof(float); i += 16) sum += f[i];
  }
  // Keeps the reads: the sum lands where nothing looks.
  scratch[0] += sum * 0.0f;
}

std::vector<AlgorithmTiming> TimeFusetuneLayer(const LayerSpec& layer, int threads, int runs,
                                               bool layouts, bool cold_weights) {
  LayerData data(layer);
  kernels::KernelConfig config;
  config.threads = threads;
  std::vector<AlgorithmTiming> timings;
  for (int i = 0; i < kernels::kNumConvAlgorithms; ++i) {
    const auto a = static_cast<ConvAlgorithm>(i);
    if (!kernels::ConvAlgorithmApplies(data.d.shape, a).ok()) continue;
    AlgorithmTiming best;
    best.algorithm = a;
    best.best_ms = 1e30;
    for (const ConvTiling& t : Grid(data.d.shape, a, layouts)) {
      data.d.w_packed = nullptr;
      if (!kernels::ConvTilingFits(data.d, t, config)) continue;
      data.PrePack(t);
      ++best.tilings_tried;
      const double ms = Time(data.d, t, config, 3).first;
      if (ms < best.best_ms) {
        best.best_ms = ms;
        best.tiling = t;
      }
    }
    if (best.tilings_tried == 0) continue;
    data.d.w_packed = nullptr;
    data.PrePack(best.tiling);
    const auto keep = Activations(data);
    std::tie(best.best_ms, best.median_ms) =
        Time(data.d, best.tiling, config, runs, cold_weights ? &keep : nullptr);
    timings.push_back(best);
  }
  return timings;
}

}  // namespace fusetune::bench
