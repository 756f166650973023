#include "search/tuning_job.h"

#include <fmt/format.h>

#include <span>

#include "common/check.h"
#include "cost_model/training.h"
#include "search/job_target.h"
#include "search/tuned_sizes.h"

namespace fusetune::search {

TuningJob::TuningJob(db::Database& database, std::shared_ptr<const graph::Graph> graph,
                     TuningJobOptions options, TuningJobCallbacks callbacks)
    : database_(database),
      graph_(std::move(graph)),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      graph_key_(GraphWorkloadKey(*graph_)) {}

TuningJob::~TuningJob() = default;

int TuningJob::tasks() const { return static_cast<int>(tuner_->tasks().size()); }

Result<std::unique_ptr<TuningJob>> TuningJob::Open(db::Database& database,
                                                   std::shared_ptr<const graph::Graph> graph,
                                                   TuningJobOptions options,
                                                   TuningJobCallbacks callbacks) {
  std::unique_ptr<TuningJob> job(
      new TuningJob(database, std::move(graph), std::move(options), std::move(callbacks)));
  if (job->options_.resume) FT_RETURN_IF_ERROR(job->FindJobToResume());
  TunerContext context;
  FT_RETURN_IF_ERROR(job->TakeTarget(&context));
  FT_RETURN_IF_ERROR(job->StoreWorkloads());
  FT_RETURN_IF_ERROR(job->OpenJobRow());
  context.job_id = job->job_id_;
  FT_RETURN_IF_ERROR(job->MakeTuner(std::move(context)));
  return job;
}

// The job to continue: the latest unfinished one of this graph. It keeps the
// cache protocol it was started with: its records are stored under that
// protocol's target key.
Status TuningJob::FindJobToResume() {
  FT_ASSIGN_OR_RETURN(auto jobs, database_.ListJobs());
  for (auto it = jobs.rbegin(); it != jobs.rend() && !resumed_; ++it) {
    const auto spec = nlohmann::json::parse(it->spec, nullptr, false);
    if (spec.is_object() && spec.value("graph_key", "") == graph_key_ && it->state != "done")
      resumed_ = *it;
  }
  if (!resumed_)
    return Error(
        ErrorCode::kNotFound,
        "--resume: no unfinished job of this model in the database (start one without --resume)");
  const auto spec = nlohmann::json::parse(resumed_->spec, nullptr, false);
  const std::string job_caches = spec.is_object() ? spec.value("caches", "flushed") : "flushed";
  const auto job_protocol = target::CacheProtocolFromName(job_caches);
  if (!job_protocol)
    return Error(ErrorCode::kCorrupt, fmt::format("job {} names an unknown cache protocol '{}'",
                                                  resumed_->id, job_caches));
  // The default (flushed) resumes a job of any protocol; another protocol
  // must be the job's.
  if (options_.caches != target::CacheProtocol::kFlushed && options_.caches != *job_protocol)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--caches {}: job {} measures with caches {}; resume it without "
                             "--caches, or start a new job",
                             target::CacheProtocolName(options_.caches), resumed_->id, job_caches));
  options_.caches = *job_protocol;
  // A job goes on as it searched: with the cost model or without it (one
  // job is one arm of issue 38's ablation, never both).
  const bool job_guided = spec.is_object() ? spec.value("guided", true) : true;
  if (!options_.tuner.guided && job_guided)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--no-model: job {} searches with the cost model; resume it without "
                             "--no-model, or start a new job",
                             resumed_->id));
  options_.tuner.guided = job_guided;
  return TakeResumedPrecision(spec);
}

