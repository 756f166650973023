// Candidate groups, tiling spaces, plans and their mutations, exact
// partition selection against brute force, and the plan file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "fusion_space/partition.h"
#include "fusion_space/plan_json.h"
#include "fusion_space/space.h"
#include "graph/workload_key.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::fusion_space {
namespace {

kernels::KernelConfig Config() { return testing::SmallKernelConfig(); }

TEST(Candidates, EveryTemplateAppearsAndEveryCandidateIsLegal) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, Config());
  const CandidateSet& c = space.candidates();
  EXPECT_EQ(c.num_nodes, static_cast<int64_t>(g.nodes.size()));
  for (KernelTemplate t : {KernelTemplate::kGemm, KernelTemplate::kAttention,
                           KernelTemplate::kRowwise, KernelTemplate::kElementwise})
    EXPECT_GT(c.count_by_template.count(t) ? c.count_by_template.at(t) : 0, 0)
        << KernelTemplateName(t);
  std::set<std::vector<int32_t>> seen;
  for (const CandidateGroup& group : c.groups) {
    EXPECT_TRUE(seen.insert(group.nodes).second) << "enumerated twice";
    EXPECT_TRUE(std::is_sorted(group.nodes.begin(), group.nodes.end()));
    EXPECT_LE(group.nodes.size(), 12u);
    EXPECT_TRUE(MatchGroup(g, space.flow(), group.nodes).decision);
    EXPECT_EQ(group.key, graph::ComputeWorkloadKey(g, group.nodes));
  }
}

bool IsGemm(const graph::Node& n) { return n.op_type == "MatMul" || n.op_type == "Gemm"; }

// Connected through dataflow edges or a shared A operand of two GEMMs (the
// sets candidate enumeration visits).
bool Connected(const graph::Graph& g, const Dataflow& flow, const std::vector<int32_t>& set) {
  auto linked = [&](int32_t a, int32_t b) {
    for (int32_t c : flow.consumers(a))
      if (c == b) return true;
    for (int32_t p : flow.producers(a))
      if (p == b) return true;
    return IsGemm(g.nodes[a]) && IsGemm(g.nodes[b]) && g.nodes[a].inputs[0] == g.nodes[b].inputs[0];
  };
  std::vector<char> reached(set.size(), 0);
  std::vector<size_t> stack = {0};
  reached[0] = 1;
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    for (size_t j = 0; j < set.size(); ++j)
      if (!reached[j] && linked(set[i], set[j])) {
        reached[j] = 1;
        stack.push_back(j);
      }
  }
  return std::all_of(reached.begin(), reached.end(), [](char r) { return r != 0; });
}

// Enumeration prunes (op mixes no template takes, sets that are not convex)
// before matching: no legal connected group of up to four nodes may be lost.
TEST(Candidates, EveryLegalSmallGroupIsACandidate) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, Config());
  std::set<std::vector<int32_t>> candidates;
  for (const CandidateGroup& c : space.candidates().groups) candidates.insert(c.nodes);
  const int32_t n = static_cast<int32_t>(g.nodes.size());
  int legal = 0;
  std::vector<int32_t> set;
  std::function<void(int32_t)> grow = [&](int32_t from) {
    if (set.size() >= 2 && Connected(g, space.flow(), set) &&
        MatchGroup(g, space.flow(), set).decision) {
      ++legal;
      EXPECT_TRUE(candidates.count(set))
          << "a legal group is missing: " << ::testing::PrintToString(set);
    }
    if (set.size() == 4) return;
    for (int32_t v = from; v < n; ++v) {
      set.push_back(v);
      grow(v + 1);
      set.pop_back();
    }
  };
  grow(0);
  EXPECT_GT(legal, 10);
}

TEST(Candidates, RepeatedLayersShareKeys) {
  graph::Graph one = testing::LoadTestModel("encoder_postln_op13");
  graph::Graph three = testing::LoadTestModel("encoder_3layer_op13");
  FusionSpace s1(one, Config()), s3(three, Config());
  std::map<graph::WorkloadKey, int> count1, count3;
  for (const auto& c : s1.candidates().groups) count1[c.key]++;
  for (const auto& c : s3.candidates().groups) count3[c.key]++;
  // Every group of one layer occurs at least three times in three layers.
  int repeated = 0;
  for (auto [key, n] : count1)
    if (count3[key] >= 3 * n) ++repeated;
  EXPECT_GT(repeated, static_cast<int>(count1.size()) * 9 / 10);
}

