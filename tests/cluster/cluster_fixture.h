// What the cluster tests share: a Slurm double that records submissions,
// requeues and dependency changes and answers queries from a state table the
// test sets, and a fixture with a job's spec in a folder of its own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_job.h"
#include "cluster/slurm.h"

namespace fusetune::cluster {

// Slurm's word on a job, as ParseScontrolJobs would give it.
inline SlurmJobState SlurmJob(const std::string& id, const std::string& state,
                              const std::string& reason, int restarts, const std::string& nodes) {
  return {id, ParseSlurmState(state), state, reason, restarts, "0:0", nodes};
}

// Records every submission, requeue and dependency change; answers queries
// from a state table.
class FakeScheduler : public Scheduler {
 public:
  struct Submitted {
    std::string script;
    std::vector<std::string> after_ok;   // afterok jobs
    std::vector<std::string> after_any;  // afterany jobs
  };
  std::vector<Submitted> submitted;
  std::vector<std::string> requeued;
  std::vector<std::string> cancelled;  // in the order asked
  std::map<std::string, Dependency> dependencies;  // set by SetDependency
  std::map<std::string, SlurmJobState> states;
  bool refuse_dependencies = false;  // SetDependency fails (scontrol refused)

  Result<std::string> Submit(const std::string& script, const Dependency& after) override {
    Submitted s{script, {}, {}};
    (after.kind == After::kOk ? s.after_ok : s.after_any) = after.jobs;
    submitted.push_back(s);
    const std::string id = std::to_string(100 + submitted.size());
    states[id] = SlurmJob(id, "PENDING", "Dependency", 0, "");
    return id;
  }
  Result<std::vector<SlurmJobState>> Query(const std::vector<std::string>& ids) override {
    std::vector<SlurmJobState> out;
    for (const std::string& id : ids)
      for (const auto& [key, state] : states)
        if (key == id || key.rfind(id + "_", 0) == 0) out.push_back(state);
    return out;
  }
  Status Cancel(const std::vector<std::string>& ids) override {
    for (const std::string& id : ids) {
      cancelled.push_back(id);
      if (states.count(id)) states[id] = SlurmJob(id, "CANCELLED", "None", states[id].restarts, "");
    }
    return Status::Ok();
  }
  Status Requeue(const std::vector<std::string>& ids) override {
    for (const std::string& id : ids) {
      requeued.push_back(id);
      const SlurmJobState was = states.count(id) ? states[id] : SlurmJob(id, "PENDING", "", 0, "");
      states[id] = SlurmJob(id, "PENDING", "BeginTime", was.restarts + 1, was.nodes);
    }
    return Status::Ok();
  }
  Status SetDependency(const std::string& id, const Dependency& after) override {
    if (refuse_dependencies)
      return Error(ErrorCode::kIo, "scontrol update JobId=" + id + " failed (exit 1)");
    dependencies[id] = after;
    return Status::Ok();
  }
  void FinishAll() {
    for (auto& [id, s] : states) s = SlurmJob(id, "COMPLETED", "None", s.restarts, s.nodes);
  }
};

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("fusetune_cluster_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    spec_.models = {"/models/a.onnx", "/models/b.onnx"};
    spec_.db = (dir_ / "team.db").string();
    spec_.nodes = 3;
    spec_.waves = 2;
    spec_.trials = 500;
    spec_.fusetune = "/opt/fusetune/bin/fusetune";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void MarkDone(const std::string& path) {
    StepStatus s = StartedStep();
    s.state = StepState::kDone;
    ASSERT_TRUE(WriteStep(path, s).ok());
  }

  std::filesystem::path dir_;
  ClusterSpec spec_;
};

}  // namespace fusetune::cluster
