// onednn_conv [--peak GFLOPS] [--runs N] [--threads T] [--algorithm direct|auto]
//             [--only resnet50|mobilenet_v2] [--json FILE] [--fusetune [--layouts]]
//             [--cold-weights]
//
// The peer figures of issue 37, point 6: oneDNN's FP32 forward-inference
// convolution on every distinct layer shape of torchvision's ResNet-50 and
// MobileNetV2 at 224x224, batch 1, with the post-ops those layers carry once
// BatchNormalization is folded into them: bias, then ReLU, ReLU6 (clip 0..6),
// the residual Add (a sum post-op into the destination) followed by ReLU in
// ResNet's blocks, or nothing (MobileNetV2's linear projections). Memory
// formats are left to oneDNN (format_tag::any) and the inputs, weights and
// residual are reordered into its choice once, outside the timed runs, as a
// library user who prepares a network ahead would. Each layer runs `runs`
// times back to back (warm caches); the best and the median run are
// reported, with GFLOP/s (2 x MACs / best time), the share of the FP32 FMA
// peak, and GB/s of the bytes the layer must move (input, weights, output,
// and the residual read by a sum). The per-network line sums best time x
// occurrences over the network's layers: oneDNN's convolution time for the
// whole network. 3x3 stride-1 layers are also tried with oneDNN's Winograd
// algorithm, where this build and CPU have one.
//
// --fusetune times fusetune's convolution template on every layer in the
// same run (bench/fusetune_conv_layer.h: each algorithm at the best of a
// grid of tilings, the same post-ops) and prints it against oneDNN's best
// (direct or Winograd), the FMA peak, and for depthwise layers the
// bandwidth of the cache level their data fits in: the figures of issue 37,
// point 6, from one process and one machine state. OpenMP's threads are
// made to sleep between oneDNN's calls (OMP_WAIT_POLICY=PASSIVE, set by
// re-executing the program) so that they do not spin against fusetune's.
// --layouts adds every activation layout pair the template can read and
// write (NCHW, NHWC, NCHW16c; kernels/layout.h) to fusetune's grid: what a
// layer gains from a layout, before the transforms a plan may need.
// --cold-weights times every timed run (oneDNN's and fusetune's best
// tilings; fusetune's grid is still searched warm) after evicting the caches
// and reading the activations back: a layer as it runs inside a model whose
// weights (pre-packed, Winograd-transformed) exceed the last-level cache.
//
// Threads: oneDNN here runs on OpenMP; the program sets its thread count.
// The peak is --peak, or measured in-process (measure/roofline.h) when absent:
// the larger of the T-thread figure and T x the 1-thread one, as assemble.py
// reads a calibration (on a busy shared host one of T threads may not run).
#include <fmt/format.h>
#include <omp.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <dnnl.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/fusetune_conv_layer.h"
#include "measure/roofline.h"

