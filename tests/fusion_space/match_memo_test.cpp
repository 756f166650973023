// The match memo against matching from scratch: a translated match must be
// the match (Halide's test_caching, for fusion legality), and groups whose
// surroundings or read-by-value constants differ must not be translated.
#include <gtest/gtest.h>

#include "fusion_space/match_memo.h"
#include "fusion_space/space.h"
#include "graph/text_format.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::fusion_space {
namespace {

// Everything of two matches that the rest of the system reads: the decision,
// the ids, and (through the analytical estimate of every tiling) the shapes
// and strides of the descriptor.
void ExpectSameMatch(const GroupMatch& got, const GroupMatch& want, const std::string& where) {
  ASSERT_EQ(got.decision.allowed(), want.decision.allowed()) << where;
  if (!want.decision.allowed()) return;
  const KernelInstance& a = got.instance;
  const KernelInstance& b = want.instance;
  EXPECT_EQ(a.kind, b.kind) << where;
  EXPECT_EQ(a.nodes, b.nodes) << where;
  EXPECT_EQ(a.inputs, b.inputs) << where;
  EXPECT_EQ(a.outputs, b.outputs) << where;
  EXPECT_EQ(a.summary, b.summary) << where;
  ASSERT_EQ(a.slots.size(), b.slots.size()) << where;
  for (size_t i = 0; i < a.slots.size(); ++i) {
    EXPECT_EQ(a.slots[i].value, b.slots[i].value) << where << " slot " << i;
    EXPECT_EQ(a.slots[i].owned, b.slots[i].owned) << where << " slot " << i;
    EXPECT_EQ(a.slots[i].offset, b.slots[i].offset) << where << " slot " << i;
  }
  ASSERT_EQ(a.owned.size(), b.owned.size()) << where;
  for (size_t i = 0; i < a.owned.size(); ++i) EXPECT_TRUE(*a.owned[i] == *b.owned[i]) << where;
  const TilingSpace sa(a, testing::SmallKernelConfig()), sb(b, testing::SmallKernelConfig());
  ASSERT_EQ(sa.size(), sb.size()) << where;
  const std::vector<Tiling> tilings = sa.Enumerate();
  for (size_t i = 0; i < tilings.size(); i += 1 + tilings.size() / 16) {
    const auto ea = EstimateTiling(a, tilings[i], 2), eb = EstimateTiling(b, tilings[i], 2);
    EXPECT_EQ(ea.bytes_in, eb.bytes_in) << where;
    EXPECT_EQ(ea.bytes_out, eb.bytes_out) << where;
    EXPECT_EQ(ea.local_bytes, eb.local_bytes) << where;
    EXPECT_EQ(ea.steps, eb.steps) << where;
  }
}

TEST(MatchMemo, TranslatedMatchesEqualMatchesFromScratch) {
  size_t reused = 0;
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    FusionSpace space(g, testing::SmallKernelConfig());
    MatchMemo memo(g, space.flow());
    for (const CandidateGroup& c : space.candidates().groups) {
      const GroupMatch want = MatchGroup(g, space.flow(), c.nodes);
      std::string where = model + " group";
      for (int32_t n : c.nodes) where += " " + std::to_string(n);
      if (auto got = memo.Find(c.nodes)) {
        ExpectSameMatch(*got, want, where);
        ++reused;
      } else {
        GroupMatch added = want;
        memo.Add(c.nodes, &added);
        if (added.decision && added.instance.kind != KernelTemplate::kReference) {
          EXPECT_GE(added.structure, 0) << where;
        }
      }
      ExpectSameMatch(space.Match(c.nodes), want, where + " (space)");
    }
  }
  EXPECT_GT(reused, 100u) << "the repeated layers of encoder_3layer_op13 reuse matches";
}

