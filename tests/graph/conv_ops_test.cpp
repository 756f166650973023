// Convolutional-network ops (ops_conv.cpp) against values computed offline
// with PyTorch in double precision (torch.nn.functional conv/pool/batch_norm;
// asymmetric and SAME pads applied with F.pad first), plus shape inference and
// the errors for bad attributes and shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "graph/op_registry.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::Parse;
using testing::RunFirst;

using testing::ParseError;
using testing::Pattern;

// A graph with a constant-free single node over feeds x (and w, b).
Tensor RunOne(const std::string& text, const TensorMap& feeds) {
  return RunFirst(Parse(text), feeds);
}

TEST(ConvOps, Conv2dStridePadBias) {
  Tensor y = RunOne(R"(graph g {
    input x: f32[1, 2, 5, 5]  input w: f32[3, 2, 3, 3]  input b: f32[3]
    y = Conv(x, w, b) {strides=[2, 2], pads=[1, 1, 1, 1], kernel_shape=[3, 3]}
    output y })",
                    {{"x", Pattern({1, 2, 5, 5}, 7, 3, 0.5)},
                     {"w", Pattern({3, 2, 3, 3}, 5, 2, 0.25)},
                     {"b", testing::F32({3}, {0.5, -1, 0.25})}});
  EXPECT_EQ(y.dims(), (Dims{1, 3, 3, 3}));
  EXPECT_VALUES_NEAR(
      y, (std::vector<float>{1.375, -1.125, -0.125, -1,   -0.75, 1.125,  1.625,  2.875,  -0.75,
                             -2.5,  -0.125, 0.75,   -0.5, 0.375, -2.375, -0.625, -2.5,   -0.75,
                             2,     1.125,  -1.25,  0.25, -2,    1.875,  -0.75,  -0.125, 0.125}),
      1e-5);
}

TEST(ConvOps, Conv2dGroupsDilationAsymmetricPads) {
  Tensor y =
      RunOne(R"(graph g {
    input x: f32[1, 4, 5, 5]  input w: f32[4, 2, 2, 2]
    y = Conv(x, w) {group=2, dilations=[2, 2], pads=[0, 1, 1, 0]}
    output y })",
             {{"x", Pattern({1, 4, 5, 5}, 9, 4, 0.25)}, {"w", Pattern({4, 2, 2, 2}, 3, 1, 0.5)}});
  EXPECT_EQ(y.dims(), (Dims{1, 4, 4, 4}));
  EXPECT_VALUES_NEAR(
      y,
      (std::vector<float>{
          0.75,  -0.75,  0.25,   0.125,  -0.375, -0.25,  0.75,   0.625, -0.375, 0.25,  0.125,
          0,     0.125,  0,      0,      0,      0.625,  0.125,  -1,    0.125,  0,     0.125,
          -1,    0.125,  0.5,    -1,     0.125,  0.125,  -0.375, -0.25, 0.75,   0.625, 0.375,
          0.125, 0.25,   -0.75,  -0.125, 0.75,   -0.25,  -0.125, 0.5,   0.25,   -0.75, -0.625,
          0.25,  -0.25,  -0.125, 0,      -0.375, -0.25,  0.75,   0.625, -0.375, 0.25,  0.125,
          0,     -0.375, 0.75,   0.625,  -0.625, -0.375, 0,      0,     0}),
      1e-5);
}

