#include "search/shard_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <span>

#include "common/enum_names.h"
#include "cost_model/training.h"
#include "fusion_space/plan_json.h"
#include "search/job_target.h"

namespace fusetune::search {

struct ShardJob::JobTask {
  Task task;
  std::string unit;  // tasks of one tiling space
};

namespace {

// Tasks with one tiling space (template and parameter values) form a unit.
std::string UnitOf(const Task& task) {
  if (task.kind == fusion_space::KernelTemplate::kReference) return task.key.ToString();
  std::string unit = fusion_space::KernelTemplateName(task.kind);
  for (const auto& p : task.tilings().params()) {
    unit += "|" + p.name;
    for (int64_t v : p.values) unit += fmt::format(",{}", v);
  }
  return unit;
}

// The records of `key` on `target` in `database` (fresh only).
Status ForEachOf(db::Database* database, const std::string& key, const std::string& target,
                 const std::function<void(const db::Record&)>& visit) {
  if (database == nullptr) return Status::Ok();
  db::RecordFilter filter;
  filter.workload_key = key;
  filter.target = target;
  filter.fresh_only = true;
  return database->ForEachRecord(filter, [&](const db::Record& r) {
    visit(r);
    return true;
  });
}

std::optional<fusion_space::Tiling> TilingOf(const Task& task, const db::Record& record) {
  const auto json = nlohmann::json::parse(record.plan, nullptr, false);
  auto plan = fusion_space::PlanFromJson(*task.space, json);
  if (!plan.ok() || plan->groups.size() != 1) return std::nullopt;
  return plan->groups[0].tiling;
}

}  // namespace

nlohmann::json ShardResultToJson(const ShardJobResult& r) {
  return {{"job_id", r.job_id},
          {"tasks", r.tasks},
          {"tasks_finished", r.tasks_finished},
          {"trials", r.trials},
          {"trials_total", r.trials_total},
          {"quota", r.quota},
          {"job_quota", r.job_quota},
          {"failed", r.failed},
          {"seconds", r.seconds},
          {"stop_reason", r.stop ? ShardStopName(*r.stop) : "running"}};
}

const char* ShardStopName(ShardStop stop) {
  static constexpr EnumNames<ShardStop, 3> kNames{{{
      {ShardStop::kDone, "done"},
      {ShardStop::kTime, "time"},
      {ShardStop::kInterrupted, "interrupted"},
  }}};
  return kNames.Name(stop);
}

ShardJob::ShardJob(db::Database& shard_db, db::Database* base, ShardJobOptions options,
                   ShardJobCallbacks callbacks)
    : shard_db_(shard_db),
      base_(base),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      start_(std::chrono::steady_clock::now()) {}

ShardJob::~ShardJob() = default;

Result<std::unique_ptr<ShardJob>> ShardJob::Open(db::Database& shard_db, db::Database* base,
                                                 ShardJobOptions options,
                                                 ShardJobCallbacks callbacks) {
  if (options.models.empty())
    return Error(ErrorCode::kInvalidArgument, "a shard needs at least one model");
  if (options.shard < 1 || options.shard > options.shards || options.wave < 1 ||
      options.wave > options.waves)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("shard {}/{} of wave {}/{}: out of range", options.shard,
                             options.shards, options.wave, options.waves));
  if (options.trials <= 0)
    return Error(ErrorCode::kInvalidArgument, "a sharded job needs a trial budget (--trials N)");
  std::unique_ptr<ShardJob> job(
      new ShardJob(shard_db, base, std::move(options), std::move(callbacks)));
  FT_RETURN_IF_ERROR(job->ExtractJobTasks());
  FT_RETURN_IF_ERROR(job->TakeTarget());
  FT_RETURN_IF_ERROR(job->OpenJobRow());
  FT_RETURN_IF_ERROR(job->MakeMeasure());
  const TunerOptions& tuner = job->options_.tuner;
  job->model_ = tuner.guided ? cost_model::ActiveOrAnalytical(base ? *base : shard_db)
                             : cost_model::MakeUnguidedModel(tuner.seed);
  return job;
}

