// The reference executor against hand-computed values: it is the oracle for
// everything else, so each op family is pinned down here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/op_registry.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::F32;
using testing::I64;
using testing::Parse;
using testing::RunFirst;

TEST(ReferenceOps, MatMulBroadcastsBatch) {
  Graph g =
      Parse(R"(graph g { input a: f32[2, 2, 3]  input b: f32[3, 2]  y = MatMul(a, b)  output y })");
  Tensor a = F32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0});
  Tensor b = F32({3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_VALUES_NEAR(RunFirst(g, {{"a", a}, {"b", b}}),
                     (std::vector<float>{4, 5, 10, 11, 1, 0, 0, 1}), 1e-6);
}

TEST(ReferenceOps, MatMulVectorPromotion) {
  Graph g = Parse(R"(graph g { input a: f32[3]  input b: f32[3, 2]  y = MatMul(a, b)  output y })");
  Tensor y = RunFirst(g, {{"a", F32({3}, {1, 2, 3})}, {"b", F32({3, 2}, {1, 0, 0, 1, 1, 1})}});
  EXPECT_EQ(y.dims(), (Dims{2}));
  EXPECT_VALUES_NEAR(y, (std::vector<float>{4, 5}), 1e-6);
}

TEST(ReferenceOps, GemmWithTransposeAlphaBeta) {
  Graph g = Parse(R"(graph g {
    input a: f32[2, 2]  input b: f32[3, 2]  const c: f32[3] = [1, 2, 3]
    y = Gemm(a, b, c) {transB=1, alpha=2.0, beta=0.5}
    output y })");
  Tensor y =
      RunFirst(g, {{"a", F32({2, 2}, {1, 2, 3, 4})}, {"b", F32({3, 2}, {1, 0, 0, 1, 1, 1})}});
  EXPECT_VALUES_NEAR(y, (std::vector<float>{2.5, 5, 7.5, 6.5, 9, 15.5}), 1e-5);
}

TEST(ReferenceOps, BroadcastingArithmetic) {
  Graph g = Parse(R"(graph g {
    input a: f32[2, 3]  const b: f32[3] = [1, 2, 3]  const c: f32[2, 1] = [10, 20]
    s = Add(a, b)  m = Mul(s, c)  d = Div(m, c)  p = Pow(d, b)  e = Sub(p, b)
    output e })");
  Tensor y = RunFirst(g, {{"a", F32({2, 3}, {0, 1, 2, 3, 4, 5})}});
  // ((a + b) * c / c) ^ b - b
  EXPECT_VALUES_NEAR(y, (std::vector<float>{0, 7, 122, 3, 34, 509}), 1e-3);
}

TEST(ReferenceOps, IntegerArithmeticForShapes) {
  Graph g = Parse(R"(graph g {
    const a: i64[3] = [6, 7, 8]  const b: i64[] = [2]
    y = Div(a, b)  z = Mul(y, b)
    output z })");
  EXPECT_VALUES_NEAR(RunFirst(g, {}), (std::vector<float>{6, 6, 8}), 0);
}

TEST(ReferenceOps, UnaryMath) {
  Graph g = Parse(R"(graph g {
    input x: f32[4]
    a = Relu(x)  b = Sigmoid(x)  c = Tanh(x)  d = Erf(x)  e = Exp(x)  f = Neg(x)
    gg = Gelu(x)  gt = Gelu(x) {approximate="tanh"}  sq = Sqrt(e)  r = Reciprocal(e)
    output a, b, c, d, f, gg, gt, sq, r })");
  Tensor x = F32({4}, {-2, -0.5, 0, 1.5});
  auto r = RunReference(g, {{"x", x}});
  ASSERT_TRUE(r.ok());
  const auto& o = r->outputs;
  EXPECT_VALUES_NEAR(o.at("a"), (std::vector<float>{0, 0, 0, 1.5}), 0);
  for (int i = 0; i < 4; ++i) {
    const double v = x.data<float>()[i];
    EXPECT_NEAR(o.at("b").data<float>()[i], 1 / (1 + std::exp(-v)), 1e-6);
    EXPECT_NEAR(o.at("c").data<float>()[i], std::tanh(v), 1e-6);
    EXPECT_NEAR(o.at("d").data<float>()[i], std::erf(v), 1e-6);
    EXPECT_NEAR(o.at("f").data<float>()[i], -v, 0);
    EXPECT_NEAR(o.at("gg").data<float>()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))), 1e-6);
    EXPECT_NEAR(o.at("gt").data<float>()[i],
                0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-6);
    EXPECT_NEAR(o.at("sq").data<float>()[i], std::exp(v / 2), 1e-5);
    EXPECT_NEAR(o.at("r").data<float>()[i], std::exp(-v), 1e-5);
  }
}