namespace {

using dnnl::algorithm;
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// What follows the convolution and its bias in the BN-folded graph.
enum class Post { kNone, kRelu, kRelu6, kSum, kSumRelu };

struct Layer {
  const char* net;
  const char* name;
  int cin, cout, hw, k, stride, groups;
  Post post;
  int count;  // occurrences of this shape and post-op in the network
  int out_hw() const { return (hw + 2 * (k / 2) - k) / stride + 1; }
  double flops() const { return 2.0 * cout * out_hw() * out_hw() * (cin / groups) * k * k; }
  double bytes() const {
    const double src = double(cin) * hw * hw, dst = double(cout) * out_hw() * out_hw();
    const double weights = double(cout) * (cin / groups) * k * k + cout;
    const bool sum = post == Post::kSum || post == Post::kSumRelu;
    return 4.0 * (src + weights + dst * (sum ? 2 : 1));
  }
};

// ResNet-50 (torchvision v1.5: the stride on the 3x3 conv), every distinct
// conv with its post-ops and how often it occurs: 53 convolutions.
const std::vector<Layer>& ResNet50() {
  static const std::vector<Layer> layers = {
      {"resnet50", "conv1 7x7/2", 3, 64, 224, 7, 2, 1, Post::kRelu, 1},
      {"resnet50", "layer1 1x1 in (block 0)", 64, 64, 56, 1, 1, 1, Post::kRelu, 1},
      {"resnet50", "layer1 1x1 in", 256, 64, 56, 1, 1, 1, Post::kRelu, 2},
      {"resnet50", "layer1 3x3", 64, 64, 56, 3, 1, 1, Post::kRelu, 3},
      {"resnet50", "layer1 1x1 out +res", 64, 256, 56, 1, 1, 1, Post::kSumRelu, 3},
      {"resnet50", "layer1 downsample 1x1", 64, 256, 56, 1, 1, 1, Post::kNone, 1},
      {"resnet50", "layer2 1x1 in (block 0)", 256, 128, 56, 1, 1, 1, Post::kRelu, 1},
      {"resnet50", "layer2 3x3/2", 128, 128, 56, 3, 2, 1, Post::kRelu, 1},
      {"resnet50", "layer2 downsample 1x1/2", 256, 512, 56, 1, 2, 1, Post::kNone, 1},
      {"resnet50", "layer2 1x1 in", 512, 128, 28, 1, 1, 1, Post::kRelu, 3},
      {"resnet50", "layer2 3x3", 128, 128, 28, 3, 1, 1, Post::kRelu, 3},
      {"resnet50", "layer2 1x1 out +res", 128, 512, 28, 1, 1, 1, Post::kSumRelu, 4},
      {"resnet50", "layer3 1x1 in (block 0)", 512, 256, 28, 1, 1, 1, Post::kRelu, 1},
      {"resnet50", "layer3 3x3/2", 256, 256, 28, 3, 2, 1, Post::kRelu, 1},
      {"resnet50", "layer3 downsample 1x1/2", 512, 1024, 28, 1, 2, 1, Post::kNone, 1},
      {"resnet50", "layer3 1x1 in", 1024, 256, 14, 1, 1, 1, Post::kRelu, 5},
      {"resnet50", "layer3 3x3", 256, 256, 14, 3, 1, 1, Post::kRelu, 5},
      {"resnet50", "layer3 1x1 out +res", 256, 1024, 14, 1, 1, 1, Post::kSumRelu, 6},
      {"resnet50", "layer4 1x1 in (block 0)", 1024, 512, 14, 1, 1, 1, Post::kRelu, 1},
      {"resnet50", "layer4 3x3/2", 512, 512, 14, 3, 2, 1, Post::kRelu, 1},
      {"resnet50", "layer4 downsample 1x1/2", 1024, 2048, 14, 1, 2, 1, Post::kNone, 1},
      {"resnet50", "layer4 1x1 in", 2048, 512, 7, 1, 1, 1, Post::kRelu, 2},
      {"resnet50", "layer4 3x3", 512, 512, 7, 3, 1, 1, Post::kRelu, 2},
      {"resnet50", "layer4 1x1 out +res", 512, 2048, 7, 1, 1, 1, Post::kSumRelu, 3},
  };
  return layers;
}

// MobileNetV2: the stem, then per inverted residual the 1x1 expansion
// (ReLU6), the 3x3 depthwise (ReLU6) and the linear 1x1 projection (a sum
// where the block has a residual; no activation after it); the 1x1 head.
// 52 convolutions.
const std::vector<Layer>& MobileNetV2() {
  static const std::vector<Layer> layers = {
      {"mobilenet_v2", "stem 3x3/2", 3, 32, 224, 3, 2, 1, Post::kRelu6, 1},
      {"mobilenet_v2", "dw 3x3", 32, 32, 112, 3, 1, 32, Post::kRelu6, 1},
      {"mobilenet_v2", "project 1x1", 32, 16, 112, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "expand 1x1", 16, 96, 112, 1, 1, 1, Post::kRelu6, 1},
      {"mobilenet_v2", "dw 3x3/2", 96, 96, 112, 3, 2, 96, Post::kRelu6, 1},
      {"mobilenet_v2", "project 1x1", 96, 24, 56, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "expand 1x1", 24, 144, 56, 1, 1, 1, Post::kRelu6, 2},
      {"mobilenet_v2", "dw 3x3", 144, 144, 56, 3, 1, 144, Post::kRelu6, 1},
      {"mobilenet_v2", "project 1x1 +res", 144, 24, 56, 1, 1, 1, Post::kSum, 1},
      {"mobilenet_v2", "dw 3x3/2", 144, 144, 56, 3, 2, 144, Post::kRelu6, 1},
      {"mobilenet_v2", "project 1x1", 144, 32, 28, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "expand 1x1", 32, 192, 28, 1, 1, 1, Post::kRelu6, 3},
      {"mobilenet_v2", "dw 3x3", 192, 192, 28, 3, 1, 192, Post::kRelu6, 2},
      {"mobilenet_v2", "project 1x1 +res", 192, 32, 28, 1, 1, 1, Post::kSum, 2},
      {"mobilenet_v2", "dw 3x3/2", 192, 192, 28, 3, 2, 192, Post::kRelu6, 1},
      {"mobilenet_v2", "project 1x1", 192, 64, 14, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "expand 1x1", 64, 384, 14, 1, 1, 1, Post::kRelu6, 4},
      {"mobilenet_v2", "dw 3x3", 384, 384, 14, 3, 1, 384, Post::kRelu6, 4},
      {"mobilenet_v2", "project 1x1 +res", 384, 64, 14, 1, 1, 1, Post::kSum, 3},
      {"mobilenet_v2", "project 1x1", 384, 96, 14, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "expand 1x1", 96, 576, 14, 1, 1, 1, Post::kRelu6, 3},
      {"mobilenet_v2", "dw 3x3", 576, 576, 14, 3, 1, 576, Post::kRelu6, 2},
      {"mobilenet_v2", "project 1x1 +res", 576, 96, 14, 1, 1, 1, Post::kSum, 2},
      {"mobilenet_v2", "dw 3x3/2", 576, 576, 14, 3, 2, 576, Post::kRelu6, 1},
      {"mobilenet_v2", "project 1x1", 576, 160, 7, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "expand 1x1", 160, 960, 7, 1, 1, 1, Post::kRelu6, 3},
      {"mobilenet_v2", "dw 3x3", 960, 960, 7, 3, 1, 960, Post::kRelu6, 3},
      {"mobilenet_v2", "project 1x1 +res", 960, 160, 7, 1, 1, 1, Post::kSum, 2},
      {"mobilenet_v2", "project 1x1", 960, 320, 7, 1, 1, 1, Post::kNone, 1},
      {"mobilenet_v2", "head 1x1", 320, 1280, 7, 1, 1, 1, Post::kRelu6, 1},
  };
  return layers;
}

const char* PostName(Post post) {
  switch (post) {
    case Post::kNone:
      return "bias";
    case Post::kRelu:
      return "bias, relu";
    case Post::kRelu6:
      return "bias, relu6";
    case Post::kSum:
      return "bias, sum";
    case Post::kSumRelu:
      return "bias, sum, relu";
  }
  return "";
}

std::string ShapeText(const Layer& l) {
  return fmt::format("{}x{}x{} -> {}x{}x{}, {}x{}/{}{}", l.cin, l.hw, l.hw, l.cout, l.out_hw(),
                     l.out_hw(), l.k, l.k, l.stride, l.groups > 1 ? " dw" : "");
}

dnnl::post_ops PostOps(Post post) {
  dnnl::post_ops ops;
  switch (post) {
    case Post::kNone:
      break;
    case Post::kRelu:
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      break;
    case Post::kRelu6:
      ops.append_eltwise(1.0f, algorithm::eltwise_clip, 0.0f, 6.0f);
      break;
    case Post::kSum:
      ops.append_sum(1.0f);
      break;
    case Post::kSumRelu:
      ops.append_sum(1.0f);
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      break;
  }
  return ops;
}

// A memory in `want`'s layout holding random values: filled in the plain
// layout `plain` and reordered once (the reorder is not timed).
memory Filled(const memory::desc& plain, const memory::desc& want, const dnnl::engine& eng,
              dnnl::stream& s, uint32_t seed) {
  memory user(plain, eng);
  float* p = static_cast<float*>(user.get_data_handle());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < plain.get_size() / sizeof(float); ++i) p[i] = dist(rng);
  if (want == plain) return user;
  memory m(want, eng);
  dnnl::reorder(user, m).execute(s, user, m);
  s.wait();
  return m;
}

