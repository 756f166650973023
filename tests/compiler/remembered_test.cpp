// compiler/remembered.h: a plan chosen from group records is remembered with
// the database generation, and the next compile of the same graph and
// options takes it (the same plan and provenance, no candidates chosen)
// until a commit moves the generation.
#include <gtest/gtest.h>

#include "compiler/explain.h"
#include "compiler/remembered.h"
#include "tests/compiler/compile_fixture.h"
#include "tests/db/db_test_util.h"

namespace fusetune::compiler {
namespace {

using namespace testing_util;  // NOLINT: the shared fixture

// A fixture whose fused MatMul+Add+Relu group is tuned: the compile chooses
// from an exact hit, defaults and a partition.
struct Tuned : Fixture {
  Tuned() : Fixture(Mlp(32)) {
    const auto tasks = search::ExtractTasks(graph, *space);
    fused = GemmTask(tasks, 3).nodes;
    AddGroupRecord(*db, GemmTask(tasks, 3), OtherTiling(GemmTask(tasks, 3).tilings()), 20e-6);
  }
  // A compile on a space of its own, as a later process would make.
  Result<CompiledPlan> CompileAgain(const CompileOptions& options = {}) {
    spaces.push_back(std::make_unique<fusion_space::FusionSpace>(graph, kernels::KernelConfig{}));
    indexes.push_back(Index());
    return CompileGraph(*spaces.back(), *indexes.back(), options);
  }
  std::vector<int32_t> fused;
  std::vector<std::unique_ptr<fusion_space::FusionSpace>> spaces;
  std::vector<std::unique_ptr<TuningIndex>> indexes;
};

void ExpectSameChoice(const GroupChoice& a, const GroupChoice& b) {
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(fusion_space::TilingToString(a.tiling), fusion_space::TilingToString(b.tiling));
  EXPECT_EQ(a.cost, b.cost);
  EXPECT_EQ(a.measured_seconds, b.measured_seconds);
  EXPECT_EQ(a.predicted_seconds, b.predicted_seconds);
  EXPECT_EQ(a.predicted_loss, b.predicted_loss);
  EXPECT_EQ(a.record_id, b.record_id);
  EXPECT_EQ(a.detail, b.detail);
}

TEST(RememberedCompile, TheNextCompileTakesTheSamePlanAndProvenanceWithoutChoosing) {
  Tuned f;
  auto chosen = f.CompileAgain();
  ASSERT_TRUE(chosen.ok()) << chosen.error().ToString();
  ASSERT_TRUE(chosen->remember.has_value());
  EXPECT_FALSE(chosen->remembered_generation.has_value());
  EXPECT_FALSE(chosen->candidates.empty());
  auto stored = f.db->PutCompiledPlan(RememberedEntry(*f.spaces.back(), *chosen, kTarget));
  ASSERT_TRUE(stored.ok() && *stored);

  auto again = f.CompileAgain();
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  ASSERT_EQ(again->remembered_generation, chosen->remember->generation);
  EXPECT_FALSE(again->remember.has_value()) << "nothing new to remember";
  EXPECT_TRUE(again->candidates.empty()) << "no candidate group was chosen again";
  EXPECT_EQ(again->plan, chosen->plan);
  EXPECT_TRUE(f.spaces.back()->Validate(again->plan).allowed());
  ASSERT_EQ(again->groups.size(), chosen->groups.size());
  for (size_t i = 0; i < again->groups.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(again->groups[i].nodes, chosen->groups[i].nodes);
    EXPECT_EQ(again->groups[i].workload_key, chosen->groups[i].workload_key);
    EXPECT_EQ(again->groups[i].kernel, chosen->groups[i].kernel);
    EXPECT_EQ(again->groups[i].bytes, chosen->groups[i].bytes);
    ExpectSameChoice(again->groups[i].choice, chosen->groups[i].choice);
  }
  EXPECT_EQ(again->count, chosen->count);
  EXPECT_EQ(again->predicted_seconds, chosen->predicted_seconds);
  EXPECT_EQ(again->scale, chosen->scale);
  EXPECT_EQ(again->model, chosen->model);
  EXPECT_EQ(again->peak_bytes, chosen->peak_bytes);
  EXPECT_NE(again->partition.find("remembered at generation"), std::string::npos);
  EXPECT_NE(again->partition.find(chosen->partition), std::string::npos) << again->partition;
}

TEST(RememberedCompile, ACommitMovesTheGenerationAndTheNextCompileChoosesAgain) {
  Tuned f;
  auto chosen = f.CompileAgain();
  ASSERT_TRUE(chosen.ok());
  const db::CompiledPlanEntry entry = RememberedEntry(*f.spaces.back(), *chosen, kTarget);
  // A tuner commits between the compile's reads and its remembering.
  const auto tasks = search::ExtractTasks(f.graph, *f.space);
  const search::Task& fused = GemmTask(tasks, 3);
  AddGroupRecord(*f.db, fused, fused.tilings().Default(), 5e-6);
  auto stored = f.db->PutCompiledPlan(entry);
  ASSERT_TRUE(stored.ok());
  EXPECT_FALSE(*stored) << "remembered a choice the commit made out of date";

  auto after = f.CompileAgain();
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->remembered_generation.has_value());
  ASSERT_TRUE(after->remember.has_value());
  EXPECT_GT(after->remember->generation, entry.generation);
  bool faster_record_used = false;
  for (const GroupDecision& d : after->groups)
    if (d.nodes == f.fused) faster_record_used = d.choice.measured_seconds == 5e-6;
  EXPECT_TRUE(faster_record_used) << ExplainPlan(*f.spaces.back(), *after, true);
}

TEST(RememberedCompile, OtherOptionsDoNotTakeItAndTurningItOffNeitherTakesNorOffers) {
  Tuned f;
  auto chosen = f.CompileAgain();
  ASSERT_TRUE(chosen.ok());
  ASSERT_TRUE(*f.db->PutCompiledPlan(RememberedEntry(*f.spaces.back(), *chosen, kTarget)));
  CompileOptions limited;
  limited.max_memory_bytes = int64_t{1} << 30;
  auto other = f.CompileAgain(limited);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->remembered_generation.has_value()) << "another memory limit";
  EXPECT_NE(RememberContext(limited), RememberContext({}));
  CompileOptions off;
  off.remembered_plans = false;
  auto fresh = f.CompileAgain(off);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->remembered_generation.has_value());
  EXPECT_FALSE(fresh->remember.has_value());
  EXPECT_EQ(fresh->plan, chosen->plan);
}