TEST(ReferenceOps, SoftmaxAlongAxis) {
  Graph g = Parse(
      R"(graph g opset 13 { input x: f32[2, 3]  y = Softmax(x) {axis=0}  z = Softmax(x)  output y, z })");
  auto r = RunReference(g, {{"x", F32({2, 3}, {0, 1, 2, 0, 1, 2})}});
  ASSERT_TRUE(r.ok());
  EXPECT_VALUES_NEAR(r->outputs.at("y"), (std::vector<float>{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}), 1e-6);
  const double s = 1 + std::exp(1.0) + std::exp(2.0);
  EXPECT_NEAR(r->outputs.at("z").data<float>()[2], std::exp(2.0) / s, 1e-6);
}

TEST(ReferenceOps, SoftmaxOpset11FlattensFromAxis) {
  Graph g =
      Parse(R"(graph g opset 11 { input x: f32[1, 2, 2]  y = Softmax(x) {axis=1}  output y })");
  Tensor y = RunFirst(g, {{"x", F32({1, 2, 2}, {0, 0, 0, 0})}});
  EXPECT_VALUES_NEAR(y, (std::vector<float>{0.25, 0.25, 0.25, 0.25}), 1e-6);
}

TEST(ReferenceOps, LayerNormalization) {
  Graph g = Parse(R"(graph g opset 17 {
    input x: f32[2, 4]  const s: f32[4] = [1, 1, 2, 2]  const b: f32[4] = [0, 1, 0, 1]
    y = LayerNormalization(x, s, b) {epsilon=1e-5}
    output y })");
  Tensor y = RunFirst(g, {{"x", F32({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2})}});
  const double d = std::sqrt(1.25);
  EXPECT_VALUES_NEAR(y,
                     (std::vector<float>{float(-1.5 / d), float(-0.5 / d + 1), float(1.0 / d),
                                         float(3.0 / d + 1), 0, 1, 0, 1}),
                     1e-3);  // second row: zero variance, so only the bias remains
}

TEST(ReferenceOps, ReductionsWithAxesAsAttributeOrInput) {
  Graph g13 = Parse(R"(graph g opset 13 {
    input x: f32[2, 3]  const ax: i64[1] = [1]
    m = ReduceMean(x) {axes=[1]}  s = ReduceSum(x, ax) {keepdims=0}  mx = ReduceMax(x) {axes=[0], keepdims=0}
    output m, s, mx })");
  auto r = RunReference(g13, {{"x", F32({2, 3}, {1, 2, 3, 4, 5, 9})}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->outputs.at("m").dims(), (Dims{2, 1}));
  EXPECT_VALUES_NEAR(r->outputs.at("m"), (std::vector<float>{2, 6}), 1e-6);
  EXPECT_VALUES_NEAR(r->outputs.at("s"), (std::vector<float>{6, 18}), 1e-6);
  EXPECT_VALUES_NEAR(r->outputs.at("mx"), (std::vector<float>{4, 5, 9}), 0);
  Graph g18 = Parse(
      R"(graph g opset 18 { input x: f32[2, 3]  const ax: i64[1] = [-1]  m = ReduceMean(x, ax)  output m })");
  EXPECT_VALUES_NEAR(RunFirst(g18, {{"x", F32({2, 3}, {1, 2, 3, 4, 5, 9})}}),
                     (std::vector<float>{2, 6}), 1e-6);
}

