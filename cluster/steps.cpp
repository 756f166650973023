#include "cluster/steps.h"

#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "cluster/report.h"
#include "cost_model/training.h"
#include "db/jsonl.h"

namespace fusetune::cluster {

namespace {

int NodeCpus() {
  const char* slurm = std::getenv("SLURM_CPUS_ON_NODE");
  if (slurm != nullptr && std::atoi(slurm) > 0) return std::atoi(slurm);
  return std::max(1u, std::thread::hardware_concurrency());
}

Result<std::unique_ptr<db::Database>> OpenDb(const std::string& path, bool read_only) {
  db::OpenOptions o;
  o.create = !read_only;
  o.read_only = read_only;
  return db::MakeSqliteDatabase(path, o);
}

// Runs `body` as a step whose status lives at `path`: running, then done
// with the figures `body` returns, or failed with its error.
// A step whose result says it was stopped (`stopped` returns why) ends
// failed, to be run again, not done.
template <typename T>
Result<T> AsStep(const std::string& path, StepStatus status,
                 const std::function<Result<T>(StepStatus*)>& body,
                 const std::function<nlohmann::json(const T&)>& figures,
                 const std::function<std::string(const T&)>& stopped = {}) {
  FT_RETURN_IF_ERROR(WriteStep(path, status));
  Result<T> result = body(&status);
  status.ended_at = UnixNow();
  const std::string why = result.ok() && stopped ? stopped(*result) : "";
  if (result.ok()) {
    status.state = why.empty() ? StepState::kDone : StepState::kFailed;
    status.error = why;
    status.progress = figures(*result);
  } else {
    status.state = StepState::kFailed;
    status.error = result.error().message();
  }
  FT_RETURN_IF_ERROR(WriteStep(path, status));
  return result;
}

Status NeedMerged(const ClusterJob& job, int wave) {
  if (wave <= 1) return Status::Ok();
  FT_ASSIGN_OR_RETURN(auto merge, ReadStep(JobPaths(job.spec.db).merge_status(wave - 1)));
  if (!merge || merge->state != StepState::kDone)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("wave {} starts from wave {}'s merge, which has not finished", wave,
                             wave - 1));
  return Status::Ok();
}

}  // namespace

search::ShardJobOptions ShardOptions(const ClusterSpec& spec, int wave, int shard,
                                     std::vector<search::ShardModel> models) {
  search::ShardJobOptions o;
  o.models = std::move(models);
  o.shard = shard;
  o.shards = spec.nodes;
  o.wave = wave;
  o.waves = spec.waves;
  o.trials = spec.trials;
  o.max_seconds = spec.shard_seconds;
  o.tuner.seed = spec.seed;
  o.tuner.measure.threads = spec.threads > 0 ? spec.threads : NodeCpus();
  // Nodes of different sizes plan alike: the plan assumes the job's threads,
  // or one where each node measures with its own.
  o.plan_threads = spec.threads > 0 ? spec.threads : 1;
  o.caches = spec.caches;
  o.precision = spec.precision;
  return o;
}

Result<search::ShardJobResult> RunShardStep(const ClusterJob& job, int wave, int shard,
                                            std::vector<search::ShardModel> models,
                                            const StepCallbacks& callbacks) {
  const JobPaths paths(job.spec.db);
  if (shard < 1 || shard > job.spec.nodes || wave < 1 || wave > job.spec.waves)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("shard {} of wave {}: the job has {} shards and {} waves", shard,
                             wave, job.spec.nodes, job.spec.waves));
  FT_RETURN_IF_ERROR(NeedMerged(job, wave));
  std::function<Result<search::ShardJobResult>(StepStatus*)> body =
      [&](StepStatus* status) -> Result<search::ShardJobResult> {
    FT_ASSIGN_OR_RETURN(auto base, OpenDb(job.spec.db, true));
    FT_ASSIGN_OR_RETURN(auto shard_db, OpenDb(paths.shard_db(wave, shard), false));
    search::ShardJobCallbacks cb;
    cb.calibrating = callbacks.calibrating;
    cb.should_stop = callbacks.should_stop;
    double last_write = 0;
    cb.progress = [&](const search::ShardProgress& p) {
      if (callbacks.shard_progress) callbacks.shard_progress(p);
      if (UnixNow() - last_write < 2 && p.current != "done") return;
      last_write = UnixNow();
      status->progress["trials"] = p.trials;
      status->progress["quota"] = p.quota;
      status->progress["tasks"] = p.tasks;
      status->progress["tasks_finished"] = p.tasks_finished;
      status->progress["seconds"] = p.seconds;
      (void)WriteStep(paths.shard_status(wave, shard), *status);
    };
    search::ShardJobOptions options = ShardOptions(job.spec, wave, shard, std::move(models));
    options.worker_path = callbacks.worker_path;
    options.measure = callbacks.measure;
    FT_ASSIGN_OR_RETURN(auto run, search::ShardJob::Open(*shard_db, base.get(),
                                                         std::move(options), cb));
    status->progress["target"] = run->target();
    return run->Run();
  };
  std::function<nlohmann::json(const search::ShardJobResult&)> figures =
      [](const search::ShardJobResult& r) { return search::ShardResultToJson(r); };
  std::function<std::string(const search::ShardJobResult&)> stopped =
      [](const search::ShardJobResult& r) {
        return r.stop == search::ShardStop::kInterrupted
                   ? std::string("stopped by a signal before its quotas were measured")
                   : std::string();
      };
  return AsStep(paths.shard_status(wave, shard), StartedStep(), body, figures, stopped);
}