// Every model's tasks, merged by workload key (occurrences summed).
Result<std::map<std::string, ShardJob::JobTask>> ShardJob::ExtractAll(bool offer_bf16,
                                                                      int threads) {
  std::map<std::string, JobTask> by_key;
  for (const ShardModel& model : options_.models) {
    kernels::KernelConfig config;
    config.threads = threads;
    config.offer_bf16 = offer_bf16;
    spaces_.push_back(std::make_unique<fusion_space::FusionSpace>(*model.graph, config));
    for (Task& t : ExtractTasks(*model.graph, *spaces_.back(), true)) {
      auto [it, added] = by_key.try_emplace(t.key.ToString());
      if (!added) {
        it->second.task.occurrences += t.occurrences;
        continue;
      }
      it->second.unit = UnitOf(t);
      it->second.task = std::move(t);
    }
  }
  return by_key;
}

// The plan is made from the f32 spaces of the job's plan threads on every
// node; a node tunes in spaces of its own threads and, in a mixed-precision
// job on a node with bf16, spaces that offer it: the same tasks, within the
// same quotas.
Status ShardJob::ExtractJobTasks() {
  const int threads = options_.tuner.measure.threads;
  const int plan_threads = options_.plan_threads > 0 ? options_.plan_threads : threads;
  FT_ASSIGN_OR_RETURN(auto by_key, ExtractAll(false, plan_threads));
  for (auto& [key, t] : by_key) tasks_.push_back(std::move(t));
  FT_RETURN_IF_ERROR(MakePlan());
  const bool bf16 = options_.precision.mixed && target::DetectTarget().Has("avx512_bf16");
  if (bf16 || plan_threads != threads) {
    FT_ASSIGN_OR_RETURN(auto own, ExtractAll(bf16, threads));
    for (JobTask& t : tasks_) {
      auto it = own.find(t.task.key.ToString());
      if (it == own.end())
        return Error(ErrorCode::kInternal,
                     fmt::format("task {} of the plan is not a task with {} threads",
                                 t.task.key.ToString(), threads));
      t.task = std::move(it->second.task);
    }
  }
  for (const JobTask& t : tasks_) FT_RETURN_IF_ERROR(shard_db_.PutWorkload(t.task.Workload()));
  return Status::Ok();
}

// The same on every node: nominal roofs, the f32 space's size.
Status ShardJob::MakePlan() {
  std::vector<ShardTaskInfo> infos;
  const cost_model::TargetFeatures nominal;
  for (const JobTask& jt : tasks_) {
    const Task& t = jt.task;
    ShardTaskInfo info;
    info.key = t.key.ToString();
    info.unit = jt.unit;
    info.occurrences = t.occurrences;
    info.reference = t.kind == fusion_space::KernelTemplate::kReference;
    info.space_size = t.tilings().size();
    info.predicted_seconds = cost_model::AnalyticalSeconds(
        cost_model::MakeGroupInfo(*t.graph, t.instance()), t.tilings().Default(), nominal);
    infos.push_back(std::move(info));
  }
  ShardPlanOptions o;
  o.shards = options_.shards;
  o.trials = options_.trials;
  o.measure = options_.tuner.measure;
  FT_ASSIGN_OR_RETURN(plan_, PlanShards(infos, o));
  mine_ = plan_.order[options_.shard - 1];
  return Status::Ok();
}

