// fusetune cluster submit|status|shard|merge|finish: a tuning job on a Slurm
// cluster (cluster/). `submit` writes the steps' batch scripts and submits
// them as a chain; `status` shows each wave's progress and what failed; the
// other three are the steps the scripts run on the nodes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/tune_shard.h"
#include "cluster/report.h"
#include "cluster/steps.h"
#include "cluster/submit.h"
#include "cluster/wave_gate.h"

namespace fusetune::cli {

namespace {

struct ClusterArgs {
  std::vector<std::string> models;
  std::string db = "fusetune.db";
  int nodes = 0, waves = 1, wave = 0, shard = 0;
  int64_t trials = 0;
  std::string time;
  uint64_t seed = 1;
  int threads = 0;
  cluster::SlurmOptions slurm;
  CachesArgs caches;
  PrecisionArgs precision;
  std::string fusetune;
  bool dry_run = false, json = false;
};

std::string Absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

std::string ThisExecutable() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("fusetune") : self.string();
}

Result<cluster::ClusterSpec> SpecOf(const ClusterArgs& a) {
  if (a.trials <= 0 && a.time.empty())
    return Error(ErrorCode::kInvalidArgument, "give a budget: --time 8h, --trials N, or both");
  cluster::ClusterSpec spec;
  for (const std::string& m : a.models) spec.models.push_back(Absolute(m));
  spec.db = Absolute(a.db);
  spec.nodes = a.nodes;
  spec.waves = a.waves;
  spec.seed = a.seed;
  spec.threads = a.threads;
  spec.slurm = a.slurm;
  spec.caches = a.caches.caches;
  FT_ASSIGN_OR_RETURN(spec.precision, a.precision.Policy());
  spec.fusetune = a.fusetune.empty() ? ThisExecutable() : Absolute(a.fusetune);
  if (!a.time.empty()) {
    FT_ASSIGN_OR_RETURN(spec.seconds, ParseDuration(a.time));
  }
  cluster::PlanTimes(&spec);
  spec.trials = a.trials > 0 ? a.trials : cluster::TrialsForTime(spec);
  spec.trials_from_time = a.trials <= 0;
  return spec;
}

void PrintSubmitted(const cluster::SubmitOutcome& out) {
  const cluster::ClusterSpec& s = out.job.spec;
  fmt::print("cluster job of {}: {} model(s), {} shards x {} waves, {} group trials", s.db,
             s.models.size(), s.nodes, s.waves, s.trials);
  if (s.seconds > 0)
    fmt::print(", {:.0f} s per shard and wave, {:.0f} s per merge, {:.0f} s to finish",
               s.shard_seconds, s.merge_seconds, s.finish_seconds);
  fmt::print("\n");
  if (out.continued)
    fmt::print("continuing the job from wave {} (the waves before it are merged)\n",
               out.first_wave);
  if (!out.submitted) {
    fmt::print("scripts written to {}; {} submits them as a chain\n",
               cluster::JobPaths(s.db).dir, out.submit_script);
    return;
  }
  const cluster::Submission& sub = *out.submitted;
  for (size_t i = 0; i < sub.wave_jobs.size(); ++i)
    fmt::print("  wave {}: array job {} ({} shards), then merge and retrain {}\n",
               sub.first_wave + static_cast<int>(i), sub.wave_jobs[i], s.nodes,
               sub.merge_jobs[i]);
  fmt::print("  finish: {}\n`fusetune cluster status --db {}` shows its progress\n",
             sub.finish_job, s.db);
}

int Submit(const ClusterArgs& a) {
  auto spec = SpecOf(a);
  if (!spec.ok()) return ReportError(spec.error());
  // A model that does not load fails here, not on a node an hour later.
  auto models = LoadShardModels(spec->models, {});
  if (!models.ok()) return ReportError(models.error());
  std::unique_ptr<cluster::Scheduler> scheduler;
  if (!a.dry_run) {
    auto made = cluster::MakeSlurmScheduler();
    if (!made.ok()) return ReportError(made.error());
    scheduler = std::move(*made);
  }
  auto out = cluster::SubmitJob(*spec, scheduler.get());
  if (!out.ok()) return ReportError(out.error());
  if (out->nothing_to_do) {
    fmt::print("the cluster job of {} is done: nothing to submit ({})\n", spec->db,
               cluster::JobPaths(spec->db).report_text());
    return kExitOk;
  }
  if (a.json) {
    nlohmann::json j = cluster::JobToJson(out->job);
    j["first_wave"] = out->first_wave;
    j["continued"] = out->continued;
    PrintJson(j);
  } else {
    PrintSubmitted(*out);
  }
  return kExitOk;
}

Result<cluster::ClusterJob> LoadJobOf(const std::string& db) {
  FT_ASSIGN_OR_RETURN(auto job, cluster::LoadJob(Absolute(db)));
  if (!job)
    return Error(ErrorCode::kNotFound,
                 fmt::format("{} has no cluster job ({} is missing): `fusetune cluster submit` "
                             "starts one",
                             db, cluster::JobPaths(Absolute(db)).job()));
  return *job;
}

int Status(const ClusterArgs& a) {
  auto job = LoadJobOf(a.db);
  if (!job.ok()) return ReportError(job.error());
  std::unique_ptr<cluster::Scheduler> scheduler;
  if (auto made = cluster::MakeSlurmScheduler(); made.ok()) scheduler = std::move(*made);
  else fmt::print(stderr, "note: {}; the status comes from the steps' files only\n",
                  made.error().message());
  auto status = cluster::CollectStatus(*job, scheduler.get());
  if (!status.ok()) return ReportError(status.error());
  if (a.json) PrintJson(*status);
  else fmt::print("{}", cluster::FormatStatus(*status));
  // A failed or cancelled job is an error for scripts that poll it: it will
  // not end done by itself.
  const bool stopped = (*status)["state"] == "failed" || (*status)["state"] == "cancelled";
  return stopped ? kExitInternal : kExitOk;
}

int Cancel(const ClusterArgs& a) {
  auto job = LoadJobOf(a.db);
  if (!job.ok()) return ReportError(job.error());
  auto scheduler = cluster::MakeSlurmScheduler();
  if (!scheduler.ok()) return ReportError(scheduler.error());
  auto cancelled = cluster::CancelJob(&*job, **scheduler);
  if (!cancelled.ok()) return ReportError(cancelled.error());
  fmt::print("cancelled the Slurm jobs {} of the cluster job of {}; `fusetune cluster submit` "
             "with the same flags continues it\n",
             fmt::join(*cancelled, ", "), job->spec.db);
  return kExitOk;
}

cluster::StepCallbacks Callbacks(ProgressLine* bar) {
  cluster::StepCallbacks cb;
  cb.calibrating = PrintCalibrating;
  cb.should_stop = [] { return Interrupted(); };
  cb.shard_progress = [bar](const search::ShardProgress& p) {
    if (bar != nullptr) UpdateShardBar(*bar, p);
  };
  cb.stage = [](const std::string& s) { fmt::print("{}\n", s); };
  return cb;
}

// A step that cannot even start says so in its status file, for `status`.
int StepFailed(const std::string& status_path, const Error& error) {
  cluster::StepStatus status = cluster::StartedStep();
  status.state = cluster::StepState::kFailed;
  status.error = error.message();
  status.ended_at = cluster::UnixNow();
  (void)cluster::WriteStep(status_path, status);
  return ReportError(error);
}

int Shard(const ClusterArgs& a) {
  auto job = LoadJobOf(a.db);
  if (!job.ok()) return ReportError(job.error());
  auto models = LoadShardModels(job->spec.models, {});
  if (!models.ok())
    return StepFailed(cluster::JobPaths(job->spec.db).shard_status(a.wave, a.shard),
                      models.error());
  CatchInterrupt();
  ProgressLine bar(fmt::format("wave {} shard {}/{}", a.wave, a.shard, job->spec.nodes));
  auto r = cluster::RunShardStep(*job, a.wave, a.shard, std::move(*models), Callbacks(&bar));
  bar.Finish();
  if (!r.ok()) return ReportError(r.error());
  fmt::print("{}", FormatShardResult(*r, cluster::JobPaths(job->spec.db).shard_db(a.wave,
                                                                                  a.shard)));
  return Interrupted() ? kExitInterrupted : kExitOk;
}

// Inside Slurm (its batch script) the merge asks Slurm about shards that are
// not done and runs again those it ended from outside; run by hand, it
// merges only a wave whose shards are all done.
int Merge(const ClusterArgs& a) {
  auto job = LoadJobOf(a.db);
  if (!job.ok()) return ReportError(job.error());
  std::unique_ptr<cluster::Scheduler> scheduler;
  if (std::getenv("SLURM_JOB_ID") != nullptr) {
    auto made = cluster::MakeSlurmScheduler();
    if (!made.ok()) return ReportError(made.error());
    scheduler = std::move(*made);
  }
  auto r = cluster::MergeWhenReady(&*job, a.wave, scheduler.get(), Callbacks(nullptr));
  if (!r.ok()) return StepFailed(cluster::JobPaths(job->spec.db).merge_status(a.wave), r.error());
  switch (r->outcome) {
    case cluster::MergeOutcome::kMerged: PrintJson(r->figures); return kExitOk;
    case cluster::MergeOutcome::kHandedOver: fmt::print("{}\n", r->message); return kExitOk;
    case cluster::MergeOutcome::kWaveFailed:
    case cluster::MergeOutcome::kNotRun:
      fmt::print(stderr, "fusetune: {}\n", r->message);
      return kExitInternal;
  }
  return kExitInternal;
}

int Finish(const ClusterArgs& a) {
  auto job = LoadJobOf(a.db);
  if (!job.ok()) return ReportError(job.error());
  auto models = LoadShardModels(job->spec.models, {});
  if (!models.ok())
    return StepFailed(cluster::JobPaths(job->spec.db).finish_status(), models.error());
  CatchInterrupt();
  auto r = cluster::RunFinishStep(*job, std::move(*models), Callbacks(nullptr));
  if (!r.ok()) return ReportError(r.error());
  fmt::print("{}", cluster::FormatReport(*r));
  return kExitOk;
}

void AddSubmitCommand(CLI::App* cluster, std::shared_ptr<ClusterArgs> args,
                      std::function<void(int)> set_result) {
  CLI::App* cmd = cluster->add_subcommand(
      "submit", "Submit a tuning job of the models as Slurm jobs: waves of shards, merges, finish");
  cmd->add_option("models", args->models, "ONNX models")->required()->check(CLI::ExistingFile);
  cmd->add_option("--db", args->db, "The job's database (its folder DB.cluster beside it)")
      ->capture_default_str();
  cmd->add_option("--nodes", args->nodes, "Shards per wave: one node each")
      ->required()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--waves", args->waves, "Waves; the cost model is retrained between them")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--time", args->time, "The whole job's wall time: 8h, 30m, 2m");
  cmd->add_option("--trials", args->trials, "Group trials over the whole job")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--seed", args->seed, "Root seed")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads per kernel (default: the node's CPUs)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--partition", args->slurm.partition, "Slurm partition");
  cmd->add_option("--constraint", args->slurm.constraint,
                  "Slurm node features (pin one machine kind)");
  cmd->add_option("--account", args->slurm.account, "Slurm account");
  cmd->add_option("--sbatch", args->slurm.extra,
                  "More #SBATCH lines, e.g. --sbatch=--qos=low (repeatable)");
  cmd->add_option("--fusetune", args->fusetune,
                  "The fusetune the nodes run (default: this one; must be on a shared path)");
  AddCachesOptions(cmd, &args->caches, /*measures=*/true);
  AddPrecisionOptions(cmd, &args->precision, /*tunes=*/true);
  cmd->add_flag("--dry-run", args->dry_run, "Write the scripts and submit.sh; submit nothing");
  cmd->add_flag("--json", args->json, "Print the job as JSON");
  cmd->callback([args, set_result] { set_result(Submit(*args)); });
}

