// The tuning job: one model tuned into a tuning database, the unit that
// `fusetune tune` and the embedding API's Tune() run (and that shards of a
// cluster job and the Python module are to run).
//
//   auto job = TuningJob::Open(database, graph, options, callbacks);
//   job->Run()   -> the summary, or the error that ended the job
//
// Open(), in order:
//   1. with `resume`: finds the latest unfinished job of this graph in the
//      database and takes its cache protocol (a job's records live under one
//      target key);
//   2. the target: this machine's key for the cache protocol and its
//      calibration, measured once per database (job_target.h);
//   3. the tasks: extracted from the graph's fusion space and stored as
//      workloads, with the whole graph's;
//   4. the job row: a new one with its spec, or the resumed one, which
//      keeps its budget unless a new one is given and counts the trials its
//      records hold and the seconds its last checkpoint says;
//   5. the tuner (tuner.h): measuring through the fusetune-worker process,
//      with the records already in the database for this target as priors
//      (never measured again), the active cost model, and the database's
//      records as the history online model updates train on.
// Run():
//   6. runs the tuner: each result committed as it arrives, the job's
//      progress (what resuming and `fusetune report` need) checkpointed after
//      every round, until the budget is spent, every task has converged
//      (`until_converged`, or no budget), or callbacks.should_stop says so;
//   7. stores how the job ended (done, interrupted, failed) with its summary.
//
// The job prints nothing: progress, the stop request and the committed
// records pass through TuningJobCallbacks; the caller formats the summary.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "db/database.h"
#include "graph/graph.h"
#include "measure/measurer.h"
#include "search/tuner.h"
#include "target/target.h"

namespace fusetune::search {

struct TuningJobOptions {
  std::string model;  // what the job spec and the graph's workload call the model (its path)
  // A model with symbolic dimensions: its file's key (graph/model_file.h) and
  // the values this job's graph bound, recorded in the spec so that a
  // compile without --dim finds the sizes tuned (tuned_sizes.h).
  std::string model_key;
  std::map<std::string, int64_t> dims;
  // Budget (max_trials, max_seconds; neither: until converged), seed, round
  // sizes and the measurement (threads, min_seconds). The job sets what
  // depends on the database: trials_before and seconds_before of a resumed
  // job, the calibrated roofs, the measurement's `caches`, and
  // stop_when_converged.
  TunerOptions tuner;
  bool until_converged = false;  // with a budget: whichever comes first
  bool resume = false;           // continue this graph's latest unfinished job
  // How measurements treat the caches (target.h): each protocol has its own
  // target key. A resumed job keeps its own (asking a job for another
  // protocol than its own is an error; the default takes the job's).
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
  // Which precisions groups may compute in (target.h). Mixed: GEMM groups'
  // tiling spaces offer bf16 (where the target has avx512_bf16; elsewhere
  // the job tunes f32 under the mixed key and says so), a candidate with a
  // bf16 group is verified against the error budget, and the records go
  // under the policy's target key. A resumed job keeps its own policy.
  target::PrecisionPolicy precision;
  std::string worker_path;  // fusetune-worker; empty: measure::DefaultWorkerPath()
  MeasureFn measure;        // a stand-in for the worker (tests); empty: the worker
};

struct TuningJobCallbacks {
  std::function<void()> calibrating;  // Open(): before calibrating this machine (seconds)
  std::function<void(const TunerProgress&)> progress;
  // Polled between measurements: true stops the job, which commits what was
  // measured and ends as interrupted (resumable).
  std::function<bool()> should_stop;
  std::function<void(const db::Record&)> committed;  // each record once in the database
};

struct TuningJobResult {
  int64_t job_id = 0;
  TuneSummary summary;       // summary.stop_reason: trials, time, converged, interrupted
  bool interrupted = false;  // should_stop said so: the job is left resumable
};

class TuningJob {
 public:
  // Steps 1 to 5 above. `database` must outlive the job.
  static Result<std::unique_ptr<TuningJob>> Open(db::Database& database,
                                                 std::shared_ptr<const graph::Graph> graph,
                                                 TuningJobOptions options,
                                                 TuningJobCallbacks callbacks = {});
  ~TuningJob();
  TuningJob(const TuningJob&) = delete;
  TuningJob& operator=(const TuningJob&) = delete;

  // Steps 6 and 7; once per job.
  Result<TuningJobResult> Run();

  // The worker a job starts when TuningJobOptions::worker_path is empty:
  // $FUSETUNE_WORKER, else fusetune-worker next to the running program.
  static std::string DefaultWorkerPath();

  int64_t job_id() const { return job_id_; }
  bool resumed() const { return options_.resume; }
  int64_t trials_before() const { return options_.tuner.trials_before; }  // of a resumed job
  int tasks() const;
  const std::string& target() const { return target_; }
  const std::string& graph_key() const { return graph_key_; }

 private:
  TuningJob(db::Database& database, std::shared_ptr<const graph::Graph> graph,
            TuningJobOptions options, TuningJobCallbacks callbacks);
  Status FindJobToResume();
  Status TakeResumedPrecision(const nlohmann::json& spec);
  Status TakeTarget(TunerContext* context);
  Status StoreWorkloads();
  Status OpenJobRow();
  Status CountResumedWork();
  Status MakeTuner(TunerContext context);
  Status LoadPriors();

  db::Database& database_;
  std::shared_ptr<const graph::Graph> graph_;
  TuningJobOptions options_;
  TuningJobCallbacks callbacks_;
  std::string graph_key_, target_;
  std::optional<db::JobEntry> resumed_;
  int64_t job_id_ = 0;
  std::unique_ptr<fusion_space::FusionSpace> space_;
  std::vector<Task> tasks_;  // until the tuner takes them
  std::unique_ptr<measure::Measurer> measurer_;
  std::unique_ptr<Tuner> tuner_;
  bool ran_ = false;
};

}  // namespace fusetune::search
