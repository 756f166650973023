// Scaling on paper (issue 41): what a cluster job of N nodes would take,
// predicted from what one machine cannot show but can measure:
//   - a single-machine tuning job's measuring time per task (from its
//     records' timestamps: the time up to each group record is charged to
//     that record's task; up to a whole-plan record, to the whole-model
//     stage);
//   - a cluster job's fixed costs, from its step files: a shard's start
//     (loading the models, planning, opening databases), the merge's seconds
//     per record and the retraining's per record in the database, the time
//     Slurm takes between one step's end and the next one's start.
// Prediction for N shards and W waves: each task's time split evenly over
// the waves; the tasks placed on shards longest first as the shard plan
// places units (shard_plan.h BalanceUnits), each task its own unit here
// (the records do not say which tasks share a tiling space: slightly
// optimistic where the plan keeps siblings together); each wave ends
// with its slowest shard (the barrier), then the merge and the retraining
// on everything so far; the finishing step measures whole plans as long as
// the single job's whole-model stage took. What it leaves out: nodes slower
// or faster than the measuring machine, and a shared file system slower
// than a local disk.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "db/database.h"

namespace fusetune::cluster {

struct MeasuredTask {
  std::string key;
  std::string unit;  // "" : its own
  double seconds = 0;
  int64_t trials = 0;
};

struct SingleJobTimes {
  std::vector<MeasuredTask> tasks;
  double whole_model_seconds = 0;  // baselines and whole plans
  double wall_seconds = 0;         // first to last record
  int64_t records = 0;
};

// The tuning job `job_id` of `database` (0: the latest job with records).
Result<SingleJobTimes> TimesOfJob(db::Database& database, int64_t job_id);

struct ClusterCosts {
  double shard_start_seconds = 0;    // a shard's seconds before its first trial
  double merge_start_seconds = 0;    // a merge step's seconds besides merging and training
  double merge_seconds_per_record = 0;
  double retrain_seconds_per_record = 0;  // of the database's records
  double step_gap_seconds = 0;       // Slurm, from a step's end to the next one's start
  double finish_start_seconds = 0;   // the finishing step besides measuring whole plans
};

// From a finished cluster job's report (report.json).
Result<ClusterCosts> CostsOfReport(const nlohmann::json& report);

struct ScalingPoint {
  int nodes = 1;
  double wall_seconds = 0;
  double measuring_seconds = 0;  // the slowest shards' measuring, summed over waves
  double overhead_seconds = 0;   // starts, barriers, merges, retraining, gaps, finishing
  double speedup = 1;            // over nodes = 1 with the same waves
  double efficiency = 1;         // speedup / nodes
};

std::vector<ScalingPoint> PredictScaling(const SingleJobTimes& job, const ClusterCosts& costs,
                                         int waves, const std::vector<int>& nodes);

}  // namespace fusetune::cluster
