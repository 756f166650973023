#include "cli/tune_shard.h"

#include <fmt/format.h>

#include "cli/progress.h"

namespace fusetune::cli {

Result<std::vector<search::ShardModel>> LoadShardModels(const std::vector<std::string>& paths,
                                                        const ModelOptions& options) {
  std::vector<search::ShardModel> models;
  for (const std::string& path : paths) {
    auto graph = LoadModel(path, options);
    if (!graph.ok()) return graph.error().WithContext(path);
    models.push_back({path, std::make_shared<const graph::Graph>(std::move(*graph))});
  }
  return models;
}

std::string FormatShardResult(const search::ShardJobResult& r, const std::string& db) {
  const std::string ended =
      r.stop == search::ShardStop::kDone
          ? "done"
          : fmt::format("stopped: {}", r.stop ? search::ShardStopName(*r.stop) : "running");
  return fmt::format(
      "shard job {} in {}: {} of {} tasks finished, {} trials this run ({} failed), {}/{} of the "
      "wave's quota, {:.1f} s, {}\n",
      r.job_id, db, r.tasks_finished, r.tasks, r.trials, r.failed, r.trials_total, r.quota,
      r.seconds, ended);
}

void UpdateShardBar(ProgressLine& bar, const search::ShardProgress& p) {
  bar.Update(p.trials, p.quota,
             fmt::format("{}/{} tasks, {}", p.tasks_finished, p.tasks, p.current));
}

namespace {

Result<search::ShardJobResult> RunShard(const ShardRunArgs& args) {
  FT_ASSIGN_OR_RETURN(auto shard, search::ParseShardSpec(args.shard, "--shard"));
  FT_ASSIGN_OR_RETURN(auto wave, search::ParseShardSpec(args.wave, "--wave"));
  if (args.trials <= 0)
    return Error(ErrorCode::kInvalidArgument,
                 "--shard needs --trials N: the job's trials, which every shard splits the same "
                 "way (--time only stops this shard)");
  FT_ASSIGN_OR_RETURN(auto buckets, ExpandDimBuckets(args.model_options));
  if (buckets.size() > 1)
    return Error(ErrorCode::kInvalidArgument,
                 "--shard tunes one shape per model: give one value per --dim");
  search::ShardJobOptions options;
  FT_ASSIGN_OR_RETURN(options.models, LoadShardModels(args.models, args.model_options));
  std::tie(options.shard, options.shards) = shard;
  std::tie(options.wave, options.waves) = wave;
  options.trials = args.trials;
  if (!args.time.empty()) {
    FT_ASSIGN_OR_RETURN(options.max_seconds, ParseDuration(args.time));
  }
  options.tuner = args.tuner;
  options.caches = args.caches;
  options.precision = args.precision;
  std::unique_ptr<db::Database> base;
  if (!args.base.empty()) {
    db::OpenOptions o;
    o.create = false;
    o.read_only = true;
    FT_ASSIGN_OR_RETURN(base, db::MakeSqliteDatabase(args.base, o));
  }
  FT_ASSIGN_OR_RETURN(auto shard_db, db::MakeSqliteDatabase(args.db));
  std::optional<ProgressLine> bar;
  search::ShardJobCallbacks callbacks;
  callbacks.calibrating = PrintCalibrating;
  callbacks.should_stop = [] { return Interrupted(); };
  callbacks.progress = [&](const search::ShardProgress& p) {
    if (bar) UpdateShardBar(*bar, p);
  };
  FT_ASSIGN_OR_RETURN(auto job,
                      search::ShardJob::Open(*shard_db, base.get(), std::move(options), callbacks));
  if (job->resumed()) fmt::print(stderr, "continuing shard job {}\n", job->job_id());
  bar.emplace(fmt::format("shard {} wave {}: {} tasks", args.shard, args.wave, job->tasks()),
              !args.json);
  auto result = job->Run();
  bar->Finish();
  if (result.ok() && result->job_quota > args.trials)
    fmt::print(stderr,
               "note: the job's quotas add up to {} trials, more than --trials {}: every task "
               "gets its first round (a reference-only group one trial)\n",
               result->job_quota, args.trials);
  return result;
}

}  // namespace

int TuneShard(const ShardRunArgs& args) {
  CatchInterrupt();
  auto result = RunShard(args);
  if (!result.ok()) return ReportError(result.error());
  if (args.json)
    PrintJson(search::ShardResultToJson(*result));
  else
    fmt::print("{}", FormatShardResult(*result, args.db));
  return Interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace fusetune::cli