void AddStepCommand(CLI::App* cluster, const char* name, const char* help,
                    std::shared_ptr<ClusterArgs> args, int (*run)(const ClusterArgs&),
                    bool wave, bool shard, std::function<void(int)> set_result) {
  CLI::App* cmd = cluster->add_subcommand(name, help);
  cmd->add_option("--db", args->db, "The job's database")->capture_default_str();
  if (wave) cmd->add_option("--wave", args->wave, "Wave (1-based)")->required();
  if (shard) cmd->add_option("--shard", args->shard, "Shard (1-based)")->required();
  if (std::string(name) == "status") cmd->add_flag("--json", args->json, "Print as JSON");
  cmd->callback([args, run, set_result] { set_result(run(*args)); });
}

}  // namespace

void AddClusterCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<ClusterArgs>();
  CLI::App* cluster =
      app.add_subcommand("cluster", "Tune on a Slurm cluster: submit, status (and the steps)");
  cluster->require_subcommand(1);
  AddSubmitCommand(cluster, args, set_result);
  AddStepCommand(cluster, "status", "Each wave's progress and what failed", args, Status, false,
                 false, set_result);
  AddStepCommand(cluster, "cancel", "Stop the job: scancel its steps (submitting again continues it)",
                 args, Cancel, false, false, set_result);
  AddStepCommand(cluster, "shard", "Run one shard of a wave (what the array jobs run)", args,
                 Shard, true, true, set_result);
  AddStepCommand(cluster, "merge", "Merge a wave's shards and retrain (a dependent job)", args,
                 Merge, true, false, set_result);
  AddStepCommand(cluster, "finish", "Measure whole-model plans and write the report", args,
                 Finish, false, false, set_result);
}

}  // namespace fusetune::cli