// This node's target, its calibration taken from the base database when the
// base has this node kind's.
Status ShardJob::TakeTarget() {
  measure::MeasureOptions& measure = options_.tuner.measure;
  measure.caches = options_.caches;
  if (options_.precision.mixed)
    measure.reduced_precision_tolerance = options_.precision.error_budget;
  const std::string key = target::ThisMachineKey(options_.caches, options_.precision);
  if (base_ != nullptr) {
    for (const std::string& k : {key, target::FlushedKeyOf(key)}) {
      FT_ASSIGN_OR_RETURN(auto stored, base_->GetTarget(k));
      FT_ASSIGN_OR_RETURN(auto own, shard_db_.GetTarget(k));
      if (stored && !own) FT_RETURN_IF_ERROR(shard_db_.PutTarget(*stored));
    }
  }
  FT_ASSIGN_OR_RETURN(JobTarget target, EnsureTarget(shard_db_, measure.threads, options_.caches,
                                                     options_.precision, callbacks_.calibrating));
  target_ = target.key;
  features_ = cost_model::TargetFeaturesFromCalibration(target.calibration, options_.caches);
  measure.peak_gflops = features_.peak_gflops;
  measure.dram_gbps = features_.dram_gbps;
  return Status::Ok();
}

// The job row of this shard and wave: continued when it exists (a requeued
// shard), with the tasks it finished.
Status ShardJob::OpenJobRow() {
  nlohmann::json models = nlohmann::json::array();
  for (const ShardModel& m : options_.models) models.push_back(m.name);
  const nlohmann::json spec{{"kind", "shard"},
                            {"models", models},
                            {"shard", options_.shard},
                            {"shards", options_.shards},
                            {"wave", options_.wave},
                            {"waves", options_.waves},
                            {"trials", options_.trials},
                            {"seed", options_.tuner.seed},
                            {"guided", options_.tuner.guided},
                            {"target", target_}};
  FT_ASSIGN_OR_RETURN(auto jobs, shard_db_.ListJobs());
  for (const db::JobEntry& j : jobs) {
    if (j.spec != spec.dump()) continue;
    job_id_ = j.id;
    resumed_ = true;
    was_done_ = j.state == "done";
    const auto progress = nlohmann::json::parse(j.progress, nullptr, false);
    if (progress.is_object() && progress.contains("finished"))
      for (const auto& k : progress["finished"]) finished_.insert(k.get<std::string>());
    return Status::Ok();
  }
  db::JobEntry job;
  job.spec = spec.dump();
  FT_ASSIGN_OR_RETURN(job_id_, shard_db_.CreateJob(job));
  return Status::Ok();
}

Status ShardJob::MakeMeasure() {
  measure_ = options_.measure;
  if (measure_) return Status::Ok();
  FT_ASSIGN_OR_RETURN(measurer_, measure::Measurer::Create(options_.worker_path.empty()
                                                               ? measure::DefaultWorkerPath()
                                                               : options_.worker_path));
  measure_ = [measurer = measurer_.get(), o = options_.tuner.measure](const measure::Candidate& c) {
    return measurer->Measure(c, o);
  };
  return Status::Ok();
}

double ShardJob::Elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::optional<ShardStop> ShardJob::DueStop() const {
  if (callbacks_.should_stop && callbacks_.should_stop()) return ShardStop::kInterrupted;
  if (options_.max_seconds > 0 && Elapsed() >= options_.max_seconds) return ShardStop::kTime;
  return std::nullopt;
}

void ShardJob::ReportProgress(const std::string& current) {
  if (!callbacks_.progress) return;
  ShardProgress p;
  p.trials = result_.trials_total;
  p.quota = leftover_ ? 0 : result_.quota;  // beyond the quotas: a count, not a bar
  p.tasks = static_cast<int>(mine_.size());
  p.tasks_finished = static_cast<int>(finished_.size());
  p.seconds = Elapsed();
  p.max_seconds = options_.max_seconds;
  p.current = current;
  callbacks_.progress(p);
}

Status ShardJob::Checkpoint(const std::string& state) {
  nlohmann::json progress{{"finished", finished_}, {"result", ShardResultToJson(result_)}};
  return shard_db_.UpdateJob(job_id_, state, progress.dump());
}

