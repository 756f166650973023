// A shard of a cluster job (issue 41): one node's share of the tuning tasks
// of several models, for one wave, measured into the shard's own database.
// `fusetune tune MODEL... --shard I/N` and the cluster's array jobs run it.
//
//   auto job = ShardJob::Open(shard_db, base_db, options, callbacks);
//   job->Run()   -> what the shard measured, or the error that ended it
//
// Open(), in order:
//   1. the tasks of every model (merged by workload key, occurrences summed)
//      and the shard plan (shard_plan.h), computed with nominal roofs and
//      the job's `plan_threads`, not the node's, so that every node computes
//      the same plan whatever it is;
//   2. the target: this node's key and calibration, taken from the base
//      database when it has them (from wave 2 on: each shard of wave 1
//      calibrates its node), else measured; records carry this node's key;
//   3. the job row in the shard database: the one with the same spec when
//      there is one (a requeued shard continues where it was killed), else a
//      new one;
//   4. the cost model: the active model of the base database (what the last
//      wave's merge trained; the shard database's without a base), else
//      analytical.
// Run(): each of the shard's tasks in the plan's order, skipping the tasks
// the job row says are finished: its records in both databases are priors
// (counted, never measured again), then rounds of the evolutionary search
// until the task has measured its quota for this wave, has converged, or
// its space is exhausted; each result is committed as it arrives and the
// task is marked finished. The search's seed is the job's root seed forked
// by a hash of the workload key and the wave, and nothing learned online
// crosses tasks (no model updates within a wave; suggestions only within a
// unit, which one shard tunes in a fixed order): the records of a task are
// the same whichever shard measures it and however many shards there are,
// given the same measurements. No whole-model stage: the cluster's
// finishing step measures whole plans.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "db/database.h"
#include "graph/graph.h"
#include "search/shard_plan.h"
#include "search/tuner.h"
#include "target/target.h"

namespace fusetune::search {

struct ShardModel {
  std::string name;  // its path, as the job spec names it
  std::shared_ptr<const graph::Graph> graph;
};

struct ShardJobOptions {
  std::vector<ShardModel> models;
  int shard = 1, shards = 1;  // 1 <= shard <= shards
  int wave = 1, waves = 1;    // 1 <= wave <= waves
  int64_t trials = 0;         // the job's group trials over every wave and shard
  double max_seconds = 0;     // this run's wall time; 0: until the quotas are measured
  // The threads the plan's spaces assume: the same on every node (the
  // measurement's threads may be the node's own). 0: tuner.measure.threads.
  int plan_threads = 0;
  // seed, round sizes, evolution, guided, measurement (threads, minimums).
  // The budget fields are ignored: the quotas are the budget.
  TunerOptions tuner;
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
  target::PrecisionPolicy precision;
  std::string worker_path;  // empty: measure::DefaultWorkerPath()
  MeasureFn measure;        // a stand-in for the worker (tests)
};

struct ShardProgress {
  // This wave's, of the shard's tasks (earlier runs included); quota 0 once
  // they are measured and a time budget is spent on more.
  int64_t trials = 0, quota = 0;
  int tasks = 0, tasks_finished = 0;
  double seconds = 0, max_seconds = 0;
  std::string current;
};

struct ShardJobCallbacks {
  std::function<void()> calibrating;
  std::function<void(const ShardProgress&)> progress;
  std::function<bool()> should_stop;  // polled between measurements
};

// Why a shard's run ended. Its name (ShardStopName) is the result JSON's
// stop_reason; a cluster step reads the value, not the text.
enum class ShardStop { kDone, kTime, kInterrupted };
const char* ShardStopName(ShardStop stop);

struct ShardJobResult {
  int64_t job_id = 0;
  int tasks = 0, tasks_finished = 0;
  int64_t trials = 0;  // measured by this run
  // Measured of the shard's tasks through this wave (up to each quota):
  // earlier waves' and earlier runs' included.
  int64_t trials_total = 0;
  int64_t quota = 0;      // of the shard's tasks, through this wave
  int64_t job_quota = 0;  // of every task over the whole job (>= the trials asked)
  int64_t failed = 0;
  double seconds = 0;
  std::optional<ShardStop> stop;  // set once the run ends or is stopped
};
nlohmann::json ShardResultToJson(const ShardJobResult& result);

class ShardJob {
 public:
  // `base`: the job's merged database, read only (may be null).
  static Result<std::unique_ptr<ShardJob>> Open(db::Database& shard_db, db::Database* base,
                                                ShardJobOptions options,
                                                ShardJobCallbacks callbacks = {});
  ~ShardJob();
  ShardJob(const ShardJob&) = delete;
  ShardJob& operator=(const ShardJob&) = delete;

  Result<ShardJobResult> Run();

  const std::string& target() const { return target_; }
  const ShardPlan& plan() const { return plan_; }
  int tasks() const { return static_cast<int>(mine_.size()); }
  int64_t job_id() const { return job_id_; }
  bool resumed() const { return resumed_; }

 private:
  struct JobTask;
  ShardJob(db::Database& shard_db, db::Database* base, ShardJobOptions options,
           ShardJobCallbacks callbacks);
  Result<std::map<std::string, JobTask>> ExtractAll(bool offer_bf16, int threads);
  Status ExtractJobTasks();
  Status MakePlan();
  Result<int64_t> CountMeasured(const Task& task);
  Status TakeTarget();
  Status OpenJobRow();
  Status MakeMeasure();
  Result<int64_t> LoadPriors(const Task& task, TaskSearch* search);
  Status TuneTask(int index);
  Status MeasureRound(const Task& task, TaskSearch* search, int count,
                      const std::vector<fusion_space::Tiling>& suggestions = {});
  Status SpendLeftoverTime();
  uint64_t TaskSeed(const Task& task, uint64_t round) const;
  int64_t WaveQuotaOf(int task) const;
  Status Checkpoint(const std::string& state);
  void ReportProgress(const std::string& current);
  std::optional<ShardStop> DueStop() const;
  double Elapsed() const;

  db::Database& shard_db_;
  db::Database* base_;
  ShardJobOptions options_;
  ShardJobCallbacks callbacks_;
  std::vector<std::unique_ptr<fusion_space::FusionSpace>> spaces_;
  std::vector<JobTask> tasks_;  // every task of the job, in key order
  ShardPlan plan_;
  std::vector<int> mine_;  // this shard's tasks, in the order it tunes them
  std::string target_;
  cost_model::TargetFeatures features_;
  std::unique_ptr<measure::Measurer> measurer_;
  MeasureFn measure_;
  std::unique_ptr<cost_model::CostModel> model_;
  int64_t job_id_ = 0;
  bool resumed_ = false;
  bool leftover_ = false;  // spending time left after the quotas
  bool was_done_ = false;  // the job row had ended done before this run
  std::set<std::string> finished_;
  ShardJobResult result_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fusetune::search
