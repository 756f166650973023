// compiler/: every source of a group's plan (whole-model record, exact key,
// nearest tuned shape, default), the greedy plan with an empty database, the
// memory limit, outputs against the reference executor, determinism, and
// the fused ONNX export. Records come from an in-memory database filled by
// the test (a measurement double: times are stated, not measured).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <numeric>
#include <set>

#include "compiler/explain.h"
#include "compiler/fused_export.h"
#include "compiler/model.h"
#include "compiler/plan_layouts.h"
#include "fusion_space/plan_json.h"
#include "graph/onnx_io.h"
#include "graph/workload_key.h"
#include "search/tasks.h"
#include "tests/compiler/compile_fixture.h"
#include "tests/db/db_test_util.h"
#include "tests/fusion_space/model_util.h"
#include "tests/graph/test_util.h"

namespace fusetune::compiler {
namespace {

using namespace testing_util;  // NOLINT: the shared fixture

TEST(Compiler, AnEmptyDatabaseGivesTheGreedyPlanWithEveryGroupMarkedDefault) {
  Fixture f(Mlp(32));
  auto index = f.Index();
  auto plan = CompileGraph(*f.space, *index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->plan, f.space->Greedy());
  EXPECT_EQ(plan->count.at(PlanSource::kDefault), static_cast<int>(plan->groups.size()));
  for (const GroupDecision& d : plan->groups) EXPECT_FALSE(d.choice.predicted_loss.has_value());
  EXPECT_NE(plan->partition.find("greedy"), std::string::npos);
}

TEST(Compiler, AnExactKeyHitUsesTheRecordedTilingAndTime) {
  Fixture f(Mlp(32));
  const auto tasks = search::ExtractTasks(f.graph, *f.space);
  const search::Task& fused = GemmTask(tasks, 3);
  const fusion_space::Tiling tiling = OtherTiling(fused.tilings());
  AddGroupRecord(*f.db, fused, tiling, 20e-6);
  auto index = f.Index();
  auto plan = CompileGraph(*f.space, *index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  const GroupDecision* hit = nullptr;
  for (const GroupDecision& d : plan->groups)
    if (d.nodes == fused.nodes) hit = &d;
  ASSERT_NE(hit, nullptr) << ExplainPlan(*f.space, *plan, true);
  EXPECT_EQ(hit->choice.source, PlanSource::kExact);
  EXPECT_EQ(fusion_space::TilingToString(hit->choice.tiling), fusion_space::TilingToString(tiling));
  EXPECT_DOUBLE_EQ(*hit->choice.measured_seconds, 20e-6);
  EXPECT_EQ(*hit->choice.predicted_loss, 0);
  // Every other group says where it came from: nothing here is silent.
  for (const GroupDecision& d : plan->groups)
    if (&d != hit) {
      EXPECT_NE(d.choice.source, PlanSource::kExact);
    }
  EXPECT_TRUE(f.space->Validate(plan->plan).allowed());
}

TEST(Compiler, TheExplanationBreaksEachTemplateGroupIntoPhysicalParts) {
  Fixture f(Mlp(32));
  auto index = f.Index();
  auto plan = CompileGraph(*f.space, *index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  const std::string text = ExplainPlan(*f.space, *plan, true);
  int template_groups = 0;
  for (const GroupDecision& d : plan->groups) {
    if (d.kind == fusion_space::KernelTemplate::kReference) continue;
    ++template_groups;
    // The default choice's predicted time is the analytical time x scale;
    // the line shows that time as overhead + compute + memory - eta x min.
    const std::string ms = fmt::format("analytical {:.4g} ms = overhead",
                                       d.choice.predicted_seconds / plan->scale * 1e3);
    EXPECT_NE(text.find(ms), std::string::npos) << ms << "\n" << text;
  }
  EXPECT_GT(template_groups, 0);
}

// Stored structure keys and signatures, or (older databases) the stored
// group graphs parsed for them, find the same tuned shape.
TEST(Compiler, AnUntunedSequenceLengthTakesTheNearestTunedShape) {
  for (bool older : {false, true}) {
    SCOPED_TRACE(older ? "group graphs parsed" : "structure keys stored");
    Fixture tuned(Mlp(32));
    const auto tasks = search::ExtractTasks(tuned.graph, *tuned.space);
    const search::Task& fused = GemmTask(tasks, 3);
    AddGroupRecord(*tuned.db, fused, OtherTiling(fused.tilings()), 20e-6, older);
    Fixture far(Mlp(512));  // a second tuned shape, farther from 96 than 32 is
    const auto far_tasks = search::ExtractTasks(far.graph, *far.space);
    const search::Task& far_task = GemmTask(far_tasks, 3);
    AddGroupRecord(*tuned.db, far_task, far_task.tilings().Default(), 300e-6, older);

    Fixture f(Mlp(96));
    auto index = TuningIndex::Load(*tuned.db, kTarget, {});
    ASSERT_TRUE(index.ok());
    auto plan = CompileGraph(*f.space, **index);
    ASSERT_TRUE(plan.ok()) << plan.error().ToString();
    const GroupDecision* bucket = nullptr;
    for (const GroupDecision& d : plan->groups)
      if (d.choice.source == PlanSource::kShapeBucket) bucket = &d;
    ASSERT_NE(bucket, nullptr) << ExplainPlan(*f.space, *plan, true);
    EXPECT_EQ(bucket->nodes.size(), 3u);
    EXPECT_NE(bucket->choice.detail.find(fused.key.ToString()), std::string::npos)
        << bucket->choice.detail;  // the 32-row record, not the 512-row one
    EXPECT_TRUE(f.space->Tilings(bucket->nodes).Check(bucket->choice.tiling).allowed());
    ASSERT_TRUE(bucket->choice.predicted_loss.has_value());
    EXPECT_GE(*bucket->choice.predicted_loss, 0);
  }
}

std::vector<std::vector<int32_t>> Partition(const fusion_space::Plan& plan) {
  std::vector<std::vector<int32_t>> groups;
  for (const fusion_space::PlanGroup& g : plan.groups) groups.push_back(g.nodes);
  std::sort(groups.begin(), groups.end());
  return groups;
}

// A model tuned at two sizes (whole-model records of different partitions):
// at a size never tuned, the nearest tuned size's partition is kept, each
// tiling legal at this size.
TEST(Compiler, AnUntunedSizeMovesTheNearestTunedSizesPlan) {
  Fixture tuned(Mlp(32));
  AddWholeModelRecord(tuned, tuned.space->Unfused(), 1e-4);
  Fixture far(Mlp(512));
  AddWholeModelRecord(far, far.space->Greedy(), 5e-4, false, tuned.db.get());
  ASSERT_NE(Partition(tuned.space->Unfused()), Partition(tuned.space->Greedy()));
  auto index = TuningIndex::Load(*tuned.db, kTarget, {});
  ASSERT_TRUE(index.ok());
  for (int rows : {48, 384}) {
    SCOPED_TRACE(rows);
    Fixture f(Mlp(rows));
    auto plan = CompileGraph(*f.space, **index);
    ASSERT_TRUE(plan.ok()) << plan.error().ToString();
    const fusion_space::Plan& nearest = rows == 48 ? f.space->Unfused() : f.space->Greedy();
    EXPECT_EQ(Partition(plan->plan), Partition(nearest)) << ExplainPlan(*f.space, *plan, true);
    EXPECT_NE(plan->partition.find("nearest tuned size"), std::string::npos) << plan->partition;
    EXPECT_EQ(plan->count.at(PlanSource::kShapeBucket), static_cast<int>(plan->groups.size()));
    EXPECT_TRUE(f.space->Validate(plan->plan).allowed());
    for (const GroupDecision& d : plan->groups)
      EXPECT_TRUE(f.space->Tilings(d.nodes).Check(d.choice.tiling).allowed());
  }
  // Without whole-model plans the groups are chosen one by one.
  Fixture f(Mlp(48));
  CompileOptions by_groups;
  by_groups.whole_model_plans = false;
  auto plan = CompileGraph(*f.space, **index, by_groups);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->partition.find("nearest tuned size"), std::string::npos) << plan->partition;
}

TEST(Compiler, AMeasuredWholeModelPlanComesFirstUnlessItBreaksTheMemoryLimit) {
  Fixture f(Mlp(32));
  const fusion_space::Plan unfused = f.space->Unfused();
  AddWholeModelRecord(f, unfused, 1e-4);
  auto index = f.Index();
  auto plan = CompileGraph(*f.space, *index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->plan, unfused);
  EXPECT_EQ(plan->count.at(PlanSource::kWholeModel), static_cast<int>(unfused.groups.size()));
  EXPECT_DOUBLE_EQ(*plan->measured_seconds, 1e-4);

  // A limit below the unfused plan's peak: the record is skipped, and the
  // partition keeps within the limit.
  CompileOptions limited;
  limited.max_memory_bytes = f.space->PeakIntermediateBytes(f.space->Greedy());
  ASSERT_LT(*limited.max_memory_bytes, f.space->PeakIntermediateBytes(unfused));
  auto within = CompileGraph(*f.space, *index, limited);
  ASSERT_TRUE(within.ok()) << within.error().ToString();
  EXPECT_FALSE(within->whole_model_record.has_value());
  EXPECT_LE(within->peak_bytes, *limited.max_memory_bytes);
  EXPECT_NE(within->partition.find("over the limit"), std::string::npos) << within->partition;

  limited.max_memory_bytes = 16;  // less than any output
  auto impossible = CompileGraph(*f.space, *index, limited);
  ASSERT_FALSE(impossible.ok());
  EXPECT_NE(impossible.error().message().find("--max-memory"), std::string::npos);
}

TEST(Compiler, AWholeModelRecordBeatenByAStaleOneIsNotTheTunedPlan) {
  // Kernels changed since tuning: the tuned plan's record went stale, and the
  // best fresh whole-model record is a baseline. The groups are looked up.
  Fixture f(Mlp(32));
  AddWholeModelRecord(f, f.space->Greedy(), 0.5e-4, /*stale=*/true);
  AddWholeModelRecord(f, f.space->Unfused(), 1e-4);
  auto index = f.Index();
  auto plan = CompileGraph(*f.space, *index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_FALSE(plan->whole_model_record.has_value());
  EXPECT_EQ(plan->count.count(PlanSource::kWholeModel), 0u);
  EXPECT_NE(plan->partition.find("older kernels took 0.050 ms"), std::string::npos)
      << plan->partition;
  EXPECT_TRUE(f.space->Validate(plan->plan).allowed());
}

// Forwards to a database and counts the reads a compile makes.
class CountingDatabase : public db::Database {
 public:
  explicit CountingDatabase(db::Database& inner) : inner_(inner) {}
  int best = 0, best_plans = 0, active_model = 0, faster_stale = 0, targets = 0, compiled_plans = 0;

  Status PutTarget(const db::TargetEntry& t) override { return inner_.PutTarget(t); }
  Result<std::optional<db::TargetEntry>> GetTarget(const std::string& f) override {
    ++targets;
    return inner_.GetTarget(f);
  }
  Result<std::vector<db::TargetEntry>> ListTargets() override { return inner_.ListTargets(); }
  Status PutWorkload(const db::WorkloadEntry& w) override { return inner_.PutWorkload(w); }
  Result<std::optional<db::WorkloadEntry>> GetWorkload(const std::string& k) override {
    return inner_.GetWorkload(k);
  }
  Result<std::vector<int64_t>> CommitRecords(std::span<db::Record> r) override {
    return inner_.CommitRecords(r);
  }
  Result<std::optional<db::BestPlan>> Best(const std::string& k, const std::string& t) override {
    ++best;
    return inner_.Best(k, t);
  }
  Result<std::optional<double>> FasterStaleSeconds(const std::string& k,
                                                   const std::string& t) override {
    ++faster_stale;
    return inner_.FasterStaleSeconds(k, t);
  }
  Result<std::map<std::string, db::BestPlan>> BestPlans(const std::string& t) override {
    ++best_plans;
    return inner_.BestPlans(t);
  }
  Result<std::vector<db::Record>> TopK(const std::string& k, const std::string& t, int n) override {
    return inner_.TopK(k, t, n);
  }
  Status ForEachRecord(const db::RecordFilter& f,
                       const std::function<bool(const db::Record&)>& v) override {
    return inner_.ForEachRecord(f, v);
  }
  Result<std::vector<std::string>> WorkloadKeys(std::optional<db::WorkloadKind> kind) override {
    return inner_.WorkloadKeys(kind);
  }
  Result<int64_t> CreateJob(const db::JobEntry& j) override { return inner_.CreateJob(j); }
  Status UpdateJob(int64_t id, const std::string& s, const std::string& p) override {
    return inner_.UpdateJob(id, s, p);
  }
  Result<std::optional<db::JobEntry>> GetJob(int64_t id) override { return inner_.GetJob(id); }
  Result<std::vector<db::JobEntry>> ListJobs() override { return inner_.ListJobs(); }
  Result<int64_t> SaveModel(const db::ModelEntry& m) override { return inner_.SaveModel(m); }
  Status ActivateModel(int64_t id) override { return inner_.ActivateModel(id); }
  Result<std::optional<db::ModelEntry>> ActiveModel(const std::string& n) override {
    ++active_model;
    return inner_.ActiveModel(n);
  }
  Result<std::vector<db::ModelEntry>> ListModels() override { return inner_.ListModels(); }
  Result<int64_t> Generation() override { return inner_.Generation(); }
  Result<std::optional<db::CompiledPlanEntry>> FindCompiledPlan(const std::string& g,
                                                                const std::string& t,
                                                                const std::string& c) override {
    ++compiled_plans;
    return inner_.FindCompiledPlan(g, t, c);
  }
  Result<std::vector<db::CompiledPlanEntry>> CompiledPlans(const std::string& t) override {
    return inner_.CompiledPlans(t);
  }
  Result<bool> PutCompiledPlan(const db::CompiledPlanEntry& e) override {
    return inner_.PutCompiledPlan(e);
  }
  Status RecomputeBest() override { return inner_.RecomputeBest(); }
  Result<db::DbStats> Stats(const std::string& t) override { return inner_.Stats(t); }
  Status CheckIntegrity() override { return inner_.CheckIntegrity(); }
  Status Vacuum() override { return inner_.Vacuum(); }

 private:
  db::Database& inner_;
};

TEST(Compiler, ATunedModelReadsOnlyTheRowsItNeedsOnceAndNoCostModel) {
  Fixture f(Mlp(32));
  const fusion_space::Plan unfused = f.space->Unfused();
  AddWholeModelRecord(f, unfused, 1e-4);
  CountingDatabase counting(*f.db);
  auto index = TuningIndex::Load(counting, kTarget, {});
  ASSERT_TRUE(index.ok());
  auto plan = CompileGraph(*f.space, **index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->plan, unfused);
  EXPECT_EQ(counting.best_plans, 0);    // no scan of every workload's best
  EXPECT_EQ(counting.active_model, 0);  // nothing needed a cost model
  EXPECT_EQ(counting.targets, 0);       // nor the target's calibration
  EXPECT_FALSE(plan->target.has_value());
  EXPECT_EQ(plan->model, "not consulted");
  // The whole-model key, then each distinct group key once.
  std::set<std::string> keys;
  for (const GroupDecision& d : plan->groups) keys.insert(d.workload_key);
  EXPECT_EQ(counting.best, 1 + static_cast<int>(keys.size()));
  const int reads = counting.best;
  auto again = CompileGraph(*f.space, **index);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(counting.best, reads);      // the index remembers what it read
  EXPECT_EQ(counting.faster_stale, 1);  // asked of the whole-model key only
  EXPECT_EQ(again->plan, plan->plan);
  // --explain shows analytical parts: then the calibration is read, once.
  CompileOptions explain;
  explain.target_features = true;
  for (int i = 0; i < 2; ++i) {
    auto explained = CompileGraph(*f.space, **index, explain);
    ASSERT_TRUE(explained.ok());
    EXPECT_TRUE(explained->target.has_value());
  }
  EXPECT_EQ(counting.targets, 1);
}

// A compiler opened before its model's import reads every best plan on a
// second thread (its own connection to the file); once that read is in, a
// compile asks the database nothing and compiles what it would have read key
// by key: the tuned whole-model plan, or (kernels changed since tuning) not.
TEST(Compiler, APreloadedIndexCompilesTheSamePlanWithoutLookups) {
  for (bool stale_tuned_plan : {false, true}) {
    SCOPED_TRACE(stale_tuned_plan ? "a stale record beats the best" : "the best is the tuned plan");
    Fixture f(Mlp(32));
    const std::string path =
        db::testing::FreshDbPath(fmt::format("compiler_preload_{}", stale_tuned_plan));
    f.db = std::move(db::MakeSqliteDatabase(path).value());
    ASSERT_TRUE(f.db->PutTarget({kTarget, "{}", "{}"}).ok());
    if (stale_tuned_plan) AddWholeModelRecord(f, f.space->Greedy(), 0.5e-4, /*stale=*/true);
    AddWholeModelRecord(f, f.space->Unfused(), 1e-4);
    auto key_by_key = CompileGraph(*f.space, *f.Index());
    ASSERT_TRUE(key_by_key.ok()) << key_by_key.error().ToString();

    CountingDatabase counting(*f.db);
    auto index = std::move(TuningIndex::Load(counting, kTarget, {}).value());
    index->PreloadInBackground(path);
    index->WaitForPreload();
    auto preloaded = CompileGraph(*f.space, *index);
    ASSERT_TRUE(preloaded.ok()) << preloaded.error().ToString();
    EXPECT_EQ(counting.best, 0);
    EXPECT_EQ(counting.faster_stale, 0);
    EXPECT_EQ(preloaded->plan, key_by_key->plan);
    EXPECT_EQ(preloaded->whole_model_record, key_by_key->whole_model_record);
    EXPECT_EQ(preloaded->partition, key_by_key->partition);
    ASSERT_EQ(preloaded->groups.size(), key_by_key->groups.size());
    for (size_t i = 0; i < preloaded->groups.size(); ++i) {
      EXPECT_EQ(preloaded->groups[i].choice.source, key_by_key->groups[i].choice.source);
      EXPECT_EQ(preloaded->groups[i].choice.measured_seconds,
                key_by_key->groups[i].choice.measured_seconds);
    }
  }
}

// A preload that cannot read (no such file) leaves the lookups key by key.
TEST(Compiler, AFailedPreloadIsDropped) {
  Fixture f(Mlp(32));
  const fusion_space::Plan unfused = f.space->Unfused();
  AddWholeModelRecord(f, unfused, 1e-4);
  CountingDatabase counting(*f.db);
  auto index = std::move(TuningIndex::Load(counting, kTarget, {}).value());
  index->PreloadInBackground(db::testing::FreshDbPath("compiler_preload_missing"));
  index->WaitForPreload();
  auto plan = CompileGraph(*f.space, *index);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  EXPECT_EQ(plan->plan, unfused);
  EXPECT_GT(counting.best, 0);
}

// A database whose pages cannot be read (SQLite's corrupt-file error): the
// load or the compile fails with the read's error, never compiles on
// default machine figures or without the generation.
class DamagedDatabase : public CountingDatabase {
 public:
  DamagedDatabase(db::Database& inner, bool target, bool generation)
      : CountingDatabase(inner), target_(target), generation_(generation) {}
  Result<std::optional<db::TargetEntry>> GetTarget(const std::string& f) override {
    if (target_) return Damage("reading target");
    return CountingDatabase::GetTarget(f);
  }
  Result<int64_t> Generation() override {
    if (generation_) return Damage("reading the database generation");
    return CountingDatabase::Generation();
  }

 private:
  static Error Damage(const std::string& what) {
    return Error(ErrorCode::kCorrupt, "tuning database 'damaged.db' is damaged: " + what);
  }
  bool target_, generation_;
};

TEST(Compiler, ADamagedDatabaseFailsInsteadOfCompilingOnDefaults) {
  Fixture f(Mlp(32));
  {
    DamagedDatabase damaged(*f.db, /*target=*/false, /*generation=*/true);
    auto index = TuningIndex::Load(damaged, kTarget, {});
    ASSERT_FALSE(index.ok());
    EXPECT_NE(index.error().message().find("damaged.db"), std::string::npos);
  }
  DamagedDatabase damaged(*f.db, /*target=*/true, /*generation=*/false);
  auto index = TuningIndex::Load(damaged, kTarget, {});
  ASSERT_TRUE(index.ok()) << index.error().ToString();
  CompileOptions explain;
  explain.target_features = true;
  auto plan = CompileGraph(*f.space, **index, explain);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code(), ErrorCode::kCorrupt);
  EXPECT_NE(plan.error().message().find("damaged.db"), std::string::npos);
}

TEST(Compiler, CompiledModelsMatchTheReferenceAndCompileDeterministically) {
  const graph::Graph graph = testing::LoadTestModel("encoder_postln_op17");
  auto index = TuningIndex::Empty({});
  auto a = CompiledModel::Compile(graph, {}, *index);
  auto b = CompiledModel::Compile(graph, {}, *index);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->compiled().plan, (*b)->compiled().plan);
  graph::TensorMap feeds;
  for (graph::ValueId v : graph.inputs) {
    graph::Tensor t(graph::DataType::kFloat32, graph.type(v).dims);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.1f * static_cast<float>(i % 17);
    feeds.emplace(graph.value(v).name, std::move(t));
  }
  auto got = (*a)->program().Run(feeds);
  auto want = graph::RunReference(graph, feeds);
  ASSERT_TRUE(got.ok() && want.ok());
  for (const auto& [name, tensor] : want->outputs)
    EXPECT_LT(testing::ScaledError(got->at(name), tensor), 1e-4) << name;
}

TEST(Compiler, TheFusedGraphHasOneCustomNodePerFusedKernelAndExports) {
  const graph::Graph graph = testing::LoadTestModel("encoder_postln_op17");
  fusion_space::FusionSpace space(graph, {});
  auto index = TuningIndex::Empty({});
  auto plan = CompileGraph(space, *index);
  ASSERT_TRUE(plan.ok());
  auto fused = FusedGraph(space, *plan);
  ASSERT_TRUE(fused.ok()) << fused.error().ToString();
  size_t custom = 0, multi = 0;
  for (const graph::Node& n : fused->nodes) custom += n.domain == kFusedDomain;
  for (const fusion_space::PlanGroup& g : plan->plan.groups) multi += g.nodes.size() > 1;
  EXPECT_EQ(custom, multi);
  EXPECT_EQ(fused->nodes.size(), plan->plan.groups.size());
  EXPECT_EQ(fused->inputs.size(), graph.inputs.size());
  EXPECT_EQ(fused->outputs.size(), graph.outputs.size());
  for (const graph::Node& n : fused->nodes)
    if (n.domain == kFusedDomain) {
      EXPECT_TRUE(n.attrs.Has("tiling") && n.attrs.Has("source") && n.attrs.Has("nodes"));
    }
  EXPECT_TRUE(graph::ExportOnnxBytes(*fused).ok());
}

constexpr const char* kOneConv = R"(graph g { input x: f32[1, 16, 12, 12]
  const w: f32[32, 16, 3, 3]  c = Conv(x, w) {pads=[1, 1, 1, 1]}  y = Relu(c)  output y })";

