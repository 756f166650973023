#include <gtest/gtest.h>

#include "graph/shape_inference.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::Parse;

TEST(ShapeInference, FoldsPyTorchShapeChains) {
  // What PyTorch emits for x.view(b, s, h, d): Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
  Graph g = Parse(R"(graph g opset 13 {
    input x: f32[2, 8, 32]
    const i0: i64[] = [0]  const i1: i64[] = [1]  const ax: i64[1] = [0]
    const h: i64[1] = [4]  const d: i64[1] = [8]
    s = Shape(x)
    b = Gather(s, i0) {axis=0}  n = Gather(s, i1) {axis=0}
    bu = Unsqueeze(b, ax)  nu = Unsqueeze(n, ax)
    shape = Concat(bu, nu, h, d) {axis=0}
    y = Reshape(x, shape)
    output y })",
                  /*fold=*/true);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
  EXPECT_EQ(g.type(g.outputs[0]).dims, (Dims{2, 8, 4, 8}));
}

TEST(ShapeInference, MismatchNamesTheNode) {
  auto r = ParseGraphText(R"(graph g {
    input a: f32[2, 3]  input b: f32[4, 5]
    y = MatMul(a, b)
    output y })");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kShapeMismatch);
  EXPECT_NE(r.error().message().find("(MatMul)"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("[2, 3] x [4, 5]"), std::string::npos) << r.error().message();
}

TEST(ShapeInference, BroadcastFailureIsReported) {
  auto r =
      ParseGraphText("graph g { input a: f32[2, 3]  input b: f32[4]  y = Add(a, b)  output y }");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("do not broadcast"), std::string::npos);
}

TEST(ShapeInference, ReshapeNeedsConstantShape) {
  auto r = ParseGraphText(
      "graph g { input a: f32[2, 3]  input s: i64[2]  y = Reshape(a, s)  output y }");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message().find("must be a constant"), std::string::npos);
}

TEST(ShapeInference, BadReshapeSizeIsReported) {
  auto r = ParseGraphText(
      "graph g { input a: f32[2, 3]  const s: i64[2] = [4, -1]  y = Reshape(a, s)  output y }");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("cannot reshape [2, 3]"), std::string::npos)
      << r.error().message();
}

TEST(ShapeInference, UnsupportedOpsAreListedTogether) {
  auto r = ParseGraphText(R"(graph g {
    input a: f32[1, 3, 8, 8]
    b = GridSample(a)  c = Relu(b)  d = LpPool(c)  e = GridSample(d)
    output e })");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported);
  const std::string& m = r.error().message();
  EXPECT_NE(m.find("2 unsupported op types"), std::string::npos) << m;
  EXPECT_NE(m.find("GridSample (first used by node #0 (GridSample))"), std::string::npos) << m;
  EXPECT_NE(m.find("LpPool"), std::string::npos) << m;
}

TEST(ShapeInference, WrongInputCountIsReported) {
  auto r = ParseGraphText("graph g { input a: f32[2]  y = Add(a)  output y }");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("has 1 inputs, expects 2 to 2"), std::string::npos)
      << r.error().message();
}

// A scalar has no axis to reduce (found by the ONNX import fuzzer: the
// reduced-axes mask was indexed at -1).
TEST(ShapeInference, ReducingAScalarIsReported) {
  auto r = ParseGraphText(
      "graph g opset 13 { input a: f32[]  y = ReduceMean(a) {axes=[-1]}  output y }");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("of a scalar, which has none"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace fusetune::graph
