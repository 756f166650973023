// bf16 GEMM 384x768x3072 + bias + GELU (issue 40's kernel figure), against
// the measured BF16 dot peak, and oneDNN's bf16 matmul with the same
// post-ops as the peer:
//   fusetune/gemm_bf16_bias_gelu/<tiling>        f32 A converted as it is packed, weights
//                                                pre-packed in bf16 once (as a compiled
//                                                program holds them), f32 out
//   peer/onednn/gemm_bf16_bias_gelu              oneDNN matmul, bf16 src and weights (weights
//                                                reordered to its layout once), f32 dst,
//                                                bias + gelu_erf post-op; A converted from
//                                                f32 to bf16 by a oneDNN reorder in the loop
//                                                (the same work: f32 in, f32 out)
//   peer/onednn/gemm_bf16_bias_gelu_bf16_src     the same with A already bf16 (no reorder)
//   .../compute_only                             the micro-kernels and epilogue, no copies
//   ..._refill                                   B refilled in place (GemmTiling::refill)
// frac_bf16_peak is GFLOP/s over MeasureBf16DotPeak.
#include <fmt/format.h>

#include "bench/bench_common.h"
#include "kernels/gemm.h"
#include "measure/roofline.h"

#ifdef FUSETUNE_HAVE_ONEDNN
#include <dnnl.hpp>
#endif

namespace fusetune::bench {
namespace {

using namespace kernels;

constexpr int64_t kM = 384, kN = 3072, kK = 768;

struct Data {
  std::vector<float> a = RandomVector(kM * kK, 1), b = RandomVector(kK * kN, 2, 0.05f),
                     bias = RandomVector(kN, 3), c = std::vector<float>(kM * kN);
};
Data& TheData() {
  static Data data;
  return data;
}

double Bf16Peak() {
  static const double peak = measure::MeasureBf16DotPeak(kThreads);
  return peak;
}

void ReportBf16Flops(benchmark::State& state, double seconds) {
  ReportFlops(state, 2.0 * kM * kN * kK, seconds);
  if (Bf16Peak() > 0) state.counters["frac_bf16_peak"] = state.counters["gflops"] / Bf16Peak();
}

GemmDesc Describe(Data& data) {
  GemmDesc d = DenseGemm(kM, kN, kK, data.a.data(), data.b.data(), data.c.data());
  GemmOutput& out = d.outputs[0];
  out.epilogue = {EpilogueOp::Bias(data.bias.data()), EpilogueOp::Act(EpilogueKind::kGeluErf)};
  return d;
}

void RunFusetune(benchmark::State& state, GemmTiling t, RunMode mode) {
  GemmDesc d = Describe(TheData());
  std::vector<float> packed(PrePackedBFloats(d, 0, t));
  PrePackB(d, 0, t, packed.data());
  d.outputs[0].b_packed = packed.data();
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&] {
    auto r = RunGemm(d, t, config, mode);
    if (r.ok()) stats = *r;
    return r;
  });
  ReportBf16Flops(state, seconds);
  ReportTraffic(state, stats);
  state.SetLabel(t.ToString());
}

GemmTiling Bf16Tiling(int mr, int nr, int64_t mc, int64_t nc, int64_t kc, ParallelSplit split,
                      bool double_buffer = false) {
  return GemmTilingOf(mr, nr, mc, nc, kc, split, double_buffer, Precision::kBf16);
}

// The same tiling with B refilled in place (GemmTiling::refill).
GemmTiling Refilled(GemmTiling t) {
  t.refill = true;
  return t;
}

#ifdef FUSETUNE_HAVE_ONEDNN
void RunOnednn(benchmark::State& state, bool convert_a) {
  using namespace dnnl;
  using dt = memory::data_type;
  using tag = memory::format_tag;
  Data& d = TheData();
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const memory::desc a_f32({kM, kK}, dt::f32, tag::ab), a_md({kM, kK}, dt::bf16, tag::ab),
      b_f32({kK, kN}, dt::f32, tag::ab), b_md({kK, kN}, dt::bf16, tag::any),
      bias_md({1, kN}, dt::f32, tag::ab), c_md({kM, kN}, dt::f32, tag::ab);
  post_ops ops;
  ops.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  primitive_attr attr;
  attr.set_post_ops(ops);
  const matmul::primitive_desc pd(matmul::desc(a_md, b_md, bias_md, c_md), attr, eng);
  matmul prim(pd);
  memory a_user(a_f32, eng, d.a.data()), a(a_md, eng), b_user(b_f32, eng, d.b.data()),
      b(pd.weights_desc(), eng), bias(bias_md, eng, d.bias.data()), c(c_md, eng, d.c.data());
  reorder(b_user, b).execute(s, b_user, b);  // weights once, outside the loop
  reorder to_bf16(a_user, a);
  to_bf16.execute(s, a_user, a);
  s.wait();
  const double seconds = TimedLoop(state, [&] {
    if (convert_a) to_bf16.execute(s, a_user, a);
    prim.execute(
        s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, c}});
    s.wait();
    return LoopOk();
  });
  ReportBf16Flops(state, seconds);
  state.SetLabel(pd.impl_info_str());
}
#endif

}  // namespace

