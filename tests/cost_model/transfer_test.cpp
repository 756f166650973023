// cost_model/transfer: the arms and their training rows, validation
// workloads unseen by every arm, a ranking that carries over between two
// targets whose times differ by a factor, repeatability, and clear errors.
#include "cost_model/transfer.h"

#include <gtest/gtest.h>

#include <set>

#include "common/rng.h"
#include "cost_model/features.h"
#include "tests/cost_model/records_util.h"

namespace fusetune::cost_model {
namespace {

using namespace test_records;  // NOLINT: the record-database helpers of these tests

constexpr int kTilingsPerTask = 12;

// Target "a" times each tiling at its analytical time (with 10% noise), "b"
// at twice that (other noise): the same ranking, other seconds.
// With `from_a_job`, every record is a tuning job's.
std::unique_ptr<db::Database> TwoTargets(const Groups& g, bool from_a_job = false) {
  auto db = DatabaseWithTasks(g);
  int64_t job = 0;
  if (from_a_job) {
    auto created = db->CreateJob({});
    FT_CHECK(created.ok(), "job");
    job = *created;
  }
  FT_CHECK(db->PutTarget({"a", "{}", "{}"}).ok(), "target a");
  FT_CHECK(db->PutTarget({"b", "{}", "{}"}).ok(), "target b");
  Rng rng(11);
  std::vector<db::Record> records;
  for (const search::Task& t : g.tasks) {
    const GroupInfo info = MakeGroupInfo(*t.graph, t.instance());
    std::set<std::string> seen;
    for (int i = 0; i < 4 * kTilingsPerTask && static_cast<int>(seen.size()) < kTilingsPerTask;
         ++i) {
      const fusion_space::Tiling tiling = t.tilings().Sample(rng);
      if (!seen.insert(fusion_space::TilingToString(tiling)).second) continue;
      FeatureMatrix x;
      x.Add(info, tiling, TargetFeatures{});
      const double seconds = x.parts.front().memory + x.parts.front().compute;
      db::Record a = RecordOf(t, tiling, seconds * (1 + 0.1 * rng.Uniform()));
      db::Record b = RecordOf(t, tiling, 2 * seconds * (1 + 0.1 * rng.Uniform()));
      a.target = "a";
      b.target = "b";
      if (job) a.job_id = b.job_id = job;
      records.push_back(a);
      records.push_back(b);
    }
  }
  FT_CHECK(db->CommitRecords(records).ok(), "records");
  return db;
}

TransferOptions Options() {
  TransferOptions o;
  o.from = "a";
  o.to = "b";
  o.fractions = {0.25};
  o.xgboost.form = "direct";
  o.xgboost.rounds = 30;
  o.xgboost.ensemble = 1;
  return o;
}

TEST(Transfer, ArmsTrainOnTheirRowsAndNeverOnValidationWorkloads) {
  Groups g = LoadGroups("encoder_postln_op13");
  auto db = TwoTargets(g);
  auto r = EvaluateTransfer(*db, Options());
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->arms.size(), 5u);
  EXPECT_EQ(r->arms[0].name, "all of b");
  EXPECT_EQ(r->arms[1].name, "a + 25% of b");
  EXPECT_EQ(r->arms[2].name, "25% of b");
  EXPECT_EQ(r->arms[3].name, "a");
  EXPECT_EQ(r->arms[4].name, "analytical");
  EXPECT_EQ(r->arms[4].train_samples, 0);
  EXPECT_EQ(r->from_samples, r->to_samples);
  // Both targets measured the same tilings of every workload, so "a" without
  // the validation workloads has as many rows as b's training workloads.
  const int64_t train = r->arms[0].train_samples;
  EXPECT_EQ(r->arms[3].train_samples, train);
  EXPECT_LT(train, r->to_samples);
  EXPECT_NEAR(static_cast<double>(r->arms[2].train_samples), 0.25 * train, 1.0);
  EXPECT_EQ(r->arms[1].train_samples, train + r->arms[2].train_samples);
  EXPECT_EQ(r->SpearmanGap(r->arms[0]), 0);
  for (const TransferArm& arm : r->arms) {
    EXPECT_EQ(arm.metrics.workloads, r->valid_workloads) << arm.name;
    EXPECT_FALSE(arm.tuning.has_value()) << "no record came from a tuning job";
  }
}

TEST(Transfer, TuningJobRowsAreScoredApartInEveryArm) {
  Groups g = LoadGroups("encoder_postln_op13");
  auto db = TwoTargets(g, true);
  TransferOptions o = Options();
  o.splits = 2;
  auto r = EvaluateTransfer(*db, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  for (const TransferArm& arm : r->arms) {
    ASSERT_TRUE(arm.tuning.has_value()) << arm.name;
    // Every row is a job's: the two sets of figures are the same.
    EXPECT_DOUBLE_EQ(arm.tuning->spearman, arm.metrics.spearman) << arm.name;
    EXPECT_EQ(arm.tuning->workloads, arm.metrics.workloads) << arm.name;
  }
}

TEST(Transfer, ARankingThatCarriesOverRanksTheNewTargetAsWellAsItsOwnRecords) {
  Groups g = LoadGroups("encoder_postln_op13");
  auto db = TwoTargets(g);
  TransferOptions o = Options();
  o.splits = 2;
  auto r = EvaluateTransfer(*db, o);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_GT(r->arms[0].metrics.spearman, 0.5);
  EXPECT_GT(r->SpearmanGap(r->arms[1]), -0.1) << "b's times are a's doubled";
  EXPECT_GT(r->SpearmanGap(r->arms[3]), -0.1);
  // The same inputs give the same figures.
  auto again = EvaluateTransfer(*db, o);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < r->arms.size(); ++i)
    EXPECT_EQ(again->arms[i].metrics.spearman, r->arms[i].metrics.spearman) << r->arms[i].name;
}

TEST(Transfer, BalancingWeighsOnlyTheArmsThatMixTheTwoTargets) {
  Groups g = LoadGroups("encoder_postln_op13");
  auto db = TwoTargets(g);
  TransferOptions plain = Options(), balanced = Options();
  balanced.balance = true;
  auto p = EvaluateTransfer(*db, plain);
  auto b = EvaluateTransfer(*db, balanced);
  ASSERT_TRUE(p.ok() && b.ok());
  ASSERT_EQ(p->arms.size(), b->arms.size());
  for (size_t i = 0; i < p->arms.size(); ++i) {
    EXPECT_EQ(p->arms[i].train_samples, b->arms[i].train_samples) << p->arms[i].name;
    const bool mixes = p->arms[i].uses_from && p->arms[i].fraction > 0;
    if (!mixes) {
      EXPECT_EQ(p->arms[i].metrics.spearman, b->arms[i].metrics.spearman) << p->arms[i].name;
    }
  }
}

TEST(Transfer, BadTargetsAndSharesAreClearErrors) {
  Groups g = LoadGroups("encoder_postln_op13");
  auto db = TwoTargets(g);
  TransferOptions same = Options();
  same.to = "a";
  auto r = EvaluateTransfer(*db, same);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("same target"), std::string::npos) << r.error().message();
  TransferOptions unknown = Options();
  unknown.to = "c";
  r = EvaluateTransfer(*db, unknown);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("target c"), std::string::npos) << r.error().message();
  TransferOptions share = Options();
  share.fractions = {1.5};
  r = EvaluateTransfer(*db, share);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("fraction"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace fusetune::cost_model
