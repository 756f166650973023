// GEMM prologues (elementwise, LayerNorm, RMSNorm applied while A is packed),
// the LayerNorm epilogue (post-LN: LayerNorm(A x B + bias + residual)),
// horizontal fusion (QKV, SwiGLU) and double buffering, against the
// reference executor on random shapes and tilings with a fixed seed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "kernels/gemm.h"
#include "kernels/microkernel.h"
#include "tests/graph/test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace fusetune::kernels {
namespace {

using ::fusetune::kernels::testing::Error;
using ::fusetune::kernels::testing::Random;
using ::fusetune::testing::F32;
using ::fusetune::testing::Parse;

GemmTiling RandomTiling(Rng& rng, int64_t k) {
  const auto shapes = MicroTileShapes();
  GemmTiling t;
  std::tie(t.mr, t.nr) = shapes[rng.Below(shapes.size())];
  t.mc = t.mr * rng.Between(1, 6);
  t.nc = t.nr * rng.Between(1, 4);
  t.kc = rng.Below(2) ? k : rng.Between(1, std::max<int64_t>(1, k));
  t.order = rng.Below(2) ? LoopOrder::kMN : LoopOrder::kNM;
  t.split = static_cast<ParallelSplit>(rng.Below(3));
  t.double_buffer = rng.Below(2) == 1;
  t.refill = !t.double_buffer && rng.Below(2) == 1;
  return t;
}

GemmOutput Output(int64_t n, const std::vector<float>& w, std::vector<float>& c) {
  GemmOutput out;
  out.n = n;
  out.b = w.data();
  out.b_row_stride = n;
  out.c = c.data();
  out.c_row_stride = n;
  return out;
}

// An m x k row-major A; the test adds outputs and fusion.
GemmDesc DescWithA(int64_t m, int64_t k, const std::vector<float>& a) {
  GemmDesc d;
  d.m = m;
  d.k = k;
  d.a = a.data();
  d.a_row_stride = k;
  return d;
}

const int64_t kSizes[] = {1, 3, 7, 16, 31, 33, 64, 97};

// y = LayerNorm(x + r) @ W + bias (or RMSNorm(x) @ W), as the opset-17 graph.
TEST(GemmPrologue, NormsMatchReference) {
  Rng rng(21);
  for (int trial = 0; trial < 30; ++trial) {
    const bool rms = trial % 3 == 2;
    const int64_t m = kSizes[rng.Below(8)], k = kSizes[rng.Below(8)], n = kSizes[rng.Below(8)];
    auto x = Random(m * k, rng), r = Random(m * k, rng), gamma = Random(k, rng),
         beta = Random(k, rng), w = Random(k * n, rng), bias = Random(n, rng);
    for (float& v : x) v = v * 3 + 1;  // a mean and a scale for the norm to remove
    std::vector<float> y(m * n, NAN);
    GemmDesc d = DescWithA(m, k, x);
    d.prologue.norm = rms ? NormKind::kRmsNorm : NormKind::kLayerNorm;
    d.prologue.gamma = gamma.data();
    if (!rms) {
      d.prologue.beta = beta.data();
      d.prologue.elementwise = {EpilogueOp::Residual(r.data(), k)};
    }
    d.prologue.epsilon = 1e-5f;
    d.outputs = {Output(n, w, y)};
    d.outputs[0].epilogue = {EpilogueOp::Bias(bias.data())};
    const GemmTiling tiling = RandomTiling(rng, k);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunGemm(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    const std::string norm =
        rms ? "sq = Mul(x, x)  ms = ReduceMean(sq) {axes=[-1], keepdims=1}  v = Add(ms, eps)\n"
              "rt = Sqrt(v)  nn = Div(x, rt)  h = Mul(nn, gamma)"
            : "s = Add(x, r)  h = LayerNormalization(s, gamma, beta) {axis=-1, epsilon=1e-5}";
    graph::Graph g = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {1}]  input r: f32[{0}, {1}]  input gamma: f32[{1}]"
        "  input beta: f32[{1}]  input w: f32[{1}, {2}]  input bias: f32[{2}]\n"
        "eps = Constant() {{value=f32[] [1e-5]}}\n {3}\n mm = MatMul(h, w)  y = Add(mm, bias)"
        "  output y }}",
        m, k, n, norm));
    auto want = graph::RunReference(g, {{"x", F32({m, k}, x)},
                                        {"r", F32({m, k}, r)},
                                        {"gamma", F32({k}, gamma)},
                                        {"beta", F32({k}, beta)},
                                        {"w", F32({k, n}, w)},
                                        {"bias", F32({n}, bias)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(Error(y, want->outputs.at("y")), 3e-5)
        << (rms ? "rms " : "ln ") << m << "x" << k << "x" << n << " " << tiling.ToString();
  }
}

TEST(GemmPrologue, StatisticsPassIsCountedWhenKcDoesNotCoverK) {
  const int64_t m = 16, k = 64, n = 32;
  Rng rng(22);
  auto x = Random(m * k, rng), gamma = Random(k, rng), w = Random(k * n, rng);
  std::vector<float> y(m * n);
  GemmDesc d = DescWithA(m, k, x);
  d.prologue.norm = NormKind::kRmsNorm;
  d.prologue.gamma = gamma.data();
  d.outputs = {Output(n, w, y)};
  GemmTiling t;
  t.mc = 16;
  t.nc = 32;
  KernelConfig one;
  one.threads = 1;
  t.kc = k;  // statistics from the packed block: A and gamma once, B once
  auto whole = RunGemm(d, t, one);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->bytes_global_to_local, 4 * (m * k + k + k * n));
  t.kc = 16;  // one more pass over A's rows for the statistics
  auto sliced = RunGemm(d, t, one);
  ASSERT_TRUE(sliced.ok());
  EXPECT_EQ(sliced->bytes_global_to_local, 4 * (2 * m * k + k + k * n));
}

// Q, K and V projections sharing A in one kernel: outputs match three
// separate GEMMs, and A is read once instead of three times.
TEST(GemmHorizontal, QkvSharesTheAOperand) {
  Rng rng(23);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t m = kSizes[rng.Below(8)], k = kSizes[rng.Below(8)], n = kSizes[rng.Below(8)];
    auto x = Random(m * k, rng);
    std::vector<std::vector<float>> w, bias, y(3, std::vector<float>(m * n, NAN));
    GemmDesc d = DescWithA(m, k, x);
    for (int o = 0; o < 3; ++o) {
      w.push_back(Random(k * n, rng));
      bias.push_back(Random(n, rng));
    }
    for (int o = 0; o < 3; ++o) {
      d.outputs.push_back(Output(n, w[o], y[o]));
      d.outputs.back().epilogue = {EpilogueOp::Bias(bias[o].data())};
    }
    const GemmTiling tiling = RandomTiling(rng, k);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    ASSERT_TRUE(RunGemm(d, tiling, config).ok());
    for (int o = 0; o < 3; ++o) {
      graph::Graph g = Parse(fmt::format(
          "graph g opset 17 {{ input x: f32[{0}, {1}]  input w: f32[{1}, {2}]  input b: f32[{2}]\n"
          "mm = MatMul(x, w)  y = Add(mm, b)  output y }}",
          m, k, n));
      auto want = graph::RunReference(
          g, {{"x", F32({m, k}, x)}, {"w", F32({k, n}, w[o])}, {"b", F32({n}, bias[o])}});
      ASSERT_TRUE(want.ok());
      EXPECT_LE(Error(y[o], want->outputs.at("y")), 2e-5)
          << "output " << o << " " << m << "x" << k << "x" << n << " " << tiling.ToString();
    }
  }
  // Traffic: with kc = K and one A block per thread, A is copied once.
  const int64_t m = 32, k = 48, n = 64;
  auto x = Random(m * k, rng), w = Random(k * n, rng);
  std::vector<float> y0(m * n), y1(m * n), y2(m * n);
  GemmDesc d = DescWithA(m, k, x);
  d.outputs = {Output(n, w, y0), Output(n, w, y1), Output(n, w, y2)};
  GemmTiling t;
  t.mc = 32;
  t.nc = 64;
  t.kc = k;
  KernelConfig one;
  one.threads = 1;
  auto stats = RunGemm(d, t, one);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes_global_to_local, 4 * (m * k + 3 * k * n));
  EXPECT_EQ(stats->bytes_local_to_global, 4 * 3 * m * n);
}