// The conv + ReLU group's task of `tasks` (null, and a failed test, if none).
const search::Task* ConvTask(const std::vector<search::Task>& tasks) {
  for (const search::Task& t : tasks)
    if (t.kind == fusion_space::KernelTemplate::kConv && t.nodes.size() == 2) return &t;
  ADD_FAILURE() << "no conv + ReLU task";
  return nullptr;
}

// The first tiling of `task`'s space that `wanted` accepts.
fusion_space::Tiling FindConvTiling(const search::Task& task,
                                    const std::function<bool(const kernels::ConvTiling&)>& wanted) {
  for (const fusion_space::Tiling& t : task.tilings().Enumerate())
    if (wanted(std::get<kernels::ConvTiling>(t))) return t;
  ADD_FAILURE() << "no tiling";
  return task.tilings().Default();
}

// The conv group's --explain detail of `plan`.
std::string ConvDetail(const CompiledPlan& plan) {
  std::string detail;
  for (const GroupDecision& d : plan.groups)
    if (d.kind == fusion_space::KernelTemplate::kConv) detail = d.choice.detail;
  return detail;
}

Result<CompiledPlan> CompileExplained(Fixture& f) {
  CompileOptions options;
  options.explain_alternatives = true;
  auto index = f.Index();
  return CompileGraph(*f.space, *index, options);
}

