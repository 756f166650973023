// fusetune tune MODEL.onnx --db FILE (--trials N | --time 8h | --until-converged) [--resume]
// (and MODEL... --shard I/N: tune_shard.h):
// the overnight job (search::TuningJob: every result is committed as it
// arrives; the job's progress, what resuming and `fusetune report` need,
// after every round). Here: flags in, the progress line and Ctrl-C, the
// summary out.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <optional>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/tune_shard.h"
#include "cli/tune_summary.h"
#include "graph/model_file.h"
#include "search/tuning_job.h"

namespace fusetune::cli {

namespace {

struct TuneArgs {
  std::vector<std::string> models;
  std::string model;  // the one model of an unsharded job
  ModelOptions model_options;
  std::string db = "fusetune.db";
  int64_t trials = 0;
  std::string time;
  bool until_converged = false, resume = false, json = false;
  CachesArgs caches;  // how runs find the caches (target::CacheProtocol)
  PrecisionArgs precision;
  search::TunerOptions tuner;
  std::string save_plan;
  std::string shard, wave = "1/1", base;  // a shard of a job over several machines
};

std::string ProgressNote(const search::TunerProgress& p) {
  std::string note = fmt::format("{:.1f} trials/s, {}/{} converged",
                                 p.seconds > 0 ? static_cast<double>(p.trials) / p.seconds : 0.0,
                                 p.tasks_converged, p.tasks);
  if (p.best_model_seconds && p.unfused_seconds)
    note += fmt::format(", model {:.3f} ms ({:.2f}x unfused)", *p.best_model_seconds * 1e3,
                        *p.unfused_seconds / *p.best_model_seconds);
  return note + ", " + p.current;
}

void UpdateBar(ProgressLine& bar, const search::TunerProgress& p) {
  if (p.max_trials > 0)
    bar.Update(p.trials, p.max_trials, ProgressNote(p));
  else if (p.max_seconds > 0)
    bar.Update(static_cast<int64_t>(p.seconds), static_cast<int64_t>(p.max_seconds),
               fmt::format("{} trials, ", p.trials) + ProgressNote(p));
  else
    bar.Update(p.tasks_converged, p.tasks, fmt::format("{} trials, ", p.trials) + ProgressNote(p));
}

// The job's options from the flags: the budget, and the cache protocol.
Result<search::TuningJobOptions> JobOptions(const TuneArgs& args) {
  if (args.trials <= 0 && args.time.empty() && !args.until_converged && !args.resume)
    return Error(ErrorCode::kInvalidArgument,
                 "give a budget: --trials N, --time DURATION or --until-converged");
  search::TuningJobOptions options;
  options.model = args.model;
  options.tuner = args.tuner;
  if (!args.time.empty()) {
    FT_ASSIGN_OR_RETURN(options.tuner.max_seconds, ParseDuration(args.time));
  }
  options.tuner.max_trials = args.trials;
  options.until_converged = args.until_converged;
  options.resume = args.resume;
  options.caches = args.caches.caches;
  FT_ASSIGN_OR_RETURN(options.precision, args.precision.Policy());
  return options;
}

Status SavePlan(const search::TuneSummary& summary, const std::string& path) {
  if (path.empty() || summary.best_plan.is_null()) return Status::Ok();
  std::ofstream out(path);
  out << summary.best_plan.dump(2) << "\n";
  if (!out) return Error(ErrorCode::kIo, "cannot write " + path);
  return Status::Ok();
}

nlohmann::json SummaryJson(const TuneArgs& args, const ModelOptions& bucket,
                           const search::TuningJobResult& result) {
  nlohmann::json j = search::SummaryToJson(result.summary);
  j["job"] = result.job_id;
  j["db"] = args.db;
  j["dims"] = bucket.dims;
  return j;
}

// One shape bucket's job (the model with `bucket`'s --dim values).
Result<search::TuningJobResult> TuneBucket(const TuneArgs& args, const ModelOptions& bucket,
                                           search::TuningJobOptions options, db::Database& db) {
  FT_ASSIGN_OR_RETURN(graph::Graph graph, LoadModel(args.model, bucket));
  FT_ASSIGN_OR_RETURN(options.dims, BoundDims(bucket));
  std::optional<ProgressLine> bar;  // titled with the task count, known once the job is open
  search::TuningJobCallbacks callbacks;
  callbacks.calibrating = PrintCalibrating;
  callbacks.progress = [&](const search::TunerProgress& p) {
    if (bar) UpdateBar(*bar, p);
  };
  callbacks.should_stop = [] { return Interrupted(); };
  FT_ASSIGN_OR_RETURN(
      auto job, search::TuningJob::Open(db, std::make_shared<const graph::Graph>(std::move(graph)),
                                        std::move(options), callbacks));
  if (job->resumed())
    fmt::print(stderr, "resuming job {} after {} trials\n", job->job_id(), job->trials_before());
  bar.emplace(fmt::format("tuning {} tasks", job->tasks()), !args.json);
  auto result = job->Run();
  bar->Finish();
  return result;
}

// The budget of one of `buckets` shape buckets: an equal share.
void ShareBudget(search::TuningJobOptions& options, size_t buckets) {
  if (buckets <= 1) return;
  options.tuner.max_seconds /= static_cast<double>(buckets);
  if (options.tuner.max_trials > 0)
    options.tuner.max_trials =
        std::max<int64_t>(1, options.tuner.max_trials / static_cast<int64_t>(buckets));
}

int TuneShardOf(const TuneArgs& args) {
  if (args.resume || args.until_converged || !args.save_plan.empty())
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--shard: a shard continues by itself when run again, has no "
                             "whole-model stage and no convergence stop (no --resume, "
                             "--until-converged or --save-plan)"));
  ShardRunArgs shard;
  shard.models = args.models;
  shard.model_options = args.model_options;
  shard.db = args.db;
  shard.base = args.base;
  shard.shard = args.shard;
  shard.wave = args.wave;
  shard.trials = args.trials;
  shard.time = args.time;
  shard.tuner = args.tuner;
  shard.caches = args.caches.caches;
  auto policy = args.precision.Policy();
  if (!policy.ok()) return ReportError(policy.error());
  shard.precision = *policy;
  shard.json = args.json;
  return TuneShard(shard);
}

