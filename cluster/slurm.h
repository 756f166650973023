// Slurm as the engine of a cluster job: batch scripts written from a job's
// steps, and the scheduler's commands (sbatch, scontrol, squeue, scancel)
// behind an interface, so that submission and status logic is tested with
// a double and the real one is a few process calls.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_job.h"
#include "common/status.h"

namespace fusetune::cluster {

// One batch script.
struct BatchScript {
  std::string name;            // --job-name
  int array_size = 0;          // > 0: an array job of tasks 1..array_size
  double seconds = 0;          // --time (rounded up to minutes, with a grace); 0: none
  bool requeue = false;        // --requeue: rerun on node failure, and a killed shard requeues itself
  bool exclusive = false;      // --exclusive: a shard measures on a node of its own
  std::string output;          // --output pattern
  std::vector<std::string> commands;  // the body, one command per line
};
// The script's text for the job's Slurm options (partition, constraint,
// account, extra lines).
std::string ScriptText(const BatchScript& script, const SlurmOptions& slurm);

// The job states of Slurm (its JOB STATE CODES) that fusetune tells apart;
// the rest are kOther. Parsed where Slurm's text comes in.
enum class SlurmState {
  kPending, kRunning, kCompleting, kCompleted, kFailed, kCancelled, kTimeout, kNodeFail,
  kOutOfMemory, kPreempted, kDeadline, kBootFail, kRequeued, kRequeueHold, kOther
};
SlurmState ParseSlurmState(const std::string& text);

// Slurm's word on one job or array task.
struct SlurmJobState {
  std::string id;          // "123" or "123_2"
  SlurmState state = SlurmState::kOther;
  std::string state_text;  // Slurm's own word for it, as shown to people
  std::string reason;      // Slurm's reason, as shown
  int restarts = 0;
  std::string exit_code;   // "0:0"
  std::string nodes;

  // Ended: it runs again only if requeued.
  bool ended() const;
  // Queued to run (again): pending, requeued, held after a requeue.
  bool waiting() const;
  // Waits on (or was cancelled for) a dependency that can never be met: a
  // step before it failed. It never runs.
  bool never_runs() const { return reason == "DependencyNeverSatisfied"; }
  // Ended from outside rather than failing by itself: scancel, a node lost,
  // preemption. (One cancelled because a step before it failed is not:
  // running it again would not help.)
  bool killed_from_outside() const;
  // Killed from outside and not yet run kMaxShardRestarts times more: the
  // wave's merge runs it again (wave_gate.h).
  bool runs_again_by_its_merge() const;
};

// How many times a shard killed from outside (a signal, scancel, a node
// lost) runs again before its wave fails.
constexpr int kMaxShardRestarts = 3;

// What a job waits for: every job of `jobs` ended successfully (afterok: a
// failure cancels the waiting job), or ended at all (afterany).
enum class After { kOk, kAny };
struct Dependency {
  After kind = After::kOk;
  std::vector<std::string> jobs;  // empty: none
};
// Slurm's text for it: "afterok:1:2", "afterany:3_2".
std::string DependencyText(const Dependency& dependency);

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Submits `script` to run once `after` holds; returns the job id.
  virtual Result<std::string> Submit(const std::string& script, const Dependency& after) = 0;
  // What Slurm knows of `job_ids` (an array job's tasks each): jobs it has
  // forgotten are absent.
  virtual Result<std::vector<SlurmJobState>> Query(const std::vector<std::string>& job_ids) = 0;
  virtual Status Cancel(const std::vector<std::string>& job_ids) = 0;
  // Runs ended batch jobs (or array tasks) again, under the same ids.
  virtual Status Requeue(const std::vector<std::string>& job_ids) = 0;
  // Makes a pending job wait for `after` instead of what it waited for.
  virtual Status SetDependency(const std::string& job_id, const Dependency& after) = 0;
};

// The scheduler of the cluster this machine submits to (sbatch and friends
// on PATH, SLURM_CONF as the environment says). Errors when sbatch is missing.
Result<std::unique_ptr<Scheduler>> MakeSlurmScheduler();

// Parses `scontrol show job -o` output: one job per line.
std::vector<SlurmJobState> ParseScontrolJobs(const std::string& text);

}  // namespace fusetune::cluster