TEST(RememberedCompile, ADamagedEntryIsPassedOverWithTheReason) {
  Tuned f;
  auto chosen = f.CompileAgain();
  ASSERT_TRUE(chosen.ok());
  db::CompiledPlanEntry entry = RememberedEntry(*f.spaces.back(), *chosen, kTarget);
  entry.decisions = R"({"groups":[["teleported",1,null,1,null,0,""]]})";
  ASSERT_TRUE(*f.db->PutCompiledPlan(entry));
  auto again = f.CompileAgain();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->remembered_generation.has_value());
  EXPECT_NE(again->partition.find("unknown plan source 'teleported'"), std::string::npos)
      << again->partition;
  EXPECT_EQ(again->plan, chosen->plan);

  entry.decisions = DecisionsToText(*chosen);
  entry.plan = R"({"format":"fusetune-plan","version":1,"groups":[{"nodes":[0]}]})";
  ASSERT_TRUE(*f.db->PutCompiledPlan(entry));
  auto partial = f.CompileAgain();
  ASSERT_TRUE(partial.ok());
  EXPECT_FALSE(partial->remembered_generation.has_value());
  EXPECT_NE(partial->partition.find("does not fit this build"), std::string::npos)
      << partial->partition;
  EXPECT_EQ(partial->plan, chosen->plan);
}

// As `fusetune compile` runs: the index preloads the remembered plans with
// the best plans while the model imports, and takes one only at the
// generation it loaded at.
TEST(RememberedCompile, APreloadedPlanIsTakenOnlyAtTheIndexGeneration) {
  const std::string path = db::testing::FreshDbPath("remembered_preload");
  Fixture f(Mlp(32));
  f.db = std::move(db::MakeSqliteDatabase(path).value());
  ASSERT_TRUE(f.db->PutTarget({kTarget, "{}", "{}"}).ok());
  const auto tasks = search::ExtractTasks(f.graph, *f.space);
  const search::Task& fused = GemmTask(tasks, 3);
  AddGroupRecord(*f.db, fused, OtherTiling(fused.tilings()), 20e-6);
  auto chosen = CompileGraph(*f.space, *f.Index());
  ASSERT_TRUE(chosen.ok());
  ASSERT_TRUE(*f.db->PutCompiledPlan(RememberedEntry(*f.space, *chosen, kTarget)));

  auto preloaded = [&](bool commit_between) {
    auto reader = OpenTuningDatabase(path);
    EXPECT_TRUE(reader.ok());
    auto index = TuningIndex::Load(**reader, kTarget, {});
    EXPECT_TRUE(index.ok());
    if (commit_between) AddGroupRecord(*f.db, fused, fused.tilings().Default(), 30e-6);
    (*index)->PreloadInBackground(path);
    (*index)->WaitForPreload();
    fusion_space::FusionSpace space(f.graph, kernels::KernelConfig{});
    auto plan = CompileGraph(space, **index);
    EXPECT_TRUE(plan.ok());
    return plan.ok() && plan->remembered_generation.has_value();
  };
  EXPECT_TRUE(preloaded(false));
  EXPECT_FALSE(preloaded(true)) << "the preload read after a commit the index did not see";
}

TEST(RememberedCompile, DecisionsRoundTripThroughText) {
  Tuned f;
  auto chosen = f.CompileAgain();
  ASSERT_TRUE(chosen.ok());
  auto read = DecisionsFromText(DecisionsToText(*chosen));
  ASSERT_TRUE(read.ok()) << read.error().ToString();
  EXPECT_EQ(read->partition, chosen->partition);
  EXPECT_EQ(read->model, chosen->model);
  EXPECT_EQ(read->predicted_seconds, chosen->predicted_seconds);
  ASSERT_EQ(read->choices.size(), chosen->groups.size());
  for (size_t i = 0; i < read->choices.size(); ++i) {
    read->choices[i].tiling = chosen->groups[i].choice.tiling;  // the plan carries tilings
    ExpectSameChoice(read->choices[i], chosen->groups[i].choice);
  }
  EXPECT_FALSE(DecisionsFromText(R"({"groups":[[)").ok());
}

}  // namespace
}  // namespace fusetune::compiler