namespace {

// Merges every shard database of `wave` into `into`.
Result<nlohmann::json> MergeShards(const ClusterJob& job, int wave, db::Database& into) {
  const JobPaths paths(job.spec.db);
  nlohmann::json shards = nlohmann::json::array();
  for (int i = 1; i <= job.spec.nodes; ++i) {
    const std::string path = paths.shard_db(wave, i);
    if (!std::filesystem::exists(path))
      return Error(ErrorCode::kNotFound,
                   fmt::format("wave {} shard {} left no database ({})", wave, i, path));
    FT_ASSIGN_OR_RETURN(auto from, OpenDb(path, true));
    auto merged = db::MergeDatabase(into, *from);
    if (!merged.ok()) return merged.error().WithContext("merging " + path);
    shards.push_back({{"shard", i},
                      {"records_read", merged->records_read},
                      {"records_added", merged->records_added}});
  }
  return shards;
}

// Retrains on everything; too little data is not a failure of the wave.
nlohmann::json RetrainModel(const ClusterJob& job, db::Database& database) {
  cost_model::RetrainOptions o;
  o.seed = job.spec.seed;
  o.forms = {"corrected", "composed"};
  o.xgboost.max_seconds = std::max(2.0, job.spec.merge_seconds * 0.3);
  const double start = UnixNow();
  auto report = cost_model::Retrain(database, o);
  if (!report.ok())
    return {{"retrained", false}, {"why", report.error().message()},
            {"seconds", UnixNow() - start}};
  return {{"retrained", true},
          {"model_id", report->model_id},
          {"form", report->chosen_form},
          {"spearman", report->chosen.spearman},
          {"promoted", report->promoted},
          {"seconds", report->seconds}};
}

}  // namespace

Result<nlohmann::json> RunMergeStep(const ClusterJob& job, int wave,
                                    const StepCallbacks& callbacks) {
  const JobPaths paths(job.spec.db);
  std::function<Result<nlohmann::json>(StepStatus*)> body =
      [&](StepStatus*) -> Result<nlohmann::json> {
    FT_ASSIGN_OR_RETURN(auto into, OpenDb(job.spec.db, false));
    if (callbacks.stage) callbacks.stage(fmt::format("merging wave {}", wave));
    const double start = UnixNow();
    FT_ASSIGN_OR_RETURN(nlohmann::json shards, MergeShards(job, wave, *into));
    const double merge_seconds = UnixNow() - start;
    if (callbacks.stage) callbacks.stage("retraining the cost model");
    return nlohmann::json{{"shards", shards},
                          {"merge_seconds", merge_seconds},
                          {"model", RetrainModel(job, *into)}};
  };
  std::function<nlohmann::json(const nlohmann::json&)> figures = [](const nlohmann::json& j) {
    return j;
  };
  return AsStep(paths.merge_status(wave), StartedStep(), body, figures);
}

Result<nlohmann::json> RunFinishStep(const ClusterJob& job,
                                     std::vector<search::ShardModel> models,
                                     const StepCallbacks& callbacks) {
  const JobPaths paths(job.spec.db);
  FT_RETURN_IF_ERROR(NeedMerged(job, job.spec.waves + 1));
  std::function<Result<nlohmann::json>(StepStatus*)> body =
      [&](StepStatus*) -> Result<nlohmann::json> {
    FT_ASSIGN_OR_RETURN(auto database, OpenDb(job.spec.db, false));
    nlohmann::json plans = nlohmann::json::array();
    for (search::ShardModel& m : models) {
      if (callbacks.stage) callbacks.stage("whole-model plans of " + m.name);
      search::TuningJobOptions o;
      o.model = m.name;
      o.tuner.seed = job.spec.seed;
      o.tuner.whole_model_only = true;
      o.tuner.measure.threads = ShardOptions(job.spec, 1, 1, {}).tuner.measure.threads;
      o.caches = job.spec.caches;
      o.precision = job.spec.precision;
      o.worker_path = callbacks.worker_path;
      o.measure = callbacks.measure;
      search::TuningJobCallbacks cb;
      cb.calibrating = callbacks.calibrating;
      cb.should_stop = callbacks.should_stop;
      FT_ASSIGN_OR_RETURN(auto tuning, search::TuningJob::Open(*database, m.graph, o, cb));
      FT_ASSIGN_OR_RETURN(search::TuningJobResult r, tuning->Run());
      plans.push_back(ModelPlanJson(m.name, tuning->target(), r));
    }
    FT_ASSIGN_OR_RETURN(nlohmann::json report, BuildReport(job, plans));
    FT_RETURN_IF_ERROR(WriteFileAtomically(paths.report_json(), report.dump(2) + "\n"));
    FT_RETURN_IF_ERROR(WriteFileAtomically(paths.report_text(), FormatReport(report)));
    return report;
  };
  std::function<nlohmann::json(const nlohmann::json&)> figures = [](const nlohmann::json& j) {
    return j.value("plans", nlohmann::json::array());
  };
  return AsStep(paths.finish_status(), StartedStep(), body, figures);
}

}  // namespace fusetune::cluster