// --explain on a conv: the algorithm and layouts the plan runs, the fastest
// record of another algorithm and of other layouts, and how much slower.
TEST(Compiler, ExplainingAConvNamesItsAlgorithmLayoutsAndRunnersUp) {
  Fixture f(kOneConv);
  const auto tasks = search::ExtractTasks(f.graph, *f.space);
  const search::Task* conv = ConvTask(tasks);
  ASSERT_NE(conv, nullptr);
  using A = kernels::ConvAlgorithm;
  using L = kernels::ActivationLayout;
  auto find = [&](A a, L layout) {
    return FindConvTiling(*conv, [&](const kernels::ConvTiling& c) {
      return c.algorithm == a && c.in_layout == layout && c.out_layout == layout;
    });
  };
  AddGroupRecord(*f.db, *conv, find(A::kDirect, L::kNCHWc), 10e-6);
  AddGroupRecord(*f.db, *conv, find(A::kDirect, L::kNCHW), 11e-6);
  AddGroupRecord(*f.db, *conv, find(A::kWinograd4, L::kNCHWc), 12e-6);
  auto plan = CompileExplained(f);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  const std::string detail = ConvDetail(*plan);
  EXPECT_NE(detail.find("algorithm direct, layout nchw16c -> nchw16c"), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("runner-up algorithm winograd4 0.012 ms (+20%)"), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("runner-up layout nchw -> nchw 0.011 ms (+10%)"), std::string::npos)
      << detail;
  // The graph's input and output are NCHW: the plan transforms both.
  const std::string text = ExplainPlan(*f.space, *plan, true);
  EXPECT_NE(text.find("layouts     2 transforms: 'x' nchw -> nchw16c, 'y' nchw16c -> nchw"),
            std::string::npos)
      << text;
}