TEST(ConvOps, DepthwiseConvWithBias) {
  Tensor y = RunOne(R"(graph g {
    input x: f32[1, 4, 5, 5]  input w: f32[4, 1, 3, 3]  input b: f32[4]
    y = Conv(x, w, b) {group=4, pads=[1, 1, 1, 1]}
    output y })",
                    {{"x", Pattern({1, 4, 5, 5}, 9, 4, 0.25)},
                     {"w", Pattern({4, 1, 3, 3}, 4, 1.5, 0.5)},
                     {"b", testing::F32({4}, {1, 0, -1, 0.5})}});
  EXPECT_VALUES_NEAR(
      y,
      (std::vector<float>{
          1.75,    0.8125,  0.8125,  2.5,     0.3125,  0.5625,  1.0625,  0.875,   1.25,   2.875,
          1.5625,  0.6875,  2.1875,  -0.25,   -0.5,    0.3125,  0.875,   1.25,    2.75,   1.1875,
          1.5,     0.5,     -0.3125, 0,       1.75,    0.25,    -1.3125, -1,      0.4375, 0.5,
          0.5,     1.25,    -1.0625, -0.5625, -0.6875, -0.625,  -0.75,   0.875,   0.8125, 0.3125,
          0.5,     -1.0625, -0.5625, -0.625,  -0.9375, 0.25,    1.25,    1.25,    1.25,   0.25,
          -0.5,    0.25,    0.25,    -1.4375, -1.5625, -1.6875, -1.5625, -2.0625, 0.25,   -0.5,
          -0.4375, -0.125,  -1.75,   -2.25,   -1.0625, -1.4375, -2.0625, 0.25,    0.3125, -1.0625,
          -0.25,   -2,      -2.3125, -1.5,    -0.5,    -0.1875, -0.8125, 0,       0.25,   1.25,
          2.375,   0.75,    0.375,   0.5625,  0.0625,  -1,      1.6875,  0.1875,  0.375,  1.3125,
          0.6875,  0.375,   0.5625,  -0.9375, -0.25,   1.25,    0.3125,  0.3125,  2,      -0.1875}),
      1e-5);
}

TEST(ConvOps, Conv1dSameUpperAndLower) {
  const TensorMap feeds{{"x", Pattern({1, 2, 7}, 5, 2, 1)}, {"w", Pattern({2, 2, 4}, 3, 1, 0.5)}};
  const std::string head =
      "graph g { input x: f32[1, 2, 7]  input w: f32[2, 2, 4]  y = Conv(x, w) ";
  Tensor upper = RunOne(head + R"({strides=[2], auto_pad="SAME_UPPER"} output y })", feeds);
  EXPECT_EQ(upper.dims(), (Dims{1, 2, 4}));
  EXPECT_VALUES_NEAR(upper, (std::vector<float>{-1, 2, -1.5, 1.5, 0.5, -0.5, -0.5, -0.5}), 1e-5);
  Tensor lower = RunOne(head + R"({strides=[2], auto_pad="SAME_LOWER"} output y })", feeds);
  EXPECT_VALUES_NEAR(lower, (std::vector<float>{-0.5, 0, 1.5, -2, -1, 2, -3, 3}), 1e-5);
}

TEST(ConvOps, BatchNormalizationInference) {
  Tensor y = RunOne(R"(graph g {
    input x: f32[2, 3, 2, 2]
    const s: f32[3] = [1, 2, 0.5]  const b: f32[3] = [0, 1, -1]
    const m: f32[3] = [0.5, -0.5, 0]  const v: f32[3] = [1, 4, 0.25]
    y = BatchNormalization(x, s, b, m, v) {epsilon=0.001}
    output y })",
                    {{"x", Pattern({2, 3, 2, 2}, 11, 5, 0.5)}});
  EXPECT_VALUES_NEAR(
      y, (std::vector<float>{-2.998501, -2.498751, -1.999001, -1.499251,  1,         1.499938,
                             1.999875,  2.499813,  0.497009,  0.996012,   1.495015,  -3.495015,
                             -2.498751, -1.999001, -1.499251, -0.9995004, 1.499938,  1.999875,
                             2.499813,  2.99975,   0.996012,  1.495015,   -3.495015, -2.996012}),
      1e-5);
}

