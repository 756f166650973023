// search/shard_plan.h and search/shard_job.h: the plan's invariants (quotas
// within bounds and summing to the budget, every task in exactly one shard,
// siblings together, balanced loads, the same plan from any shard), and the
// shard job's equivalences over real SQLite databases with a deterministic
// measurement double: N shards merged hold exactly the records of one shard
// of all the tasks; a shard run again, or stopped and run again, measures
// nothing twice; wave 2 continues from wave 1's merged records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "common/hash.h"
#include "db/jsonl.h"
#include "search/shard_job.h"
#include "search/shard_plan.h"
#include "target/calibration.h"
#include "tests/fusion_space/model_util.h"
#include "tests/search/hash_timed_device.h"

namespace fusetune::search {
namespace {

std::vector<ShardTaskInfo> SomeTasks() {
  std::vector<ShardTaskInfo> tasks;
  for (int i = 0; i < 40; ++i) {
    ShardTaskInfo t;
    t.key = "task" + std::to_string(i);
    t.unit = i < 30 ? "unit" + std::to_string(i % 12) : "";
    t.occurrences = 1 + i % 3;
    t.predicted_seconds = 1e-5 * (1 + (i * 7919) % 50);
    t.space_size = i % 5 == 0 ? 4 : 200;
    t.reference = i >= 36;
    tasks.push_back(t);
  }
  return tasks;
}

TEST(ShardPlan, QuotasStayWithinBoundsAndSpendTheBudget) {
  const auto tasks = SomeTasks();
  ShardPlanOptions o;
  o.shards = 3;
  o.trials = 2000;
  auto plan = PlanShards(tasks, o);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->total_quota(), 2000);
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].reference) {
      EXPECT_EQ(plan->quota[t], 1) << t;
      continue;
    }
    EXPECT_GE(plan->quota[t], std::min<int64_t>(o.min_trials, tasks[t].space_size)) << t;
    EXPECT_LE(plan->quota[t], tasks[t].space_size) << t;
  }
}

TEST(ShardPlan, EveryTaskInOneShardWithItsUnitAndLoadsBalanced) {
  const auto tasks = SomeTasks();
  ShardPlanOptions o;
  o.shards = 4;
  o.trials = 3000;
  auto plan = PlanShards(tasks, o);
  ASSERT_TRUE(plan.ok());
  std::multiset<int> listed;
  for (const auto& order : plan->order) listed.insert(order.begin(), order.end());
  EXPECT_EQ(listed.size(), tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t) EXPECT_EQ(listed.count(static_cast<int>(t)), 1u);
  std::map<std::string, int> unit_shard;
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].unit.empty()) continue;
    auto [it, added] = unit_shard.emplace(tasks[t].unit, plan->shard[t]);
    EXPECT_EQ(it->second, plan->shard[t]) << tasks[t].unit;
  }
  const auto [lo, hi] = std::minmax_element(plan->load.begin(), plan->load.end());
  EXPECT_LT(*hi, 1.35 * *lo);
}

TEST(ShardPlan, IsAFunctionOfItsInputsOnly) {
  const auto tasks = SomeTasks();
  ShardPlanOptions o;
  o.shards = 5;
  o.trials = 1500;
  auto a = PlanShards(tasks, o);
  auto b = PlanShards(tasks, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->quota, b->quota);
  EXPECT_EQ(a->shard, b->shard);
  EXPECT_EQ(a->order, b->order);
}

TEST(ShardPlan, SmallBudgetsStillGiveEveryTaskItsFirstRound) {
  const auto tasks = SomeTasks();
  ShardPlanOptions o;
  o.trials = 10;
  auto plan = PlanShards(tasks, o);
  ASSERT_TRUE(plan.ok());
  for (size_t t = 0; t < tasks.size(); ++t)
    EXPECT_GE(plan->quota[t], tasks[t].reference ? 1 : std::min<int64_t>(2, tasks[t].space_size));
}

TEST(ShardPlan, WaveQuotasGrowToTheQuota) {
  EXPECT_EQ(WaveQuota(10, 1, 2), 5);
  EXPECT_EQ(WaveQuota(11, 1, 2), 6);
  EXPECT_EQ(WaveQuota(11, 2, 2), 11);
  EXPECT_EQ(WaveQuota(1, 1, 3), 1);
  EXPECT_EQ(WaveQuota(7, 1, 1), 7);
}

TEST(ShardPlan, ErrorsAndShardSpecs) {
  EXPECT_FALSE(PlanShards({}, {}).ok());
  ShardPlanOptions o;
  o.shards = 0;
  EXPECT_FALSE(PlanShards(SomeTasks(), o).ok());
  auto spec = ParseShardSpec("2/8", "--shard");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->first, 2);
  EXPECT_EQ(spec->second, 8);
  for (const char* bad : {"0/8", "9/8", "2", "a/b", "2/0", "1/2/3", ""}) {
    auto r = ParseShardSpec(bad, "--shard");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message().find("--shard"), std::string::npos);
  }
}

class ShardJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fusetune_shard_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    graph_ = std::make_shared<const graph::Graph>(testing::LoadTestModel("encoder_postln_op13"));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A database with this machine's calibration: no test calibrates.
  std::unique_ptr<db::Database> Open(const std::string& name) {
    auto opened = db::MakeSqliteDatabase((dir_ / name).string());
    EXPECT_TRUE(opened.ok());
    target::Calibration c;
    c.target = target::DetectTarget();
    c.roofline.fma_gflops = 100;
    c.roofline.read_gbps = 20;
    c.threads = 2;
    const nlohmann::json j = target::CalibrationToJson(c);
    EXPECT_TRUE((*opened)->PutTarget({c.target.HashString(), j["target"].dump(), j.dump()}).ok());
    return std::move(*opened);
  }

  ShardJobOptions Options(int shard, int shards, int wave = 1, int waves = 1) {
    ShardJobOptions o;
    o.models = {{"encoder.onnx", graph_}};
    o.shard = shard;
    o.shards = shards;
    o.wave = wave;
    o.waves = waves;
    o.trials = 250;
    o.measure = [this](const measure::Candidate& c) { return device_(c); };
    return o;
  }

  Result<ShardJobResult> RunShard(db::Database& shard_db, db::Database* base,
                                  ShardJobOptions options, std::function<bool()> stop = {}) {
    ShardJobCallbacks cb;
    cb.calibrating = [] { ADD_FAILURE() << "calibrated"; };
    cb.should_stop = std::move(stop);
    FT_ASSIGN_OR_RETURN(auto job, ShardJob::Open(shard_db, base, std::move(options), cb));
    return job->Run();
  }

  static std::multiset<std::string> Records(db::Database& d) {
    std::multiset<std::string> out;
    EXPECT_TRUE(d.ForEachRecord({}, [&](const db::Record& r) {
                   out.insert(r.workload_key + "|" + r.plan);
                   return true;
                 }).ok());
    return out;
  }

  std::filesystem::path dir_;
  std::shared_ptr<const graph::Graph> graph_;
  testing::HashTimedDevice device_;
  const std::multiset<std::string>& seen_ = device_.measured;
};

TEST_F(ShardJobTest, ShardsMergedHoldExactlyTheRecordsOfOneMachine) {
  auto single = Open("single.db");
  auto r = RunShard(*single, nullptr, Options(1, 1));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stop, ShardStop::kDone);
  const auto want = Records(*single);
  ASSERT_GT(want.size(), 50u);

  auto merged = Open("merged.db");
  int64_t trials = 0;
  for (int i = 1; i <= 3; ++i) {
    auto shard = Open("shard" + std::to_string(i) + ".db");
    auto s = RunShard(*shard, nullptr, Options(i, 3));
    ASSERT_TRUE(s.ok()) << s.error().message();
    trials += s->trials;
    EXPECT_GT(s->trials, 0) << "shard " << i;
    ASSERT_TRUE(db::MergeDatabase(*merged, *shard).ok());
  }
  EXPECT_EQ(trials, r->trials);
  EXPECT_EQ(Records(*merged), want);
  // Merging again adds nothing.
  auto again = Open("shard1.db");
  auto m = db::MergeDatabase(*merged, *again);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->records_added, 0);
}

TEST_F(ShardJobTest, AShardRunAgainOrStoppedMeasuresNothingTwice) {
  auto shard = Open("shard.db");
  int polls = 0;
  auto first = RunShard(*shard, nullptr, Options(2, 3), [&] { return ++polls > 40; });
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ(first->stop, ShardStop::kInterrupted);
  auto second = RunShard(*shard, nullptr, Options(2, 3));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->stop, ShardStop::kDone);
  EXPECT_EQ(second->job_id, first->job_id);  // the same job row, continued
  for (const auto& plan : seen_) EXPECT_EQ(seen_.count(plan), 1u) << plan;
  const size_t measured = seen_.size();
  auto third = RunShard(*shard, nullptr, Options(2, 3));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->trials, 0);
  EXPECT_EQ(seen_.size(), measured);
  EXPECT_EQ(third->trials_total, third->quota);
}

TEST_F(ShardJobTest, WaveTwoContinuesFromTheMergedWaveOne) {
  auto team = Open("team.db");
  auto w1 = Open("w1.db");
  auto r1 = RunShard(*w1, nullptr, Options(1, 1, 1, 2));
  ASSERT_TRUE(r1.ok());
  ASSERT_TRUE(db::MergeDatabase(*team, *w1).ok());
  auto w2 = Open("w2.db");
  auto r2 = RunShard(*w2, team.get(), Options(1, 1, 2, 2));
  ASSERT_TRUE(r2.ok()) << r2.error().message();
  EXPECT_GT(r2->trials, 0);
  EXPECT_EQ(r1->trials + r2->trials, r2->job_quota);
  for (const auto& plan : seen_) EXPECT_EQ(seen_.count(plan), 1u) << plan;
}

TEST_F(ShardJobTest, BadOptionsAreErrors) {
  auto d = Open("bad.db");
  auto o = Options(4, 3);
  EXPECT_FALSE(RunShard(*d, nullptr, o).ok());
  o = Options(1, 3);
  o.trials = 0;
  auto r = RunShard(*d, nullptr, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("--trials"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::search
