// Splitting a cluster job (issue 41): the tuning tasks of several models cut
// into N disjoint shards, and each task's trial budget cut into waves.
//
// Everything here is a function of the tasks and the numbers given, never
// of what was measured: every shard computes the same plan on its own, on
// its own node, and no shard needs to know what the others do. The plan:
//   - each task gets a trial quota for the whole job, in proportion to its
//     predicted share of the models' time (analytical seconds of its
//     default tiling times its occurrences over all models), at least
//     `min_trials` (a first round and one more), at most its space's size;
//     a reference-only task (one tiling) gets one trial;
//   - tasks with the same tiling space (the same GEMM with another epilogue)
//     form a unit that one shard tunes in a fixed order, so that the best
//     tilings they suggest to each other are the same whatever N is;
//   - units go to shards largest first, each to the least loaded shard
//     (longest processing time first), by predicted measuring time: the
//     quota times the estimated seconds of one trial. Shards so take about
//     the same time.
//   - wave w of W measures a task up to ceil(quota x w / W) trials in all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure/measurement.h"

namespace fusetune::search {

struct ShardTaskInfo {
  std::string key;   // workload key
  std::string unit;  // tasks with equal `unit` go to one shard
  int64_t occurrences = 1;
  double predicted_seconds = 0;  // one run of the default tiling
  int64_t space_size = 1;
  bool reference = false;  // one tiling, measured once
};

struct ShardPlanOptions {
  int shards = 1;
  int64_t trials = 0;  // the job's group trials over every wave and shard
  int min_trials = 10;
  measure::MeasureOptions measure;  // how long one trial takes (EstimatedTrialSeconds)
};

struct ShardPlan {
  std::vector<int64_t> quota;  // per task (the order given): trials over the whole job
  std::vector<int> shard;      // per task: 1..shards
  std::vector<double> load;    // per shard (index shard - 1): predicted seconds of measuring
  // Per shard: its tasks' indices in the order it tunes them (units largest
  // first, tasks of a unit by key).
  std::vector<std::vector<int>> order;
  int64_t total_quota() const;
};

// Errors: shards < 1, no tasks.
Result<ShardPlan> PlanShards(const std::vector<ShardTaskInfo>& tasks,
                             const ShardPlanOptions& options);

// Longest processing time first: the units (tasks with equal `units[t]`,
// or each task alone where it is empty) by total load, largest first, each
// to the least loaded of `bins` (ties: the lower bin; units of equal load:
// the smaller unit key). Tasks of a unit keep the order of `keys`.
struct LoadBalance {
  std::vector<int> bin;                 // per task, 0-based
  std::vector<double> load;             // per bin
  std::vector<std::vector<int>> order;  // per bin: its tasks in the order they run
};
LoadBalance BalanceUnits(const std::vector<std::string>& keys,
                         const std::vector<std::string>& units, const std::vector<double>& load,
                         int bins);

// The trials a task with `quota` has measured by the end of wave `wave`
// (1-based) of `waves`.
int64_t WaveQuota(int64_t quota, int wave, int waves);

// The predicted wall seconds of measuring one candidate whose run takes
// `run_seconds`: the worker's compile and verification, then the three run
// modes (full, copy-only, compute-only) each repeated until the options'
// minimums, with the caches flushed between repeats.
double EstimatedTrialSeconds(double run_seconds, const measure::MeasureOptions& options);

// "I/N" as a shard (1 <= I <= N); the error names `flag`.
Result<std::pair<int, int>> ParseShardSpec(const std::string& text, const std::string& flag);

}  // namespace fusetune::search
