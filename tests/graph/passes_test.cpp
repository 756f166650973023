// Each pass on a small stated graph, with the expected rewrite, and the
// invariant that matters most: outputs are unchanged.
#include <gtest/gtest.h>

#include "graph/passes.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::Parse;

std::vector<std::string> OpTypes(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

// Runs `pass` and checks that every output is bitwise or numerically unchanged.
template <typename Pass>
Graph ApplyAndCheck(const std::string& text, Pass pass, int* changes) {
  Graph before = Parse(text);
  Graph after = Parse(text);
  auto r = pass(after);
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  *changes = r.ok() ? *r : -1;
  EXPECT_TRUE(after.Validate().ok());
  const TensorMap feeds = RandomFeeds(before, 11);
  auto want = RunReference(before, feeds);
  auto got = RunReference(after, feeds);
  EXPECT_TRUE(want.ok() && got.ok());
  if (!want.ok() || !got.ok()) return after;
  for (const auto& [name, t] : want->outputs) {
    EXPECT_TRUE(got->outputs.count(name)) << "output " << name << " lost its name";
    if (got->outputs.count(name)) {
      EXPECT_LE(testing::ScaledError(got->outputs.at(name), t), 1e-6) << name;
    }
  }
  return after;
}

TEST(Passes, ConstantFolding) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[3]  const a: f32[3] = [1, 2, 3]  const b: f32[3] = [1, 1, 1]
    c = Add(a, b)  d = Mul(c, c)  y = Add(x, d)
    output y })",
                          FoldConstants, &n);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Add"}));
}

TEST(Passes, DeadCodeElimination) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[3]  const unused: f32[3] = [1, 2, 3]
    a = Relu(x)  dead1 = Exp(x)  dead2 = Neg(dead1)  y = Sigmoid(a)
    output y })",
                          EliminateDeadCode, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Relu", "Sigmoid"}));
  EXPECT_EQ(n, 3);  // two nodes and one constant
}

TEST(Passes, CommonSubexpressionElimination) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[3]  const c1: f32[] = [2]  const c2: f32[] = [2]
    a = Mul(x, c1)  b = Mul(x, c2)  e1 = Exp(a)  e2 = Exp(b)  y = Add(e1, e2)
    output y })",
                          EliminateCommonSubexpressions, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Mul", "Exp", "Add"}));
}

TEST(Passes, CseKeepsDifferentAttributesApart) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[2, 3]
    a = Softmax(x) {axis=0}  b = Softmax(x) {axis=1}  y = Add(a, b)
    output y })",
                          EliminateCommonSubexpressions, &n);
  EXPECT_EQ(g.nodes.size(), 3u);
}

TEST(Passes, IdentityAndDropoutRemoval) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[2, 3]  const s: i64[2] = [2, 3]
    a = Identity(x)  b = Dropout(a)  c = Relu(b)  d = Reshape(c, s)  e = Cast(d) {to=1}
    t = Transpose(e) {perm=[0, 1]}  y = Sigmoid(t)
    output y })",
                          RemoveIdentities, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Relu", "Sigmoid"}));
  EXPECT_EQ(n, 5);
}

TEST(Passes, IdentityProducingAnOutputKeepsTheOutputName) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[3]  a = Relu(x)  y = Identity(a)
    output y })",
                          RemoveIdentities, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Relu"}));
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
}

TEST(Passes, ConsecutiveTransposesMerge) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[2, 3, 4]
    a = Transpose(x) {perm=[1, 0, 2]}  b = Transpose(a) {perm=[0, 2, 1]}  y = Relu(b)
    output y })",
                          CanonicalizeTransposeReshape, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Transpose", "Relu"}));
  EXPECT_EQ(g.nodes[0].attrs.GetInts("perm").value(), (std::vector<int64_t>{1, 2, 0}));
}

TEST(Passes, InverseTransposesVanish) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[2, 3, 4]
    a = Transpose(x) {perm=[0, 2, 1]}  b = Transpose(a) {perm=[0, 2, 1]}  y = Relu(b)
    output y })",
                          CanonicalizeTransposeReshape, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Relu"}));
}

TEST(Passes, ReshapeChainsAndViewsBecomeOneReshape) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g opset 13 {
    input x: f32[2, 3, 4]  const s1: i64[2] = [6, 4]  const ax: i64[1] = [0]
    a = Reshape(x, s1)  b = Unsqueeze(a, ax)  c = Flatten(b) {axis=2}  y = Relu(c)
    output y })",
                          CanonicalizeTransposeReshape, &n);
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Reshape", "Relu"}));
  EXPECT_EQ(g.type(g.nodes[0].outputs[0]).dims, (Dims{6, 4}));
}

TEST(Passes, ConstantGemmWeightsArePretransposed) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[2, 3]  const w: f32[4, 3] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    const bias: f32[4] = [1, -1, 2, -2]
    y = Gemm(x, w, bias) {transB=1}  z = Gemm(x, w) {transB=1, alpha=0.5}
    output y  output z })",
                          PretransposeGemmWeights, &n);
  EXPECT_EQ(n, 2);
  for (const Node& node : g.nodes) {
    EXPECT_EQ(node.attrs.GetInt("transB", 0).value(), 0);
    EXPECT_EQ(g.type(node.inputs[1]).dims, (Dims{3, 4}));
  }
  EXPECT_EQ(g.nodes[0].inputs[1], g.nodes[1].inputs[1]);  // one copy of the shared weight
  const Tensor& wt = *g.value(g.nodes[0].inputs[1]).constant;
  EXPECT_EQ(wt.data<float>()[1], 4.0f);  // w[1][0]
}

TEST(Passes, GemmWithAnActivationAsBKeepsItsTranspose) {
  int n = 0;
  Graph g = ApplyAndCheck(R"(graph g {
    input x: f32[2, 3]  input w: f32[4, 3]
    y = Gemm(x, w) {transB=1}
    output y })",
                          PretransposeGemmWeights, &n);
  EXPECT_EQ(n, 0);
  EXPECT_EQ(g.nodes[0].attrs.GetInt("transB", 0).value(), 1);
}

TEST(Passes, StandardPipelineReachesAFixedPoint) {
  Graph g = Parse(R"(graph g {
    input x: f32[2, 3]  const a: f32[] = [1]  const b: f32[] = [1]
    k = Add(a, b)  i = Identity(x)  m1 = Mul(i, k)  m2 = Mul(i, k)  t1 = Transpose(m1) {perm=[1, 0]}
    t2 = Transpose(t1) {perm=[1, 0]}  y = Add(t2, m2)  unused = Exp(x)
    output y })");
  ASSERT_TRUE(RunStandardPasses(g).ok());
  EXPECT_EQ(OpTypes(g), (std::vector<std::string>{"Mul", "Add"}));
}

}  // namespace
}  // namespace fusetune::graph
