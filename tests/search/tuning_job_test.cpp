// search/tuning_job.h: the job's lifecycle over a real SQLite database with a
// measurement double: a new job commits every result and ends done with its
// spec and summary stored; a stop predicate ends it interrupted; resuming
// continues the same job with its budget and measures nothing twice; the
// target row is reused, not calibrated again; and the errors of resuming.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "common/hash.h"
#include "measure/result.h"
#include "search/job_target.h"
#include "search/tuned_sizes.h"
#include "search/tuning_job.h"
#include "target/calibration.h"
#include "target/target.h"
#include "tests/fusion_space/model_util.h"
#include "tests/search/hash_timed_device.h"

namespace fusetune::search {
namespace {

using testing::HashTimedDevice;

class TuningJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("fusetune_job_test_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db");
    std::filesystem::remove(path_);
    auto opened = db::MakeSqliteDatabase(path_.string());
    ASSERT_TRUE(opened.ok()) << opened.error().message();
    database_ = std::move(*opened);
    // This machine's calibration, as an earlier job would have stored it:
    // no job in these tests calibrates.
    target::Calibration c;
    c.target = target::DetectTarget();
    c.roofline.fma_gflops = 100;
    c.roofline.read_gbps = 20;
    c.threads = 2;
    const nlohmann::json calibration = target::CalibrationToJson(c);
    ASSERT_TRUE(
        database_
            ->PutTarget({c.target.HashString(), calibration["target"].dump(), calibration.dump()})
            .ok());
    graph_ = std::make_shared<const graph::Graph>(testing::LoadTestModel("encoder_postln_op13"));
  }
  void TearDown() override {
    database_.reset();
    for (const char* suffix : {"", "-wal", "-shm", ".b", ".b-wal", ".b-shm"})
      std::filesystem::remove(path_.string() + suffix);
  }

  TuningJobOptions Options(int64_t trials) {
    TuningJobOptions o;
    o.model = "encoder.onnx";
    o.tuner.max_trials = trials;
    o.tuner.model_update_every = 0;
    o.measure = [this](const measure::Candidate& c) { return device_(c); };
    return o;
  }
  TuningJobCallbacks Callbacks(std::function<bool()> stop = {}) {
    TuningJobCallbacks cb;
    cb.calibrating = [this] { ++calibrations_; };
    cb.committed = [this](const db::Record& r) { committed_.push_back(r); };
    cb.should_stop = std::move(stop);
    return cb;
  }
  db::JobEntry Job(int64_t id) {
    auto job = database_->GetJob(id);
    EXPECT_TRUE(job.ok() && job->has_value());
    return job.ok() && job->has_value() ? **job : db::JobEntry{};
  }
  int64_t RecordsOfJob(int64_t id) {
    db::RecordFilter filter;
    filter.job_id = id;
    int64_t n = 0;
    EXPECT_TRUE(database_->ForEachRecord(filter, [&](const db::Record&) { return ++n > 0; }).ok());
    return n;
  }

  std::filesystem::path path_;
  std::unique_ptr<db::Database> database_;
  std::shared_ptr<const graph::Graph> graph_;
  HashTimedDevice device_;
  std::vector<db::Record> committed_;
  int calibrations_ = 0;
};