// The task's records in the base and shard databases, in plan-text order
// (the order they were committed in differs with the number of shards):
// added to the search, returns how many distinct tilings were measured.
Result<int64_t> ShardJob::LoadPriors(const Task& task, TaskSearch* search) {
  std::map<std::string, const db::Record*> by_plan;
  std::vector<db::Record> records;
  for (db::Database* d : {base_, &shard_db_})
    FT_RETURN_IF_ERROR(ForEachOf(d, task.key.ToString(), target_,
                                 [&](const db::Record& r) { records.push_back(r); }));
  for (const db::Record& r : records) {
    auto [it, added] = by_plan.try_emplace(r.plan, &r);
    // A tiling measured twice (a shard merged, then run again): the faster ok one.
    if (!added && r.status == db::RecordStatus::kOk &&
        (it->second->status != db::RecordStatus::kOk || r.seconds < it->second->seconds))
      it->second = &r;
  }
  for (const auto& [plan, r] : by_plan) {
    if (auto tiling = TilingOf(task, *r))
      search->AddRecord(*tiling, *r, measure::MetricsFromText(r->metrics));
  }
  return static_cast<int64_t>(by_plan.size());
}

Result<int64_t> ShardJob::CountMeasured(const Task& task) {
  std::set<std::string> plans;
  for (db::Database* d : {base_, &shard_db_})
    FT_RETURN_IF_ERROR(ForEachOf(d, task.key.ToString(), target_,
                                 [&](const db::Record& r) { plans.insert(r.plan); }));
  return static_cast<int64_t>(plans.size());
}

// The best measured tiling of each other task of the unit (suggestions).
static Result<std::vector<fusion_space::Tiling>> UnitBests(const std::vector<const Task*>& siblings,
                                                           db::Database* base, db::Database& shard,
                                                           const std::string& target) {
  std::vector<fusion_space::Tiling> bests;
  for (const Task* s : siblings) {
    std::optional<db::Record> best;
    for (db::Database* d : {base, &shard})
      FT_RETURN_IF_ERROR(ForEachOf(d, s->key.ToString(), target, [&](const db::Record& r) {
        if (r.status == db::RecordStatus::kOk && (!best || r.seconds < best->seconds)) best = r;
      }));
    if (best)
      if (auto t = TilingOf(*s, *best)) bests.push_back(*t);
  }
  return bests;
}

// The search of a task in one wave (or one pass over the time left): the
// root seed forked by the task's workload key, whatever shard tunes it.
uint64_t ShardJob::TaskSeed(const Task& task, uint64_t round) const {
  return ForkSeed(ForkSeed(options_.tuner.seed, Hasher().AddString(task.key.ToString()).digest()),
                  round);
}

int64_t ShardJob::WaveQuotaOf(int task) const {
  return WaveQuota(plan_.quota[task], options_.wave, options_.waves);
}

// One round of `search`: up to `count` proposals measured and committed.
Status ShardJob::MeasureRound(const Task& task, TaskSearch* search, int count,
                              const std::vector<fusion_space::Tiling>& suggestions) {
  const auto proposals = search->Propose(count, *model_, features_, suggestions);
  int measured = 0;
  for (const Proposal& p : proposals) {
    if (measured >= count) break;  // suggestions come on top of `count`
    if ((result_.stop = DueStop())) break;
    ReportProgress(task.summary);
    Trial trial = MeasureTrial(task, p.tiling, measure_, target_, job_id_, NoteOf(p, *model_));
    if (trial.record) {
      auto committed = shard_db_.CommitRecords(std::span<db::Record>(&*trial.record, 1));
      if (!committed.ok()) return committed.error();
    }
    const measure::MeasureResult& result = trial.result;
    search->AddMeasured(p.tiling,
                        result.ok() ? std::optional<double>(result.time.median) : std::nullopt,
                        result.time);
    ++measured;
    ++result_.trials;
    ++result_.trials_total;
    result_.failed += !trial.result.ok();
  }
  search->EndRound();
  return Status::Ok();
}

