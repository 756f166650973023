// The steps of a cluster job, each run by `fusetune cluster shard|merge|
// finish` inside a Slurm job (and by tests directly). Each writes its status
// file (cluster_job.h) as it starts, as it progresses and as it ends, so
// that `cluster status` can tell what happened without asking Slurm, which
// forgets finished jobs.
//
//   shard  (wave W, shard I)  search::ShardJob into wave-W/shard-I.db, the
//                             job's database read only as its base
//   merge  (wave W)           every shard database of the wave merged into
//                             the job's database (idempotent: a record is
//                             stored once; a shard killed mid-write left
//                             only committed records), then the cost model
//                             retrained on everything, with its quality
//                             gate (a model that ranks worse is stored, not
//                             activated)
//   finish                    per model, the whole-model stage on this node
//                             (baselines and the exact partition over the
//                             groups' records, measured end to end) and the
//                             job's report
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/cluster_job.h"
#include "search/shard_job.h"
#include "search/tuning_job.h"

namespace fusetune::cluster {

struct StepCallbacks {
  std::function<void()> calibrating;
  std::function<void(const search::ShardProgress&)> shard_progress;
  std::function<void(const std::string& stage)> stage;  // merge and finish: what is under way
  std::function<bool()> should_stop;
  std::string worker_path;   // empty: the default worker
  search::MeasureFn measure; // a stand-in for the worker (tests)
};

// The shard's options from the job's spec (the same on every node but for
// the threads: the node's CPUs when the spec leaves them to it).
search::ShardJobOptions ShardOptions(const ClusterSpec& spec, int wave, int shard,
                                     std::vector<search::ShardModel> models);

Result<search::ShardJobResult> RunShardStep(const ClusterJob& job, int wave, int shard,
                                            std::vector<search::ShardModel> models,
                                            const StepCallbacks& callbacks);

// The merge's figures: per shard read and added records, the model.
Result<nlohmann::json> RunMergeStep(const ClusterJob& job, int wave,
                                    const StepCallbacks& callbacks);

// The report's JSON (also written to report.json and report.txt).
Result<nlohmann::json> RunFinishStep(const ClusterJob& job,
                                     std::vector<search::ShardModel> models,
                                     const StepCallbacks& callbacks);

}  // namespace fusetune::cluster