TEST_F(TuningJobTest, ANewJobCommitsEveryResultAndEndsDoneWithItsSummary) {
  auto job = TuningJob::Open(*database_, graph_, Options(60), Callbacks());
  ASSERT_TRUE(job.ok()) << job.error().message();
  EXPECT_FALSE((*job)->resumed());
  EXPECT_GT((*job)->tasks(), 0);
  EXPECT_EQ((*job)->target(),
            target::TargetKey(target::DetectTarget(), target::CacheProtocol::kFlushed));
  EXPECT_EQ(calibrations_, 0) << "the stored calibration is used";
  auto result = (*job)->Run();
  ASSERT_TRUE(result.ok()) << result.error().message();
  EXPECT_EQ(result->job_id, (*job)->job_id());
  EXPECT_FALSE(result->interrupted);
  EXPECT_EQ(result->summary.trials, 60);
  EXPECT_EQ(result->summary.stop_reason, "trials");
  ASSERT_TRUE(result->summary.best.has_value());
  EXPECT_LE(result->summary.best->seconds, result->summary.unfused->seconds);
  // Every measurement is in the database, under this job and target.
  EXPECT_EQ(testing::RunsOfRecords(committed_), device_.measured);
  EXPECT_EQ(RecordsOfJob(result->job_id), static_cast<int64_t>(committed_.size()));
  for (const db::Record& r : committed_) {
    EXPECT_GT(r.id, 0);
    EXPECT_EQ(r.target, (*job)->target());
  }
  // The job row: its spec, and its end state with the summary.
  const db::JobEntry row = Job(result->job_id);
  EXPECT_EQ(row.state, "done");
  const auto spec = nlohmann::json::parse(row.spec);
  EXPECT_EQ(spec["model"], "encoder.onnx");
  EXPECT_EQ(spec["graph_key"], (*job)->graph_key());
  EXPECT_EQ(spec["trials"], 60);
  EXPECT_EQ(spec["caches"], "flushed");
  const auto progress = nlohmann::json::parse(row.progress);
  EXPECT_EQ(progress["summary"], SummaryToJson(result->summary));
}

TEST_F(TuningJobTest, AJobOfAModelWithSymbolicDimensionsRecordsItsSizes) {
  TuningJobOptions options = Options(4);
  options.model_key = "0123456789abcdef";
  options.dims = {{"seq", 16}, {"batch", 1}};
  auto job = TuningJob::Open(*database_, graph_, options, Callbacks());
  ASSERT_TRUE(job.ok()) << job.error().message();
  ASSERT_TRUE((*job)->Run().ok());
  using Sizes = std::map<std::string, std::vector<int64_t>>;
  auto sizes = TunedSizes(*database_, "0123456789abcdef");
  ASSERT_TRUE(sizes.ok()) << sizes.error().message();
  EXPECT_EQ(*sizes, (Sizes{{"batch", {1}}, {"seq", {16}}}));
  // A job without a key (a model of fixed shapes) records none.
  const auto spec = nlohmann::json::parse(Job((*job)->job_id()).spec);
  EXPECT_EQ(spec["model_key"], "0123456789abcdef");
  auto plain = TuningJob::Open(*database_, graph_, Options(4), Callbacks());
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  EXPECT_FALSE(nlohmann::json::parse(Job((*plain)->job_id()).spec).contains("model_key"));
}

TEST_F(TuningJobTest, TheStopPredicateEndsTheJobInterruptedAndResumingFinishesIt) {
  int polls = 0;
  auto first =
      TuningJob::Open(*database_, graph_, Options(120), Callbacks([&] { return ++polls > 30; }));
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto stopped = (*first)->Run();
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->interrupted);
  EXPECT_EQ(stopped->summary.stop_reason, "interrupted");
  EXPECT_LT(stopped->summary.trials, 120);
  EXPECT_EQ(Job(stopped->job_id).state, "interrupted");
  const std::multiset<std::string> measured_before = device_.measured;

  // No budget given: the job's own (120 trials); its trials so far come
  // from its records.
  TuningJobOptions again = Options(0);
  again.resume = true;
  auto second = TuningJob::Open(*database_, graph_, again, Callbacks());
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_TRUE((*second)->resumed());
  EXPECT_EQ((*second)->job_id(), stopped->job_id);
  EXPECT_EQ((*second)->trials_before(), stopped->summary.trials);
  auto done = (*second)->Run();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_FALSE(done->interrupted);
  EXPECT_EQ(done->summary.trials, 120);
  EXPECT_EQ(done->summary.stop_reason, "trials");
  EXPECT_EQ(Job(done->job_id).state, "done");
  // Each candidate once: a confirmed whole plan's runs make one record (the
  // showdown's runs aside).
  testing::ExpectEachCandidateRecordedOnce(committed_, device_.measured);
  EXPECT_GT(device_.measured.size(), measured_before.size());

  // A finished job is not resumed.
  auto none = TuningJob::Open(*database_, graph_, again, Callbacks());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), ErrorCode::kNotFound);
}