Status ShardJob::TuneTask(int index) {
  const JobTask& jt = tasks_[index];
  const Task& task = jt.task;
  const std::string key = task.key.ToString();
  const int64_t quota = WaveQuotaOf(index);
  TaskSearch search(task, options_.tuner.evolution, TaskSeed(task, options_.wave));
  FT_ASSIGN_OR_RETURN(int64_t measured, LoadPriors(task, &search));
  std::vector<const Task*> siblings;
  for (const JobTask& other : tasks_)
    if (other.unit == jt.unit && &other != &jt) siblings.push_back(&other.task);
  result_.trials_total += std::min(measured, quota);
  while (measured < quota && !search.converged() && !search.exhausted()) {
    FT_ASSIGN_OR_RETURN(const auto suggestions, UnitBests(siblings, base_, shard_db_, target_));
    const int size =
        search.rounds() == 0 ? options_.tuner.first_round_size : options_.tuner.round_size;
    const int count = static_cast<int>(std::min<int64_t>(size, quota - measured));
    const int64_t measured_before_round = search.measured();
    FT_RETURN_IF_ERROR(MeasureRound(task, &search, count, suggestions));
    if (result_.stop) return Status::Ok();
    if (search.measured() == measured_before_round) break;  // nothing left to propose
    measured += search.measured() - measured_before_round;
  }
  finished_.insert(key);
  return Checkpoint("running");
}

// With a time budget left once every quota is measured: more rounds, one
// per task in the plan's order, pass after pass, until the time is spent or
// a pass finds nothing left to measure. What a time budget buys beyond the
// quotas depends on the node's speed, so these trials are not the same
// whatever the number of shards (a trial budget alone stops at the quotas).
Status ShardJob::SpendLeftoverTime() {
  leftover_ = true;
  for (uint64_t pass = 1;; ++pass) {
    int64_t before = result_.trials;
    for (int t : mine_) {
      const Task& task = tasks_[t].task;
      TaskSearch search(task, options_.tuner.evolution, TaskSeed(task, 1000 + pass));
      FT_ASSIGN_OR_RETURN(const int64_t measured, LoadPriors(task, &search));
      if (measured == 0) continue;
      if (search.exhausted()) continue;
      FT_RETURN_IF_ERROR(MeasureRound(task, &search, options_.tuner.round_size));
      if (result_.stop) return Status::Ok();
    }
    if (result_.trials == before) return Status::Ok();
  }
}

Result<ShardJobResult> ShardJob::Run() {
  // start_ is the job's opening: max_seconds bounds the calibration too.
  result_ = {};
  result_.job_id = job_id_;
  result_.tasks = static_cast<int>(mine_.size());
  result_.job_quota = plan_.total_quota();
  for (int t : mine_) result_.quota += WaveQuotaOf(t);
  for (int t : mine_) {
    const std::string key = tasks_[t].task.key.ToString();
    if (finished_.count(key) > 0) {  // in an earlier run of this shard
      FT_ASSIGN_OR_RETURN(const int64_t measured, CountMeasured(tasks_[t].task));
      result_.trials_total += std::min(measured, WaveQuotaOf(t));
      continue;
    }
    if (Status st = TuneTask(t); !st.ok()) {
      result_.seconds = Elapsed();
      (void)Checkpoint("failed");
      return st.error();
    }
    if (result_.stop) break;
  }
  // A shard run again after it ended (its wave rerun for a failed merge)
  // spends no more time.
  if (!result_.stop && options_.max_seconds > 0 && !was_done_) {
    if (Status st = SpendLeftoverTime(); !st.ok()) return st.error();
  }
  result_.tasks_finished = static_cast<int>(finished_.size());
  result_.seconds = Elapsed();
  if (!result_.stop) result_.stop = ShardStop::kDone;
  ReportProgress("done");
  FT_RETURN_IF_ERROR(Checkpoint(result_.stop == ShardStop::kDone ? "done" : "interrupted"));
  return result_;
}

}  // namespace fusetune::search