TEST(ConvOps, MaxPool2dCeilModeAndDilation) {
  const TensorMap feeds{{"x", Pattern({1, 2, 6, 6}, 13, 6, 0.5)}};
  Tensor ceil = RunOne(R"(graph g { input x: f32[1, 2, 6, 6]
    y = MaxPool(x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1}
    output y })",
                       feeds);
  EXPECT_EQ(ceil.dims(), (Dims{1, 2, 4, 4}));
  EXPECT_VALUES_NEAR(ceil, (std::vector<float>{0.5, 1.5,  2.5, 2.5, 3,   1.5, 2.5, 2.5, 3, 3, 2,
                                               2,   -0.5, 0.5, 1.5, 1.5, 2.5, 3,   1,   1, 2, 3,
                                               3,   1,    1.5, 2.5, 3,   0.5, -2,  -1,  0, 0}),
                     0);
  Tensor dil = RunOne(R"(graph g { input x: f32[1, 2, 6, 6]
    y = MaxPool(x) {kernel_shape=[2, 2], dilations=[2, 2]}  output y })",
                      feeds);
  EXPECT_EQ(dil.dims(), (Dims{1, 2, 4, 4}));
  EXPECT_VALUES_NEAR(dil, (std::vector<float>{3,   -1.5, -1,  -0.5, 1, 1.5, 2,  2.5,  3, 3,    -1.5,
                                              -1,  0.5,  1,   1.5,  2, 3,   3,  3,    3, -0.5, 0,
                                              0.5, 1,    2.5, 3,    3, 3,   -1, -0.5, 0, 0.5}),
                     0);
}

TEST(ConvOps, AveragePoolPadCounting) {
  const TensorMap feeds{{"x", Pattern({1, 2, 6, 6}, 13, 6, 0.5)}};
  Tensor excl = RunOne(R"(graph g { input x: f32[1, 2, 6, 6]
    y = AveragePool(x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1}
    output y })",
                       feeds);
  EXPECT_EQ(excl.dims(), (Dims{1, 2, 4, 4}));
  EXPECT_VALUES_NEAR(
      excl,
      (std::vector<float>{-1.25,      -0.5,       0.5,        1,          0,          -0.3333333,
                          0.6666667,  1.166667,   0.5833333,  -0.1111111, 0.1666667,  0.6666667,
                          -0.75,      0,          1,          1.5,        0.5,        0.1666667,
                          -1,         -0.5,       -0.4166667, 0.3333333,  -0.1111111, -0.3333333,
                          -0.9166667, -0.1666667, 0.1111111,  -0.8333333, -2.25,      -1.5,
                          -0.5,       0}),
      1e-6);
  Tensor incl = RunOne(R"(graph g { input x: f32[1, 2, 6, 6]
    y = AveragePool(x) {kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                        count_include_pad=1}
    output y })",
                       feeds);
  EXPECT_EQ(incl.dims(), (Dims{1, 2, 3, 3}));
  EXPECT_VALUES_NEAR(
      incl,
      (std::vector<float>{-0.5555556, -0.3333333, 0.3333333, 0, -0.3333333, 0.6666667, 0.3888889,
                          -0.1111111, 0.1666667, 0.2222222, 0.1111111, -0.6666667, -0.2777778,
                          0.3333333, -0.1111111, -0.6111111, -0.1666667, 0.1111111}),
      1e-6);
}

TEST(ConvOps, Pools1d) {
  const TensorMap feeds{{"x", Pattern({1, 1, 7}, 4, 1.5, 1)}};
  Tensor mx = RunOne(R"(graph g { input x: f32[1, 1, 7]
    y = MaxPool(x) {kernel_shape=[3], strides=[2], pads=[1, 1]}  output y })",
                     feeds);
  EXPECT_VALUES_NEAR(mx, (std::vector<float>{-0.5, 1.5, 1.5, 0.5}), 0);
  Tensor avg = RunOne(R"(graph g { input x: f32[1, 1, 7]
    y = AveragePool(x) {kernel_shape=[2], strides=[2], ceil_mode=1}  output y })",
                      feeds);
  EXPECT_EQ(avg.dims(), (Dims{1, 1, 4}));
  EXPECT_VALUES_NEAR(avg, (std::vector<float>{-1, 1, -1, 0.5}), 1e-6);
}