struct Timing {
  double best_ms = 0, median_ms = 0;
  std::string impl;
};

// Builds the primitive for `l` with algorithm `algo` and times `runs`
// executions; nullopt when oneDNN has no implementation (e.g. Winograd).
std::optional<Timing> TimeLayer(const Layer& l, algorithm algo, int runs, const dnnl::engine& eng,
                                dnnl::stream& s, bool cold_weights) {
  const memory::dim oh = l.out_hw();
  const memory::dims src_dims{1, l.cin, l.hw, l.hw}, dst_dims{1, l.cout, oh, oh};
  const bool grouped = l.groups > 1;
  const memory::dims w_dims =
      grouped ? memory::dims{l.groups, l.cout / l.groups, l.cin / l.groups, l.k, l.k}
              : memory::dims{l.cout, l.cin, l.k, l.k};
  const memory::desc src_any(src_dims, dt::f32, tag::any), w_any(w_dims, dt::f32, tag::any),
      dst_any(dst_dims, dt::f32, tag::any), bias_md({l.cout}, dt::f32, tag::x);
  const memory::dims strides{l.stride, l.stride}, pad{l.k / 2, l.k / 2};
  dnnl::primitive_attr attr;
  attr.set_post_ops(PostOps(l.post));
  dnnl::convolution_forward::primitive_desc pd;
  try {
    pd = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algo, src_any, w_any,
                                        bias_md, dst_any, strides, pad, pad),
        attr, eng);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  memory src = Filled({src_dims, dt::f32, tag::nchw}, pd.src_desc(), eng, s, 1);
  memory w =
      Filled({w_dims, dt::f32, grouped ? tag::goihw : tag::oihw}, pd.weights_desc(), eng, s, 2);
  memory bias = Filled(bias_md, pd.bias_desc(), eng, s, 3);
  // The residual a sum adds is the destination's initial content.
  memory dst = Filled({dst_dims, dt::f32, tag::nchw}, pd.dst_desc(), eng, s, 4);
  dnnl::convolution_forward conv(pd);
  const std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
  std::vector<double> ms;
  const std::vector<std::pair<const void*, size_t>> activations = {
      {src.get_data_handle(), src.get_desc().get_size()},
      {dst.get_data_handle(), dst.get_desc().get_size()}};
  for (int i = -3; i < runs; ++i) {  // three warm-up runs
    if (cold_weights) fusetune::bench::EvictCachesKeeping(activations);
    const auto start = std::chrono::steady_clock::now();
    conv.execute(s, args);
    s.wait();
    if (i >= 0)
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
  }
  std::sort(ms.begin(), ms.end());
  return Timing{ms.front(), ms[ms.size() / 2], pd.impl_info_str()};
}