TEST(TilingSpace, EnumerationSamplingAndConstraints) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, Config());
  Rng rng(7);
  for (const CandidateGroup& c : space.candidates().groups) {
    const TilingSpace& t = space.Tilings(c.nodes);
    const auto& all = t.Enumerate();
    if (c.instance->kind == KernelTemplate::kReference) {
      EXPECT_EQ(t.size(), 1);
      continue;
    }
    ASSERT_GT(t.size(), 0) << c.instance->summary;
    EXPECT_LE(t.size(), t.product_size());
    for (const Tiling& x : all) EXPECT_TRUE(t.Check(x)) << TilingToString(x);
    for (int i = 0; i < 5; ++i) {
      Tiling s = t.Sample(rng);
      EXPECT_TRUE(t.Check(s));
      EXPECT_TRUE(t.ChoiceOf(s).has_value());
    }
    EXPECT_TRUE(t.Check(t.Default()));
  }
}

// Every point of a parameter product space, as enumeration visits it
// (parameter 0 varying fastest).
std::vector<std::vector<int>> ProductPoints(const TilingSpace& t) {
  std::vector<std::vector<int>> points;
  std::vector<int> c(t.params().size(), 0);
  while (true) {
    points.push_back(c);
    size_t i = 0;
    for (; i < c.size(); ++i) {
      if (++c[i] < static_cast<int>(t.params()[i].values.size())) break;
      c[i] = 0;
    }
    if (i == c.size()) return points;
  }
}

TEST(TilingSpace, TheQuietCheckAgreesWithTheExplainedOne) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, Config());
  Rng rng(11);
  int64_t checked = 0, legal = 0;
  for (const CandidateGroup& c : space.candidates().groups) {
    if (c.instance->kind == KernelTemplate::kReference) continue;
    const TilingSpace& t = space.Tilings(c.nodes);
    const auto points = ProductPoints(t);
    for (int i = 0; i < 300; ++i) {
      const Tiling x = t.At(points[rng.Below(points.size())]);
      const FusionDecision explained = t.Check(x);
      EXPECT_EQ(TilingFits(*c.instance, Config(), x), explained.allowed())
          << TilingToString(x) << ": " << explained.ToString();
      ++checked;
      legal += explained.allowed();
    }
  }
  EXPECT_GT(legal, 0);
  EXPECT_LT(legal, checked);  // both answers were exercised
}

// The nearest legal point by exhaustive search, with the distance Nearest
// documents: block sizes by |log2| ratio, categorical parameters by equality.
std::optional<Tiling> ExhaustiveNearest(const TilingSpace& t, const Tiling& wanted) {
  const std::vector<int64_t> want = TilingValues(wanted);
  std::optional<Tiling> best;
  double best_distance = 0;
  for (const Tiling& x : t.Enumerate()) {
    const std::vector<int64_t> v = TilingValues(x);
    double d = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string& name = t.params()[i].name;
      const bool numeric =
          v[i] > 0 && want[i] > 0 && name != "micro" && name != "order" && name != "split";
      d += numeric ? std::abs(std::log2(static_cast<double>(v[i]) / static_cast<double>(want[i])))
                   : (v[i] != want[i] ? 1.0 : 0.0);
    }
    if (!best || d < best_distance) best = x, best_distance = d;
  }
  return best;
}

