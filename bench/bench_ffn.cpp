// FFN back-to-back fusion at 384x768x3072x768 (BERT-base): the fused template
// (hidden activation kept local) against two unfused paths of this library:
// two GEMM kernels with fused epilogues, and single-op kernels (GEMM, bias
// add, GELU, GEMM, bias add). Compare their traffic_mb and times.
#include <fmt/format.h>

#include "bench/bench_common.h"
#include "kernels/elementwise.h"
#include "kernels/ffn.h"
#include "kernels/gemm.h"

namespace fusetune::bench {
namespace {

using namespace kernels;

struct FfnData {
  int64_t m = 384, k = 768, h = 3072, n = 768;
  std::vector<float> x = RandomVector(m * k, 31), w1 = RandomVector(k * h, 32, 0.05f),
                     b1 = RandomVector(h, 33), w2 = RandomVector(h * n, 34, 0.05f),
                     b2 = RandomVector(n, 35), hidden = std::vector<float>(m * h),
                     hidden2 = std::vector<float>(m * h), o = std::vector<float>(m * n);
  double Flops() const { return 2.0 * m * h * (k + n); }
};

FfnData& Data() {
  static FfnData data;
  return data;
}

void RunFused(benchmark::State& state, FfnTiling t) {
  FfnData& f = Data();
  FfnDesc d;
  d.m = f.m;
  d.k = f.k;
  d.hidden = f.h;
  d.n = f.n;
  d.x = f.x.data();
  d.x_row_stride = f.k;
  d.w1 = f.w1.data();
  d.w1_row_stride = f.h;
  d.b1 = f.b1.data();
  d.w2 = f.w2.data();
  d.w2_row_stride = f.n;
  d.epilogue = {EpilogueOp::Bias(f.b2.data())};
  d.o = f.o.data();
  d.o_row_stride = f.n;
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&] {
    auto r = RunFfn(d, t, config);
    if (r.ok()) stats = *r;
    return r;
  });
  ReportFlops(state, f.Flops(), seconds);
  ReportTraffic(state, stats);
  state.SetLabel(t.ToString());
}

GemmDesc Gemm(const float* a, int64_t m, int64_t k, const float* b, int64_t n, float* c) {
  GemmDesc g;
  g.m = m;
  g.k = k;
  g.a = a;
  g.a_row_stride = k;
  GemmOutput& out = g.outputs.emplace_back();
  out.n = n;
  out.b = b;
  out.b_row_stride = n;
  out.c = c;
  out.c_row_stride = n;
  return g;
}

ElementwiseDesc Elementwise(const float* x, const float* bias, float* y, int64_t m, int64_t n,
                            TileOp op) {
  ElementwiseDesc e;
  e.dims = {m, n};
  e.inputs = {{x, {n, 1}}};
  if (bias) e.inputs.push_back({bias, {0, 1}});
  e.outputs = {y};
  TileProgram& p = e.program;
  p.Output(bias ? p.Binary(op, p.Input(0), p.Input(1)) : p.Unary(op, p.Input(0)));
  return e;
}

void RunUnfused(benchmark::State& state, bool single_ops) {
  FfnData& f = Data();
  GemmDesc g1 = Gemm(f.x.data(), f.m, f.k, f.w1.data(), f.h, f.hidden.data());
  GemmDesc g2 = Gemm(f.hidden.data(), f.m, f.h, f.w2.data(), f.n, f.o.data());
  if (!single_ops) {
    g1.outputs[0].epilogue = {EpilogueOp::Bias(f.b1.data()),
                              EpilogueOp::Act(EpilogueKind::kGeluErf)};
    g2.outputs[0].epilogue = {EpilogueOp::Bias(f.b2.data())};
  }
  const ElementwiseDesc bias1 =
      Elementwise(f.hidden.data(), f.b1.data(), f.hidden2.data(), f.m, f.h, TileOp::kAdd);
  const ElementwiseDesc gelu =
      Elementwise(f.hidden2.data(), nullptr, f.hidden.data(), f.m, f.h, TileOp::kGeluErf);
  const ElementwiseDesc bias2 =
      Elementwise(f.o.data(), f.b2.data(), f.o.data(), f.m, f.n, TileOp::kAdd);
  GemmTiling t1;  // the best hand-picked tiling (see fusetune/gemm_bias_gelu)
  t1.mc = 384;
  t1.nc = 384;
  t1.kc = 64;
  t1.split = ParallelSplit::kN;
  GemmTiling t2 = t1;  // N = 768: two blocks, one per thread
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&]() -> Result<KernelStats> {
    FT_ASSIGN_OR_RETURN(stats, RunGemm(g1, t1, config));
    if (single_ops) {
      FT_ASSIGN_OR_RETURN(KernelStats add, RunElementwise(bias1, ElementwiseTiling(), config));
      FT_ASSIGN_OR_RETURN(KernelStats act, RunElementwise(gelu, ElementwiseTiling(), config));
      stats += add;
      stats += act;
    }
    FT_ASSIGN_OR_RETURN(KernelStats second, RunGemm(g2, t2, config));
    stats += second;
    if (single_ops) {
      FT_ASSIGN_OR_RETURN(KernelStats add2, RunElementwise(bias2, ElementwiseTiling(), config));
      stats += add2;
    }
    return stats;
  });
  ReportFlops(state, f.Flops(), seconds);
  ReportTraffic(state, stats);
}

}  // namespace

void RegisterFfnBenchmarks() {
  for (auto [mb, hb] :
       {std::pair<int64_t, int64_t>{128, 16}, {128, 32}, {96, 32}, {96, 64}, {64, 64}}) {
    FfnTiling t;
    t.mb = mb;
    t.hb = hb;
    benchmark::RegisterBenchmark(
        fmt::format("fusetune/ffn_384x768x3072x768/mb{}_hb{}", mb, hb).c_str(),
        [t](benchmark::State& s) { RunFused(s, t); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("fusetune_unfused/ffn_384x768x3072x768/two_gemms_with_epilogues",
                               [](benchmark::State& s) { RunUnfused(s, false); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("fusetune_unfused/ffn_384x768x3072x768/single_op_kernels",
                               [](benchmark::State& s) { RunUnfused(s, true); })
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

}  // namespace fusetune::bench