struct Options {
  double peak = 0;  // GFLOP/s; 0: measure
  int runs = 50, threads = 2;
  bool fusetune = false, layouts = false, cold_weights = false;
  algorithm algo = algorithm::convolution_direct;
  std::string only, json;
};

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--peak" && has_value) {
      o->peak = std::atof(argv[++i]);
    } else if (a == "--runs" && has_value) {
      o->runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--threads" && has_value) {
      o->threads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && has_value) {
      o->only = argv[++i];
      if (o->only != "resnet50" && o->only != "mobilenet_v2") return false;
    } else if (a == "--fusetune") {
      o->fusetune = true;
    } else if (a == "--layouts") {
      o->layouts = true;
    } else if (a == "--cold-weights") {
      o->cold_weights = true;
    } else if (a == "--json" && has_value) {
      o->json = argv[++i];
    } else if (a == "--algorithm" && has_value) {
      const std::string v = argv[++i];
      if (v != "direct" && v != "auto") return false;
      o->algo = v == "auto" ? algorithm::convolution_auto : algorithm::convolution_direct;
    } else {
      return false;
    }
  }
  return true;
}

struct NetTotal {
  std::string net;
  double ms = 0, flops = 0;
  int convs = 0;
};

void PrintHeader(const Options& o, bool measured_peak) {
  const dnnl::version_t* v = dnnl::version();
  fmt::print(
      "oneDNN {}.{}.{}, {} threads, best and median of {} runs ({}), {}; FP32 FMA peak "
      "{:.0f} GFLOP/s ({})\n\n",
      v->major, v->minor, v->patch, o.threads, o.runs,
      o.cold_weights ? "caches evicted before each run, activations read back: weights cold"
                     : "warm caches",
      o.algo == algorithm::convolution_auto ? "convolution_auto" : "convolution_direct", o.peak,
      measured_peak ? "measured in-process" : "--peak");
  fmt::print(
      "| net | layer | C x H x W -> K x OH x OW, kernel/stride | count | post-ops | oneDNN "
      "implementation | best ms | median ms | GFLOP/s | % FMA peak | GB/s |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
}

// The Winograd row of a 3x3 stride-1 layer, against its direct time.
std::string WinogradRow(const Layer& l, const Timing& direct, const std::optional<Timing>& w,
                        nlohmann::json* row) {
  if (!w) {
    (*row)["winograd"] = nullptr;
    return fmt::format("| {} | {} | none in this oneDNN build for this CPU | - | - | - |", l.net,
                       l.name);
  }
  const double gflops = l.flops() / (w->best_ms * 1e6);
  (*row)["winograd"] = {{"impl", w->impl}, {"best_ms", w->best_ms}, {"median_ms", w->median_ms}};
  return fmt::format("| {} | {} | {} | {:.3f} | {:.0f} | {:.2f}x |", l.net, l.name, w->impl,
                     w->best_ms, gflops, direct.best_ms / w->best_ms);
}

// fusetune's side of a layer (--fusetune): every algorithm's best time, the
// best of them against oneDNN's best (direct, or Winograd where faster).
// `totals` gets fusetune's sums, `onednn_best` oneDNN's best per layer.
std::string FusetuneRow(const Layer& l, const Timing& direct, const std::optional<Timing>& winograd,
                        const Options& o, std::vector<NetTotal>* totals,
                        std::vector<NetTotal>* onednn_best, nlohmann::json* row) {
  using fusetune::bench::LayerPost;
  const LayerPost post = l.post == Post::kNone    ? LayerPost::kNone
                         : l.post == Post::kRelu  ? LayerPost::kRelu
                         : l.post == Post::kRelu6 ? LayerPost::kRelu6
                         : l.post == Post::kSum   ? LayerPost::kSum
                                                  : LayerPost::kSumRelu;
  const auto timings =
      fusetune::bench::TimeFusetuneLayer({l.cin, l.cout, l.hw, l.k, l.stride, l.groups, post},
                                         o.threads, o.runs, o.layouts, o.cold_weights);
  const double onednn = winograd ? std::min(direct.best_ms, winograd->best_ms) : direct.best_ms;
  std::string per_algorithm;
  const fusetune::bench::AlgorithmTiming* best = nullptr;
  for (const auto& t : timings) {
    per_algorithm += fmt::format("{}{} {:.3f}", per_algorithm.empty() ? "" : ", ",
                                 fusetune::kernels::ConvAlgorithmName(t.algorithm), t.best_ms);
    if (!best || t.best_ms < best->best_ms) best = &t;
    (*row)["fusetune"][fusetune::kernels::ConvAlgorithmName(t.algorithm)] = {
        {"best_ms", t.best_ms}, {"median_ms", t.median_ms}, {"tiling", t.tiling.ToString()}};
  }
  if (!best) return fmt::format("| {} | {} | no tiling fits |", l.net, l.name);
  for (auto [sums, ms] : {std::pair{totals, best->best_ms}, std::pair{onednn_best, onednn}}) {
    if (sums->empty() || sums->back().net != l.net) sums->push_back({l.net});
    sums->back().ms += l.count * ms;
    sums->back().flops += l.count * l.flops();
    sums->back().convs += l.count;
  }
  const double gflops = l.flops() / (best->best_ms * 1e6), gbps = l.bytes() / (best->best_ms * 1e6);
  return fmt::format("| {} | {} | {} | {:.3f}{} | {} | {} | {:.3f} | {:.2f}x | {:.0f}% | {:.0f} |",
                     l.net, l.name, ShapeText(l), onednn,
                     winograd && winograd->best_ms < direct.best_ms ? " (wino)" : "", per_algorithm,
                     best->tiling.ToString(), best->best_ms, onednn / best->best_ms,
                     100 * gflops / o.peak, gbps);
}

void PrintFusetune(const std::vector<std::string>& rows, const std::vector<NetTotal>& ours,
                   const std::vector<NetTotal>& onednn_direct,
                   const std::vector<NetTotal>& onednn_best, const Options& o) {
  const double l3 = fusetune::measure::MeasureBandwidth(fusetune::measure::StreamKind::kCopy,
                                                        o.threads, size_t{4} << 20, 16);
  const double dram =
      fusetune::measure::MeasureBandwidth(fusetune::measure::StreamKind::kCopy, o.threads);
  fmt::print(
      "\nfusetune's convolution template, same layers and post-ops, best tiling of a grid per "
      "algorithm (ms, best of {} runs); speed-up over oneDNN's best (direct, or Winograd where "
      "faster); % FMA peak of the direct definition's FLOPs; GB/s of the bytes the layer must "
      "move (copy bandwidth measured now: {:.0f} GB/s at 4 MiB, {:.0f} GB/s at 256 MiB)\n\n"
      "| net | layer | shape | oneDNN best ms | fusetune per algorithm ms | best tiling | "
      "fusetune ms | vs oneDNN | % FMA peak | GB/s |\n|---|---|---|---|---|---|---|---|---|---|\n",
      o.runs, l3, dram);
  for (const std::string& row : rows) fmt::print("{}\n", row);
  fmt::print("\n");
  auto sum_of = [](const std::vector<NetTotal>& totals, const std::string& net) {
    for (const NetTotal& t : totals)
      if (t.net == net) return t.ms;
    return 0.0;
  };
  for (const NetTotal& t : ours) {
    const double direct = sum_of(onednn_direct, t.net), best = sum_of(onednn_best, t.net);
    fmt::print(
        "{}: fusetune {:.2f} ms summed over {} convolutions (each layer's best algorithm); "
        "oneDNN direct {:.2f} ms ({:.2f}x), oneDNN with Winograd where faster {:.2f} ms "
        "({:.2f}x)\n",
        t.net, t.ms, t.convs, direct, direct / t.ms, best, best / t.ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    fmt::print(stderr,
               "usage: onednn_conv [--peak GFLOPS] [--runs N] [--threads T] "
               "[--algorithm direct|auto] [--only resnet50|mobilenet_v2] [--json FILE] "
               "[--fusetune [--layouts]] [--cold-weights]\n");
    return 2;
  }
  // libgomp reads its wait policy when it loads, before main: set it and
  // start again, so that idle OpenMP threads sleep while fusetune runs.
  if (o.fusetune && std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
    fmt::print(stderr, "onednn_conv: could not re-execute itself with OMP_WAIT_POLICY set\n");
    return 1;
  }
  omp_set_num_threads(o.threads);
  const bool measured_peak = o.peak <= 0;
  if (measured_peak)
    o.peak = std::max(fusetune::measure::MeasureFmaPeak(o.threads),
                      o.threads * fusetune::measure::MeasureFmaPeak(1));
  PrintHeader(o, measured_peak);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  nlohmann::json json{{"threads", o.threads},
                      {"runs", o.runs},
                      {"peak_gflops", o.peak},
                      {"caches", o.cold_weights ? "cold_weights" : "warm"}};
  std::vector<NetTotal> totals, fusetune_totals, onednn_best_totals;
  std::vector<std::string> winograd_rows, fusetune_rows;
  for (const auto* net : {&ResNet50(), &MobileNetV2()}) {
    for (const Layer& l : *net) {
      if (!o.only.empty() && o.only != l.net) continue;
      const auto t = TimeLayer(l, o.algo, o.runs, eng, s, o.cold_weights);
      if (!t) {
        fmt::print(stderr, "onednn_conv: no oneDNN implementation for {} {}\n", l.net, l.name);
        return 1;
      }
      const double gflops = l.flops() / (t->best_ms * 1e6), gbps = l.bytes() / (t->best_ms * 1e6);
      fmt::print("| {} | {} | {} | {} | {} | {} | {:.3f} | {:.3f} | {:.0f} | {:.0f}% | {:.0f} |\n",
                 l.net, l.name, ShapeText(l), l.count, PostName(l.post), t->impl, t->best_ms,
                 t->median_ms, gflops, 100 * gflops / o.peak, gbps);
      if (totals.empty() || totals.back().net != l.net) totals.push_back({l.net});
      totals.back().ms += l.count * t->best_ms;
      totals.back().flops += l.count * l.flops();
      totals.back().convs += l.count;
      nlohmann::json row{{"net", l.net},
                         {"layer", l.name},
                         {"shape", ShapeText(l)},
                         {"count", l.count},
                         {"post_ops", PostName(l.post)},
                         {"impl", t->impl},
                         {"best_ms", t->best_ms},
                         {"median_ms", t->median_ms},
                         {"flops", l.flops()},
                         {"bytes", l.bytes()}};
      std::optional<Timing> winograd;
      if (l.k == 3 && l.stride == 1 && l.groups == 1) {
        winograd = TimeLayer(l, algorithm::convolution_winograd, o.runs, eng, s, o.cold_weights);
        winograd_rows.push_back(WinogradRow(l, *t, winograd, &row));
      }
      if (o.fusetune)
        fusetune_rows.push_back(
            FusetuneRow(l, *t, winograd, o, &fusetune_totals, &onednn_best_totals, &row));
      json["layers"].push_back(row);
    }
  }
  fmt::print("\n");
  for (const NetTotal& t : totals) {
    const double gflops = t.flops / (t.ms * 1e6);
    fmt::print(
        "{}: {} convolutions, {:.2f} GFLOP, {:.2f} ms summed over the layers' best runs ({:.0f} "
        "GFLOP/s, {:.0f}% of peak)\n",
        t.net, t.convs, t.flops * 1e-9, t.ms, gflops, 100 * gflops / o.peak);
    json["totals"][t.net] = {{"convs", t.convs}, {"flops", t.flops}, {"ms", t.ms}};
  }
  if (!winograd_rows.empty()) {
    fmt::print(
        "\nWinograd (convolution_winograd) on the 3x3 stride-1 layers, GFLOP/s counted as the "
        "direct convolution's:\n\n| net | layer | oneDNN implementation | best ms | GFLOP/s | vs "
        "direct |\n|---|---|---|---|---|---|\n");
    for (const std::string& row : winograd_rows) fmt::print("{}\n", row);
  }
  if (o.fusetune) PrintFusetune(fusetune_rows, fusetune_totals, totals, onednn_best_totals, o);
  if (!o.json.empty()) std::ofstream(o.json) << json.dump(1) << "\n";
  return 0;
}
