// cluster/: batch scripts, Slurm's job lines, and the submission and status
// logic against a scheduler double: the chain of dependencies, continuing a
// job from its first unmerged wave, refusing while its jobs run or when the
// flags that shape the plan differ, and the state a status reports from
// step files and Slurm's word. (The real Slurm is tests/cluster/slurm_test.sh.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "cluster/report.h"
#include "cluster/scaling.h"
#include "cluster/slurm.h"
#include "cluster/submit.h"
#include "tests/cluster/cluster_fixture.h"

namespace fusetune::cluster {
namespace {

TEST(Slurm, ScriptsCarryTheStepsOptions) {
  BatchScript s;
  s.name = "fusetune-wave1";
  s.array_size = 3;
  s.seconds = 90;
  s.requeue = true;
  s.output = "/logs/w1-%a.log";
  s.commands = {"echo hi"};
  SlurmOptions o;
  o.partition = "cpu";
  o.constraint = "zen5";
  o.extra = {"--qos=low"};
  const std::string text = ScriptText(s, o);
  for (const char* want : {"#!/bin/bash\n", "#SBATCH --array=1-3\n", "#SBATCH --time=0:03:00\n",
                           "#SBATCH --requeue\n", "#SBATCH --partition=cpu\n",
                           "#SBATCH --constraint=zen5\n", "#SBATCH --qos=low\n", "echo hi\n"})
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  EXPECT_EQ(text.find("--account"), std::string::npos);
}

TEST(Slurm, ParsesScontrolLines) {
  const auto jobs = ParseScontrolJobs(
      "JobId=21 ArrayJobId=17 ArrayTaskId=2 JobName=x JobState=FAILED Reason=NonZeroExitCode "
      "Restarts=1 ExitCode=1:0 NodeList=node2\n"
      "JobId=22 JobName=merge JobState=CANCELLED Reason=DependencyNeverSatisfied Restarts=0\n"
      "JobId=17 ArrayJobId=17 ArrayTaskId=3-4%2 JobState=PENDING Reason=JobArrayTaskLimit\n");
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[2].id, "17_3");
  EXPECT_EQ(jobs[3].id, "17_4");
  EXPECT_EQ(jobs[3].state_text, "PENDING");
  EXPECT_EQ(jobs[0].id, "17_2");
  EXPECT_EQ(jobs[0].state_text, "FAILED");
  EXPECT_EQ(jobs[0].restarts, 1);
  EXPECT_EQ(jobs[0].nodes, "node2");
  EXPECT_EQ(jobs[1].id, "22");
  EXPECT_EQ(jobs[1].reason, "DependencyNeverSatisfied");
  EXPECT_EQ(jobs[0].state, SlurmState::kFailed);
  EXPECT_TRUE(jobs[0].ended());
  EXPECT_TRUE(jobs[1].ended());
  EXPECT_TRUE(jobs[1].never_runs());
  EXPECT_FALSE(jobs[1].killed_from_outside());
  EXPECT_FALSE(jobs[3].ended());
  EXPECT_TRUE(jobs[3].waiting());
  EXPECT_EQ(ParseSlurmState("TIMEOUT"), SlurmState::kTimeout);
  EXPECT_EQ(ParseSlurmState("SPECIAL_EXIT"), SlurmState::kOther);
}

TEST_F(ClusterTest, SubmitChainsEveryStepAfterTheOneBefore) {
  FakeScheduler slurm;
  auto out = SubmitJob(spec_, &slurm);
  ASSERT_TRUE(out.ok()) << out.error().message();
  ASSERT_EQ(slurm.submitted.size(), 5u);  // wave, merge, wave, merge, finish
  EXPECT_TRUE(slurm.submitted[0].after_ok.empty());
  EXPECT_TRUE(slurm.submitted[0].after_any.empty());
  // A merge waits for its wave's array to end however it ended (it runs
  // again the shards killed from outside); every other step for success.
  for (size_t i = 1; i < 5; ++i) {
    const bool merge = i % 2 == 1;
    EXPECT_EQ(merge ? slurm.submitted[i].after_any : slurm.submitted[i].after_ok,
              std::vector<std::string>{std::to_string(100 + i)});
    EXPECT_TRUE((merge ? slurm.submitted[i].after_ok : slurm.submitted[i].after_any).empty());
  }
  const JobPaths paths(spec_.db);
  EXPECT_EQ(slurm.submitted[0].script, paths.wave_script(1));
  EXPECT_EQ(slurm.submitted[4].script, paths.finish_script());
  auto saved = LoadJob(spec_.db);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  ASSERT_EQ((*saved)->submissions.size(), 1u);
  EXPECT_EQ((*saved)->submissions[0].wave_jobs, (std::vector<std::string>{"101", "103"}));
  EXPECT_TRUE(std::filesystem::exists(paths.dir + "/submit.sh"));
}

TEST_F(ClusterTest, SubmitAgainRefusesWhileRunningThenContinuesFromTheFirstUnmergedWave) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());
  auto running = SubmitJob(spec_, &slurm);
  ASSERT_FALSE(running.ok());
  EXPECT_NE(running.error().message().find("still queued or running"), std::string::npos);

  slurm.FinishAll();
  MarkDone(JobPaths(spec_.db).merge_status(1));
  auto again = SubmitJob(spec_, &slurm);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_TRUE(again->continued);
  EXPECT_EQ(again->first_wave, 2);
  ASSERT_EQ(slurm.submitted.size(), 5u + 3u);  // wave 2, merge 2, finish
  EXPECT_EQ(slurm.submitted[5].script, JobPaths(spec_.db).wave_script(2));
  EXPECT_TRUE(slurm.submitted[5].after_ok.empty());

  slurm.FinishAll();
  MarkDone(JobPaths(spec_.db).merge_status(2));
  MarkDone(JobPaths(spec_.db).finish_status());
  auto done = SubmitJob(spec_, &slurm);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->nothing_to_do);
  EXPECT_EQ(slurm.submitted.size(), 8u);
}

