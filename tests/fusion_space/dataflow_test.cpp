// Convexity of node groups on small graphs whose answer is known by hand.
#include <gtest/gtest.h>

#include <set>

#include "fusion_space/dataflow.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

// a -> b -> d, a -> c -> d (a diamond), then e after d.
graph::Graph Diamond() {
  return testing::Parse(
      "graph g opset 17 { input x: f32[4]\n"
      "a = Relu(x)  b = Exp(a)  c = Neg(a)  d = Add(b, c)  e = Sigmoid(d)  output e }");
}

TEST(Dataflow, ProducersAndConsumers) {
  graph::Graph g = Diamond();
  Dataflow flow(g);
  ASSERT_EQ(flow.num_nodes(), 5);
  auto list = [](std::span<const int32_t> s) { return std::vector<int32_t>(s.begin(), s.end()); };
  EXPECT_EQ(list(flow.consumers(0)), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(list(flow.producers(3)), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(flow.producers(0).empty());
}

// The flat lists against the definitions, on every test model: a value's
// uses by node then slot; a node's distinct producers and consumers, ascending.
TEST(Dataflow, ListsMatchTheirDefinitionsOnEveryModel) {
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    const graph::Graph g = testing::LoadTestModel(model);
    const Dataflow flow(g);
    const auto n = static_cast<int32_t>(g.nodes.size());
    std::vector<std::vector<std::pair<int32_t, int32_t>>> uses(g.values.size());
    std::vector<std::set<int32_t>> producers(n), consumers(n);
    for (int32_t i = 0; i < n; ++i)
      for (int32_t s = 0; s < static_cast<int32_t>(g.nodes[i].inputs.size()); ++s) {
        const graph::ValueId v = g.nodes[i].inputs[s];
        if (v == graph::kNoValue) continue;
        uses[v].emplace_back(i, s);
        if (const int32_t p = g.value(v).producer; p >= 0) {
          producers[i].insert(p);
          consumers[p].insert(i);
        }
      }
    for (size_t v = 0; v < g.values.size(); ++v) {
      const auto got = flow.uses(static_cast<graph::ValueId>(v));
      const std::vector<std::pair<int32_t, int32_t>> listed(got.begin(), got.end());
      EXPECT_EQ(listed, uses[v]);
    }
    for (int32_t i = 0; i < n; ++i) {
      const auto p = flow.producers(i), c = flow.consumers(i);
      EXPECT_EQ(std::vector<int32_t>(p.begin(), p.end()),
                std::vector<int32_t>(producers[i].begin(), producers[i].end()));
      EXPECT_EQ(std::vector<int32_t>(c.begin(), c.end()),
                std::vector<int32_t>(consumers[i].begin(), consumers[i].end()));
    }
  }
}

TEST(Dataflow, ConvexGroups) {
  graph::Graph g = Diamond();
  Dataflow flow(g);
  for (std::vector<int32_t> group :
       {std::vector<int32_t>{0}, {1, 2}, {0, 1, 2, 3}, {3, 4}, {0, 1, 2, 3, 4}, {1, 3}, {0, 1}})
    EXPECT_TRUE(flow.CheckConvex(group).allowed()) << ::testing::PrintToString(group);
}

TEST(Dataflow, NonConvexGroupsSayWhy) {
  graph::Graph g = Diamond();
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
}  // namespace fusetune::fusion_space