// Groups given one structure id allow the same tilings (FusionSpace checks a
// tiling once per structure) and have the same boundary traffic.
TEST(MatchMemo, GroupsOfOneStructureAllowTheSameTilings) {
  const graph::Graph g = testing::LoadTestModel("encoder_3layer_op13");
  FusionSpace space(g, testing::SmallKernelConfig());
  std::map<int32_t, std::vector<int32_t>> first_of;  // structure -> its first group
  size_t shared = 0;
  for (const CandidateGroup& c : space.candidates().groups) {
    const GroupMatch& m = space.Match(c.nodes);
    if (m.structure < 0) continue;
    auto [it, first] = first_of.emplace(m.structure, c.nodes);
    if (first) continue;
    ++shared;
    const KernelInstance& a = space.Match(it->second).instance;
    EXPECT_EQ(space.GroupTraffic(c.nodes), space.GroupTraffic(it->second));
    // Legal tilings of either, and tilings of other groups of the same
    // template (mostly illegal here), get one verdict for both.
    std::vector<Tiling> tilings = space.Tilings(c.nodes).Enumerate();
    for (const auto& [s, nodes] : first_of)
      if (space.Match(nodes).instance.kind == a.kind)
        for (const Tiling& t : space.Tilings(nodes).Enumerate()) tilings.push_back(t);
    for (size_t i = 0; i < tilings.size(); i += 1 + tilings.size() / 64)
      EXPECT_EQ(CheckTiling(a, testing::SmallKernelConfig(), tilings[i]).allowed(),
                CheckTiling(m.instance, testing::SmallKernelConfig(), tilings[i]).allowed());
  }
  EXPECT_GT(shared, 50u) << "the three layers repeat their structures";
}

TEST(MatchMemo, NonConvexGroupsOfAKnownStructureStayForbidden) {
  // Every connected pair and triple of nodes: a translated match must agree
  // with the matcher, non-convex groups and forbidden ones included.
  graph::Graph g = testing::LoadTestModel("encoder_3layer_op13");
  const Dataflow flow(g);
  MatchMemo memo(g, flow);
  int translated = 0;
  for (int32_t a = 0; a < flow.num_nodes(); ++a)
    for (int32_t b : flow.consumers(a))
      for (int32_t c : flow.consumers(b))
        for (std::vector<int32_t> group : {std::vector<int32_t>{a, b}, {a, b, c}, {a, c}}) {
          std::sort(group.begin(), group.end());
          group.erase(std::unique(group.begin(), group.end()), group.end());
          const GroupMatch want = MatchGroup(g, flow, group);
          if (auto got = memo.Find(group)) {
            ExpectSameMatch(*got, want, "group");
            ++translated;
          } else {
            EXPECT_TRUE(memo.Find(group) == std::nullopt);
            GroupMatch added = want;
            memo.Add(group, &added);
          }
        }
  EXPECT_GT(translated, 50);
}

// Two chains of the same shape: y1 = x * 0.5 + 1 and y2 = x * s + 1.
graph::Graph TwoChains(const std::string& scale) {
  auto g = graph::ParseGraphText(
      "graph two opset 17 {\n"
      "  input x: f32[64, 128]\n"
      "  const half: f32[] = [0.5]\n"
      "  const s: f32[] = [" +
      scale +
      "]\n"
      "  const one: f32[] = [1]\n"
      "  a1 = Mul(x, half)\n"
      "  y1 = Add(a1, one)\n"
      "  a2 = Mul(x, s)\n"
      "  y2 = Add(a2, one)\n"
      "  output y1\n"
      "  output y2\n"
      "}");
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message());
  return g.ok() ? std::move(*g) : graph::Graph{};
}

TEST(MatchMemo, ConstantsReadWhileMatchingMustBeEqual) {
  for (const std::string scale : {"0.5", "3"}) {
    graph::Graph g = TwoChains(scale);
    const Dataflow flow(g);
    MatchMemo memo(g, flow);
    const std::vector<int32_t> first = {0, 1}, second = {2, 3};
    GroupMatch m = MatchGroup(g, flow, first);
    memo.Add(first, &m);
    auto got = memo.Find(second);
    EXPECT_EQ(got.has_value(), scale == "0.5") << "scale " << scale;
    if (got) ExpectSameMatch(*got, MatchGroup(g, flow, second), "second chain");
  }
}

TEST(MatchMemo, UsesOutsideTheGroupMustAgree) {
  // The same chain twice, but the second Mul's output is also a graph output:
  // its group must write it, so the match differs.
  auto g = graph::ParseGraphText(
      "graph uses opset 17 {\n"
      "  input x: f32[64, 128]\n"
      "  const one: f32[] = [1]\n"
      "  a1 = Relu(x)\n"
      "  y1 = Add(a1, one)\n"
      "  a2 = Relu(x)\n"
      "  y2 = Add(a2, one)\n"
      "  output y1\n"
      "  output y2\n"
      "  output a2\n"
      "}");
  ASSERT_TRUE(g.ok()) << g.error().message();
  const Dataflow flow(*g);
  MatchMemo memo(*g, flow);
  const std::vector<int32_t> first = {0, 1}, second = {2, 3};
  GroupMatch m = MatchGroup(*g, flow, first);
  memo.Add(first, &m);
  EXPECT_FALSE(memo.Find(second).has_value());
}

}  // namespace
}  // namespace fusetune::fusion_space