// A mixed compile names the conv's precision and the fastest record of the
// other one.
TEST(Compiler, ExplainingAMixedConvNamesItsPrecisionAndTheOther) {
  Fixture f(kOneConv);
  kernels::KernelConfig mixed;
  mixed.offer_bf16 = true;
  f.space = std::make_unique<fusion_space::FusionSpace>(f.graph, mixed);
  const auto tasks = search::ExtractTasks(f.graph, *f.space);
  const search::Task* conv = ConvTask(tasks);
  ASSERT_NE(conv, nullptr);
  auto find = [&](kernels::Precision p) {
    return FindConvTiling(*conv, [&](const kernels::ConvTiling& c) {
      return c.algorithm == kernels::ConvAlgorithm::kIm2colGemm && c.precision == p &&
             c.in_layout == kernels::ActivationLayout::kNCHW &&
             c.out_layout == kernels::ActivationLayout::kNCHW;
    });
  };
  AddGroupRecord(*f.db, *conv, find(kernels::Precision::kBf16), 10e-6);
  AddGroupRecord(*f.db, *conv, find(kernels::Precision::kF32), 15e-6);
  auto plan = CompileExplained(f);
  ASSERT_TRUE(plan.ok()) << plan.error().ToString();
  const std::string detail = ConvDetail(*plan);
  EXPECT_NE(detail.find("algorithm im2col_gemm in bf16, layout nchw -> nchw"), std::string::npos)
      << detail;
  EXPECT_NE(detail.find("runner-up precision f32 0.015 ms (+50%)"), std::string::npos) << detail;
}