TEST_F(TuningJobTest, AResumedJobKeepsItsCacheProtocol) {
  auto first = TuningJob::Open(*database_, graph_, Options(20), Callbacks([] { return true; }));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Run().ok());
  TuningJobOptions warm = Options(0);
  warm.resume = true;
  warm.caches = target::CacheProtocol::kWarm;
  auto refused = TuningJob::Open(*database_, graph_, warm, Callbacks());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("caches flushed"), std::string::npos);
}

TEST_F(TuningJobTest, AResumedJobKeepsSearchingWithOrWithoutTheModel) {
  auto guided = TuningJob::Open(*database_, graph_, Options(20), Callbacks([] { return true; }));
  ASSERT_TRUE(guided.ok());
  ASSERT_TRUE((*guided)->Run().ok());
  TuningJobOptions unguided = Options(0);
  unguided.resume = true;
  unguided.tuner.guided = false;
  auto refused = TuningJob::Open(*database_, graph_, unguided, Callbacks());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("--no-model"), std::string::npos);

  // A job started without the model resumes without it, unasked.
  TuningJobOptions first = Options(20);
  first.tuner.guided = false;
  first.model = "other.onnx";
  auto job = TuningJob::Open(*database_, graph_, first, Callbacks([] { return true; }));
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE((*job)->Run().ok());
  TuningJobOptions again = Options(0);
  again.model = "other.onnx";
  again.resume = true;
  auto resumed = TuningJob::Open(*database_, graph_, again, Callbacks());
  ASSERT_TRUE(resumed.ok()) << resumed.error().message();
  committed_.clear();
  ASSERT_TRUE((*resumed)->Run().ok());
  int unguided_notes = 0;
  for (const db::Record& r : committed_) {
    const auto metrics = measure::MetricsFromText(r.metrics);
    if (!metrics.ok() || !metrics->search || metrics->search->plan_kind) continue;
    EXPECT_EQ(metrics->search->model, "none/random");
    ++unguided_notes;
  }
  EXPECT_GT(unguided_notes, 0);
}

TEST_F(TuningJobTest, AWarmJobMeasuresUnderTheWarmKeyWithTheStoredCalibration) {
  TuningJobOptions warm = Options(10);
  warm.caches = target::CacheProtocol::kWarm;
  auto job = TuningJob::Open(*database_, graph_, warm, Callbacks());
  ASSERT_TRUE(job.ok()) << job.error().message();
  EXPECT_EQ(calibrations_, 0);
  EXPECT_EQ((*job)->target(),
            target::TargetKey(target::DetectTarget(), target::CacheProtocol::kWarm));
  auto stored = database_->GetTarget((*job)->target());
  ASSERT_TRUE(stored.ok() && stored->has_value()) << "the warm key has its target row";
  ASSERT_TRUE((*job)->Run().ok());
  EXPECT_EQ(nlohmann::json::parse(Job((*job)->job_id()).spec)["caches"], "warm");
}

TEST_F(TuningJobTest, SameSeedSameBestPlan) {
  auto a = TuningJob::Open(*database_, graph_, Options(80), Callbacks());
  ASSERT_TRUE(a.ok());
  auto first = (*a)->Run();
  ASSERT_TRUE(first.ok());
  // A second database: nothing of the first job is a prior.
  const auto other_path = path_.string() + ".b";
  std::filesystem::remove(other_path);
  {
    auto other = db::MakeSqliteDatabase(other_path);
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->PutTarget(*database_->GetTarget((*a)->target()).value()).ok());
    HashTimedDevice device;
    TuningJobOptions options = Options(80);
    options.measure = [&](const measure::Candidate& c) { return device(c); };
    auto b = TuningJob::Open(**other, graph_, options, {});
    ASSERT_TRUE(b.ok());
    auto second = (*b)->Run();
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(first->summary.best_plan, second->summary.best_plan);
    EXPECT_EQ(device.measured, device_.measured);
  }
}

}  // namespace
}  // namespace fusetune::search
