#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "graph/analysis.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "graph/workload_key.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::Parse;

WorkloadKey KeyOf(const std::string& text) { return CanonicalizeGraph(Parse(text)).key; }

const char* kBlock = R"(graph g {
  input x: f32[4, 8]  const w: f32[8, 8]  const b: f32[8]
  h = MatMul(x, w)  y = Add(h, b)  r = Relu(y)
  output r })";

TEST(WorkloadKey, IgnoresNamesAndWeightValues) {
  const WorkloadKey a = KeyOf(kBlock);
  const WorkloadKey renamed = KeyOf(R"(graph other {
    input input0: f32[4, 8]  const weight: f32[8, 8]  const bias: f32[8]
    t0 = MatMul(input0, weight)  t1 = Add(t0, bias)  t2 = Relu(t1)
    output t2 })");
  EXPECT_EQ(a, renamed);  // different names and (seeded from names) different weight values
}

TEST(WorkloadKey, DependsOnShapeOpAttributeAndStructure) {
  const WorkloadKey base = KeyOf(kBlock);
  EXPECT_NE(base, KeyOf(R"(graph g { input x: f32[5, 8]  const w: f32[8, 8]  const b: f32[8]
    h = MatMul(x, w)  y = Add(h, b)  r = Relu(y)  output r })"));
  EXPECT_NE(base, KeyOf(R"(graph g { input x: f32[4, 8]  const w: f32[8, 8]  const b: f32[8]
    h = MatMul(x, w)  y = Add(h, b)  r = Sigmoid(y)  output r })"));
  EXPECT_NE(base, KeyOf(R"(graph g { input x: f32[4, 8]  const w: f32[8, 8]  const b: f32[8]
    h = MatMul(x, w)  y = Add(b, h)  r = Relu(y)  output r })"));  // operand order is structure
  EXPECT_NE(KeyOf("graph g { input x: f32[2, 3]  y = Softmax(x) {axis=0}  output y }"),
            KeyOf("graph g { input x: f32[2, 3]  y = Softmax(x) {axis=1}  output y }"));
  EXPECT_NE(KeyOf("graph g { input x: f32[3]  input z: f32[3]  y = Add(x, z)  output y }"),
            KeyOf("graph g { input x: f32[3]  input z: f32[3]  y = Add(x, x)  output y }"));
}

WorkloadKey StructureKeyOf(const std::string& text) {
  return CanonicalizeGraph(Parse(text), KeyScope::kStructure).key;
}

TEST(WorkloadKey, StructureKeyIgnoresDimensionsAndShapeConstantsOnly) {
  const char* seq8 =
      R"(graph g { input x: f32[8, 16]  const w: f32[16, 16]  const s: i64[3] = [8, 4, 4]
    h = MatMul(x, w)  r = Reshape(h, s)  output r })";
  const char* seq32 =
      R"(graph g { input x: f32[32, 16]  const w: f32[16, 16]  const s: i64[3] = [32, 4, 4]
    h = MatMul(x, w)  r = Reshape(h, s)  output r })";
  EXPECT_NE(KeyOf(seq8), KeyOf(seq32));
  EXPECT_EQ(StructureKeyOf(seq8), StructureKeyOf(seq32));
  EXPECT_NE(StructureKeyOf(seq8), KeyOf(seq8));  // the scopes never collide
  // Ops, attributes, ranks and small float constants still count.
  EXPECT_NE(StructureKeyOf("graph g { input x: f32[2, 3]  y = Softmax(x) {axis=0}  output y }"),
            StructureKeyOf("graph g { input x: f32[2, 3]  y = Softmax(x) {axis=1}  output y }"));
  EXPECT_NE(StructureKeyOf("graph g { input x: f32[2, 3]  y = Relu(x)  output y }"),
            StructureKeyOf("graph g { input x: f32[6]  y = Relu(x)  output y }"));
  EXPECT_NE(StructureKeyOf(
                "graph g { input x: f32[3]  const e: f32[] = [1e-5]  y = Add(x, e)  output y }"),
            StructureKeyOf(
                "graph g { input x: f32[3]  const e: f32[] = [1e-6]  y = Add(x, e)  output y }"));
  // Signatures of one structure align dimension by dimension.
  const Graph a = Parse(seq8), b = Parse(seq32);
  const auto sa = ShapeSignature(a, CanonicalizeGraph(a).node_order);
  const auto sb = ShapeSignature(b, CanonicalizeGraph(b).node_order);
  EXPECT_EQ(sa, (std::vector<int64_t>{8, 16, 8, 4, 4}));
  EXPECT_EQ(sb, (std::vector<int64_t>{32, 16, 32, 4, 4}));
}

TEST(WorkloadKey, KeysFromPrecomputedUsesEqualKeysFromScanningTheGraph) {
  Graph g = Parse(R"(graph g { input x: f32[4, 8]  const w: f32[8, 8]  const b: f32[8]
    h = MatMul(x, w)  y = Add(h, b)  r = Relu(y)  s = Sigmoid(y)  z = Mul(r, s)  t = Tanh(h)
    output z  output t })");
  const ValueUses uses = g.Consumers();
  const int n = static_cast<int>(g.nodes.size());
  for (int mask = 1; mask < (1 << n); ++mask) {  // every subset
    std::vector<int32_t> nodes;
    for (int i = 0; i < n; ++i)
      if (mask & (1 << i)) nodes.push_back(i);
    EXPECT_EQ(ComputeWorkloadKey(g, nodes), ComputeWorkloadKey(g, nodes, &uses)) << mask;
  }
}

