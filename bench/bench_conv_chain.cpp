// The conv-chain template on MobileNetV2's inverted-residual blocks (224 x
// 224, batch 1, ReLU6 after the expand and the depthwise stage, the residual
// Add where the block has one), against the same block unfused: the expand
// and project as im2col GEMMs and the depthwise conv on its own kernel, each
// at the best of a grid of tilings, with the intermediates going through
// memory. Both sides are timed in the same run, 2 threads, pre-packed
// weights, median of repeated runs on warm caches. Needs only ft_kernels.
//
// With --bf16 the fused block runs in bf16 too (ConvChainTiling::precision,
// its own best tiling), printed beside the f32 one with their ratio.
//
//   bench_conv_chain [--quick] [--bf16] [BLOCK]   (BLOCK: a name's first word, "b15")
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/conv_shapes.h"
#include "kernels/conv.h"
#include "kernels/conv_chain.h"
#include "kernels/microkernel.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::bench {
namespace {

using namespace kernels;
constexpr int kThreads = 2;

struct BlockShape {
  const char* name;
  int64_t c, size, e, out, stride;
  bool expand, residual;
};

// Every distinct inverted-residual shape of MobileNetV2 at 224 x 224.
const BlockShape kBlocks[] = {
    {"b1 32@112 dw->16", 32, 112, 32, 16, 1, false, false},
    {"b2 16@112 x6 s2->24", 16, 112, 96, 24, 2, true, false},
    {"b3 24@56 x6 ->24 +res", 24, 56, 144, 24, 1, true, true},
    {"b4 24@56 x6 s2->32", 24, 56, 144, 32, 2, true, false},
    {"b5 32@28 x6 ->32 +res", 32, 28, 192, 32, 1, true, true},
    {"b7 32@28 x6 s2->64", 32, 28, 192, 64, 2, true, false},
    {"b8 64@14 x6 ->64 +res", 64, 14, 384, 64, 1, true, true},
    {"b11 64@14 x6 ->96", 64, 14, 384, 96, 1, true, false},
    {"b12 96@14 x6 ->96 +res", 96, 14, 576, 96, 1, true, true},
    {"b14 96@14 x6 s2->160", 96, 14, 576, 160, 2, true, false},
    {"b15 160@7 x6 ->160 +res", 160, 7, 960, 160, 1, true, true},
    {"b17 160@7 x6 ->320", 160, 7, 960, 320, 1, true, false},
};

double MedianSeconds(const std::function<void()>& run, int reps) {
  for (int i = 0; i < 3; ++i) run();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

ConvShape Shape(int64_t c, int64_t size, int64_t out, int64_t k, int64_t stride, int64_t groups) {
  return bench::SquareConvShape(c, size, out, k, stride, groups);
}

std::vector<float> Filled(int64_t n, float v) { return std::vector<float>(n, v); }

// The best median over `tilings` of one conv (pre-packed per tiling).
double BestConv(ConvDesc d, const std::vector<ConvTiling>& tilings, int reps) {
  KernelConfig config;
  config.threads = kThreads;
  double best = 1e9;
  for (const ConvTiling& t : tilings) {
    if (!ConvTilingFits(d, t, config)) continue;
    std::vector<float> packed(std::max<int64_t>(1, PrePackedConvWeightFloats(d, t)));
    d.w_packed = nullptr;
    if (PrePackedConvWeightFloats(d, t) > 0) {
      PrePackConvWeights(d, t, packed.data());
      d.w_packed = packed.data();
    }
    best = std::min(best, MedianSeconds([&] { (void)RunConv(d, t, config); }, reps));
  }
  return best;
}

std::vector<ConvTiling> GemmTilings(bool quick) {
  std::vector<ConvTiling> v;
  for (int64_t oc : {32, 64, 96, 160, 320})
    for (int64_t px : {128, 256, 512, 1024})
      for (auto [mr, nr] : MicroTileShapes()) {
        if ((quick && (mr != 8 || nr != 32)) || IsThinMicroTile(mr, nr)) continue;
        ConvTiling t;
        t.algorithm = ConvAlgorithm::kIm2colGemm;
        t.oc_block = oc;
        t.pixel_block = px;
        t.k_block = 1024;
        t.mr = mr;
        t.nr = nr;
        v.push_back(t);
      }
  return v;
}

std::vector<ConvTiling> DepthwiseTilings() {
  std::vector<ConvTiling> v;
  for (int64_t oc : {16, 32, 64, 192})
    for (int64_t px : {112, 448, 1024, 4096}) {
      ConvTiling t;
      t.algorithm = ConvAlgorithm::kDepthwise;
      t.oc_block = oc;
      t.pixel_block = px;
      t.mr = MicroTileShapes().front().first;
      t.nr = MicroTileShapes().front().second;
      v.push_back(t);
    }
  return v;
}

double Unfused(const BlockShape& b, bool quick, int reps) {
  const ConvShape dw =
      Shape(b.expand ? b.e : b.c, b.size, b.expand ? b.e : b.c, 3, b.stride, b.expand ? b.e : b.c);
  const int64_t e = dw.in_channels;
  std::vector<float> x = Filled(b.c * b.size * b.size, 0.1f), hidden(e * b.size * b.size);
  std::vector<float> mid(e * dw.pixels()), y(b.out * dw.pixels()), r(y.size(), 0.1f);
  std::vector<float> we = Filled(e * b.c, 0.01f), wd = Filled(e * 9, 0.1f);
  std::vector<float> wp = Filled(b.out * e, 0.01f), bias = Filled(std::max(e, b.out), 0.1f);
  double seconds = 0;
  // Epilogues are push_back'ed: GCC 12 takes `epilogue = {op}` here for a
  // free of a non-heap pointer (-Wfree-nonheap-object, a false positive).
  if (b.expand) {
    ConvDesc d;
    d.shape = Shape(b.c, b.size, e, 1, 1, 1);
    d.x = x.data();
    d.w = we.data();
    d.bias = bias.data();
    d.y = hidden.data();
    d.epilogue.push_back(EpilogueOp::Clip(0, 6));
    seconds += BestConv(d, GemmTilings(quick), reps);
  }
  ConvDesc d;
  d.shape = dw;
  d.x = b.expand ? hidden.data() : x.data();
  d.w = wd.data();
  d.bias = bias.data();
  d.y = mid.data();
  d.epilogue.push_back(EpilogueOp::Clip(0, 6));
  seconds += BestConv(d, DepthwiseTilings(), reps);
  ConvDesc p;
  p.shape = Shape(e, dw.out_h, b.out, 1, 1, 1);
  p.x = mid.data();
  p.w = wp.data();
  p.bias = bias.data();
  p.y = y.data();
  if (b.residual)
    p.epilogue.push_back(EpilogueOp::Residual(r.data(), dw.pixels(), b.out * dw.pixels()));
  return seconds + BestConv(p, GemmTilings(quick), reps);
}

// The best fused time and its tiling.
std::pair<double, ConvChainTiling> Fused(const BlockShape& b, bool quick, int reps,
                                         Precision precision = Precision::kF32) {
  const int64_t e = b.expand ? b.e : b.c;
  ConvChainDesc d;
  d.depthwise = Shape(e, b.size, e, 3, b.stride, e);
  d.in_channels = b.c;
  d.out_channels = b.out;
  d.expand = b.expand;
  std::vector<float> x = Filled(b.c * b.size * b.size, 0.1f);
  std::vector<float> y(b.out * d.depthwise.pixels()), r(y.size(), 0.1f);
  std::vector<float> we = Filled(e * b.c, 0.01f), wd = Filled(e * 9, 0.1f);
  std::vector<float> wp = Filled(b.out * e, 0.01f), bias = Filled(std::max(e, b.out), 0.1f);
  d.x = x.data();
  d.expand_w = b.expand ? we.data() : nullptr;
  d.expand_bias = b.expand ? bias.data() : nullptr;
  d.dw_w = wd.data();
  d.dw_bias = bias.data();
  d.project_w = wp.data();
  d.project_bias = bias.data();
  if (b.expand) d.expand_act = {EpilogueOp::Clip(0, 6)};
  d.dw_act = {EpilogueOp::Clip(0, 6)};
  if (b.residual)
    d.epilogue = {
        EpilogueOp::Residual(r.data(), d.depthwise.pixels(), b.out * d.depthwise.pixels())};
  d.y = y.data();
  KernelConfig config;
  config.threads = kThreads;
  std::pair<double, ConvChainTiling> best{1e9, {}};
  for (int64_t rows : {1, 2, 4, 7, 8, 14, 16})
    for (int64_t eb : {16, 32, 48, 64, 96, 144, 192})
      for (auto [mr, nr] : MicroTileShapes())
        for (bool split : {false, true}) {
          if ((quick && (mr != 8 || nr != 32)) || IsThinMicroTile(mr, nr)) continue;
          if (precision == Precision::kBf16 && FindBf16MicroKernel(mr, nr) == nullptr) continue;
          const ConvChainTiling t{rows, eb, mr, nr, split, precision};
          if (!ConvChainTilingFits(d, t, config)) continue;
          std::vector<float> packed(PrePackedConvChainWeightFloats(d, t));
          PrePackConvChainWeights(d, t, packed.data());
          d.w_packed = packed.data();
          const double s = MedianSeconds([&] { (void)RunConvChain(d, t, config); }, reps);
          if (s < best.first) best = {s, t};
        }
  return best;
}

}  // namespace
}  // namespace fusetune::bench

