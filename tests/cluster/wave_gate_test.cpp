// cluster/wave_gate: what a wave's merge does with shards that are not done,
// against a scheduler double. A shard Slurm ended from outside (scancel, a
// node lost) runs again under its own id and the merge hands over to a new
// one that the next step waits for; a shard that failed by itself, or was
// killed too often, fails the wave; a wave never run is not merged; a merge
// run outside Slurm merges only a wave whose shards are all done.
#include "cluster/wave_gate.h"

#include <gtest/gtest.h>

#include "cluster/report.h"
#include "cluster/submit.h"
#include "tests/cluster/cluster_fixture.h"

namespace fusetune::cluster {
namespace {

class WaveGateTest : public ClusterTest {
 protected:
  // Submits the job (wave 1: array 101, merge 102; wave 2: 103, 104; finish
  // 105); shards 1 and 3 of wave 1 are done, shard 2 ended as `slurm_state`.
  ClusterJob SubmitWithShard2(const std::string& slurm_state, const std::string& reason,
                              int restarts, const std::string& error) {
    EXPECT_TRUE(SubmitJob(spec_, &slurm_).ok());
    const JobPaths paths(spec_.db);
    MarkDone(paths.shard_status(1, 1));
    MarkDone(paths.shard_status(1, 3));
    StepStatus shard = StartedStep();
    shard.state = StepState::kFailed;
    shard.node = "node2";
    shard.error = error;
    EXPECT_TRUE(WriteStep(paths.shard_status(1, 2), shard).ok());
    slurm_.states["101_2"] = SlurmJob("101_2", slurm_state, reason, restarts, "node2");
    slurm_.states["102"] = SlurmJob("102", "RUNNING", "None", 0, "node1");  // the merge
    auto job = LoadJob(spec_.db);
    EXPECT_TRUE(job.ok() && job->has_value());
    return **job;
  }

  FakeScheduler slurm_;
};

TEST_F(WaveGateTest, AShardScancelledRunsAgainAndTheMergeHandsOver) {
  ClusterJob job = SubmitWithShard2("CANCELLED", "None", 0,
                                    "stopped by a signal before its quotas were measured");
  // Before the merge acts, `status` already says the shard will run again.
  auto before = CollectStatus(job, &slurm_);
  ASSERT_TRUE(before.ok()) << before.error().message();
  EXPECT_EQ((*before)["state"], "running");
  EXPECT_EQ((*before)["waves"][0]["shards"][1]["state"], "requeued");

  auto run = MergeWhenReady(&job, 1, &slurm_, {});
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->outcome, MergeOutcome::kHandedOver);
  EXPECT_EQ(slurm_.requeued, std::vector<std::string>{"101_2"});
  ASSERT_EQ(slurm_.submitted.size(), 6u);  // the chain of 5, then the new merge
  EXPECT_EQ(slurm_.submitted[5].script, JobPaths(spec_.db).merge_script(1));
  EXPECT_EQ(slurm_.submitted[5].after_any, std::vector<std::string>{"101_2"});
  // Wave 2's array waits for the new merge instead of this one.
  ASSERT_EQ(slurm_.dependencies.count("103"), 1u);
  EXPECT_EQ(slurm_.dependencies["103"].kind, After::kOk);
  EXPECT_EQ(slurm_.dependencies["103"].jobs, std::vector<std::string>{"106"});
  auto saved = LoadJob(spec_.db);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ(LatestStepIds(**saved).merge.at(1), "106");

  slurm_.states["102"] = SlurmJob("102", "COMPLETED", "None", 0, "node1");
  auto after = CollectStatus(**saved, &slurm_);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["state"], "running");
  EXPECT_EQ((*after)["waves"][0]["shards"][1]["state"], "requeued");
  EXPECT_EQ((*after)["waves"][0]["merge"]["state"], "pending");
  EXPECT_NE(FormatStatus(*after).find("runs as job 106 once shard(s) 2 end"),
            std::string::npos)
      << FormatStatus(*after);
}

// A hand-over that cannot re-point the next step leaves the chain as it
// was: the new merge and the requeued shard cancelled, job.json unchanged,
// this merge failing (Slurm then cancels the rest; submitting continues).
TEST_F(WaveGateTest, AHandOverThatFailsLeavesNothingOfItRunning) {
  ClusterJob job = SubmitWithShard2("CANCELLED", "None", 0, "");
  slurm_.refuse_dependencies = true;
  auto run = MergeWhenReady(&job, 1, &slurm_, {});
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.error().message().find("pointing step 103 at the new merge"), std::string::npos)
      << run.error().message();
  EXPECT_EQ(slurm_.cancelled, (std::vector<std::string>{"106", "101_2"}));
  auto saved = LoadJob(spec_.db);
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ(LatestStepIds(**saved).merge.at(1), "102");
  EXPECT_EQ(LatestStepIds(job).merge.at(1), "102");
}

