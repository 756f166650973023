// Row-reduction and elementwise templates against the reference executor:
// softmax with a broadcast mask, residual add + LayerNorm (decomposed),
// RMSNorm and a decomposed GELU with broadcasting, on random shapes (1,
// primes, non-multiples of 16) and random tilings with a fixed seed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "kernels/elementwise.h"
#include "kernels/rowwise.h"
#include "tests/graph/test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace fusetune::kernels {
namespace {

using ::fusetune::kernels::testing::Error;
using ::fusetune::kernels::testing::Random;
using ::fusetune::testing::F32;
using ::fusetune::testing::Parse;

RowwiseTiling RandomRowTiling(Rng& rng) {
  RowwiseTiling t;
  t.rows_per_tile = rng.Between(1, 9);
  const int unrolls[] = {1, 2, 4};
  t.unroll = unrolls[rng.Below(3)];
  t.prefetch = static_cast<int>(rng.Below(3));
  return t;
}

const int64_t kRowSizes[] = {1, 2, 7, 13, 16, 31, 33, 64, 97, 768};

// softmax(x * scale + mask) over the last axis; x [B, H, S, T], mask [1, 1, S, T].
TEST(Rowwise, ScaledMaskedSoftmaxMatchesReference) {
  Rng rng(11);
  for (int trial = 0; trial < 25; ++trial) {
    const int64_t b = rng.Between(1, 2), h = rng.Between(1, 3), s = kRowSizes[rng.Below(9)],
                  t = kRowSizes[rng.Below(10)];
    auto x = Random(b * h * s * t, rng, 3.0), mask = Random(s * t, rng, 2.0);
    const float scale = 0.125f;
    std::vector<float> y(x.size(), NAN);
    RowwiseDesc d;
    d.row_dims = {b, h, s};
    d.cols = t;
    d.inputs = {{x.data(), {h * s * t, s * t, t}, 1}, {mask.data(), {0, 0, t}, 1}};
    d.outputs = {{y.data(), {h * s * t, s * t, t}, 1}};
    TileProgram& p = d.program;
    const int z =
        p.Binary(TileOp::kAdd, p.Binary(TileOp::kMul, p.Input(0), p.Const(scale)), p.Input(1));
    const int e = p.Unary(TileOp::kExp, p.Binary(TileOp::kSub, z, p.Reduce(TileOp::kReduceMax, z)));
    p.Output(p.Binary(TileOp::kDiv, e, p.Reduce(TileOp::kReduceSum, e)));
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    const RowwiseTiling tiling = RandomRowTiling(rng);
    auto stats = RunRowwise(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    graph::Graph g = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {1}, {2}, {3}]  input m: f32[1, 1, {2}, {3}]\n"
        "c = Constant() {{value=f32[] [0.125]}}  xs = Mul(x, c)  z = Add(xs, m)\n"
        "y = Softmax(z) {{axis=-1}}  output y }}",
        b, h, s, t));
    auto want =
        graph::RunReference(g, {{"x", F32({b, h, s, t}, x)}, {"m", F32({1, 1, s, t}, mask)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(Error(y, want->outputs.at("y")), 2e-6)
        << b << "x" << h << "x" << s << "x" << t << " " << tiling.ToString();
    EXPECT_EQ(stats->bytes_local_to_global, 4 * b * h * s * t);
  }
}

// The decomposed residual add + LayerNorm PyTorch exports at opset 13, two
// outputs (the residual stream and the normalised value).
TileProgram ResidualLayerNormProgram(float eps) {
  TileProgram p;
  const int s = p.Binary(TileOp::kAdd, p.Input(0), p.Input(1));
  const int d = p.Binary(TileOp::kSub, s, p.Reduce(TileOp::kReduceMean, s));
  const int var = p.Reduce(TileOp::kReduceMean, p.Binary(TileOp::kPow, d, p.Const(2.0f)));
  const int norm =
      p.Binary(TileOp::kDiv, d, p.Unary(TileOp::kSqrt, p.Binary(TileOp::kAdd, var, p.Const(eps))));
  p.Output(s);
  p.Output(p.Binary(TileOp::kAdd, p.Binary(TileOp::kMul, norm, p.Input(2)), p.Input(3)));
  return p;
}

TEST(Rowwise, ResidualLayerNormMatchesReferenceAndCountsTraffic) {
  Rng rng(12);
  for (int trial = 0; trial < 25; ++trial) {
    const int64_t rows = kRowSizes[rng.Below(10)], cols = kRowSizes[rng.Below(10)];
    auto x = Random(rows * cols, rng), r = Random(rows * cols, rng), gamma = Random(cols, rng),
         beta = Random(cols, rng);
    std::vector<float> sum(x.size(), NAN), y(x.size(), NAN);
    RowwiseDesc d;
    d.row_dims = {rows};
    d.cols = cols;
    d.inputs = {{x.data(), {cols}, 1},
                {r.data(), {cols}, 1},
                {gamma.data(), {0}, 1},
                {beta.data(), {0}, 1}};
    d.outputs = {{sum.data(), {cols}, 1}, {y.data(), {cols}, 1}};
    d.program = ResidualLayerNormProgram(1e-5f);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    const RowwiseTiling tiling = RandomRowTiling(rng);
    auto stats = RunRowwise(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    graph::Graph g = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {1}]  input r: f32[{0}, {1}]  input gamma: f32[{1}]"
        "  input beta: f32[{1}]\n s = Add(x, r)\n"
        "y = LayerNormalization(s, gamma, beta) {{axis=-1, epsilon=1e-5}}  output s  output y }}",
        rows, cols));
    auto want = graph::RunReference(g, {{"x", F32({rows, cols}, x)},
                                        {"r", F32({rows, cols}, r)},
                                        {"gamma", F32({cols}, gamma)},
                                        {"beta", F32({cols}, beta)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(Error(y, want->outputs.at("y")), 1e-5)
        << rows << "x" << cols << " " << tiling.ToString();
    EXPECT_EQ(Error(sum, want->outputs.at("s")), 0);
    // x and r once per row; gamma and beta once per tile.
    EXPECT_EQ(stats->bytes_global_to_local, 4 * (2 * rows * cols + 2 * cols * stats->tiles));
    EXPECT_EQ(stats->bytes_local_to_global, 4 * 2 * rows * cols);
    auto copy = RunRowwise(d, tiling, config, RunMode::kCopyOnly);
    auto compute = RunRowwise(d, tiling, config, RunMode::kComputeOnly);
    ASSERT_TRUE(copy.ok() && compute.ok());
    EXPECT_EQ(copy->bytes_global_to_local, stats->bytes_global_to_local);
    EXPECT_EQ(compute->bytes_global_to_local + compute->bytes_local_to_global, 0);
  }
}

TEST(Rowwise, RmsNormMatchesReference) {
  Rng rng(13);
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t rows = kRowSizes[rng.Below(10)], cols = kRowSizes[rng.Below(10)];
    auto x = Random(rows * cols, rng), gamma = Random(cols, rng);
    std::vector<float> y(x.size(), NAN);
    RowwiseDesc d;
    d.row_dims = {rows};
    d.cols = cols;
    d.inputs = {{x.data(), {cols}, 1}, {gamma.data(), {0}, 1}};
    d.outputs = {{y.data(), {cols}, 1}};
    TileProgram& p = d.program;
    const int x0 = p.Input(0);
    const int ms = p.Reduce(TileOp::kReduceMean, p.Unary(TileOp::kSquare, x0));
    const int inv = p.Unary(TileOp::kRsqrt, p.Binary(TileOp::kAdd, ms, p.Const(1e-6f)));
    p.Output(p.Binary(TileOp::kMul, p.Binary(TileOp::kMul, x0, inv), p.Input(1)));
    KernelConfig config;
    auto stats = RunRowwise(d, RandomRowTiling(rng), config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    graph::Graph g = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {1}]  input gamma: f32[{1}]\n"
        "two = Constant() {{value=f32[] [2]}}  eps = Constant() {{value=f32[] [1e-6]}}\n"
        "sq = Pow(x, two)  ms = ReduceMean(sq) {{axes=[-1], keepdims=1}}  v = Add(ms, eps)\n"
        "rt = Sqrt(v)  inv = Reciprocal(rt)  n = Mul(x, inv)  y = Mul(n, gamma)  output y }}",
        rows, cols));
    auto want =
        graph::RunReference(g, {{"x", F32({rows, cols}, x)}, {"gamma", F32({cols}, gamma)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(Error(y, want->outputs.at("y")), 1e-5) << rows << "x" << cols;
  }
}

TEST(Rowwise, InvalidDescriptorsAndTilingsNameTheField) {
  std::vector<float> x(64), y(64);
  RowwiseDesc d;
  d.row_dims = {4};
  d.cols = 16;
  d.inputs = {{x.data(), {16}, 1}};
  d.outputs = {{y.data(), {16}, 1}};
  d.program.Output(d.program.Unary(TileOp::kExp, d.program.Input(0)));
  KernelConfig config;
  RowwiseTiling t;
  t.unroll = 3;
  EXPECT_NE(RunRowwise(d, t, config).error().message().find("tiling.unroll"), std::string::npos);
  t = RowwiseTiling();
  t.rows_per_tile = 1 << 20;
  EXPECT_NE(RunRowwise(d, t, config).error().message().find("local buffer"), std::string::npos);
  RowwiseDesc wrong = d;
  wrong.program = TileProgram();
  wrong.program.Output(wrong.program.Binary(TileOp::kAdd, 0, 5));
  EXPECT_NE(RunRowwise(wrong, RowwiseTiling(), config).error().message().find("rowwise.program"),
            std::string::npos);
  RowwiseDesc vec = d;  // reducing a value shared by all rows is not a row reduction
  vec.inputs[0].row_strides = {0};
  vec.program = TileProgram();
  vec.program.Output(vec.program.Reduce(TileOp::kReduceSum, vec.program.Input(0)));
  EXPECT_NE(RunRowwise(vec, RowwiseTiling(), config).error().message().find("not a full row"),
            std::string::npos);
}

// y = gelu(x + bias) * g, decomposed as PyTorch exports it; x [B, S, N] read
// transposed from [B, N, S], bias [N], g [B, 1, N].
TEST(Elementwise, DecomposedGeluWithBroadcastsMatchesReference) {
  Rng rng(14);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t b = rng.Between(1, 3), s = kRowSizes[rng.Below(9)], n = kRowSizes[rng.Below(10)];
    auto x = Random(b * n * s, rng, 2.0), bias = Random(n, rng), g = Random(b * n, rng);
    std::vector<float> y(b * s * n, NAN);
    ElementwiseDesc d;
    d.dims = {b, s, n};
    d.inputs = {{x.data(), {n * s, 1, s}}, {bias.data(), {0, 0, 1}}, {g.data(), {n, 0, 1}}};
    d.outputs = {y.data()};
    TileProgram& p = d.program;
    const int v = p.Binary(TileOp::kAdd, p.Input(0), p.Input(1));
    const int erf = p.Unary(TileOp::kErf, p.Binary(TileOp::kDiv, v, p.Const(1.41421354f)));
    const int gelu = p.Binary(TileOp::kMul,
                              p.Binary(TileOp::kMul, v, p.Binary(TileOp::kAdd, erf, p.Const(1.0f))),
                              p.Const(0.5f));
    p.Output(p.Binary(TileOp::kMul, gelu, p.Input(2)));
    ElementwiseTiling tiling;
    tiling.tile = rng.Between(1, 300);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunElementwise(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    graph::Graph gr = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {2}, {1}]  input bias: f32[{2}]  input g: f32[{0}, "
        "1, "
        "{2}]\n xt = Transpose(x) {{perm=[0, 2, 1]}}  v = Add(xt, bias)\n"
        "r2 = Constant() {{value=f32[] [1.41421354]}}  one = Constant() {{value=f32[] [1]}}\n"
        "half = Constant() {{value=f32[] [0.5]}}  q = Div(v, r2)  e = Erf(q)  e1 = Add(e, one)\n"
        "m = Mul(v, e1)  h = Mul(m, half)  y = Mul(h, g)  output y }}",
        b, s, n));
    auto want = graph::RunReference(
        gr, {{"x", F32({b, n, s}, x)}, {"bias", F32({n}, bias)}, {"g", F32({b, 1, n}, g)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(Error(y, want->outputs.at("y")), 2e-6) << b << "x" << s << "x" << n;
    EXPECT_EQ(stats->bytes_local_to_global, 4 * b * s * n);
  }
}

TEST(Elementwise, PowByAConstantExponentIsStrengthReducedAndMatchesPow) {
  Rng rng(15);
  auto x = Random(97, rng);
  for (float& v : x) v = std::fabs(v) + 0.25f;  // pow of a negative base is NaN for 0.5
  for (float e : {1.0f, 2.0f, 3.0f, 0.5f, -0.5f, -1.0f, 1.7f}) {
    std::vector<float> y(x.size(), NAN);
    ElementwiseDesc d;
    d.dims = {97};
    d.inputs = {{x.data(), {1}}};
    d.outputs = {y.data()};
    d.program.Output(d.program.Binary(TileOp::kPow, d.program.Input(0), d.program.Const(e)));
    bool has_pow = false;
    for (const TileInstr& i : d.program.instrs()) has_pow = has_pow || i.op == TileOp::kPow;
    EXPECT_EQ(has_pow, e == 1.7f) << e;
    ElementwiseTiling tiling;
    tiling.tile = 32;
    auto stats = RunElementwise(d, tiling, KernelConfig{});
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(y[i], std::pow(x[i], e), 1e-6f * std::fabs(std::pow(x[i], e))) << e;
  }
}

TEST(Elementwise, TrafficCountsContiguousAndBroadcastRuns) {
  std::vector<float> x(6 * 8), bias(8), y(6 * 8);
  ElementwiseDesc d;
  d.dims = {6, 8};
  d.inputs = {{x.data(), {8, 1}}, {bias.data(), {0, 1}}};
  d.outputs = {y.data()};
  d.program.Output(d.program.Binary(TileOp::kAdd, d.program.Input(0), d.program.Input(1)));
  ElementwiseTiling t;
  t.tile = 16;  // two rows a tile: x 48 elements, bias 8 per row
  KernelConfig one;
  one.threads = 1;
  auto stats = RunElementwise(d, t, one);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes_global_to_local, 4 * (48 + 48));
  EXPECT_EQ(stats->tiles, 3);
  d.inputs[1].strides = {0, 0};  // a scalar: one element per run of the innermost dimension
  stats = RunElementwise(d, t, one);
  EXPECT_EQ(stats->bytes_global_to_local, 4 * (48 + 6));
  d.program = TileProgram();
  d.program.Output(d.program.Reduce(TileOp::kReduceSum, d.program.Input(0)));
  EXPECT_NE(RunElementwise(d, t, one).error().message().find("reduction"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::kernels