int main(int argc, char** argv) {
  using namespace fusetune::bench;
  bool quick = false, bf16 = false;
  std::string only;  // a block name's prefix ("b15"): that block alone
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--bf16") == 0)
      bf16 = true;
    else
      only = argv[i];
  }
  const int reps = quick ? 7 : 15;
  fmt::print("{:<26} {:>10} {:>10} {:>7}  {}\n", "block", "unfused_ms", "fused_ms", "ratio",
             "fused tiling");
  if (bf16) fmt::print("{:<26} {:>10} {:>10} {:>7}  {}\n", "", "", "bf16_ms", "vs f32", "tiling");
  double total_unfused = 0, total_fused = 0, total_bf16 = 0;
  for (const BlockShape& b : kBlocks) {
    if (!only.empty() && std::string(b.name).rfind(only + " ", 0) != 0) continue;
    const double u = Unfused(b, quick, reps);
    const auto [f, t] = Fused(b, quick, reps);
    total_unfused += u;
    total_fused += f;
    fmt::print("{:<26} {:>10.4f} {:>10.4f} {:>6.2f}x  {}\n", b.name, u * 1e3, f * 1e3, u / f,
               t.ToString());
    if (!bf16) continue;
    const auto [h, th] = Fused(b, quick, reps, fusetune::kernels::Precision::kBf16);
    total_bf16 += h;
    fmt::print("{:<26} {:>10} {:>10.4f} {:>6.2f}x  {}\n", "", "", h * 1e3, f / h, th.ToString());
  }
  if (bf16)
    fmt::print("{:<26} {:>10} {:>10.4f} {:>6.2f}x  (bf16 fused against f32 fused)\n", "sum in bf16",
               "", total_bf16 * 1e3, total_fused / total_bf16);
  fmt::print("{:<26} {:>10.4f} {:>10.4f} {:>6.2f}x\n", "sum (each shape once)", total_unfused * 1e3,
             total_fused * 1e3, total_unfused / total_fused);
}