TEST(GemmHorizontal, SwigluMatchesReference) {
  Rng rng(24);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t m = kSizes[rng.Below(8)], k = kSizes[rng.Below(8)], n = kSizes[rng.Below(8)];
    auto x = Random(m * k, rng), wg = Random(k * n, rng), wu = Random(k * n, rng);
    std::vector<float> y(m * n, NAN), unused;
    GemmDesc d = DescWithA(m, k, x);
    d.outputs = {Output(n, wg, y), Output(n, wu, unused)};
    d.outputs[1].c = nullptr;
    d.swiglu = true;
    const GemmTiling tiling = RandomTiling(rng, k);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunGemm(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    graph::Graph g = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {1}]  input wg: f32[{1}, {2}]  input wu: f32[{1}, "
        "{2}]\n g = MatMul(x, wg)  u = MatMul(x, wu)  sg = Sigmoid(g)  s = Mul(g, sg)"
        "  y = Mul(s, u)  output y }}",
        m, k, n));
    auto want = graph::RunReference(
        g, {{"x", F32({m, k}, x)}, {"wg", F32({k, n}, wg)}, {"wu", F32({k, n}, wu)}});
    ASSERT_TRUE(want.ok());
    EXPECT_LE(Error(y, want->outputs.at("y")), 2e-5)
        << m << "x" << k << "x" << n << " " << tiling.ToString();
    EXPECT_EQ(stats->bytes_local_to_global, 4 * m * n);
  }
}

