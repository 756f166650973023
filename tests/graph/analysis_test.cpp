#include <gtest/gtest.h>

#include "graph/analysis.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

TEST(Analysis, FlopsAndBytesPerNode) {
  Graph g = testing::Parse(R"(graph g {
    input x: f32[4, 8]  const w: f32[8, 16]  const b: f32[16]
    h = MatMul(x, w)  y = Add(h, b)  output y })");
  const NodeCost mm = ComputeNodeCost(g, 0);
  EXPECT_DOUBLE_EQ(mm.flops, 2.0 * 4 * 8 * 16);
  EXPECT_DOUBLE_EQ(mm.bytes_read, 4.0 * (4 * 8 + 8 * 16));
  EXPECT_DOUBLE_EQ(mm.bytes_written, 4.0 * 4 * 16);
  const GraphSummary s = SummarizeGraph(g);
  EXPECT_EQ(s.parameters, 8 * 16 + 16);
  EXPECT_EQ(s.by_op_type.at("MatMul").count, 1);
  EXPECT_DOUBLE_EQ(s.flops, 2.0 * 4 * 8 * 16 + 4 * 16);
}

TEST(Analysis, FindsRepeatedBlocksInATextGraph) {
  Graph g = testing::Parse(R"(graph g {
    input x: f32[4, 8]  const w1: f32[8, 8]  const w2: f32[8, 8]  const w3: f32[8, 8]
    a1 = MatMul(x, w1)  r1 = Relu(a1)  s1 = Add(r1, x)
    a2 = MatMul(s1, w2)  r2 = Relu(a2)  s2 = Add(r2, s1)
    a3 = MatMul(s2, w3)  r3 = Relu(a3)  s3 = Add(r3, s2)
    out = Sigmoid(s3)
    output out })");
  const LayerStructure layers = FindLayers(g);
  ASSERT_EQ(layers.layers.size(), 1u);
  EXPECT_EQ(layers.layers[0].count, 3);
  EXPECT_EQ(layers.layers[0].instances[0].size(), 3u);
}

}  // namespace
}  // namespace fusetune::graph