TEST(WorkloadKey, SemanticConstantsCountByValue) {
  EXPECT_NE(KeyOf("graph g { input x: f32[3]  const e: f32[] = [1e-5]  y = Add(x, e)  output y }"),
            KeyOf("graph g { input x: f32[3]  const e: f32[] = [1e-6]  y = Add(x, e)  output y }"));
}

TEST(WorkloadKey, IndependentOfNodeOrderInTheFile) {
  const WorkloadKey a = KeyOf(R"(graph g { input x: f32[4]
    a = Relu(x)  b = Exp(x)  c = Add(a, b)  output c })");
  const WorkloadKey b = KeyOf(R"(graph g { input x: f32[4]
    b = Exp(x)  a = Relu(x)  c = Add(a, b)  output c })");
  EXPECT_EQ(a, b);
}

TEST(WorkloadKey, CanonicalOrderMapsPositionsAcrossExports) {
  Graph g1 =
      Parse(R"(graph g { input x: f32[4]  a = Relu(x)  b = Exp(x)  c = Add(a, b)  output c })");
  Graph g2 =
      Parse(R"(graph g { input x: f32[4]  b = Exp(x)  a = Relu(x)  c = Add(a, b)  output c })");
  const auto c1 = CanonicalizeGraph(g1), c2 = CanonicalizeGraph(g2);
  ASSERT_EQ(c1.node_order.size(), c2.node_order.size());
  for (size_t i = 0; i < c1.node_order.size(); ++i)
    EXPECT_EQ(g1.nodes[c1.node_order[i]].op_type, g2.nodes[c2.node_order[i]].op_type)
        << "position " << i;
}

TEST(WorkloadKey, RepeatedLayersShareOneKey) {
  auto g = ImportOnnxFile(testing::TestData("encoder_3layer_op13.onnx"));
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  ASSERT_TRUE(RunStandardPasses(*g).ok());
  const LayerStructure layers = FindLayers(*g);
  ASSERT_EQ(layers.layers.size(), 1u);
  EXPECT_EQ(layers.layers[0].count, 3);
  std::vector<WorkloadKey> keys;
  for (const auto& inst : layers.layers[0].instances) keys.push_back(ComputeWorkloadKey(*g, inst));
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_EQ(keys[1], keys[2]);
  // The single-layer export of the same layer at the same shape has the same key.
  auto one = ImportOnnxFile(testing::TestData("encoder_postln_op13.onnx"));
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(RunStandardPasses(*one).ok());
  EXPECT_EQ(CanonicalizeGraph(*one).key, keys[0]);
}

TEST(WorkloadKey, SubgraphKeysDependOnWhatLeavesTheGroup) {
  Graph g =
      Parse(R"(graph g { input x: f32[4]  a = Relu(x)  b = Exp(a)  c = Add(a, b)  output c })");
  const std::vector<int32_t> ab{0, 1};
  Graph g2 =
      Parse(R"(graph g { input x: f32[4]  a = Relu(x)  b = Exp(a)  c = Add(b, b)  output c })");
  EXPECT_NE(ComputeWorkloadKey(g, ab), ComputeWorkloadKey(g2, ab));  // 'a' escapes in g only
}

TEST(WorkloadKey, OrderedSubsetHashesMatchRepeatedChainsAndTellConstantsApart) {
  // Two erf-GELU chains after two inputs, and one with another constant.
  const Graph g = Parse(R"(graph g {
    input a: f32[4, 8]  input b: f32[4, 8]  const s: f32[] = [1.4142135]  const h: f32[] = [0.5]
    const one: f32[] = [1]  const s2: f32[] = [2]
    d1 = Div(a, s)  e1 = Erf(d1)  p1 = Add(e1, one)  m1 = Mul(a, p1)  y1 = Mul(m1, h)
    d2 = Div(b, s)  e2 = Erf(d2)  p2 = Add(e2, one)  m2 = Mul(b, p2)  y2 = Mul(m2, h)
    d3 = Div(b, s2)  e3 = Erf(d3)  p3 = Add(e3, one)  m3 = Mul(b, p3)  y3 = Mul(m3, h)
    output y1  output y2  output y3 })");
  const std::vector<int32_t> first{0, 1, 2, 3, 4}, second{5, 6, 7, 8, 9}, third{10, 11, 12, 13, 14};
  const ValueId a = g.inputs[0], b = g.inputs[1];
  EXPECT_EQ(OrderedSubsetHash(g, first, a), OrderedSubsetHash(g, second, b));
  EXPECT_NE(OrderedSubsetHash(g, second, b), OrderedSubsetHash(g, third, b));  // 2 vs sqrt(2)
  EXPECT_NE(OrderedSubsetHash(g, first, a), OrderedSubsetHash(g, first, kNoValue));
}

}  // namespace
}  // namespace fusetune::graph
