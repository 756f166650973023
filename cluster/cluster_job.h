// cluster/: tuning on a Slurm cluster (issue 41). This file: what a cluster
// job is on disk.
//
// A cluster job belongs to its database: team.db's job lives in the folder
// team.db.cluster/ beside it, which every node reaches (a shared file
// system, as Slurm clusters have):
//   job.json             the spec (models, nodes, waves, budget, Slurm
//                        options) and the Slurm job ids of each submission
//   wave-W.sbatch        the array job of wave W: one shard per array task
//   merge-W.sbatch       wave W's merge and retrain, after the wave
//   finish.sbatch        the whole-model stage and the report, after the last
//   wave-W/shard-I.db    shard I's records of wave W (merged into team.db)
//   wave-W/shard-I.json  shard I's status: state, node, restarts, progress
//   wave-W/merge.json    the merge's status; finish.json the finishing step's
//   logs/                Slurm's output of every step
//   report.json, report.txt   the job's report (the finishing step writes it)
// Status files are written whole (a temporary file renamed over the old
// one): a reader never sees half of one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "target/target.h"

namespace fusetune::cluster {

struct SlurmOptions {
  std::string partition, constraint, account;  // empty: the cluster's default
  std::vector<std::string> extra;              // more #SBATCH lines, as given
};

struct ClusterSpec {
  std::vector<std::string> models;  // absolute paths
  std::string db;                   // absolute path of the job's database
  int nodes = 1;                    // shards per wave: one array task each
  int waves = 1;
  int64_t trials = 0;        // group trials over the whole job
  bool trials_from_time = false;  // derived from `seconds` (TrialsForTime), not given
  double seconds = 0;        // the whole job's wall time (--time)
  uint64_t seed = 1;
  int threads = 0;           // per kernel; 0: the node's CPUs
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
  target::PrecisionPolicy precision;
  SlurmOptions slurm;
  std::string fusetune;      // the fusetune executable the scripts run
  // Wall seconds of each step (what the scripts ask Slurm for, and what a
  // shard stops itself at): derived from `seconds` by PlanTimes.
  double shard_seconds = 0, merge_seconds = 0, finish_seconds = 0;
};

nlohmann::json SpecToJson(const ClusterSpec& spec);
Result<ClusterSpec> SpecFromJson(const nlohmann::json& json, const std::string& where);

// The steps' times from the job's: the finishing step and every merge get a
// fixed share, the waves split the rest.
void PlanTimes(ClusterSpec* spec);

// One submission of the job (cluster submit; again after a failure).
struct Submission {
  int first_wave = 1;  // waves before it were merged already
  std::vector<std::string> wave_jobs;   // array job id per wave from first_wave
  std::vector<std::string> merge_jobs;  // per wave from first_wave
  std::string finish_job;
  double submitted_at = 0;
  double cancelled_at = 0;  // > 0: stopped by `cluster cancel`
};

struct ClusterJob {
  ClusterSpec spec;
  std::vector<Submission> submissions;
};

// The Slurm ids of each step in the latest submission that covers it.
struct StepIds {
  std::map<int, std::string> wave_array, merge;  // by wave
  std::string finish;
  // "" where the latest submission has none.
  std::string array_of(int wave) const { return Find(wave_array, wave); }
  std::string merge_of(int wave) const { return Find(merge, wave); }

 private:
  static std::string Find(const std::map<int, std::string>& ids, int wave) {
    auto it = ids.find(wave);
    return it == ids.end() ? "" : it->second;
  }
};
StepIds LatestStepIds(const ClusterJob& job);
// Wave `wave`'s merge now runs as Slurm job `job_id` (a merge that waits for
// shards run again hands over to a new one).
Status SetMergeJob(ClusterJob* job, int wave, const std::string& job_id);
nlohmann::json JobToJson(const ClusterJob& job);
Result<ClusterJob> JobFromJson(const nlohmann::json& json, const std::string& where);

// Where the parts of the job of database `db` are.
struct JobPaths {
  std::string dir;
  explicit JobPaths(const std::string& db) : dir(db + ".cluster") {}
  std::string job() const { return dir + "/job.json"; }
  std::string wave_dir(int wave) const;
  std::string wave_script(int wave) const;
  std::string merge_script(int wave) const;
  std::string finish_script() const { return dir + "/finish.sbatch"; }
  std::string shard_db(int wave, int shard) const;
  std::string shard_status(int wave, int shard) const;
  std::string merge_status(int wave) const;
  std::string finish_status() const { return dir + "/finish.json"; }
  std::string logs() const { return dir + "/logs"; }
  std::string report_json() const { return dir + "/report.json"; }
  std::string report_text() const { return dir + "/report.txt"; }
};

// Reads the job of `db`: nullopt when it has none.
Result<std::optional<ClusterJob>> LoadJob(const std::string& db);
Status SaveJob(const ClusterJob& job);

// What a step says of itself.
// kCancelled: not run, because a step it depends on failed.
enum class StepState { kPending, kRunning, kDone, kFailed, kCancelled };
const char* StepStateName(StepState state);

struct StepStatus {
  StepState state = StepState::kPending;
  std::string node;         // where it ran (SLURMD_NODENAME, else the host)
  std::string slurm_job;    // its Slurm job id
  int restarts = 0;         // SLURM_RESTART_COUNT
  double started_at = 0, updated_at = 0, ended_at = 0;
  std::string error;        // what ended a failed step
  nlohmann::json progress = nlohmann::json::object();  // the step's own figures
};
nlohmann::json StepToJson(const StepStatus& status);

// nullopt when the step wrote no status (it has not started).
Result<std::optional<StepStatus>> ReadStep(const std::string& path);
// Writes `status` whole (temporary file, then rename).
Status WriteStep(const std::string& path, const StepStatus& status);
// A status for a step starting now on this node, with Slurm's figures.
StepStatus StartedStep();

// Writes `text` to `path` whole.
Status WriteFileAtomically(const std::string& path, const std::string& text);
double UnixNow();

}  // namespace fusetune::cluster