TEST(ConvOps, GlobalPools) {
  Graph g = Parse(R"(graph g { input x: f32[1, 2, 6, 6]
    a = GlobalAveragePool(x)  m = GlobalMaxPool(x)  output a, m })");
  auto r = RunReference(g, {{"x", Pattern({1, 2, 6, 6}, 13, 6, 0.5)}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->outputs.at("a").dims(), (Dims{1, 2, 1, 1}));
  EXPECT_VALUES_NEAR(r->outputs.at("a"), (std::vector<float>{-0.2083333, -0.08333333}), 1e-6);
  EXPECT_VALUES_NEAR(r->outputs.at("m"), (std::vector<float>{3, 3}), 0);
}

TEST(ConvOps, HardSigmoidAndHardSwish) {
  Graph g = Parse(R"(graph g { input x: f32[6]
    s = HardSigmoid(x)  t = HardSigmoid(x) {alpha=0.5, beta=0.25}  h = HardSwish(x)
    output s, t, h })");
  auto r = RunReference(g, {{"x", testing::F32({6}, {-4, -3, -1, 0, 1.5, 4})}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_VALUES_NEAR(r->outputs.at("s"), (std::vector<float>{0, 0, 0.3f, 0.5f, 0.8f, 1}), 1e-6);
  EXPECT_VALUES_NEAR(r->outputs.at("t"), (std::vector<float>{0, 0, 0, 0.25f, 1, 1}), 1e-6);
  // x * clamp(x / 6 + 0.5, 0, 1)
  EXPECT_VALUES_NEAR(r->outputs.at("h"), (std::vector<float>{0, 0, -1.0f / 3, 0, 1.125f, 4}), 1e-6);
}

TEST(ConvOps, PadModes) {
  const TensorMap feeds{{"x", testing::F32({2, 3}, {0, 1, 2, 3, 4, 5})}};
  auto pad = [&](const std::string& attrs, const std::string& extra = "") {
    return RunOne(R"(graph g { input x: f32[2, 3]  const p: i64[4] = [1, 2, 0, 1]
      const v: f32[] = [-1] )" +
                      extra + "  y = Pad(x, p, v) " + attrs + "  output y }",
                  feeds);
  };
  Tensor c = pad("");
  EXPECT_EQ(c.dims(), (Dims{3, 6}));
  EXPECT_VALUES_NEAR(
      c, (std::vector<float>{-1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2, -1, -1, -1, 3, 4, 5, -1}), 0);
  EXPECT_VALUES_NEAR(pad(R"({mode="reflect"})"),
                     (std::vector<float>{5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4}), 0);
  EXPECT_VALUES_NEAR(pad(R"({mode="edge"})"),
                     (std::vector<float>{0, 0, 0, 1, 2, 2, 0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5}), 0);
}

TEST(ConvOps, PadAxesWrapAndCrop) {
  const TensorMap feeds{{"x", testing::F32({2, 3}, {0, 1, 2, 3, 4, 5})}};
  Tensor axes = RunOne(R"(graph g opset 18 { input x: f32[2, 3]  const p: i64[2] = [2, 1]
    const a: i64[1] = [-1]  y = Pad(x, p, _, a)  output y })",
                       feeds);
  EXPECT_EQ(axes.dims(), (Dims{2, 6}));
  EXPECT_VALUES_NEAR(axes, (std::vector<float>{0, 0, 0, 1, 2, 0, 0, 0, 3, 4, 5, 0}), 0);
  Tensor wrap = RunOne(R"(graph g opset 19 { input x: f32[2, 3]  const p: i64[4] = [0, 2, 0, 2]
    y = Pad(x, p) {mode="wrap"}  output y })",
                       feeds);
  EXPECT_VALUES_NEAR(wrap, (std::vector<float>{1, 2, 0, 1, 2, 0, 1, 4, 5, 3, 4, 5, 3, 4}), 0);
  Tensor crop = RunOne(R"(graph g { input x: f32[2, 3]  const p: i64[4] = [0, -1, 0, 0]
    y = Pad(x, p)  output y })",
                       feeds);
  EXPECT_VALUES_NEAR(crop, (std::vector<float>{1, 2, 4, 5}), 0);
  Tensor old = RunOne(R"(graph g opset 9 { input x: f32[2, 3]
    y = Pad(x) {pads=[0, 1, 0, 0], value=7.0}  output y })",
                      feeds);
  EXPECT_VALUES_NEAR(old, (std::vector<float>{7, 0, 1, 2, 7, 3, 4, 5}), 0);
}

