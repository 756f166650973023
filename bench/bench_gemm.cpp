// GEMM 384x768x3072 with a bias + GELU epilogue (BERT-base's FFN up
// projection) at several tilings, in the three run modes, with and without
// double buffering.
#include <fmt/format.h>

#include "bench/bench_common.h"
#include "kernels/gemm.h"

namespace fusetune::bench {
namespace {

using namespace kernels;

struct GemmData {
  int64_t m = 384, n = 3072, k = 768;
  std::vector<float> a = RandomVector(m * k, 1), b = RandomVector(k * n, 2, 0.05f),
                     bias = RandomVector(n, 3), c = std::vector<float>(m * n);
  GemmDesc Desc() {
    GemmDesc d = DenseGemm(m, n, k, a.data(), b.data(), c.data());
    GemmOutput& out = d.outputs[0];
    out.epilogue = {EpilogueOp::Bias(bias.data()), EpilogueOp::Act(EpilogueKind::kGeluErf)};
    return d;
  }
};

GemmData& Data() {
  static GemmData data;
  return data;
}

void RunOne(benchmark::State& state, GemmTiling t, RunMode mode) {
  GemmData& data = Data();
  const GemmDesc d = data.Desc();
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&] {
    auto r = RunGemm(d, t, config, mode);
    if (r.ok()) stats = *r;
    return r;
  });
  ReportFlops(state, 2.0 * data.m * data.n * data.k, seconds);
  ReportTraffic(state, stats);
  state.SetLabel(t.ToString());
}

GemmTiling Tiling(int mr, int nr, int64_t mc, int64_t nc, int64_t kc, ParallelSplit split,
                  bool double_buffer) {
  return GemmTilingOf(mr, nr, mc, nc, kc, split, double_buffer);
}

}  // namespace

void RegisterGemmBenchmarks() {
  const char* modes[] = {"full", "copy_only", "compute_only"};
  struct Named {
    const char* name;
    GemmTiling tiling;
  };
  const Named tilings[] = {
      {"mc128_nc384_kc192", Tiling(8, 32, 128, 384, 192, ParallelSplit::kN, false)},
      {"mc96_nc256_kc256", Tiling(8, 32, 96, 256, 256, ParallelSplit::kN, false)},

      {"mc64_nc768_kc192", Tiling(8, 32, 64, 768, 192, ParallelSplit::kN, false)},
      {"mc384_nc384_kc64", Tiling(8, 32, 384, 384, 64, ParallelSplit::kN, false)},
      {"mc384_nc384_kc64_db", Tiling(8, 32, 384, 384, 64, ParallelSplit::kN, true)},
      {"kc768_split_m", Tiling(8, 32, 48, 256, 768, ParallelSplit::kM, false)},
      {"micro14x16", Tiling(14, 16, 112, 256, 256, ParallelSplit::kN, false)},
      {"micro6x16", Tiling(6, 16, 96, 256, 256, ParallelSplit::kN, false)},
      {"micro12x32", Tiling(12, 32, 96, 384, 192, ParallelSplit::kN, false)},
  };
  for (const Named& n : tilings) {
    const int mode_count = std::string(n.name).rfind("mc384_nc384_kc64", 0) == 0 ? 3 : 1;
    for (int mode = 0; mode < mode_count; ++mode)
      benchmark::RegisterBenchmark(
          fmt::format("fusetune/gemm_bias_gelu/{}/{}", n.name, modes[mode]).c_str(),
          [t = n.tiling, mode](benchmark::State& s) { RunOne(s, t, static_cast<RunMode>(mode)); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  }
}

}  // namespace fusetune::bench