TEST(TilingSpace, NearestIsTheExhaustiveNearest) {
  for (const char* model : {"encoder_postln_op13", "mlp"}) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    FusionSpace space(g, Config());
    Rng rng(5);
    for (const CandidateGroup& c : space.candidates().groups) {
      if (c.instance->kind == KernelTemplate::kReference) continue;
      const TilingSpace& t = space.Tilings(c.nodes);
      const auto points = ProductPoints(t);
      // The template's default and points of the product space, legal or not.
      std::vector<Tiling> wanted = {t.Default()};
      for (int i = 0; i < 4; ++i) wanted.push_back(t.At(points[rng.Below(points.size())]));
      for (const Tiling& w : wanted) {
        const auto nearest = t.Nearest(w);
        const auto exhaustive = ExhaustiveNearest(t, w);
        ASSERT_EQ(nearest.has_value(), exhaustive.has_value());
        if (nearest) {
          EXPECT_EQ(TilingToString(*nearest), TilingToString(*exhaustive));
        }
        if (t.Check(w) && t.ChoiceOf(w)) {
          EXPECT_EQ(TilingToString(*nearest), TilingToString(w));
        }
      }
      EXPECT_EQ(TilingToString(t.Default()),
                TilingToString(t.Nearest(t.Default()).value_or(std::monostate{})));
    }
  }
}

TEST(TilingSpace, DoubleBufferingCountsAgainstCapacity) {
  graph::Graph g = testing::LoadTestModel("mlp");
  kernels::KernelConfig small = Config();
  FusionSpace space(g, small);
  const std::vector<int32_t> gemm = {0};
  const TilingSpace& t = space.Tilings(gemm);
  ASSERT_EQ(space.Match(gemm).instance.kind, KernelTemplate::kGemm);
  for (const Tiling& x : t.Enumerate()) {
    auto tiling = std::get<kernels::GemmTiling>(x);
    if (tiling.double_buffer) continue;
    tiling.double_buffer = true;
    tiling.refill = false;  // the single-buffered way to overlap copies
    const int64_t need = kernels::GemmLocalBytes(space.Match(gemm).instance.gemm, tiling);
    EXPECT_EQ(static_cast<bool>(t.Check(tiling)),
              need <= static_cast<int64_t>(small.local_buffer_bytes));
  }
  kernels::GemmTiling misaligned;
  misaligned.mr = 8;
  misaligned.mc = 12;
  EXPECT_NE(t.Check(misaligned).reason().find("multiple of mr"), std::string::npos);
}

TEST(Plans, UnfusedGreedyRandomAndMutationsAreValid) {
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    FusionSpace space(g, Config());
    Plan unfused = space.Unfused();
    EXPECT_EQ(unfused.groups.size(), g.nodes.size());
    EXPECT_TRUE(space.Validate(unfused)) << space.Validate(unfused).reason();
    Plan greedy = space.Greedy();
    EXPECT_TRUE(space.Validate(greedy)) << space.Validate(greedy).reason();
    EXPECT_LT(greedy.groups.size(), unfused.groups.size());
    EXPECT_LT(space.Traffic(greedy), space.Traffic(unfused));
    Rng rng(ForkSeed(11, 0));
    std::map<MutationKind, int> applied;
    for (int i = 0; i < 20; ++i) {
      Plan p = space.Random(rng);
      ASSERT_TRUE(space.Validate(p)) << space.Validate(p).reason();
      for (MutationKind k : {MutationKind::kMerge, MutationKind::kSplit, MutationKind::kMoveNode,
                             MutationKind::kRetile}) {
        auto m = space.Mutate(p, rng, k);
        if (!m) continue;
        applied[k]++;
        ASSERT_TRUE(space.Validate(*m))
            << MutationKindName(k) << ": " << space.Validate(*m).reason();
        EXPECT_FALSE(*m == p) << MutationKindName(k);
      }
    }
    EXPECT_GT(applied[MutationKind::kMerge] + applied[MutationKind::kSplit], 0);
    EXPECT_GT(applied[MutationKind::kRetile], 0);
  }
}

// The peak against a direct count: at every step, the bytes of each value
// written at or before it and read (or a graph output) at or after it.
TEST(Plans, PeakIntermediateBytesCountsEveryLiveValue) {
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    FusionSpace space(g, Config());
    Rng rng(ForkSeed(11, 0));
    for (const Plan& plan : {space.Unfused(), space.Greedy(), space.Random(rng)}) {
      const size_t steps = plan.groups.size();
      int64_t peak = 0;
      for (size_t at = 0; at < steps; ++at) {
        int64_t live = 0;
        for (size_t s = 0; s <= at; ++s)
          for (graph::ValueId v : space.Match(plan.groups[s].nodes).instance.outputs) {
            bool read_later = space.flow().is_graph_output(v);
            for (size_t r = at; r < steps && !read_later; ++r)
              for (graph::ValueId in : space.Match(plan.groups[r].nodes).instance.inputs)
                read_later = read_later || in == v;
            if (s == at || read_later) live += static_cast<int64_t>(g.type(v).nbytes());
          }
        peak = std::max(peak, live);
      }
      EXPECT_EQ(space.PeakIntermediateBytes(plan), peak);
    }
  }
}

