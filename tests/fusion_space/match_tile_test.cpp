// Matching node groups to the row-reduction and elementwise templates, on
// chains as PyTorch exports them; a matched program is run by the row kernel
// and compared with the reference executor.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

#include "common/rng.h"
#include "fusion_space/match.h"
#include "fusion_space/match_tile.h"
#include "graph/passes.h"
#include "kernels/rowwise.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

std::vector<int32_t> AllNodes(const graph::Graph& g) {
  std::vector<int32_t> nodes(g.nodes.size());
  std::iota(nodes.begin(), nodes.end(), 0);
  return nodes;
}

// LayerNorm as PyTorch exports it at opset 13, after a residual add.
const char* kDecomposedLayerNorm =
    "graph g opset 13 { input x: f32[6, 40]  input r: f32[6, 40]  input gamma: f32[40]"
    "  input beta: f32[40]\n"
    "two = Constant() {value=f32[] [2]}  eps = Constant() {value=f32[] [1e-5]}\n"
    "s = Add(x, r)  m = ReduceMean(s) {axes=[-1], keepdims=1}  d = Sub(s, m)  p = Pow(d, two)\n"
    "v = ReduceMean(p) {axes=[-1], keepdims=1}  ve = Add(v, eps)  sd = Sqrt(ve)  n = Div(d, sd)\n"
    "g1 = Mul(n, gamma)  y = Add(g1, beta)  output y  output s }";

TEST(MatchTile, DecomposedLayerNormIsOneRowProgram) {
  graph::Graph g = testing::Parse(kDecomposedLayerNorm, /*fold=*/true);
  Dataflow flow(g);
  const std::vector<int32_t> nodes = AllNodes(g);
  const TileGroupMatch m = MatchTileGroup(g, flow, nodes);
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.kind, TileTemplate::kRowwise);
  EXPECT_EQ(m.row_length, 40);
  ASSERT_EQ(m.inputs.size(), 4u);   // x, r, gamma, beta; the scalars became constants
  ASSERT_EQ(m.outputs.size(), 2u);  // s (a graph output) and y

  // Run the matched program on the row kernel and compare with the reference.
  Rng rng(3);
  graph::TensorMap feeds = graph::RandomFeeds(g, 3);
  std::vector<kernels::RowOperand> operands;
  for (graph::ValueId v : m.inputs) {
    const graph::Tensor& t = feeds.at(g.value(v).name);
    const bool row = t.dims().size() == 2;
    operands.push_back({t.data<float>(), {row ? 40 : 0}, 1});
  }
  std::vector<std::vector<float>> outs(2, std::vector<float>(6 * 40));
  kernels::RowwiseDesc d;
  d.row_dims = {6};
  d.cols = 40;
  d.inputs = operands;
  d.outputs = {{outs[0].data(), {40}, 1}, {outs[1].data(), {40}, 1}};
  d.program = m.pieces[0].program;
  ASSERT_TRUE(kernels::RunRowwise(d, kernels::RowwiseTiling(), kernels::KernelConfig()).ok());
  auto want = graph::RunReference(g, feeds);
  ASSERT_TRUE(want.ok());
  for (size_t o = 0; o < 2; ++o)
    EXPECT_LE(testing::ScaledError(testing::F32({6, 40}, outs[o]),
                                   want->outputs.at(g.value(m.outputs[o]).name)),
              1e-5);
}

TEST(MatchTile, ScaledMaskedSoftmaxAndDecomposedGelu) {
  graph::Graph g = testing::Parse(
      "graph g opset 13 { input s: f32[2, 8, 8]  input mask: f32[8, 8]\n"
      "c = Constant() {value=f32[] [8]}  q = Div(s, c)  z = Add(q, mask)"
      "  p = Softmax(z) {axis=-1}  output p }",
      true);
  Dataflow flow(g);
  TileGroupMatch m = MatchTileGroup(g, flow, AllNodes(g));
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.kind, TileTemplate::kRowwise);
  graph::Graph gelu = testing::Parse(
      "graph g opset 13 { input x: f32[4, 16]  input b: f32[16]\n"
      "r2 = Constant() {value=f32[] [1.41421354]}  one = Constant() {value=f32[] [1]}"
      "  half = Constant() {value=f32[] [0.5]}\n"
      "v = Add(x, b)  q = Div(v, r2)  e = Erf(q)  e1 = Add(e, one)  m = Mul(v, e1)"
      "  y = Mul(m, half)  output y }",
      true);
  Dataflow gf(gelu);
  m = MatchTileGroup(gelu, gf, AllNodes(gelu));
  ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
  EXPECT_EQ(m.kind, TileTemplate::kElementwise);
  EXPECT_EQ(m.inputs.size(), 2u);
}