// A resumed job measures in the precision it started with (its records'
// target key); asking for another mixed policy is an error.
Status TuningJob::TakeResumedPrecision(const nlohmann::json& spec) {
  target::PrecisionPolicy job;
  if (spec.is_object() && spec.contains("precision") && spec["precision"].is_object()) {
    job.mixed = spec["precision"].value("mixed", false);
    job.error_budget = spec["precision"].value("error_budget", 0.0);
  }
  if (options_.precision.mixed && options_.precision != job)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--precision {}: job {} tunes in precision {}; resume it without "
                             "--precision, or start a new job",
                             options_.precision.ToString(), resumed_->id, job.ToString()));
  options_.precision = job;
  return Status::Ok();
}

// The target key and the calibrated roofs the measurements and the cost
// model's features use.
Status TuningJob::TakeTarget(TunerContext* context) {
  measure::MeasureOptions& measure = options_.tuner.measure;
  measure.caches = options_.caches;
  if (options_.precision.mixed)
    measure.reduced_precision_tolerance = options_.precision.error_budget;
  FT_ASSIGN_OR_RETURN(JobTarget target, EnsureTarget(database_, measure.threads, options_.caches,
                                                     options_.precision, callbacks_.calibrating));
  target_ = target.key;
  context->target = target.key;
  context->target_features =
      cost_model::TargetFeaturesFromCalibration(target.calibration, options_.caches);
  measure.peak_gflops = context->target_features.peak_gflops;
  measure.dram_gbps = context->target_features.dram_gbps;
  return Status::Ok();
}

Status TuningJob::StoreWorkloads() {
  kernels::KernelConfig config;
  config.threads = options_.tuner.measure.threads;
  config.offer_bf16 = options_.precision.mixed && target::DetectTarget().Has("avx512_bf16");
  space_ = std::make_unique<fusion_space::FusionSpace>(*graph_, config);
  tasks_ = ExtractTasks(*graph_, *space_, true);
  for (const Task& t : tasks_) FT_RETURN_IF_ERROR(database_.PutWorkload(t.Workload()));
  return database_.PutWorkload(GraphWorkload(*graph_, options_.model));
}

// A new job with its spec, or the resumed one.
Status TuningJob::OpenJobRow() {
  if (resumed_) return CountResumedWork();
  nlohmann::json spec{
      {"model", options_.model},
      {"graph_key", graph_key_},
      {"trials", options_.tuner.max_trials},
      {"seconds", options_.tuner.max_seconds},
      {"until_converged", options_.until_converged},
      {"seed", options_.tuner.seed},
      {"guided", options_.tuner.guided},
      {"whole_model_only", options_.tuner.whole_model_only},
      {"caches", target::CacheProtocolName(options_.caches)},
      {"precision",
       {{"mixed", options_.precision.mixed}, {"error_budget", options_.precision.error_budget}}}};
  if (!options_.model_key.empty()) {
    spec[kSpecModelKey] = options_.model_key;
    spec[kSpecDims] = options_.dims;
  }
  db::JobEntry job;
  job.spec = spec.dump();
  FT_ASSIGN_OR_RETURN(job_id_, database_.CreateJob(job));
  return Status::Ok();
}

// A resumed job keeps its budget unless a new one is given; its seconds come
// from its last checkpoint and its trials from its records (those after the
// last checkpoint count too).
Status TuningJob::CountResumedWork() {
  job_id_ = resumed_->id;
  TunerOptions& tuner = options_.tuner;
  const auto old_spec = nlohmann::json::parse(resumed_->spec, nullptr, false);
  const auto progress = nlohmann::json::parse(resumed_->progress, nullptr, false);
  if (tuner.max_trials == 0 && tuner.max_seconds == 0 && !options_.until_converged) {
    tuner.max_trials = old_spec.value("trials", int64_t{0});
    tuner.max_seconds = old_spec.value("seconds", 0.0);
    options_.until_converged = old_spec.value("until_converged", false);
  }
  if (progress.is_object() && progress.contains("summary"))
    tuner.seconds_before = progress["summary"].value("seconds", 0.0);
  db::RecordFilter filter;
  filter.job_id = job_id_;
  return database_.ForEachRecord(filter, [&](const db::Record& r) {
    tuner.trials_before += r.workload_key != graph_key_;
    return true;
  });
}

