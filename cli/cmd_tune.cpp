// fusetune tune MODEL.onnx --db FILE (--trials N | --time 8h | --until-converged) [--resume]:
// the overnight job. Every result is committed as it arrives; the job's
// progress (what resuming and `fusetune report` need) after every round.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <optional>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/tune_summary.h"
#include "cost_model/training.h"
#include "search/tuner.h"

namespace fusetune::cli {

namespace {

struct TuneArgs {
  std::string model;
  ModelOptions model_options;
  std::string db = "fusetune.db";
  int64_t trials = 0;
  std::string time;
  bool until_converged = false, resume = false, json = false;
  bool warm = false;  // measure with caches kept warm (target::CacheProtocol)
  search::TunerOptions tuner;
  std::string save_plan;
};

// The job to continue: the latest unfinished one of this model.
Result<db::JobEntry> FindJobToResume(db::Database& database, const std::string& graph_key) {
  FT_ASSIGN_OR_RETURN(auto jobs, database.ListJobs());
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    const auto spec = nlohmann::json::parse(it->spec, nullptr, false);
    if (spec.is_object() && spec.value("graph_key", "") == graph_key && it->state != "done")
      return *it;
  }
  return Error(
      ErrorCode::kNotFound,
      "--resume: no unfinished job of this model in the database (start one without --resume)");
}

// A resumed job keeps the cache protocol it was started with: its records
// are stored under that protocol's target key.
Status TakeJobCaches(const db::JobEntry& job, TuneArgs& args) {
  const auto spec = nlohmann::json::parse(job.spec, nullptr, false);
  const bool job_warm = spec.is_object() && spec.value("caches", "flushed") == "warm";
  if (args.warm && !job_warm)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--warm: job {} measures with caches flushed; resume it without "
                             "--warm, or start a new job",
                             job.id));
  args.warm = job_warm;
  return Status::Ok();
}

Status LoadPriors(db::Database& database, search::Tuner& tuner, const std::string& target) {
  std::vector<std::string> keys{tuner.graph_key()};
  for (const search::Task& t : tuner.tasks()) keys.push_back(t.key.ToString());
  for (const std::string& key : keys) {
    db::RecordFilter filter;
    filter.workload_key = key;
    filter.target = target;
    filter.fresh_only = true;
    FT_RETURN_IF_ERROR(database.ForEachRecord(filter, [&](const db::Record& r) {
      tuner.AddPrior(r);
      return true;
    }));
  }
  return Status::Ok();
}

std::string ProgressNote(const search::TunerProgress& p) {
  std::string note = fmt::format("{:.1f} trials/s, {}/{} converged",
                                 p.seconds > 0 ? static_cast<double>(p.trials) / p.seconds : 0.0,
                                 p.tasks_converged, p.tasks);
  if (p.best_model_seconds && p.unfused_seconds)
    note += fmt::format(", model {:.3f} ms ({:.2f}x unfused)", *p.best_model_seconds * 1e3,
                        *p.unfused_seconds / *p.best_model_seconds);
  return note + ", " + p.current;
}