TEST(Plans, SameSeedSamePlan) {
  graph::Graph g = testing::LoadTestModel("decoder_preln_op17");
  FusionSpace a(g, Config()), b(g, Config());
  Rng ra(5), rb(5);
  EXPECT_TRUE(a.Random(ra) == b.Random(rb));
}

// Random costs per candidate; the DP + branch and bound matches brute force.
TEST(Partition, ExactSelectionMatchesBruteForce) {
  // Graphs whose exact covers brute force can list (up to ~1e4).
  for (const char* model : {"mlp", "decoder_preln_op17"}) {
    SCOPED_TRACE(model);
    graph::Graph g = testing::LoadTestModel(model);
    CandidateOptions options;
    options.max_group_size = std::string(model) == "mlp" ? 12 : 2;
    FusionSpace space(g, Config(), options);
    Rng rng(ForkSeed(3, 1));
    for (int trial = 0; trial < 4; ++trial) {
      PartitionObjective o;
      for (size_t i = 0; i < space.candidates().groups.size(); ++i)
        o.group_cost.push_back(rng.Uniform() *
                               static_cast<double>(space.candidates().groups[i].nodes.size()));
      o.launch_cost = trial * 0.3;
      if (trial == 3) o.peak_memory_limit = space.PeakIntermediateBytes(space.Greedy());
      PartitionChoice fast = SelectMinCostPartition(space, o);
      PartitionChoice brute = BruteForceMinCostPartition(space, o);
      ASSERT_TRUE(fast.found && brute.found);
      EXPECT_TRUE(fast.proven_optimal);
      EXPECT_NEAR(fast.cost, brute.cost, 1e-9);
      Plan plan = PlanFromCandidates(space, fast.groups);
      EXPECT_TRUE(space.Validate(plan)) << space.Validate(plan).reason();
      if (o.peak_memory_limit) {
        EXPECT_LE(fast.peak_bytes, *o.peak_memory_limit);
      }
    }
  }
}

// The lower bound on any plan's peak holds for every plan, and a limit under
// it is answered without a search (it used to spend the whole budget).
TEST(Partition, ALimitUnderTheLowerBoundIsInfeasibleAtOnce) {
  for (const char* name : {"llama_op17", "cnn_bn_op13"}) {
    SCOPED_TRACE(name);
    graph::Graph model = testing::LoadTestModel(name);
    FusionSpace space(model, Config());
    Rng rng(3);
    for (const Plan& plan : {space.Unfused(), space.Greedy(), space.Random(rng), space.Random(rng)})
      EXPECT_LE(space.MinimumPeakIntermediateBytes(), space.PeakIntermediateBytes(plan));
  }
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, Config());
  const int64_t bound = space.MinimumPeakIntermediateBytes();
  EXPECT_GT(bound, 0);
  Rng rng(7);
  for (const Plan& plan : {space.Unfused(), space.Greedy(), space.Random(rng), space.Random(rng)})
    EXPECT_LE(bound, space.PeakIntermediateBytes(plan));
  PartitionObjective o;
  o.group_cost.assign(space.candidates().groups.size(), 1.0);
  o.peak_memory_limit = bound - 1;
  const PartitionChoice none = SelectMinCostPartition(space, o);
  EXPECT_FALSE(none.found);
  EXPECT_EQ(none.expansions, 0);
  o.peak_memory_limit = space.PeakIntermediateBytes(space.Unfused());
  EXPECT_TRUE(SelectMinCostPartition(space, o).found);
}