TEST(ConvOps, ShapeInference) {
  auto out_dims = [](const std::string& node, const std::string& x = "f32[1, 3, 7, 9]",
                     const std::string& w = "f32[8, 3, 3, 3]") {
    Graph g =
        Parse("graph g { input x: " + x + "  input w: " + w + "  y = " + node + "  output y }");
    return g.type(g.outputs[0]).dims;
  };
  EXPECT_EQ(out_dims("Conv(x, w)"), (Dims{1, 8, 5, 7}));
  EXPECT_EQ(out_dims(R"(Conv(x, w) {auto_pad="VALID", strides=[2, 2]})"), (Dims{1, 8, 3, 4}));
  EXPECT_EQ(out_dims(R"(Conv(x, w) {auto_pad="SAME_UPPER", strides=[2, 3]})"), (Dims{1, 8, 4, 3}));
  EXPECT_EQ(out_dims(R"(Conv(x, w) {auto_pad="SAME_LOWER"})"), (Dims{1, 8, 7, 9}));
  EXPECT_EQ(out_dims("Conv(x, w) {pads=[2, 0, 2, 0], dilations=[3, 1]}"), (Dims{1, 8, 5, 7}));
  EXPECT_EQ(out_dims("Conv(x, w) {group=3}", "f32[2, 3, 7, 9]", "f32[6, 1, 3, 3]"),
            (Dims{2, 6, 5, 7}));
  EXPECT_EQ(out_dims("Conv(x, w) {strides=[3]}", "f32[1, 4, 10]", "f32[2, 4, 1]"), (Dims{1, 2, 4}));
  auto pool_dims = [](const std::string& node, const std::string& x = "f32[2, 3, 7, 7]") {
    Graph g = Parse("graph g { input x: " + x + "  y = " + node + "  output y }");
    return g.type(g.outputs[0]).dims;
  };
  EXPECT_EQ(pool_dims("MaxPool(x) {kernel_shape=[2, 2], strides=[2, 2]}"), (Dims{2, 3, 3, 3}));
  EXPECT_EQ(pool_dims("MaxPool(x) {kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1}"),
            (Dims{2, 3, 4, 4}));
  EXPECT_EQ(
      pool_dims(R"(AveragePool(x) {kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"})"),
      (Dims{2, 3, 4, 4}));
  EXPECT_EQ(pool_dims("GlobalAveragePool(x)"), (Dims{2, 3, 1, 1}));
  EXPECT_EQ(pool_dims("GlobalMaxPool(x)", "f32[2, 3, 5]"), (Dims{2, 3, 1}));
}