TEST(MatchTile, ForbiddenGroupsSayWhy) {
  graph::Graph g = testing::Parse(
      "graph g opset 13 { input x: f32[4, 16]  input w: f32[16, 8]\n"
      "a = ReduceSum(x) {axes=[0], keepdims=1}  b = Add(x, a)  mm = MatMul(b, w)"
      "  r = Relu(mm)  s = ReduceMean(r) {axes=[-1], keepdims=1}  t = Sub(x, a)"
      "  u = ReduceMax(t) {axes=[-1], keepdims=1}  v = Add(u, s)  output v }",
      true);
  Dataflow flow(g);
  auto reason = [&](std::vector<int32_t> nodes) {
    return MatchTileGroup(g, flow, nodes).decision.reason();
  };
  EXPECT_NE(reason({0, 1}).find("reduces axis 0"), std::string::npos) << reason({0, 1});
  EXPECT_NE(reason({2, 3}).find("(MatMul) is neither elementwise"), std::string::npos);
  EXPECT_NE(reason({4, 6, 7}).find("reduction axis differs"), std::string::npos)
      << reason({4, 6, 7});
  EXPECT_NE(reason({1, 3}).find("not convex"), std::string::npos) << reason({1, 3});
}

// A BatchNormalization after a pool or a Relu (1-D and 2-D) is lowered by
// the standard passes to Mul and Add by per-channel constants, which join
// the Relus around them in one elementwise kernel.
TEST(MatchTile, LoweredBatchNormJoinsAnElementwiseKernel) {
  graph::Graph g = testing::Parse(R"(graph g opset 17 {
    input x: f32[2, 4, 8, 8]  input t: f32[2, 4, 11]
    const s: f32[4] = [1, 2, 0.5, 1.5]  const b: f32[4]  const m: f32[4]
    const v: f32[4] = [1, 4, 0.5, 2]
    p = MaxPool(x) {kernel_shape=[2, 2], strides=[2, 2]}
    n = BatchNormalization(p, s, b, m, v)
    y = Relu(n)
    u = Relu(t)
    n1 = BatchNormalization(u, s, b, m, v)
    z = Relu(n1)
    output y  output z })");
  ASSERT_TRUE(graph::RunStandardPasses(g).ok());
  std::vector<int32_t> image, signal;  // the nodes after the pool, and the 1-D chain
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    const std::string& op = g.nodes[i].op_type;
    ASSERT_NE(op, "BatchNormalization");
    if (op == "MaxPool") continue;
    (g.type(g.nodes[i].outputs[0]).rank() == 4 ? image : signal).push_back(i);
  }
  ASSERT_EQ(image.size(), 3u);   // Mul, Add, Relu
  ASSERT_EQ(signal.size(), 4u);  // Relu, Mul, Add, Relu
  Dataflow flow(g);
  for (const auto& group : {image, signal}) {
    const GroupMatch m = MatchGroup(g, flow, group);
    ASSERT_TRUE(m.decision.allowed()) << m.decision.reason();
    EXPECT_EQ(m.instance.kind, KernelTemplate::kElementwise) << m.instance.summary;
    EXPECT_EQ(m.instance.outputs.size(), 1u);
  }
}

// RMSNorm as PyTorch exports it, on one row (a decode step's [1, 1, d]) and
// on several: one row program either way.
TEST(MatchTile, RmsNormOnOneRowIsARowProgram) {
  for (const char* rows : {"1, 1", "1, 3"}) {
    graph::Graph g = testing::Parse(fmt::format(R"(graph g opset 17 {{
      input x: f32[{}, 64]  input w: f32[64]
      const two: f32[] = [2]  const eps: f32[] = [1e-6]  const one: f32[] = [1]
      p = Pow(x, two)  m = ReduceMean(p) {{axes=[-1], keepdims=1}}  a = Add(m, eps)
      s = Sqrt(a)  r = Div(one, s)  n = Mul(x, r)  y = Mul(n, w)
      output y }})", rows));
    ASSERT_TRUE(graph::RunStandardPasses(g).ok());
    Dataflow flow(g);
    const GroupMatch m = MatchGroup(g, flow, AllNodes(g));
    ASSERT_TRUE(m.decision.allowed()) << rows << ": " << m.decision.reason();
    EXPECT_EQ(m.instance.kind, KernelTemplate::kRowwise) << m.instance.summary;
  }
}

}  // namespace
}  // namespace fusetune::fusion_space
