// Convexity of node groups on small graphs whose answer is known by hand.
#include <gtest/gtest.h>

#include "fusion_space/dataflow.h"
#include "tests/graph/test_util.h"

namespace fusetune {
namespace {

// a -> b -> d, a -> c -> d (a diamond), then e after d.
Graph Diamond() {
  return testing::Parse(
      "graph g opset 17 { input x: f32[4]\n"
      "a = Relu(x)  b = Exp(a)  c = Neg(a)  d = Add(b, c)  e = Sigmoid(d)  output e }");
}

TEST(Dataflow, ProducersAndConsumers) {
  Graph g = Diamond();
  Dataflow flow(g);
  ASSERT_EQ(flow.num_nodes(), 5);
  auto list = [](std::span<const int32_t> s) { return std::vector<int32_t>(s.begin(), s.end()); };
  EXPECT_EQ(list(flow.consumers(0)), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(list(flow.producers(3)), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(flow.producers(0).empty());
}

TEST(Dataflow, ConvexGroups) {
  Graph g = Diamond();
  Dataflow flow(g);
  for (std::vector<int32_t> group :
       {std::vector<int32_t>{0}, {1, 2}, {0, 1, 2, 3}, {3, 4}, {0, 1, 2, 3, 4}, {1, 3}, {0, 1}})
    EXPECT_TRUE(flow.CheckConvex(group).allowed()) << ::testing::PrintToString(group);
}

TEST(Dataflow, NonConvexGroupsSayWhy) {
  Graph g = Diamond();
  Dataflow flow(g);
  const FusionDecision skip_middle = flow.CheckConvex(std::vector<int32_t>{0, 3});
  EXPECT_FALSE(skip_middle.allowed());
  EXPECT_NE(skip_middle.reason().find("not convex"), std::string::npos) << skip_middle.reason();
  const FusionDecision one_side = flow.CheckConvex(std::vector<int32_t>{0, 1, 3});
  EXPECT_FALSE(one_side.allowed());
  EXPECT_NE(one_side.reason().find("node 2 (Neg)"), std::string::npos) << one_side.reason();
  EXPECT_FALSE(flow.CheckConvex(std::vector<int32_t>{0, 4}).allowed());
  EXPECT_EQ(flow.CheckConvex(std::vector<int32_t>{0, 4}).ToString().rfind("forbidden: ", 0), 0u);
}

}  // namespace
}  // namespace fusetune