TEST_F(ClusterTest, CancelStopsTheFinishAndTheMergesBeforeTheShards) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());  // 101 wave 1, 102 merge 1, 103, 104, 105 finish
  auto job = LoadJob(spec_.db);
  ASSERT_TRUE(job.ok());
  auto cancelled = CancelJob(&**job, slurm);
  ASSERT_TRUE(cancelled.ok()) << cancelled.error().message();
  const std::vector<std::string> order{"105", "104", "102", "103", "101"};
  EXPECT_EQ(*cancelled, order);
  EXPECT_EQ(slurm.cancelled, order);
  // The status says cancelled, not failed; submitting again continues.
  auto saved = LoadJob(spec_.db);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  auto status = CollectStatus(**saved, &slurm);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["state"], "cancelled");
  auto again = SubmitJob(spec_, &slurm);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_TRUE(again->continued);
}

TEST_F(ClusterTest, SubmitAgainCancelsStepsThatCanNeverRun) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());
  slurm.FinishAll();
  slurm.states["101_2"] = SlurmJob("101_2", "FAILED", "NonZeroExitCode", 0, "node2");
  // A Slurm that leaves the steps after a failure pending for ever.
  for (const char* id : {"103", "104", "105"})
    slurm.states[id] = SlurmJob(id, "PENDING", "DependencyNeverSatisfied", 0, "");
  auto again = SubmitJob(spec_, &slurm);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(slurm.cancelled, (std::vector<std::string>{"103", "104", "105"}));
  EXPECT_TRUE(again->continued);
}

TEST_F(ClusterTest, SubmitRefusesOtherPlanFlagsOnTheSameDatabase) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, nullptr).ok());  // --dry-run: scripts only
  EXPECT_TRUE(slurm.submitted.empty());
  ClusterSpec other = spec_;
  other.nodes = 4;
  auto r = SubmitJob(other, &slurm);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("--nodes"), std::string::npos);
}