TEST(ReferenceOps, TransposeReshapeSliceConcat) {
  Graph g = Parse(R"(graph g {
    input x: f32[2, 3]
    const shape: i64[2] = [3, -1]  const st: i64[1] = [1]  const en: i64[1] = [100]  const ax: i64[1] = [1]
    t = Transpose(x) {perm=[1, 0]}
    r = Reshape(x, shape)
    s = Slice(x, st, en, ax)
    c = Concat(x, s) {axis=1}
    output t, r, s, c })");
  auto r = RunReference(g, {{"x", F32({2, 3}, {0, 1, 2, 3, 4, 5})}});
  ASSERT_TRUE(r.ok());
  EXPECT_VALUES_NEAR(r->outputs.at("t"), (std::vector<float>{0, 3, 1, 4, 2, 5}), 0);
  EXPECT_EQ(r->outputs.at("r").dims(), (Dims{3, 2}));
  EXPECT_VALUES_NEAR(r->outputs.at("s"), (std::vector<float>{1, 2, 4, 5}), 0);
  EXPECT_VALUES_NEAR(r->outputs.at("c"), (std::vector<float>{0, 1, 2, 1, 2, 3, 4, 5, 4, 5}), 0);
}

TEST(ReferenceOps, SliceWithNegativeStep) {
  Graph g = Parse(R"(graph g {
    input x: f32[5]  const st: i64[1] = [-1]  const en: i64[1] = [-100]  const ax: i64[1] = [0]  const sp: i64[1] = [-2]
    y = Slice(x, st, en, ax, sp)  output y })");
  EXPECT_VALUES_NEAR(RunFirst(g, {{"x", F32({5}, {0, 1, 2, 3, 4})}}), (std::vector<float>{4, 2, 0}),
                     0);
}