// Two graph outputs, live together at the end: the bound is their sum. An
// omitted optional output (LayerNormalization's mean) is no value at all.
TEST(Partition, TheLowerBoundSumsTheGraphOutputsAndSkipsOmittedOnes) {
  graph::Graph g = testing::Parse(R"(graph g opset 17 {
    input x: f32[4, 8]  const s: f32[8] = [1, 1, 1, 1, 1, 1, 1, 1]  const b: f32[8] = [0, 0, 0, 0, 0, 0, 0, 0]
    y, _, r = LayerNormalization(x, s, b) {epsilon=1e-5}
    z = Relu(y)
    output z
    output r })");
  FusionSpace space(g, Config());
  EXPECT_EQ(space.MinimumPeakIntermediateBytes(), 4 * 8 * 4 + 4 * 4);
  EXPECT_LE(space.MinimumPeakIntermediateBytes(), space.PeakIntermediateBytes(space.Unfused()));
}

TEST(Partition, CountMatchesBruteForceOnSmallGraph) {
  graph::Graph g = testing::LoadTestModel("mlp");
  FusionSpace space(g, Config());
  // mlp: three Gemm+Relu pairs (Gemm fuses with its Relu) and horizontal
  // pairs are not possible, so 2^3 covers.
  EXPECT_EQ(CountPartitions(space.candidates()), 8.0);
}

TEST(PlanFile, RoundTripAndErrors) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  FusionSpace space(g, Config());
  Rng rng(9);
  Plan plan = space.Random(rng);
  nlohmann::json j = PlanToJson(space, plan);
  auto back = PlanFromJson(space, j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(*back == plan);

  // From the text (what a compile reads from the database): the same plan,
  // and each group's stored workload key.
  std::vector<std::string> keys;
  auto from_text = PlanFromJsonText(space, j.dump(1), &keys);
  ASSERT_TRUE(from_text.ok()) << from_text.error().message();
  EXPECT_TRUE(*from_text == plan);
  ASSERT_EQ(keys.size(), plan.groups.size());
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(keys[i], space.Key(plan.groups[i].nodes).ToString());

  // Both readers give the same error.
  auto expect_error = [&](nlohmann::json bad, const std::string& needle) {
    auto r = PlanFromJson(space, bad);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().message();
    auto t = PlanFromJsonText(space, bad.dump());
    ASSERT_FALSE(t.ok()) << needle;
    EXPECT_EQ(t.error().message(), r.error().message());
  };
  expect_error(nlohmann::json::array(), "not a fusetune plan");
  // A "format" of another type (plan_json_fuzz: nlohmann's value() threw).
  nlohmann::json format_array = j;
  format_array["format"] = nlohmann::json::array();
  expect_error(format_array, "not a fusetune plan");
  nlohmann::json strings = j;
  strings["groups"][0]["nodes"] = {"0"};
  expect_error(strings, "holds a non-integer");
  nlohmann::json empty = j;
  empty["groups"][0]["nodes"] = nlohmann::json::array();
  expect_error(empty, "not a non-empty array");
  nlohmann::json no_version = j;
  no_version.erase("version");
  expect_error(no_version, "\"version\" is missing");
  for (const std::string text : {R"({"format": "fusetune-plan", "version": 1,)", "{} {}"}) {
    auto t = PlanFromJsonText(space, text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.error().code(), ErrorCode::kParse) << t.error().message();
  }
  nlohmann::json v = j;
  v["version"] = 99;
  expect_error(v, "unknown version 99");
  nlohmann::json range = j;
  range["groups"][0]["nodes"] = {1000};
  expect_error(range, "out of range");
  nlohmann::json illegal = j;
  illegal["groups"] = nlohmann::json::array();
  std::vector<int> all;
  for (size_t i = 0; i < g.nodes.size(); ++i) all.push_back(static_cast<int>(i));
  illegal["groups"].push_back({{"nodes", all}, {"template", "gemm"}, {"tiling", {}}});
  expect_error(illegal, "not a legal group");
  nlohmann::json tiling = PlanToJson(space, space.Greedy());
  for (auto& grp : tiling["groups"])
    if (grp["template"] == "gemm") {
      grp["tiling"]["mc"] = 12;
      break;
    }
  expect_error(tiling, "tiling");
  // The tiling's own fields, read into a flat list from the text.
  nlohmann::json greedy = PlanToJson(space, space.Greedy());
  auto with_gemm_tiling = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json p = greedy;
    for (auto& grp : p["groups"])
      if (grp["template"] == "gemm") {
        edit(grp["tiling"]);
        break;
      }
    return p;
  };
  expect_error(with_gemm_tiling([](nlohmann::json& t) { t.erase("kc"); }),
               "tiling is missing \"kc\"");
  expect_error(with_gemm_tiling([](nlohmann::json& t) { t["nc"] = 64.5; }),
               "tiling.nc is not an integer");
  expect_error(with_gemm_tiling([](nlohmann::json& t) { t["mr"] = {8}; }),
               "tiling.mr is not an integer");
  expect_error(with_gemm_tiling([](nlohmann::json& t) { t["order"] = "km"; }),
               "tiling.order \"km\" is not mn or nm");
  expect_error(with_gemm_tiling([](nlohmann::json& t) { t = 3; }), "tiling is not an object");
  nlohmann::json missing = j;
  missing["groups"].erase(missing["groups"].size() - 1);
  expect_error(missing, "in no group");
}

