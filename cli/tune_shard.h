// `fusetune tune MODEL... --shard I/N [--wave W/WAVES] [--base TEAM.db]`:
// one shard of a job split over several machines (search/shard_job.h), run
// by hand or by a cluster's array job (`fusetune cluster shard`, which takes
// the same options from the cluster job's spec).
#pragma once

#include <string>
#include <vector>

#include "cli/cli_common.h"
#include "search/shard_job.h"

namespace fusetune::cli {

struct ShardRunArgs {
  std::vector<std::string> models;
  ModelOptions model_options;
  std::string db, base;  // base: the merged database, read only ("" none)
  std::string shard = "1/1", wave = "1/1";
  int64_t trials = 0;
  std::string time;  // a stop for this run; the quotas come from `trials`
  search::TunerOptions tuner;
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
  target::PrecisionPolicy precision;
  bool json = false;
};
int TuneShard(const ShardRunArgs& args);

// The models of a sharded job, loaded (each with the same options).
Result<std::vector<search::ShardModel>> LoadShardModels(const std::vector<std::string>& paths,
                                                        const ModelOptions& options);

// The line a shard's run ends with.
std::string FormatShardResult(const search::ShardJobResult& r, const std::string& db);

// The progress line's update for a shard's progress.
class ProgressLine;
void UpdateShardBar(ProgressLine& bar, const search::ShardProgress& p);

}  // namespace fusetune::cli