TEST_F(WaveGateTest, TheLastWavesMergeHandsOverToTheFinishingStep) {
  ASSERT_TRUE(SubmitJob(spec_, &slurm_).ok());
  const JobPaths paths(spec_.db);
  MarkDone(paths.merge_status(1));
  for (int i = 1; i <= 3; ++i) MarkDone(paths.shard_status(1, i));
  MarkDone(paths.shard_status(2, 1));
  MarkDone(paths.shard_status(2, 2));
  slurm_.states["103_3"] = SlurmJob("103_3", "NODE_FAIL", "None", 1, "node3");
  auto job = LoadJob(spec_.db);
  ASSERT_TRUE(job.ok());
  auto run = MergeWhenReady(&**job, 2, &slurm_, {});
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->outcome, MergeOutcome::kHandedOver);
  EXPECT_EQ(slurm_.requeued, std::vector<std::string>{"103_3"});
  EXPECT_EQ(slurm_.dependencies["105"].jobs, std::vector<std::string>{"106"});
}

TEST_F(WaveGateTest, AShardRequeuedByItsScriptIsWaitedForNotRequeuedAgain) {
  ClusterJob job = SubmitWithShard2("PENDING", "BeginTime", 1, "");
  auto run = MergeWhenReady(&job, 1, &slurm_, {});
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->outcome, MergeOutcome::kHandedOver);
  EXPECT_TRUE(slurm_.requeued.empty());
  EXPECT_EQ(slurm_.submitted.back().after_any, std::vector<std::string>{"101_2"});
}

TEST_F(WaveGateTest, AShardThatFailedByItselfFailsTheWave) {
  ClusterJob job =
      SubmitWithShard2("FAILED", "NonZeroExitCode", 0, "cannot open model '/models/b.onnx'");
  auto run = MergeWhenReady(&job, 1, &slurm_, {});
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->outcome, MergeOutcome::kWaveFailed);
  EXPECT_NE(run->message.find("shard 2 on node2: cannot open model"), std::string::npos)
      << run->message;
  EXPECT_TRUE(slurm_.requeued.empty());
  EXPECT_EQ(slurm_.submitted.size(), 5u);
  auto merge = ReadStep(JobPaths(spec_.db).merge_status(1));
  ASSERT_TRUE(merge.ok() && merge->has_value());
  EXPECT_EQ((*merge)->state, StepState::kFailed);
  EXPECT_EQ((*merge)->error, run->message);
}

TEST_F(WaveGateTest, AShardKilledTooOftenFailsTheWave) {
  ClusterJob job = SubmitWithShard2("CANCELLED", "None", kMaxShardRestarts, "");
  auto status = CollectStatus(job, &slurm_);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["waves"][0]["shards"][1]["state"], "failed");
  auto run = MergeWhenReady(&job, 1, &slurm_, {});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->outcome, MergeOutcome::kWaveFailed);
  EXPECT_NE(run->message.find("Slurm ended it 4 times"), std::string::npos) << run->message;
  EXPECT_TRUE(slurm_.requeued.empty());
}

TEST_F(WaveGateTest, AShardSlurmForgotFailsTheWave) {
  ClusterJob job = SubmitWithShard2("CANCELLED", "None", 0, "");
  slurm_.states.erase("101_2");
  auto run = MergeWhenReady(&job, 1, &slurm_, {});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->outcome, MergeOutcome::kWaveFailed);
  EXPECT_NE(run->message.find("Slurm no longer knows"), std::string::npos) << run->message;
}

TEST_F(WaveGateTest, AWaveNeverRunIsNotMergedAndEndsCancelled) {
  ASSERT_TRUE(SubmitJob(spec_, &slurm_).ok());
  for (const char* task : {"103_1", "103_2", "103_3"})
    slurm_.states[task] = SlurmJob(task, "CANCELLED", "DependencyNeverSatisfied", 0, "");
  slurm_.states["104"] = SlurmJob("104", "RUNNING", "None", 0, "node1");
  auto job = LoadJob(spec_.db);
  ASSERT_TRUE(job.ok());
  auto run = MergeWhenReady(&**job, 2, &slurm_, {});
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->outcome, MergeOutcome::kNotRun);
  EXPECT_TRUE(slurm_.requeued.empty());
  slurm_.states["104"] = SlurmJob("104", "FAILED", "NonZeroExitCode", 0, "node1");
  auto status = CollectStatus(**job, &slurm_);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["waves"][1]["merge"]["state"], "cancelled");
}

TEST_F(WaveGateTest, OutsideSlurmAShardNotDoneFailsTheWave) {
  ClusterJob job = SubmitWithShard2("CANCELLED", "None", 0, "");
  auto check = CheckWave(job, 1, nullptr);
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->done, (std::vector<int>{1, 3}));
  ASSERT_EQ(check->failures.size(), 1u);
  EXPECT_NE(check->failures[0].find("shard 2"), std::string::npos);
  EXPECT_FALSE(check->ready());
  auto bad = MergeWhenReady(&job, 3, nullptr, {});
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace fusetune::cluster
