// Attention, 12 heads x 384 x 64 (BERT-base), causal and not: the fused
// template against this library's unfused three-kernel path (batched GEMM
// Q x K^T, a row kernel for scale + mask + softmax, batched GEMM P x V).
// Flops count the work the mask leaves (causal: S(S+1)/2 scores per head).
#include <fmt/format.h>

#include <cmath>

#include "bench/bench_attention.h"
#include "bench/bench_common.h"
#include "kernels/attention.h"
#include "kernels/microkernel_bf16.h"
#include "kernels/gemm.h"
#include "kernels/rowwise.h"

namespace fusetune::bench {

AttentionData& SharedAttentionData() {
  static AttentionData data;
  return data;
}

AttentionData::AttentionData()
    : q(RandomVector(heads * seq * dim, 21)),
      k(RandomVector(heads * seq * dim, 22)),
      v(RandomVector(heads * seq * dim, 23)),
      o(heads * seq * dim),
      scores(heads * seq * seq),
      causal_mask(seq * seq) {
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = 0; j < seq; ++j) causal_mask[i * seq + j] = j > i ? -INFINITY : 0.0f;
}

double AttentionFlops(const AttentionData& d, bool causal) {
  const double pairs = causal ? d.seq * (d.seq + 1) / 2.0 : double(d.seq) * d.seq;
  return 4.0 * d.heads * pairs * d.dim;
}

namespace {

using namespace kernels;

void RunFused(benchmark::State& state, bool causal, AttentionTiling t) {
  AttentionData& a = SharedAttentionData();
  AttentionDesc d;
  d.heads = a.heads;
  d.seq_q = d.seq_kv = a.seq;
  d.head_dim = d.value_dim = a.dim;
  d.q = {a.q.data(), 0, a.seq * a.dim, a.dim, 1};
  d.k = {a.k.data(), 0, a.seq * a.dim, a.dim, 1};
  d.v = {a.v.data(), 0, a.seq * a.dim, a.dim, 1};
  d.o = a.o.data();
  d.o_head = a.seq * a.dim;
  d.o_row = a.dim;
  d.scale = 1.0f / std::sqrt(static_cast<float>(a.dim));
  d.mask = causal ? MaskKind::kCausal : MaskKind::kNone;
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&] {
    auto r = RunAttention(d, t, config);
    if (r.ok()) stats = *r;
    return r;
  });
  ReportFlops(state, AttentionFlops(a, causal), seconds);
  ReportTraffic(state, stats);
  state.SetLabel(t.ToString());
}

// Batched GEMM over heads: C[h] = A[h] x B[h], B read through strides.
GemmDesc HeadGemm(const float* a, int64_t m, int64_t k, const float* b, int64_t b_row,
                  int64_t b_col, int64_t b_batch, float* c, int64_t n, int64_t heads) {
  GemmDesc g;
  g.batch = heads;
  g.m = m;
  g.k = k;
  g.a = a;
  g.a_row_stride = k;
  g.a_batch_stride = m * k;
  GemmOutput& out = g.outputs.emplace_back();
  out.n = n;
  out.b = b;
  out.b_row_stride = b_row;
  out.b_col_stride = b_col;
  out.b_batch_stride = b_batch;
  out.c = c;
  out.c_row_stride = n;
  out.c_batch_stride = m * n;
  return g;
}

void RunUnfused(benchmark::State& state, bool causal) {
  AttentionData& a = SharedAttentionData();
  const int64_t s = a.seq, dim = a.dim, h = a.heads;
  const GemmDesc qk =
      HeadGemm(a.q.data(), s, dim, a.k.data(), 1, dim, s * dim, a.scores.data(), s, h);
  const GemmDesc pv =
      HeadGemm(a.scores.data(), s, s, a.v.data(), dim, 1, s * dim, a.o.data(), dim, h);
  RowwiseDesc sm;
  sm.row_dims = {h, s};
  sm.cols = s;
  sm.inputs = {{a.scores.data(), {s * s, s}, 1}, {a.causal_mask.data(), {0, s}, 1}};
  sm.outputs = {{a.scores.data(), {s * s, s}, 1}};
  TileProgram& p = sm.program;
  int z = p.Binary(TileOp::kMul, p.Input(0), p.Const(1.0f / std::sqrt(static_cast<float>(dim))));
  if (causal) z = p.Binary(TileOp::kAdd, z, p.Input(1));
  const int e = p.Unary(TileOp::kExp, p.Binary(TileOp::kSub, z, p.Reduce(TileOp::kReduceMax, z)));
  p.Output(p.Binary(TileOp::kDiv, e, p.Reduce(TileOp::kReduceSum, e)));
  GemmTiling t1;  // the best tilings found for these shapes by hand
  t1.mc = 128;
  t1.nc = 384;
  t1.kc = dim;
  t1.split = ParallelSplit::kMN;
  GemmTiling t2 = t1;
  t2.nc = dim;
  t2.kc = s;
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&]() -> Result<KernelStats> {
    FT_ASSIGN_OR_RETURN(stats, RunGemm(qk, t1, config));
    FT_ASSIGN_OR_RETURN(KernelStats softmax, RunRowwise(sm, RowwiseTiling(), config));
    FT_ASSIGN_OR_RETURN(KernelStats second, RunGemm(pv, t2, config));
    stats += softmax;
    stats += second;
    return stats;
  });
  ReportFlops(state, AttentionFlops(a, causal), seconds);
  ReportTraffic(state, stats);
}

AttentionTiling Tile(int64_t br, int64_t bc, int mr, int nr) {
  AttentionTiling t;
  t.br = br;
  t.bc = bc;
  t.mr = mr;
  t.nr = nr;
  return t;
}

}  // namespace

void RegisterAttentionBenchmarks() {
  const AttentionTiling tilings[] = {Tile(64, 64, 8, 32), Tile(128, 64, 8, 32),
                                     Tile(96, 128, 8, 32), Tile(112, 64, 14, 16),
                                     Tile(192, 128, 8, 32)};
  for (bool causal : {false, true}) {
    const std::string name = causal ? "attention_12x384x64_causal" : "attention_12x384x64";
    for (AttentionTiling t : tilings)
      for (Precision precision : {Precision::kF32, Precision::kBf16}) {
        // bf16 where the micro-tile has a bf16 kernel and the CPU the instruction.
        if (precision == Precision::kBf16 && (!CpuHasBf16Dot() || !FindBf16MicroKernel(t.mr, t.nr)))
          continue;
        t.precision = precision;
        benchmark::RegisterBenchmark(
            fmt::format("fusetune/{}/br{}_bc{}_{}x{}{}", name, t.br, t.bc, t.mr, t.nr,
                        precision == Precision::kBf16 ? "_bf16" : "")
                .c_str(),
            [causal, t](benchmark::State& s) { RunFused(s, causal, t); })
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    benchmark::RegisterBenchmark(fmt::format("fusetune_unfused/{}", name).c_str(),
                                 [causal](benchmark::State& s) { RunUnfused(s, causal); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace fusetune::bench