void RegisterGemmBf16Benchmarks() {
  struct Named {
    const char* name;
    GemmTiling tiling;
  };
  const Named tilings[] = {
      {"mc96_nc256_kc256", Bf16Tiling(8, 32, 96, 256, 256, ParallelSplit::kN)},
      {"mc128_nc384_kc384", Bf16Tiling(8, 32, 128, 384, 384, ParallelSplit::kN)},
      {"mc64_nc768_kc384", Bf16Tiling(8, 32, 64, 768, 384, ParallelSplit::kN)},
      {"mc192_nc256_kc768", Bf16Tiling(8, 32, 192, 256, 768, ParallelSplit::kM)},
      {"mc48_nc512_kc768", Bf16Tiling(8, 32, 48, 512, 768, ParallelSplit::kM)},
      {"micro14x16", Bf16Tiling(14, 16, 112, 256, 384, ParallelSplit::kN)},
      // 12x32: 24 sums in registers, the fewest loads per dot product.
      {"micro12x32_mc192_nc256_kc768", Bf16Tiling(12, 32, 192, 256, 768, ParallelSplit::kM)},
      {"micro12x32_mc192_nc128_kc768", Bf16Tiling(12, 32, 192, 128, 768, ParallelSplit::kM)},
      {"micro12x32_mc192_nc256_kc384", Bf16Tiling(12, 32, 192, 256, 384, ParallelSplit::kM)},
      {"micro12x32_mc384_nc64_kc768_split_n", Bf16Tiling(12, 32, 384, 64, 768, ParallelSplit::kN)},
      {"micro12x32_mc96_nc128_kc768_db", Bf16Tiling(12, 32, 96, 128, 768, ParallelSplit::kM, true)},
      {"mc192_nc256_kc768_refill", Refilled(Bf16Tiling(8, 32, 192, 256, 768, ParallelSplit::kM))},
      {"micro12x32_mc192_nc256_kc768_refill",
       Refilled(Bf16Tiling(12, 32, 192, 256, 768, ParallelSplit::kM))},
      {"micro12x32_mc192_nc128_kc768_refill",
       Refilled(Bf16Tiling(12, 32, 192, 128, 768, ParallelSplit::kM))},
  };
  for (const Named& n : tilings)
    benchmark::RegisterBenchmark(
        fmt::format("fusetune/gemm_bf16_bias_gelu/{}", n.name).c_str(),
        [t = n.tiling](benchmark::State& s) { RunFusetune(s, t, RunMode::kFull); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  // One tiling's copies alone and its micro-kernels and epilogue alone:
  // what the tiles reach once their operands are in the local buffer.
  const char* modes[] = {"full", "copy_only", "compute_only"};
  for (const Named* n : {&tilings[3], &tilings[6]})
    for (RunMode mode : {RunMode::kCopyOnly, RunMode::kComputeOnly})
      benchmark::RegisterBenchmark(
          fmt::format("fusetune/gemm_bf16_bias_gelu/{}/{}", n->name, modes[static_cast<int>(mode)])
              .c_str(),
          [t = n->tiling, mode](benchmark::State& s) { RunFusetune(s, t, mode); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
#ifdef FUSETUNE_HAVE_ONEDNN
  benchmark::RegisterBenchmark("peer/onednn/gemm_bf16_bias_gelu",
                               [](benchmark::State& s) { RunOnednn(s, true); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("peer/onednn/gemm_bf16_bias_gelu_bf16_src",
                               [](benchmark::State& s) { RunOnednn(s, false); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
#endif
}

}  // namespace fusetune::bench