// The same layer exported with other names and another node order: a plan
// names groups by canonical positions, so it applies unchanged.
TEST(PlanFile, AppliesToAnotherExportOfTheSameLayer) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  graph::Graph other = g;
  for (auto& v : other.values)
    if (!v.is_input) v.name = "renamed_" + v.name;
  for (auto& n : other.nodes) n.name = "other_" + n.name;
  std::reverse(other.nodes.begin(), other.nodes.end());
  for (int32_t i = 0; i < static_cast<int32_t>(other.nodes.size()); ++i)
    for (graph::ValueId out : other.nodes[i].outputs) other.value(out).producer = i;
  ASSERT_TRUE(other.TopologicalSort().ok());
  FusionSpace a(g, Config()), b(other, Config());
  Plan greedy = a.Greedy();
  auto moved = PlanFromJson(b, PlanToJson(a, greedy));
  ASSERT_TRUE(moved.ok()) << moved.error().message();
  EXPECT_EQ(moved->groups.size(), greedy.groups.size());
  EXPECT_EQ(b.Traffic(*moved), a.Traffic(greedy));
}

// A plan read through structure positions (how a plan moves to another size
// of its model, where the exact canonical order can differ): the same
// groups, whatever this graph's node indices; a list of the wrong length is
// an error.
TEST(PlanFile, MovesByStructurePositions) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  std::vector<int32_t> positions = graph::StructurePositions(
      graph::CanonicalizeGraph(g), graph::CanonicalizeGraph(g, graph::KeyScope::kStructure));

  graph::Graph other = g;
  std::reverse(other.nodes.begin(), other.nodes.end());
  for (int32_t i = 0; i < static_cast<int32_t>(other.nodes.size()); ++i)
    for (graph::ValueId out : other.nodes[i].outputs) other.value(out).producer = i;
  ASSERT_TRUE(other.TopologicalSort().ok());
  FusionSpace a(g, Config()), b(other, Config());
  const Plan greedy = a.Greedy();
  const std::string text = PlanToJson(a, greedy).dump();
  auto moved = MovedPlanFromJsonText(b, text, positions);
  ASSERT_TRUE(moved.ok()) << moved.error().message();
  EXPECT_EQ(moved->groups.size(), greedy.groups.size());
  EXPECT_EQ(b.Traffic(*moved), a.Traffic(greedy));
  for (size_t i = 0; i < greedy.groups.size(); ++i) {
    std::set<std::string> names_a, names_b;
    for (int32_t n : greedy.groups[i].nodes) names_a.insert(g.nodes[n].name);
    for (const PlanGroup& pg : moved->groups)
      if (pg.nodes.size() == greedy.groups[i].nodes.size()) {
        std::set<std::string> names;
        for (int32_t n : pg.nodes) names.insert(other.nodes[n].name);
        if (names == names_a) names_b = names;
      }
    EXPECT_EQ(names_b, names_a) << "group " << i << " did not land on the same nodes";
  }
  positions.pop_back();
  auto short_list = MovedPlanFromJsonText(b, text, positions);
  ASSERT_FALSE(short_list.ok());
  EXPECT_NE(short_list.error().message().find("structure order"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::fusion_space