TEST(GemmDoubleBuffer, SameResultsAndTrafficTwiceTheBuffer) {
  Rng rng(25);
  const int64_t m = 67, k = 131, n = 97;
  auto x = Random(m * k, rng), w = Random(k * n, rng);
  std::vector<float> y1(m * n), y2(m * n);
  GemmDesc d = DescWithA(m, k, x);
  d.outputs = {Output(n, w, y1)};
  GemmTiling t;
  t.mc = 16;
  t.nc = 32;
  t.kc = 40;
  t.order = LoopOrder::kNM;
  KernelConfig config;
  auto single = RunGemm(d, t, config);
  t.double_buffer = true;
  d.outputs[0].c = y2.data();
  auto twice = RunGemm(d, t, config);
  ASSERT_TRUE(single.ok() && twice.ok());
  EXPECT_EQ(single->bytes_global_to_local, twice->bytes_global_to_local);
  EXPECT_EQ(y1, y2);
  t.double_buffer = false;
  const int64_t one_buffer = GemmLocalBytes(d, t);
  t.double_buffer = true;
  EXPECT_GT(GemmLocalBytes(d, t), one_buffer);
  config.local_buffer_bytes = static_cast<size_t>(one_buffer);
  auto r = RunGemm(d, t, config);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("double buffered"), std::string::npos);
}