// A plan from group records takes its conv layouts across groups: c0 was
// fastest alone writing NCHW16c and c1 reading NCHW, which would need a
// transform between them; c1's recorded NCHW16c reader costs less than
// that transform.
TEST(Compiler, GroupRecordsTakeTheirLayoutsWithTheirNeighbours) {
  Fixture f(R"(graph g { input x: f32[1, 16, 8, 8]  const w0: f32[32, 16, 3, 3]
    const w1: f32[32, 32, 1, 1]
    c0 = Conv(x, w0) {pads=[1, 1, 1, 1]}  r0 = Relu(c0)  c1 = Conv(r0, w1)  output c1 })");
  const auto tasks = search::ExtractTasks(f.graph, *f.space);
  using A = kernels::ConvAlgorithm;
  using L = kernels::ActivationLayout;
  auto find = [](const search::Task& task, L in, L out) {
    for (const fusion_space::Tiling& t : task.tilings().Enumerate()) {
      const auto& c = std::get<kernels::ConvTiling>(t);
      if (c.algorithm == A::kDirect && c.in_layout == in && c.out_layout == out) return t;
    }
    ADD_FAILURE() << "no tiling";
    return task.tilings().Default();
  };
  const fusion_space::Plan greedy = f.space->Greedy();
  ASSERT_EQ(greedy.groups.size(), 2u);
  std::map<std::vector<int32_t>, GroupChoice> choices;
  fusion_space::Plan plan = greedy;
  for (size_t i = 0; i < 2; ++i) {
    const search::Task* task = nullptr;
    for (const search::Task& t : tasks)
      if (t.nodes == greedy.groups[i].nodes) task = &t;
    ASSERT_NE(task, nullptr);
    const auto fast = i == 0 ? find(*task, L::kNCHW, L::kNCHWc) : find(*task, L::kNCHW, L::kNCHW);
    const auto other = i == 0 ? find(*task, L::kNCHW, L::kNCHW) : find(*task, L::kNCHWc, L::kNCHW);
    AddGroupRecord(*f.db, *task, fast, 10e-6);
    AddGroupRecord(*f.db, *task, other, 10.2e-6);
    GroupChoice c;
    c.source = PlanSource::kExact;
    c.tiling = fast;
    c.cost = 10e-6;
    c.measured_seconds = 10e-6;
    choices[greedy.groups[i].nodes] = c;
    plan.groups[i].tiling = fast;
  }
  auto index = f.Index();
  ASSERT_TRUE(ChooseRecordedLayouts(*f.space, *index, &plan, &choices).ok());
  const auto& c0 = std::get<kernels::ConvTiling>(plan.groups[0].tiling);
  const auto& c1 = std::get<kernels::ConvTiling>(plan.groups[1].tiling);
  EXPECT_EQ(c0.out_layout, L::kNCHWc);
  EXPECT_EQ(c1.in_layout, L::kNCHWc);  // reads what c0 wrote
  const GroupChoice& changed = choices.at(plan.groups[1].nodes);
  EXPECT_DOUBLE_EQ(*changed.measured_seconds, 10.2e-6);
  EXPECT_NE(changed.detail.find("layouts chosen with its neighbours"), std::string::npos);
  EXPECT_TRUE(f.space->Validate(plan).allowed());
}

}  // namespace
}  // namespace fusetune::compiler
