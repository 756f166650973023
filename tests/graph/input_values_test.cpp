// Graph inputs that carry shapes, bound to the run's values
// (graph/input_values.h): shapes resolve, data inputs stay inputs, and a
// missing or wrong value is a clear error.
#include "graph/input_values.h"

#include <gtest/gtest.h>

#include "graph/reference_executor.h"
#include "graph/text_format.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::I64;

Graph Unfolded(const std::string& text) {
  TextParseOptions options;
  options.infer_shapes = false;
  auto g = ParseGraphText(text, options);
  EXPECT_TRUE(g.ok()) << g.error().message();
  return std::move(*g);
}

const char* kReshapeByInput = R"(graph g opset 17 {
    input x: f32[2, 6]  input shape: i64[2]
    y = Reshape(x, shape)
    output y })";

TEST(InputValues, AShapeInputIsBoundAndTheShapeResolves) {
  Graph g = Unfolded(kReshapeByInput);
  std::vector<std::string> bound;
  ASSERT_TRUE(InferShapesBindingInputs(g, {{"shape", I64({2}, {3, 4})}}, {}, &bound).ok());
  EXPECT_EQ(bound, std::vector<std::string>{"shape"});
  EXPECT_EQ(g.type(g.outputs[0]).dims, (Dims{3, 4}));
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).name, "x");
  ASSERT_TRUE(g.bound_inputs.count("shape"));
}

TEST(InputValues, AShapeComputedFromAnInputBindsThatInput) {
  Graph g = Unfolded(R"(graph g opset 17 {
    input x: f32[2, 6]  input rows: i32[1]  const cols: i64[1] = [-1]
    r = Cast(rows) {to=7}
    shape = Concat(r, cols) {axis=0}
    y = Reshape(x, shape)
    output y })");
  // An i64 value for the i32 input converts exactly.
  ASSERT_TRUE(InferShapesBindingInputs(g, {{"rows", I64({1}, {4})}}).ok());
  EXPECT_EQ(g.type(g.outputs[0]).dims, (Dims{4, 3}));
}

TEST(InputValues, DataInputsStayInputsEvenWhenGiven) {
  Graph g = Unfolded(R"(graph g opset 17 {
    const table: f32[10, 4]  input ids: i64[3]  input shape: i64[2]
    e = Gather(table, ids) {axis=0}
    y = Reshape(e, shape)
    output y })");
  const std::map<std::string, Tensor> values{{"ids", I64({3}, {1, 2, 3})},
                                             {"shape", I64({2}, {4, 3})}};
  std::vector<std::string> bound;
  ASSERT_TRUE(InferShapesBindingInputs(g, values, {}, &bound).ok());
  EXPECT_EQ(bound, std::vector<std::string>{"shape"});
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).name, "ids");
}

// A shape built from x's dims (Shape) and an input's value binds only the
// input: x is read for its dims, never its values, and stays an input.
TEST(InputValues, AnInputReadOnlyThroughShapeIsNotBound) {
  Graph g = Unfolded(R"(graph g opset 17 {
    input x: f32[2, 6]  input n: i64[1]  const i0: i64[] = [0]  const ax: i64[1] = [0]
    s = Shape(x)
    b = Gather(s, i0) {axis=0}
    bu = Unsqueeze(b, ax)
    shape = Concat(bu, n) {axis=0}
    y = Reshape(x, shape)
    output y })");
  const std::map<std::string, Tensor> run_inputs{
      {"x", Tensor::FromVector<float>(DataType::kFloat32, {2, 6}, std::vector<float>(12, 1.0f))},
      {"n", I64({1}, {6})}};
  std::vector<std::string> bound;
  ASSERT_TRUE(InferShapesBindingInputs(g, run_inputs, {}, &bound).ok());
  EXPECT_EQ(bound, std::vector<std::string>{"n"});
  EXPECT_EQ(g.type(g.outputs[0]).dims, (Dims{2, 6}));
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).name, "x");
}

TEST(InputValues, AMissingValueNamesTheInputAndTheNode) {
  Graph g = Unfolded(kReshapeByInput);
  Status s = InferShapesBindingInputs(g, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message().find("(Reshape)"), std::string::npos) << s.error().message();
  EXPECT_NE(s.error().message().find("graph input 'shape' (i64[2])"), std::string::npos)
      << s.error().message();
  EXPECT_NE(s.error().message().find("--input shape=FILE.npy"), std::string::npos);
}

TEST(InputValues, AValueOfTheWrongShapeOrTypeIsRefused) {
  Graph g = Unfolded(kReshapeByInput);
  Status s = InferShapesBindingInputs(g, {{"shape", I64({3}, {1, 3, 4})}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), ErrorCode::kShapeMismatch);
  EXPECT_NE(s.error().message().find("has shape [3]; the model declares i64[2]"), std::string::npos)
      << s.error().message();
  Graph h = Unfolded(kReshapeByInput);
  s = InferShapesBindingInputs(
      h, {{"shape", Tensor::FromVector<float>(DataType::kFloat32, {2}, {3.5f, 4})}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message().find("does not convert exactly"), std::string::npos)
      << s.error().message();
}

TEST(InputValues, ARunMayFeedTheBoundValueAgainButNoOther) {
  Graph g = Unfolded(kReshapeByInput);
  ASSERT_TRUE(InferShapesBindingInputs(g, {{"shape", I64({2}, {3, 4})}}).ok());
  Tensor x =
      Tensor::FromVector<float>(DataType::kFloat32, {2, 6}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto same = RunReference(g, {{"x", x}, {"shape", I64({2}, {3, 4})}});
  ASSERT_TRUE(same.ok()) << same.error().message();
  EXPECT_EQ(same->outputs.at("y").dims(), (Dims{3, 4}));
  auto as_floats = RunReference(
      g, {{"x", x}, {"shape", Tensor::FromVector<float>(DataType::kFloat32, {2}, {3, 4})}});
  EXPECT_TRUE(as_floats.ok()) << as_floats.error().message();
  auto fraction = RunReference(
      g, {{"x", x}, {"shape", Tensor::FromVector<float>(DataType::kFloat32, {2}, {3.5f, 4})}});
  EXPECT_FALSE(fraction.ok()) << "3.5 is not the bound 3";
  auto other = RunReference(g, {{"x", x}, {"shape", I64({2}, {4, 3})}});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message().find("load the model again"), std::string::npos)
      << other.error().message();
}

TEST(InputValues, GraphInputsReachingFollowsProducersToInputs) {
  Graph g = Unfolded(R"(graph g opset 17 {
    input a: i64[1]  input b: i64[1]  const c: i64[1] = [2]
    s = Add(a, c)
    t = Concat(s, b) {axis=0}
    output t })");
  const auto t = g.FindValue("t"), a = g.FindValue("a"), b = g.FindValue("b");
  EXPECT_EQ(GraphInputsReaching(g, *t), (std::vector<ValueId>{*a, *b}));
  EXPECT_TRUE(GraphInputsReaching(g, *g.FindValue("c")).empty());
}

}  // namespace
}  // namespace fusetune::graph
