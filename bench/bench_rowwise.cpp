// Row-reduction fusion on inputs larger than L3 (32 MiB here): LayerNorm over
// 32768 x 768 and softmax over 73728 x 384 (100 and 113 MB each way),
// reported as bytes that must move (input + output) per second against the
// measured DRAM copy bandwidth; and a bias + GELU elementwise kernel.
#include <fmt/format.h>

#include "bench/bench_common.h"
#include "kernels/elementwise.h"
#include "kernels/rowwise.h"

namespace fusetune::bench {
namespace {

using namespace kernels;

TileProgram LayerNormProgram() {
  TileProgram p;
  const int x = p.Input(0);
  const int d = p.Binary(TileOp::kSub, x, p.Reduce(TileOp::kReduceMean, x));
  const int var = p.Reduce(TileOp::kReduceMean, p.Unary(TileOp::kSquare, d));
  const int inv = p.Unary(TileOp::kRsqrt, p.Binary(TileOp::kAdd, var, p.Const(1e-5f)));
  p.Output(p.Binary(TileOp::kAdd,
                    p.Binary(TileOp::kMul, p.Binary(TileOp::kMul, d, inv), p.Input(1)),
                    p.Input(2)));
  return p;
}

TileProgram SoftmaxProgram() {
  TileProgram p;
  const int x = p.Input(0);
  const int e = p.Unary(TileOp::kExp, p.Binary(TileOp::kSub, x, p.Reduce(TileOp::kReduceMax, x)));
  p.Output(p.Binary(TileOp::kDiv, e, p.Reduce(TileOp::kReduceSum, e)));
  return p;
}

struct RowData {
  int64_t rows, cols;
  std::vector<float> x, y, gamma, beta;
  RowData(int64_t r, int64_t c)
      : rows(r),
        cols(c),
        x(RandomVector(r * c, 7)),
        y(r * c),
        gamma(RandomVector(c, 8)),
        beta(RandomVector(c, 9)) {}
};

void RunRows(benchmark::State& state, RowData& data, bool layer_norm, RowwiseTiling t) {
  RowwiseDesc d;
  d.row_dims = {data.rows};
  d.cols = data.cols;
  d.inputs = {{data.x.data(), {data.cols}, 1}};
  if (layer_norm) d.inputs.push_back({data.gamma.data(), {0}, 1});
  if (layer_norm) d.inputs.push_back({data.beta.data(), {0}, 1});
  d.outputs = {{data.y.data(), {data.cols}, 1}};
  d.program = layer_norm ? LayerNormProgram() : SoftmaxProgram();
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&] {
    auto r = RunRowwise(d, t, config);
    if (r.ok()) stats = *r;
    return r;
  });
  ReportBytes(state, 2.0 * sizeof(float) * data.rows * data.cols, seconds);
  ReportTraffic(state, stats);
  state.SetLabel(t.ToString());
}

void RunBiasGelu(benchmark::State& state, int64_t rows, int64_t cols, int64_t tile) {
  static std::vector<float> x, bias, y;
  x = RandomVector(rows * cols, 10);
  bias = RandomVector(cols, 11);
  y.assign(rows * cols, 0);
  ElementwiseDesc d;
  d.dims = {rows, cols};
  d.inputs = {{x.data(), {cols, 1}}, {bias.data(), {0, 1}}};
  d.outputs = {y.data()};
  d.program.Output(d.program.Unary(
      TileOp::kGeluErf, d.program.Binary(TileOp::kAdd, d.program.Input(0), d.program.Input(1))));
  ElementwiseTiling t;
  t.tile = tile;
  KernelConfig config;
  config.threads = kThreads;
  KernelStats stats;
  const double seconds = TimedLoop(state, [&] {
    auto r = RunElementwise(d, t, config);
    if (r.ok()) stats = *r;
    return r;
  });
  ReportBytes(state, 2.0 * sizeof(float) * rows * cols, seconds);
  ReportTraffic(state, stats);
  state.SetLabel(t.ToString());
}

RowwiseTiling Rows(int64_t rows, int unroll, int prefetch) {
  RowwiseTiling t;
  t.rows_per_tile = rows;
  t.unroll = unroll;
  t.prefetch = prefetch;
  return t;
}

}  // namespace

void RegisterRowwiseBenchmarks() {
  static RowData ln(32768, 768), sm(73728, 384);
  const RowwiseTiling tilings[] = {Rows(1, 2, 0), Rows(4, 2, 1), Rows(8, 4, 2), Rows(32, 2, 1)};
  for (const RowwiseTiling& t : tilings) {
    const std::string label =
        fmt::format("rows{}_unroll{}_prefetch{}", t.rows_per_tile, t.unroll, t.prefetch);
    benchmark::RegisterBenchmark(("fusetune/layernorm_32768x768/" + label).c_str(),
                                 [t](benchmark::State& s) { RunRows(s, ln, true, t); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("fusetune/softmax_73728x384/" + label).c_str(),
                                 [t](benchmark::State& s) { RunRows(s, sm, false, t); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (int64_t tile : {1024, 8192})
    benchmark::RegisterBenchmark(fmt::format("fusetune/bias_gelu_32768x768/tile{}", tile).c_str(),
                                 [tile](benchmark::State& s) { RunBiasGelu(s, 32768, 768, tile); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

}  // namespace fusetune::bench