int Tune(TuneArgs& args) {
  if (!args.shard.empty()) return TuneShardOf(args);
  if (args.wave != "1/1" || !args.base.empty())
    return ReportError(Error(ErrorCode::kInvalidArgument, "--wave and --base go with --shard I/N"));
  if (args.models.size() > 1)
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             fmt::format("{} models: one job tunes one model; several models are "
                                         "one job with --shard I/N (--shard 1/1 on this machine)",
                                         args.models.size())));
  args.model = args.models[0];
  auto options = JobOptions(args);
  if (!options.ok()) return ReportError(options.error());
  auto buckets = ExpandDimBuckets(args.model_options);
  if (!buckets.ok()) return ReportError(buckets.error());
  if (buckets->size() > 1 && !args.save_plan.empty())
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "--save-plan writes one plan: give one value per --dim"));
  ShareBudget(*options, buckets->size());
  if (!args.model_options.dims.empty()) {  // the sizes go into the jobs' specs (tuned_sizes.h)
    auto key = graph::ModelFileKey(args.model);
    if (!key.ok()) return ReportError(key.error());
    options->model_key = *key;
  }
  auto opened = db::MakeSqliteDatabase(args.db);
  if (!opened.ok()) return ReportError(opened.error());
  CatchInterrupt();
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < buckets->size() && !Interrupted(); ++i) {
    const ModelOptions& bucket = (*buckets)[i];
    if (buckets->size() > 1)
      fmt::print(stderr, "shape bucket {}/{}: --dim {}\n", i + 1, buckets->size(),
                 fmt::join(bucket.dims, " --dim "));
    auto result = TuneBucket(args, bucket, *options, **opened);
    if (!result.ok()) return ReportError(result.error());
    if (Status saved = SavePlan(result->summary, args.save_plan); !saved.ok())
      return ReportError(saved.error());
    if (args.json) {
      all.push_back(SummaryJson(args, bucket, *result));
      continue;
    }
    fmt::print("job {} in {}\n{}", result->job_id, args.db, FormatTuneSummary(result->summary));
    if (!args.save_plan.empty()) fmt::print("best plan written to {}\n", args.save_plan);
  }
  if (args.json) PrintJson(all.size() == 1 ? all[0] : all);
  return Interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

void AddTuneCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Tune a model's fusion and tiling into the database (an overnight job)");
  cmd->add_option("models", args->models, "ONNX model (several with --shard)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--dim", args->model_options.dims,
                  "Bind a symbolic dimension: NAME=VALUE, or NAME=V1,V2,... to tune each value "
                  "as a shape bucket (the budget shared equally), or NAME=LO..HI for LO, the "
                  "powers of two between and HI; 0 is a size (a KV cache of no rows)");
  AddValueOption(cmd, &args->model_options);
  cmd->add_option("--db", args->db, "Tuning database")->capture_default_str();
  cmd->add_option("--trials", args->trials, "Group measurements to spend")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--time", args->time, "Wall time to spend: 8h, 30m, 90s, 1h30m");
  cmd->add_flag("--until-converged", args->until_converged,
                "Stop when every group has converged (with --time or --trials: whichever comes "
                "first; without, a budget is spent in full)");
  cmd->add_flag("--resume", args->resume,
                "Continue this model's unfinished job (its budget unless a new one is given)");
  cmd->add_option("--seed", args->tuner.seed, "Root seed")->capture_default_str();
  cmd->add_option("--round-size", args->tuner.round_size, "Measurements per task round")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_flag_callback(
      "--no-model", [args] { args->tuner.guided = false; },
      "Rank tilings without the cost model: each round a random draw from the evolved "
      "candidates, no online updates (the baseline of bench/ablation/run_model_ablation.sh)");
  cmd->add_option("--model-update-every", args->tuner.model_update_every,
                  "New results between online cost-model updates (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--min-time", args->tuner.measure.min_seconds,
                  "Seconds of timed runs per mode, at least")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--threads", args->tuner.measure.threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  AddCachesOptions(cmd, &args->caches, /*measures=*/true);
  AddPrecisionOptions(cmd, &args->precision, /*tunes=*/true);
  cmd->add_option("--save-plan", args->save_plan, "Write the best whole plan to this plan file");
  cmd->add_option("--shard", args->shard,
                  "I/N: tune the I-th of N disjoint shares of the models' tasks (group stage "
                  "only; needs --trials, the whole job's) into --db");
  cmd->add_option("--wave", args->wave, "W/WAVES: with --shard, measure up to wave W's quota")
      ->capture_default_str();
  cmd->add_option("--base", args->base,
                  "With --shard: the job's merged database, read only (priors, cost model, "
                  "calibration)");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Tune(*args)); });
}

}  // namespace fusetune::cli