TEST(ConvOps, ErrorsNameTheNode) {
  struct Case {
    std::string graph, message;
  };
  const std::vector<Case> cases = {
      {"input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  y = Conv(x, w) {group=2}",
       "group 2 does not divide"},
      {"input x: f32[1, 4, 8, 8]  input w: f32[4, 4, 3, 3]  y = Conv(x, w) {group=2}",
       "channels per group"},
      {"input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  input b: f32[3]  y = Conv(x, w, b)",
       "bias [3] must be [4]"},
      {"input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  y = Conv(x, w) {kernel_shape=[5, 5]}",
       "kernel_shape"},
      {"input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  y = Conv(x, w) {strides=[1]}",
       "strides has 1 entries, expected 2"},
      {"input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  y = Conv(x, w) {auto_pad=\"SAME\"}",
       "unknown auto_pad 'SAME'"},
      {"input x: f32[1, 3, 2, 2]  input w: f32[4, 3, 3, 3]  y = Conv(x, w)",
       "larger than the padded input"},
      {"input x: f32[1, 3, 4, 4, 4]  input w: f32[4, 3, 3, 3, 3]  y = Conv(x, w)",
       "[N, C, W] or [N, C, H, W]"},
      {"input x: f32[1, 3, 8, 8]  y = MaxPool(x) {strides=[2, 2]}",
       "kernel_shape attribute is required"},
      {"input x: f32[1, 3, 8, 8]  y = AveragePool(x) {kernel_shape=[2, 2], strides=[0, 1]}",
       "strides must be in [1, 2147483648], got 0"},
      {"input x: f32[1, 3, 8, 8]  input s: f32[4]  y = BatchNormalization(x, s, s, s, s)",
       "scale is [4], expected [3]"},
      {"input x: f32[1, 3, 8, 8]  input s: f32[3]  y = BatchNormalization(x, s, s, s, s) "
       "{training_mode=1}",
       "inference-mode"},
      {"input x: f32[1, 3]  y = GlobalAveragePool(x)", "[N, C, D1, ...]"},
      {"input x: i64[4]  y = HardSwish(x)", "must be a float tensor"},
      {"input x: f32[2, 3]  const p: i64[2] = [1, 1]  y = Pad(x, p)",
       "pads has 2 values, expected 2 x 2 padded axes"},
      {"input x: f32[2, 3]  const p: i64[4] = [0, 3, 0, 0]  y = Pad(x, p) {mode=\"reflect\"}",
       "reflect pads 3 and 0 exceed axis 1"},
      {"input x: f32[2, 3]  const p: i64[4] = [0, 0, 0, 0]  y = Pad(x, p) {mode=\"wrap\"}",
       "unknown Pad mode 'wrap'"},
      {"input x: f32[2, 3]  const p: i64[4] = [0, -4, 0, 0]  y = Pad(x, p)",
       "leave axis 1 of size 3 negative"},
      {"input x: f32[2, 3]  input p: i64[4]  y = Pad(x, p)", "must be a constant"},
      {"input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  input b: i64[4]  y = Conv(x, w, b)",
       "X and B must have the same dtype"},
      {"input x: f32[2, 3]  const p: i64[4] = [0, 0, 0, 9000000000000000000]  y = Pad(x, p)",
       "pad 9000000000000000000 is too large"},
      {"input x: f32[1, 1, 8]  input w: f32[1, 1, 3]  y = Conv(x, w) "
       "{dilations=[4611686018427387904]}",
       "dilations must be in [1, 2147483648]"},
      {"input x: f32[1, 1, 8]  input w: f32[1, 1, 3000000000]  y = Conv(x, w) "
       "{dilations=[2147483647]}",
       "kernel 3000000000 with dilation 2147483647 is too large"},
  };
  for (const Case& c : cases) {
    const std::string msg = ParseError("graph g { " + c.graph + "  output y }");
    // The node is named by position and op type: "node #0 (Conv): ...".
    const size_t eq = c.graph.find("y = ") + 1, paren = c.graph.find('(', eq);
    const std::string op = c.graph.substr(eq + 3, paren - eq - 3);
    EXPECT_EQ(msg.rfind("node #0 (" + op + "): ", 0), 0u) << c.graph << "\n-> " << msg;
    EXPECT_NE(msg.find(c.message), std::string::npos) << c.graph << "\n-> " << msg;
  }
}

TEST(ConvOps, CostsCountMultiplyAdds) {
  Graph g = Parse(R"(graph g { input x: f32[1, 3, 8, 8]  input w: f32[4, 3, 3, 3]  input b: f32[4]
    y = Conv(x, w, b) {pads=[1, 1, 1, 1]}  output y })");
  const OpSchema* s = FindOpSchema("", "Conv");
  ASSERT_NE(s, nullptr);
  const Node& n = g.nodes[0];
  std::vector<const TensorType*> in, out;
  for (auto v : n.inputs) in.push_back(&g.type(v));
  for (auto v : n.outputs) out.push_back(&g.type(v));
  // 4 * 8 * 8 outputs, each 27 multiply-adds and a bias add.
  EXPECT_DOUBLE_EQ(s->cost(n, in, out).flops, 256.0 * (2 * 27 + 1));
}

}  // namespace
}  // namespace fusetune::graph