TEST_F(ClusterTest, StatusNamesTheFailedShardAndTheStepsNotRun) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());
  const JobPaths paths(spec_.db);
  MarkDone(paths.shard_status(1, 1));
  StepStatus failed = StartedStep();
  failed.state = StepState::kFailed;
  failed.error = "cannot open model '/models/b.onnx'";
  ASSERT_TRUE(WriteStep(paths.shard_status(1, 2), failed).ok());
  slurm.states["101_3"] = SlurmJob("101_3", "PENDING", "BeginTime", 1, "");
  StepStatus running = StartedStep();
  ASSERT_TRUE(WriteStep(paths.shard_status(1, 3), running).ok());
  // The wave's merge found shard 2 failed and failed the wave; Slurm
  // cancelled the steps after it.
  StepStatus merge = StartedStep();
  merge.state = StepState::kFailed;
  merge.error = "wave 1 failed: shard 2: cannot open model '/models/b.onnx'";
  ASSERT_TRUE(WriteStep(paths.merge_status(1), merge).ok());
  slurm.states["102"] = SlurmJob("102", "FAILED", "NonZeroExitCode", 0, "");
  for (const char* task : {"103_1", "103_2", "103_3"})
    slurm.states[task] = SlurmJob(task, "PENDING", "DependencyNeverSatisfied", 0, "");
  slurm.states["104"] = SlurmJob("104", "CANCELLED", "DependencyNeverSatisfied", 0, "");
  auto job = LoadJob(spec_.db);
  ASSERT_TRUE(job.ok());
  auto status = CollectStatus(**job, &slurm);
  ASSERT_TRUE(status.ok()) << status.error().message();
  EXPECT_EQ((*status)["state"], "failed");
  const std::string message = (*status)["message"];
  EXPECT_NE(message.find("wave 1 shard 2 failed"), std::string::npos) << message;
  EXPECT_NE(message.find("b.onnx"), std::string::npos) << message;
  const auto& wave = (*status)["waves"][0];
  EXPECT_EQ(wave["shards"][2]["state"], "requeued");
  EXPECT_EQ(wave["shards"][2]["restarts"], 1);
  EXPECT_EQ(wave["merge"]["state"], "failed");
  // Pending on a dependency that can never be satisfied, or cancelled for
  // it: not run, however Slurm is set up.
  EXPECT_EQ((*status)["waves"][1]["shards"][0]["state"], "cancelled");
  EXPECT_EQ((*status)["waves"][1]["merge"]["state"], "cancelled");
  EXPECT_NE(FormatStatus(*status).find("merge     cancelled"), std::string::npos);
}

TEST_F(ClusterTest, StatusOfAJobUnderWay) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());
  slurm.states["101_1"] = SlurmJob("101_1", "RUNNING", "None", 0, "node1");
  slurm.states["101_2"] = SlurmJob("101_2", "PENDING", "Resources", 0, "");
  // Stopped by its node going down, and requeued by Slurm: under way.
  StepStatus stopped = StartedStep();
  stopped.state = StepState::kFailed;
  stopped.error = "stopped by a signal before its quotas were measured";
  ASSERT_TRUE(WriteStep(JobPaths(spec_.db).shard_status(1, 3), stopped).ok());
  slurm.states["101_3"] = SlurmJob("101_3", "PENDING", "BeginTime", 1, "");
  auto job = LoadJob(spec_.db);
  ASSERT_TRUE(job.ok());
  auto status = CollectStatus(**job, &slurm);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["state"], "running");
  EXPECT_EQ((*status)["message"], "wave 1 of 2");
  EXPECT_EQ((*status)["waves"][0]["shards"][0]["state"], "running");
  EXPECT_EQ((*status)["waves"][0]["shards"][1]["state"], "pending");
  EXPECT_EQ((*status)["waves"][0]["shards"][2]["state"], "requeued");
}

TEST_F(ClusterTest, AStepSlurmForgotThatStoppedWritingIsLost) {
  FakeScheduler slurm;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());
  slurm.states.clear();  // past MinJobAge: Slurm knows none of the jobs
  StepStatus running = StartedStep();
  running.updated_at = UnixNow() - 3600;
  const JobPaths paths(spec_.db);
  ASSERT_TRUE(WriteFileAtomically(paths.shard_status(1, 1), StepToJson(running).dump()).ok());
  auto job = LoadJob(spec_.db);
  ASSERT_TRUE(job.ok());
  auto status = CollectStatus(**job, &slurm);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["state"], "failed");
  EXPECT_NE((*status)["message"].get<std::string>().find("lost"), std::string::npos);
  // Without Slurm to ask, the files alone cannot tell: still running.
  auto files_only = CollectStatus(**job, nullptr);
  ASSERT_TRUE(files_only.ok());
  EXPECT_EQ((*files_only)["waves"][0]["shards"][0]["state"], "running");
}