Status TuningJob::MakeTuner(TunerContext context) {
  MeasureFn measure = options_.measure;
  if (!measure) {
    FT_ASSIGN_OR_RETURN(measurer_, measure::Measurer::Create(options_.worker_path.empty()
                                                                 ? measure::DefaultWorkerPath()
                                                                 : options_.worker_path));
    measure = [measurer = measurer_.get(), options = options_.tuner.measure](
                  const measure::Candidate& c) { return measurer->Measure(c, options); };
  }
  TunerCallbacks callbacks;
  callbacks.commit = [this](db::Record& record) -> Status {
    FT_ASSIGN_OR_RETURN(auto ids, database_.CommitRecords(std::span<db::Record>(&record, 1)));
    record.id = ids[0];
    if (callbacks_.committed) callbacks_.committed(record);
    return Status::Ok();
  };
  callbacks.progress = [this](const TunerProgress& p) {
    if (callbacks_.progress) callbacks_.progress(p);
  };
  callbacks.should_stop = [this] { return callbacks_.should_stop && callbacks_.should_stop(); };
  callbacks.checkpoint = [this](const nlohmann::json& summary) {
    return database_.UpdateJob(job_id_, "running", nlohmann::json{{"summary", summary}}.dump());
  };
  // A trial or time budget is spent in full: converged tasks are reopened
  // until it runs out (until_converged stops at convergence).
  TunerOptions& tuner = options_.tuner;
  tuner.stop_when_converged =
      options_.until_converged || (tuner.max_trials == 0 && tuner.max_seconds == 0);
  tuner_ = std::make_unique<Tuner>(graph_, *space_, std::move(tasks_), tuner, std::move(context),
                                   std::move(measure), std::move(callbacks));
  tasks_.clear();
  FT_RETURN_IF_ERROR(LoadPriors());
  tuner_->SetModel(cost_model::ActiveOrAnalytical(database_));
  cost_model::DatasetOptions data_options;
  data_options.target = target_;
  data_options.label = cost_model::kDefaultTimeLabel;  // as Tuner::AddSample's
  if (auto history = cost_model::LoadDataset(database_, data_options); history.ok())
    tuner_->SetHistory(std::move(*history));
  return Status::Ok();
}

// The fresh records of the graph and its tasks for this target.
Status TuningJob::LoadPriors() {
  std::vector<std::string> keys{graph_key_};
  for (const Task& t : tuner_->tasks()) keys.push_back(t.key.ToString());
  for (const std::string& key : keys) {
    db::RecordFilter filter;
    filter.workload_key = key;
    filter.target = target_;
    filter.fresh_only = true;
    FT_RETURN_IF_ERROR(database_.ForEachRecord(filter, [&](const db::Record& r) {
      tuner_->AddPrior(r);
      return true;
    }));
  }
  return Status::Ok();
}

std::string TuningJob::DefaultWorkerPath() { return measure::DefaultWorkerPath(); }

Result<TuningJobResult> TuningJob::Run() {
  FT_CHECK(!ran_, "TuningJob::Run runs once");
  ran_ = true;
  const Status run = tuner_->Run();
  TuningJobResult result;
  result.job_id = job_id_;
  result.summary = tuner_->Summary();
  // The tuner's own word, not the predicate asked again: a caller's
  // predicate need not stay true once it has stopped the job.
  result.interrupted = result.summary.stop_reason == StopCauseName(StopCause::kInterrupted);
  const char* state = !run.ok() ? "failed" : result.interrupted ? "interrupted" : "done";
  // The job's end is recorded on a best-effort basis: a job left "running"
  // is resumed like an interrupted one.
  (void)database_.UpdateJob(job_id_, state,
                            nlohmann::json{{"summary", SummaryToJson(result.summary)}}.dump());
  if (!run.ok()) return run.error();
  return result;
}

}  // namespace fusetune::search
