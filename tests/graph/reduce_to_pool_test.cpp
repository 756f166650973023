// ReduceToGlobalPool (reduce_to_pool.cpp): a mean or max over every spatial
// axis becomes a global pool (and a Flatten without keepdims) that computes
// the same on the reference executor, for 2-D inputs and 1-D conv outputs (not
// [B, S, D]: an RMSNorm's mean stays a reduction), axes as an
// attribute or (opset 18) an input, negative axes; reductions over other
// axes stay reductions.
#include <gtest/gtest.h>

#include <string>

#include "graph/passes.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

struct ReduceCase {
  std::string text;  // the graph
  std::string pool;  // the pool it becomes, "" for none
  bool flatten = false;
};

class ReduceToGlobalPoolCase : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ReduceToGlobalPoolCase, RewritesExactlyTheSpatialReductions) {
  const ReduceCase& c = GetParam();
  const Graph before = testing::Parse(c.text);
  Graph after = before;
  auto rewritten = ReduceToGlobalPool(after);
  ASSERT_TRUE(rewritten.ok()) << rewritten.error().ToString();
  ASSERT_TRUE(after.Validate().ok());
  EXPECT_EQ(*rewritten, c.pool.empty() ? 0 : 1);
  if (!c.pool.empty()) {
    EXPECT_EQ(testing::CountOps(after, c.pool), 1);
    EXPECT_EQ(testing::CountOps(after, "Flatten"), c.flatten ? 1 : 0);
    EXPECT_EQ(testing::CountOps(after, "ReduceMean") + testing::CountOps(after, "ReduceMax"), 0);
  }
  EXPECT_EQ(after.type(after.outputs[0]).dims, before.type(before.outputs[0]).dims);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const TensorMap feeds = RandomFeeds(before, seed);
    EXPECT_LE(
        testing::ScaledError(testing::RunFirst(after, feeds), testing::RunFirst(before, feeds)),
        1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ReduceToGlobalPoolCase,
                         ::testing::Values(ReduceCase{R"(graph g opset 13 {
          input x: f32[2, 6, 5, 7]
          y = ReduceMean(x) {axes=[2, 3], keepdims=0}
          output y
        })",
                                                      "GlobalAveragePool", true},
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[2, 6, 5, 7]
          y = ReduceMean(x) {axes=[-1, -2]}
          output y
        })",
                                                      "GlobalAveragePool", false},
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[2, 3, 4, 4]
          y = ReduceMax(x) {axes=[2, 3], keepdims=0}
          output y
        })",
                                                      "GlobalMaxPool", true},
                                           // [B, S, D] over D: an RMSNorm's mean, left
                                           // to the row-reduction template.
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[1, 4, 9]
          const two: f32[] = [2]
          p = Pow(x, two)
          y = ReduceMean(p) {axes=[2], keepdims=1}
          output y
        })",
                                                      "", false},
                                           // A 1-D conv's feature map over its length: a pool.
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[1, 3, 9]
          const w: f32[4, 3, 3]
          c = Conv(x, w) {pads=[1, 1]}
          r = Relu(c)
          y = ReduceMax(r) {axes=[2], keepdims=0}
          output y
        })",
                                                      "GlobalMaxPool", true},
                                           ReduceCase{R"(graph g opset 18 {
          input x: f32[2, 3, 4, 4]
          const axes: i64[2] = [2, 3]
          y = ReduceMean(x, axes) {keepdims=1}
          output y
        })",
                                                      "GlobalAveragePool", false},
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[2, 6, 5, 7]
          y = ReduceMean(x) {axes=[1, 2, 3], keepdims=0}
          output y
        })",
                                                      "", false},
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[2, 6, 5, 7]
          y = ReduceMean(x) {axes=[3]}
          output y
        })",
                                                      "", false},
                                           ReduceCase{R"(graph g opset 13 {
          input x: f32[6, 7]
          y = ReduceMean(x) {axes=[1]}
          output y
        })",
                                                      "", false}));

// In the standard passes a CNN head's mean then feeds the classifier as
// PyTorch's `x.mean((2, 3))` exports it, and the pooled graph computes the same.
TEST(ReduceToGlobalPool, StandardPassesPoolACnnHead) {
  Graph g = testing::Parse(R"(graph head opset 13 {
    input x: f32[1, 8, 6, 6]
    const w: f32[8, 10]
    r = Relu(x)
    m = ReduceMean(r) {axes=[2, 3], keepdims=0}
    y = MatMul(m, w)
    output y
  })");
  const Graph before = g;
  ASSERT_TRUE(RunStandardPasses(g).ok());
  EXPECT_EQ(testing::CountOps(g, "GlobalAveragePool"), 1);
  EXPECT_EQ(testing::CountOps(g, "ReduceMean"), 0);
  const TensorMap feeds = RandomFeeds(before, 4);
  EXPECT_LE(testing::ScaledError(testing::RunFirst(g, feeds), testing::RunFirst(before, feeds)),
            1e-6);
}

}  // namespace
}  // namespace fusetune::graph