int Tune(TuneArgs& args) {
  if (args.trials <= 0 && args.time.empty() && !args.until_converged && !args.resume)
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "give a budget: --trials N, --time DURATION or --until-converged"));
  if (!args.time.empty()) {
    auto seconds = ParseDuration(args.time);
    if (!seconds.ok()) return ReportError(seconds.error());
    args.tuner.max_seconds = *seconds;
  }
  args.tuner.max_trials = args.trials;
  auto loaded = LoadModel(args.model, args.model_options);
  if (!loaded.ok()) return ReportError(loaded.error());
  auto graph = std::make_shared<const Graph>(std::move(*loaded));
  auto opened = db::MakeSqliteDatabase(args.db);
  if (!opened.ok()) return ReportError(opened.error());
  db::Database& database = **opened;
  const std::string graph_key = search::GraphWorkloadKey(*graph);
  std::optional<db::JobEntry> resumed;
  if (args.resume) {
    auto job = FindJobToResume(database, graph_key);
    if (!job.ok()) return ReportError(job.error());
    if (Status st = TakeJobCaches(*job, args); !st.ok()) return ReportError(st.error());
    resumed = std::move(*job);
  }
  args.tuner.measure.flush_caches = !args.warm;
  const target::CacheProtocol caches = measure::CacheProtocolOf(args.tuner.measure);
  nlohmann::json calibration;
  auto target = EnsureTarget(database, args.tuner.measure.threads, caches, &calibration);
  if (!target.ok()) return ReportError(target.error());
  search::TunerContext context{
      *target, cost_model::TargetFeaturesFromCalibration(calibration, caches), 0};
  args.tuner.measure.peak_gflops = context.target_features.peak_gflops;
  args.tuner.measure.dram_gbps = context.target_features.dram_gbps;

  kernels::KernelConfig config;
  config.threads = args.tuner.measure.threads;
  FusionSpace space(*graph, config);
  std::vector<search::Task> tasks = search::ExtractTasks(*graph, space, true);
  for (const search::Task& t : tasks)
    if (Status st = database.PutWorkload(t.Workload()); !st.ok()) return ReportError(st.error());
  const nlohmann::json model_desc{{"model", args.model}, {"nodes", graph->nodes.size()}};
  if (Status st = database.PutWorkload({graph_key, db::WorkloadKind::kGraph, model_desc.dump()});
      !st.ok())
    return ReportError(st.error());

  // The job: a new one, or the unfinished one --resume continues.
  nlohmann::json spec{{"model", args.model},
                      {"graph_key", graph_key},
                      {"trials", args.tuner.max_trials},
                      {"seconds", args.tuner.max_seconds},
                      {"until_converged", args.until_converged},
                      {"seed", args.tuner.seed},
                      {"caches", target::CacheProtocolName(caches)}};
  int64_t job_id = 0;
  if (resumed.has_value()) {
    const db::JobEntry* job = &*resumed;
    job_id = job->id;
    const auto old_spec = nlohmann::json::parse(job->spec, nullptr, false);
    const auto progress = nlohmann::json::parse(job->progress, nullptr, false);
    if (args.tuner.max_trials == 0 && args.tuner.max_seconds == 0 && !args.until_converged) {
      args.tuner.max_trials = old_spec.value("trials", int64_t{0});
      args.tuner.max_seconds = old_spec.value("seconds", 0.0);
      args.until_converged = old_spec.value("until_converged", false);
    }
    if (progress.is_object() && progress.contains("summary"))
      args.tuner.seconds_before = progress["summary"].value("seconds", 0.0);
    // Trials from the records: those after the last checkpoint count too.
    db::RecordFilter filter;
    filter.job_id = job_id;
    Status counted = database.ForEachRecord(filter, [&](const db::Record& r) {
      args.tuner.trials_before += r.workload_key != graph_key;
      return true;
    });
    if (!counted.ok()) return ReportError(counted.error());
    fmt::print(stderr, "resuming job {} after {} trials\n", job_id, args.tuner.trials_before);
  } else {
    db::JobEntry job;
    job.spec = spec.dump();
    auto id = database.CreateJob(job);
    if (!id.ok()) return ReportError(id.error());
    job_id = *id;
  }
  context.job_id = job_id;

  auto measurer = measure::Measurer::Create();
  if (!measurer.ok()) return ReportError(measurer.error());
  const measure::MeasureOptions measure_options = args.tuner.measure;
  ProgressLine bar(fmt::format("tuning {} tasks", tasks.size()), !args.json);
  search::TunerCallbacks callbacks;
  callbacks.commit = [&](db::Record& record) -> Status {
    FT_ASSIGN_OR_RETURN(auto ids, database.CommitRecords(std::span<db::Record>(&record, 1)));
    record.id = ids[0];
    return Status::Ok();
  };
  callbacks.progress = [&](const search::TunerProgress& p) {
    if (p.max_trials > 0)
      bar.Update(p.trials, p.max_trials, ProgressNote(p));
    else if (p.max_seconds > 0)
      bar.Update(static_cast<int64_t>(p.seconds), static_cast<int64_t>(p.max_seconds),
                 fmt::format("{} trials, ", p.trials) + ProgressNote(p));
    else
      bar.Update(p.tasks_converged, p.tasks,
                 fmt::format("{} trials, ", p.trials) + ProgressNote(p));
  };
  callbacks.should_stop = [] { return Interrupted(); };
  callbacks.checkpoint = [&](const nlohmann::json& summary) {
    return database.UpdateJob(job_id, "running", nlohmann::json{{"summary", summary}}.dump());
  };
  // A trial or time budget is spent in full: converged tasks are reopened
  // until it runs out (--until-converged stops at convergence).
  args.tuner.stop_when_converged =
      args.until_converged || (args.tuner.max_trials == 0 && args.tuner.max_seconds == 0);
  search::Tuner tuner(
      graph, space, std::move(tasks), args.tuner, context,
      [&](const measure::Candidate& c) { return (*measurer)->Measure(c, measure_options); },
      callbacks);
  if (Status st = LoadPriors(database, tuner, *target); !st.ok()) return ReportError(st.error());
  tuner.SetModel(cost_model::ActiveOrAnalytical(database));
  cost_model::DatasetOptions data_options;
  data_options.target = *target;
  if (auto history = cost_model::LoadDataset(database, data_options); history.ok())
    tuner.SetHistory(std::move(*history));

  CatchInterrupt();
  const Status run = tuner.Run();
  bar.Finish();
  const search::TuneSummary summary = tuner.Summary();
  const std::string state = !run.ok() ? "failed" : Interrupted() ? "interrupted" : "done";
  (void)database.UpdateJob(job_id, state,
                           nlohmann::json{{"summary", search::SummaryToJson(summary)}}.dump());
  if (!run.ok()) return ReportError(run.error());
  if (!args.save_plan.empty() && !summary.best_plan.is_null()) {
    std::ofstream out(args.save_plan);
    out << summary.best_plan.dump(2) << "\n";
    if (!out) return ReportError(Error(ErrorCode::kIo, "cannot write " + args.save_plan));
  }
  if (args.json) {
    nlohmann::json j = search::SummaryToJson(summary);
    j["job"] = job_id;
    j["db"] = args.db;
    PrintJson(j);
  } else {
    fmt::print("job {} in {}\n{}", job_id, args.db, FormatTuneSummary(summary));
    if (!args.save_plan.empty()) fmt::print("best plan written to {}\n", args.save_plan);
  }
  return Interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

void AddTuneCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune", "Tune a model's fusion and tiling into the database (an overnight job)");
  cmd->add_option("model", args->model, "ONNX model")->required()->check(CLI::ExistingFile);
  cmd->add_option("--dim", args->model_options.dims, "Bind a symbolic dimension: NAME=VALUE");
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
  cmd->add_flag("--warm", args->warm,
                "Measure with caches kept warm between runs (a loop over one model whose weights "
                "fit the last-level cache) instead of flushed; records go under this machine's "
                "warm target key, which `compile --warm` and `run --warm` read");
  cmd->add_option("--save-plan", args->save_plan, "Write the best whole plan to this plan file");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Tune(*args)); });
}

}  // namespace fusetune::cli
