// fusetune collect MODEL.onnx... --db FILE [--per-task N]: measures sampled
// tilings of every tuning task of the models and commits each task's
// records as it finishes: a training set for the cost model.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "search/sampling.h"

namespace fusetune::cli {

namespace {

struct CollectArgs {
  std::vector<std::string> models;
  ModelOptions model_options;
  std::string db = "fusetune.db";
  search::SampleOptions sample;
  bool json = false;
};

int Collect(CollectArgs& args) {
  auto opened = db::MakeSqliteDatabase(args.db);
  if (!opened.ok()) return ReportError(opened.error());
  db::Database& database = **opened;
  auto target = EnsureTarget(database, args.sample.measure.threads,
                             measure::CacheProtocolOf(args.sample.measure));
  if (!target.ok()) return ReportError(target.error());
  auto measurer = measure::Measurer::Create();
  if (!measurer.ok()) return ReportError(measurer.error());
  CatchInterrupt();

  int64_t committed = 0, ok = 0, tasks_total = 0;
  for (const std::string& path : args.models) {
    auto loaded = LoadModel(path, args.model_options);
    if (!loaded.ok()) return ReportError(loaded.error());
    const graph::Graph& graph = *loaded;
    kernels::KernelConfig config;
    config.threads = args.sample.measure.threads;
    fusion_space::FusionSpace space(graph, config);
    const std::vector<search::Task> tasks = search::ExtractTasks(graph, space);
    tasks_total += static_cast<int64_t>(tasks.size());
    for (const search::Task& t : tasks)
      if (Status st = database.PutWorkload(t.Workload()); !st.ok()) return ReportError(st.error());
    ProgressLine bar(fmt::format("{}: {} tasks", path, tasks.size()), !args.json);
    Status st = search::SampleTasks(
        tasks, **measurer, args.sample, *target,
        [&](std::vector<db::Record>& records) -> Status {
          auto ids = database.CommitRecords(records);
          if (!ids.ok()) return ids.error();
          committed += static_cast<int64_t>(records.size());
          for (const db::Record& r : records) ok += r.status == db::RecordStatus::kOk;
          return Status::Ok();
        },
        [&](int64_t done, int64_t total, const search::Task& task) {
          bar.Update(done, total, task.summary);
        },
        [] { return Interrupted(); });
    bar.Finish();
    if (!st.ok()) return ReportError(st.error());
    if (Interrupted()) break;
  }
  const nlohmann::json summary{
      {"db", args.db},        {"target", *target}, {"tasks", tasks_total},
      {"records", committed}, {"ok", ok},          {"interrupted", Interrupted()}};
  if (args.json)
    PrintJson(summary);
  else
    fmt::print("collected {} records ({} ok) over {} tasks into {}{}\n", committed, ok, tasks_total,
               args.db, Interrupted() ? " (interrupted)" : "");
  return Interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

void AddCollectCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<CollectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "collect", "Measure sampled tilings of every tuning task of the models into the database");
  cmd->add_option("models", args->models, "ONNX models")->required()->check(CLI::ExistingFile);
  cmd->add_option("--dim", args->model_options.dims, "Bind a symbolic dimension: NAME=VALUE");
  AddValueOption(cmd, &args->model_options);
  cmd->add_option("--db", args->db, "Tuning database")->capture_default_str();
  cmd->add_option("--per-task", args->sample.per_task, "Tilings per task (all when fewer)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", args->sample.seed, "Root seed of the sampling")->capture_default_str();
  cmd->add_option("--min-time", args->sample.measure.min_seconds,
                  "Seconds of timed runs per mode, at least")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--threads", args->sample.measure.threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Collect(*args)); });
}

}  // namespace fusetune::cli
