// The back-to-back FFN template against the reference executor: GELU and
// SwiGLU forms, with and without a LayerNorm prologue and a residual
// epilogue, on random shapes and tilings with a fixed seed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>

#include "common/rng.h"
#include "kernels/ffn.h"
#include "kernels/microkernel.h"
#include "tests/graph/test_util.h"
#include "tests/kernels/kernel_test_util.h"

namespace fusetune::kernels {
namespace {

using ::fusetune::kernels::testing::Error;
using ::fusetune::kernels::testing::Random;
using ::fusetune::testing::F32;
using ::fusetune::testing::Parse;

TEST(Ffn, MatchesReference) {
  Rng rng(41);
  const int64_t sizes[] = {1, 5, 16, 31, 33, 64};
  for (int trial = 0; trial < 24; ++trial) {
    const bool swiglu = trial % 2 == 1, norm = trial % 4 >= 2;
    const int64_t m = sizes[rng.Below(6)], k = sizes[rng.Below(6)], h = sizes[rng.Below(6)] + 7,
                  n = sizes[rng.Below(6)];
    auto x = Random(m * k, rng), gamma = Random(k, rng), beta = Random(k, rng);
    auto w1 = Random(k * h, rng, 0.3), w3 = Random(k * h, rng, 0.3), b1 = Random(h, rng);
    auto w2 = Random(h * n, rng, 0.3), b2 = Random(n, rng), r = Random(m * n, rng);
    std::vector<float> o(m * n, NAN);
    FfnDesc d;
    d.m = m;
    d.k = k;
    d.hidden = h;
    d.n = n;
    d.x = x.data();
    d.x_row_stride = k;
    if (norm) {
      d.prologue.norm = NormKind::kLayerNorm;
      d.prologue.gamma = gamma.data();
      d.prologue.beta = beta.data();
    }
    d.w1 = w1.data();
    d.w1_row_stride = h;
    d.b1 = b1.data();
    d.swiglu = swiglu;
    d.w3 = w3.data();
    d.w2 = w2.data();
    d.w2_row_stride = n;
    d.epilogue = {EpilogueOp::Bias(b2.data()), EpilogueOp::Residual(r.data(), n)};
    d.o = o.data();
    d.o_row_stride = n;
    const auto shapes = MicroTileShapes();
    FfnTiling t;
    std::tie(t.mr, t.nr) = shapes[rng.Below(shapes.size())];
    t.mb = rng.Between(1, 70);
    t.hb = rng.Between(1, 40);
    KernelConfig config;
    config.threads = static_cast<int>(rng.Between(1, 3));
    auto stats = RunFfn(d, t, config);
    ASSERT_TRUE(stats.ok()) << stats.error().ToString();
    const std::string pro = norm ? "xn = LayerNormalization(x, gamma, beta) {axis=-1, epsilon=1e-5}"
                                 : "xn = Identity(x)";
    const std::string hidden = swiglu ? "g = MatMul(xn, w1)  u = MatMul(xn, w3)  sg = Sigmoid(g)  "
                                        "s = Mul(g, sg)  hh = Mul(s, u)"
                                      : "g = MatMul(xn, w1)  gb = Add(g, b1)  hh = Gelu(gb)";
    graph::Graph g = Parse(fmt::format(
        "graph g opset 20 {{ input x: f32[{0}, {1}]  input gamma: f32[{1}]  input beta: f32[{1}]"
        "  input w1: f32[{1}, {2}]  input w3: f32[{1}, {2}]  input b1: f32[{2}]"
        "  input w2: f32[{2}, {3}]  input b2: f32[{3}]  input r: f32[{0}, {3}]\n"
        "{4}\n {5}\n y0 = MatMul(hh, w2)  y1 = Add(y0, b2)  y = Add(y1, r)  output y }}",
        m, k, h, n, pro, hidden));
    auto want = graph::RunReference(g, {{"x", F32({m, k}, x)},
                                        {"gamma", F32({k}, gamma)},
                                        {"beta", F32({k}, beta)},
                                        {"w1", F32({k, h}, w1)},
                                        {"w3", F32({k, h}, w3)},
                                        {"b1", F32({h}, b1)},
                                        {"w2", F32({h, n}, w2)},
                                        {"b2", F32({n}, b2)},
                                        {"r", F32({m, n}, r)}});
    ASSERT_TRUE(want.ok()) << want.error().ToString();
    EXPECT_LE(::fusetune::testing::ScaledError(F32({m, n}, o), want->outputs.at("y")), 3e-5)
        << (swiglu ? "swiglu " : "gelu ") << (norm ? "ln " : "") << m << "x" << k << "x" << h << "x"
        << n << " " << t.ToString();
    EXPECT_EQ(stats->bytes_local_to_global, 4 * m * n);
  }
}

TEST(Ffn, WeightsAreReadOncePerRowBlock) {
  const int64_t m = 48, k = 32, h = 64, n = 32;
  std::vector<float> x(m * k, 0.1f), w1(k * h, 0.1f), w2(h * n, 0.1f), o(m * n);
  FfnDesc d;
  d.m = m;
  d.k = k;
  d.hidden = h;
  d.n = n;
  d.x = x.data();
  d.x_row_stride = k;
  d.w1 = w1.data();
  d.w1_row_stride = h;
  d.w2 = w2.data();
  d.w2_row_stride = n;
  d.o = o.data();
  d.o_row_stride = n;
  FfnTiling t;
  t.mb = 16;
  t.hb = 16;
  KernelConfig one;
  one.threads = 1;
  auto stats = RunFfn(d, t, one);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes_global_to_local, 4 * (m * k + 3 * (k * h + h * n)));
  auto compute = RunFfn(d, t, one, RunMode::kComputeOnly);
  ASSERT_TRUE(compute.ok());
  EXPECT_EQ(compute->bytes_global_to_local + compute->bytes_local_to_global, 0);
  t.hb = 0;
  EXPECT_NE(RunFfn(d, t, one).error().message().find("tiling.hb"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::kernels