// Found by tests/fuzz/onnx_import_fuzz: steps at int64's limits take one
// element (counting the output overflowed).
TEST(ReferenceOps, SliceWithStepsAtTheLimits) {
  Graph g = Parse(R"(graph g {
    input x: f32[5]  const st: i64[1] = [1]  const en: i64[1] = [5]  const ax: i64[1] = [0]
    const up: i64[1] = [9223372036854775807]  const down: i64[1] = [-9223372036854775808]
    const last: i64[1] = [-1]  const first: i64[1] = [-100]
    a = Slice(x, st, en, ax, up)
    b = Slice(x, last, first, ax, down)
    output a, b })");
  auto r = RunReference(g, {{"x", F32({5}, {0, 1, 2, 3, 4})}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_VALUES_NEAR(r->outputs.at("a"), (std::vector<float>{1}), 0);
  EXPECT_VALUES_NEAR(r->outputs.at("b"), (std::vector<float>{4}), 0);
}

TEST(ReferenceOps, GatherSplitWhereExpandTrilu) {
  Graph g = Parse(R"(graph g opset 14 {
    input x: f32[3, 2]  const idx: i64[2] = [2, -3]  const sh: i64[3] = [2, 3, 2]  const k: i64[] = [0]
    const cond: bool[3, 1] = [1, 0, 1]  const zero: f32[] = [0]
    ga = Gather(x, idx) {axis=0}
    a, b = Split(x) {axis=1}
    w = Where(cond, x, zero)
    e = Expand(x, sh)
    ones = Expand(zero, sh)
    tl = Trilu(x, k) {upper=0}
    output ga, a, b, w, e, tl })");
  auto r = RunReference(g, {{"x", F32({3, 2}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_VALUES_NEAR(r->outputs.at("ga"), (std::vector<float>{5, 6, 1, 2}), 0);
  EXPECT_VALUES_NEAR(r->outputs.at("a"), (std::vector<float>{1, 3, 5}), 0);
  EXPECT_VALUES_NEAR(r->outputs.at("b"), (std::vector<float>{2, 4, 6}), 0);
  EXPECT_VALUES_NEAR(r->outputs.at("w"), (std::vector<float>{1, 2, 0, 0, 5, 6}), 0);
  EXPECT_EQ(r->outputs.at("e").dims(), (Dims{2, 3, 2}));
  EXPECT_VALUES_NEAR(r->outputs.at("tl"), (std::vector<float>{1, 0, 3, 4, 5, 6}), 0);
}

TEST(ReferenceOps, ConstantProducers) {
  Graph g = Parse(R"(graph g {
    input x: f32[2, 5]
    const st: i64[] = [1]  const lim: i64[] = [7]  const dl: i64[] = [2]
    s = Shape(x)  r = Range(st, lim, dl)  c = ConstantOfShape(s) {value=f32[1] [1.5]}
    eq = Equal(r, st)  cast = Cast(eq) {to=1}
    output s, r, c, cast })");
  auto r = RunReference(g, {{"x", F32({2, 5}, std::vector<float>(10, 0))}});
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_VALUES_NEAR(r->outputs.at("s"), (std::vector<float>{2, 5}), 0);
  EXPECT_VALUES_NEAR(r->outputs.at("r"), (std::vector<float>{1, 3, 5}), 0);
  EXPECT_EQ(r->outputs.at("c").dims(), (Dims{2, 5}));
  EXPECT_FLOAT_EQ(r->outputs.at("c").data<float>()[9], 1.5f);
  EXPECT_VALUES_NEAR(r->outputs.at("cast"), (std::vector<float>{1, 0, 0}), 0);
}

TEST(ReferenceOps, FeedsAreChecked) {
  Graph g = Parse(R"(graph g { input x: f32[2, 3]  y = Relu(x)  output y })");
  auto missing = RunReference(g, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("'x'"), std::string::npos);
  auto wrong_shape = RunReference(g, {{"x", F32({3, 2}, std::vector<float>(6, 0))}});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.error().message().find("expects shape [2, 3]"), std::string::npos);
  auto unknown =
      RunReference(g, {{"x", F32({2, 3}, std::vector<float>(6, 0))}, {"q", F32({1}, {0})}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message().find("'q'"), std::string::npos);
}

TEST(ReferenceOps, RegistryCoversTheExportedOpSet) {
  for (const char* op : {"MatMul",    "Gemm",      "Add",
                         "Sub",       "Mul",       "Div",
                         "Pow",       "Sqrt",      "Reciprocal",
                         "Neg",       "Exp",       "Erf",
                         "Tanh",      "Relu",      "Sigmoid",
                         "Gelu",      "Softmax",   "ReduceMean",
                         "ReduceSum", "ReduceMax", "LayerNormalization",
                         "Transpose", "Reshape",   "Flatten",
                         "Squeeze",   "Unsqueeze", "Concat",
                         "Split",     "Slice",     "Gather",
                         "Where",     "Equal",     "Expand",
                         "Cast",      "Constant",  "ConstantOfShape",
                         "Range",     "Shape",     "Identity",
                         "Dropout",   "Trilu",     "Sin",
                         "Cos",       "Less",      "Not"})
    EXPECT_NE(FindOpSchema("", op), nullptr) << op;
  EXPECT_EQ(FindOpSchema("", "Conv3DTranspose"), nullptr);
  EXPECT_EQ(FindOpSchema("com.microsoft", "Gelu"), nullptr);
}

// Found by tests/fuzz/onnx_import_fuzz: a float read as an integer (a shape
// input) saturates outside int64's range and reads NaN as 0, where the
// conversion was undefined.
TEST(TensorValues, FloatsReadAsIntegersSaturate) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor t =
      Tensor::FromVector<float>(DataType::kFloat32, {5}, {-inf, inf, std::nanf(""), 1e30f, -3.7f});
  EXPECT_EQ(t.ToInt64Vector(), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                     std::numeric_limits<int64_t>::max(), 0,
                                                     std::numeric_limits<int64_t>::max(), -3}));
}

}  // namespace
}  // namespace fusetune::graph