TEST_F(ClusterTest, ABudgetFromTimeStaysAndThreadsMustMatch) {
  FakeScheduler slurm;
  spec_.trials_from_time = true;
  ASSERT_TRUE(SubmitJob(spec_, &slurm).ok());
  slurm.FinishAll();
  ClusterSpec longer = spec_;
  longer.seconds = 7200;
  longer.trials = 9999;  // what another --time would derive
  auto again = SubmitJob(longer, &slurm);
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->job.spec.trials, spec_.trials);
  slurm.FinishAll();
  ClusterSpec threads = spec_;
  threads.threads = 4;
  auto refused = SubmitJob(threads, &slurm);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("--threads"), std::string::npos);
}

TEST_F(ClusterTest, CorruptJobAndStatusFilesAreErrorsNotCrashes) {
  const JobPaths paths(spec_.db);
  std::filesystem::create_directories(paths.wave_dir(1));
  ASSERT_TRUE(WriteFileAtomically(paths.job(), R"({"version": "one", "spec": 3})").ok());
  auto job = LoadJob(spec_.db);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.error().message().find("job.json"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomically(paths.shard_status(1, 1), R"({"state": 7, "node": []})").ok());
  auto step = ReadStep(paths.shard_status(1, 1));
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.error().message().find("shard-1.json"), std::string::npos);
}

TEST_F(ClusterTest, JobFilesRoundTripAndNewerVersionsAreRefused) {
  ClusterJob job;
  job.spec = spec_;
  job.spec.slurm.account = "ml";
  job.spec.precision = {true, 0.01};
  job.submissions.push_back({1, {"7"}, {"8"}, "9", 12.5});
  auto back = JobFromJson(JobToJson(job), "job.json");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->spec.models, job.spec.models);
  EXPECT_EQ(back->spec.slurm.account, "ml");
  EXPECT_TRUE(back->spec.precision.mixed);
  EXPECT_EQ(back->submissions[0].finish_job, "9");
  nlohmann::json newer = JobToJson(job);
  newer["version"] = 2;
  auto refused = JobFromJson(newer, "job.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("version 2"), std::string::npos);
}

TEST(Scaling, PredictionAddsTheBarriersAndTheFixedCosts) {
  SingleJobTimes job;
  for (int i = 0; i < 8; ++i) job.tasks.push_back({"t" + std::to_string(i), "", 10.0, 100});
  job.tasks.push_back({"big", "", 30.0, 100});  // no shard can beat it
  job.whole_model_seconds = 5;
  ClusterCosts costs;
  costs.shard_start_seconds = 1;
  costs.step_gap_seconds = 0.5;
  costs.merge_seconds_per_record = 1e-3;
  costs.retrain_seconds_per_record = 2e-3;
  const auto points = PredictScaling(job, costs, 2, {1, 4, 16});
  ASSERT_EQ(points.size(), 3u);
  EXPECT_DOUBLE_EQ(points[0].measuring_seconds, 110.0);  // everything, on one shard
  EXPECT_DOUBLE_EQ(points[1].measuring_seconds, 30.0);   // 15 s per wave: the big task's half
  EXPECT_DOUBLE_EQ(points[2].measuring_seconds, 30.0);   // the biggest task bounds it
  // Two waves: 2 x (start 1 + gaps 1 + merge 0.45 + retrain) + the last gap.
  const double retrain = 2e-3 * (450 + 900);
  EXPECT_NEAR(points[0].overhead_seconds, 2 * (1 + 1 + 0.45) + retrain + 0.5, 1e-9);
  EXPECT_NEAR(points[0].wall_seconds, 110 + points[0].overhead_seconds + 5, 1e-9);
  EXPECT_DOUBLE_EQ(points[0].speedup, 1.0);
  EXPECT_GT(points[1].speedup, 2.5);
  EXPECT_LT(points[2].efficiency, 0.5);
}

}  // namespace
}  // namespace fusetune::cluster