// y = LayerNormalization(x @ W + bias + r): tiles of whole rows (nc >= n),
// every split and loop order, against the opset-17 graph.
TEST(GemmEpilogue, LayerNormMatchesReference) {
  Rng rng(23);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t m = kSizes[rng.Below(8)], k = kSizes[rng.Below(8)], n = kSizes[rng.Below(8)];
    auto x = Random(m * k, rng), w = Random(k * n, rng), bias = Random(n, rng),
         r = Random(m * n, rng), gamma = Random(n, rng), beta = Random(n, rng);
    for (float& v : r) v = v * 3 + 5;  // a mean and a scale for the norm to remove
    std::vector<float> y(m * n, NAN);
    GemmDesc d = DescWithA(m, k, x);
    d.outputs = {Output(n, w, y)};
    d.outputs[0].epilogue = {EpilogueOp::Bias(bias.data()), EpilogueOp::Residual(r.data(), n),
                             EpilogueOp::LayerNorm(gamma.data(), 1e-5f),
                             EpilogueOp::Bias(beta.data())};
    GemmTiling tiling = RandomTiling(rng, k);
    tiling.nc = (n + tiling.nr - 1) / tiling.nr * tiling.nr + tiling.nr * rng.Below(2);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunGemm(d, tiling, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    graph::Graph g = Parse(fmt::format(
        "graph g opset 17 {{ input x: f32[{0}, {1}]  input w: f32[{1}, {2}]  input bias: f32[{2}]"
        "  input r: f32[{0}, {2}]  input gamma: f32[{2}]  input beta: f32[{2}]\n"
        "mm = MatMul(x, w)  s = Add(mm, bias)  t = Add(s, r)\n"
        "y = LayerNormalization(t, gamma, beta) {{axis=-1, epsilon=1e-5}}  output y }}",
        m, k, n));
    auto want = graph::RunReference(g, {{"x", F32({m, k}, x)},
                                        {"w", F32({k, n}, w)},
                                        {"bias", F32({n}, bias)},
                                        {"r", F32({m, n}, r)},
                                        {"gamma", F32({n}, gamma)},
                                        {"beta", F32({n}, beta)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(Error(y, want->outputs.at("y")), 3e-5)
        << m << "x" << k << "x" << n << " " << tiling.ToString();
    // gamma's row is read once per tile, like a bias.
    tiling.double_buffer = false;
    const int64_t tiles = (m + tiling.mc - 1) / tiling.mc;
    GemmDesc plain = d;
    plain.outputs[0].epilogue.resize(2);
    auto with = RunGemm(d, tiling, config), without = RunGemm(plain, tiling, config);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_EQ(with->bytes_global_to_local - without->bytes_global_to_local, 2 * 4 * n * tiles);
  }
}

TEST(GemmEpilogue, LayerNormNeedsWholeRows) {
  std::vector<float> a(64 * 64), b(64 * 64), c(64 * 64), gamma(64);
  GemmDesc d = DescWithA(64, 64, a);
  d.outputs = {Output(64, b, c)};
  d.outputs[0].epilogue = {EpilogueOp::LayerNorm(gamma.data(), 1e-5f)};
  GemmTiling t;
  t.mc = 16;
  t.nc = 32;
  t.kc = 64;
  const std::string message = RunGemm(d, t, KernelConfig()).error().message();
  EXPECT_NE(message.find("tiling.nc: 32"), std::string::npos) << message;
  EXPECT_NE(message.find("whole rows"), std::string::npos) << message;
  t.nc = 64;
  EXPECT_TRUE(RunGemm(d, t, KernelConfig()).ok());
  d.outputs[0].epilogue = {EpilogueOp::LayerNorm(nullptr, 1e-5f)};
  EXPECT_NE(RunGemm(d, t, KernelConfig()).error().message().find("no operand"), std::string::npos);
  d.outputs[0].epilogue.clear();
  d.prologue.elementwise = {EpilogueOp::LayerNorm(gamma.data(), 1e-5f)};
  EXPECT_NE(RunGemm(d, t, KernelConfig()).error().message().find("prologue.norm"),
            std::string::npos);
}

TEST(GemmFusion, InvalidDescriptorsNameTheField) {
  std::vector<float> a(16), b(16), c(16);
  GemmDesc d;
  d.m = d.k = 4;
  d.a = a.data();
  d.a_row_stride = 4;
  d.outputs = {Output(4, b, c)};
  d.prologue.norm = NormKind::kLayerNorm;
  EXPECT_NE(RunGemm(d, GemmTiling(), KernelConfig()).error().message().find("prologue.gamma"),
            std::string::npos);
  d.prologue = GemmPrologue();
  d.swiglu = true;
  EXPECT_NE(RunGemm(d, GemmTiling(), KernelConfig()).error().message().find("swiglu"),
            std::string::npos);
}

}  // namespace
}  // namespace fusetune::kernels
