// The tuner's loop: baselines, rounds, online model updates, stopping.
// Whole plans (partition, measurement, summary) are in tuner_plans.cpp.
#include "search/tuner.h"

#include <fmt/format.h>

#include <tuple>

#include "common/enum_names.h"
#include "cost_model/xgboost_model.h"
#include "fusion_space/plan_json.h"
#include "search/tuner_plans.h"

namespace fusetune::search {

namespace {

bool SameTilingSpace(const Task& a, const Task& b) {
  if (a.kind != b.kind || a.kind == fusion_space::KernelTemplate::kReference) return false;
  const auto& pa = a.tilings().params();
  const auto& pb = b.tilings().params();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (pa[i].name != pb[i].name || pa[i].values != pb[i].values) return false;
  return true;
}

}  // namespace

Tuner::Tuner(std::shared_ptr<const graph::Graph> graph, fusion_space::FusionSpace& space,
             std::vector<Task> tasks, TunerOptions options, TunerContext context, MeasureFn measure,
             TunerCallbacks callbacks)
    : graph_(std::move(graph)),
      space_(space),
      tasks_(std::move(tasks)),
      options_(options),
      context_(std::move(context)),
      measure_(std::move(measure)),
      callbacks_(std::move(callbacks)),
      graph_key_(GraphWorkloadKey(*graph_)),
      model_(options.guided ? cost_model::MakeAnalyticalModel()
                            : cost_model::MakeUnguidedModel(options.seed)),
      plans_(std::make_unique<PlanState>(options_.anchor_max_age_seconds)),
      start_(std::chrono::steady_clock::now()) {
  // Residuals correct a model's ranking; random scores have none to correct.
  if (!options_.guided) options_.evolution.correct_residuals = false;
  task_results_.resize(tasks_.size());
  in_plan_.assign(tasks_.size(), true);
  for (size_t t = 0; t < tasks_.size(); ++t) {
    searches_.push_back(
        std::make_unique<TaskSearch>(tasks_[t], options_.evolution, ForkSeed(options_.seed, t)));
    task_by_key_[tasks_[t].key.ToString()] = static_cast<int>(t);
  }
  siblings_.resize(tasks_.size());
  for (size_t t = 0; t < tasks_.size(); ++t)
    for (size_t u = 0; u < tasks_.size(); ++u)
      if (u != t && SameTilingSpace(tasks_[t], tasks_[u]))
        siblings_[t].push_back(static_cast<int>(u));
}

Tuner::~Tuner() = default;

std::optional<double> Tuner::SuggestionGain(int task) const {
  const TaskSearch& mine = *searches_[task];
  std::optional<double> gain;
  for (int u : siblings_[task]) {
    const TaskSearch& theirs = *searches_[u];
    if (!theirs.best_tiling().has_value() || !mine.WouldTry(*theirs.best_tiling())) continue;
    const double g = mine.best_seconds().has_value()
                         ? std::max(0.0, 1.0 - *theirs.best_seconds() / *mine.best_seconds())
                         : 1.0;
    gain = std::max(gain.value_or(0), g);
  }
  return gain;
}

std::vector<fusion_space::Tiling> Tuner::SiblingBests(int task) const {
  std::vector<fusion_space::Tiling> bests;
  for (int u : siblings_[task])
    if (searches_[u]->best_tiling().has_value()) bests.push_back(*searches_[u]->best_tiling());
  return bests;
}

void Tuner::SetModel(std::unique_ptr<cost_model::CostModel> model) {
  if (options_.guided) model_ = std::move(model);
}

void Tuner::SetHistory(cost_model::Dataset history) {
  history_ = std::move(history);
  history_workloads_.clear();
  for (size_t i = 0; i < history_.workload_keys.size(); ++i)
    history_workloads_[history_.workload_keys[i]] = static_cast<int>(i);
}

bool Tuner::AddPrior(const db::Record& record) {
  if (record.workload_key == graph_key_) return plans_->AddPrior(record);
  auto it = task_by_key_.find(record.workload_key);
  if (it == task_by_key_.end()) return false;
  const int t = it->second;
  const auto plan_json = nlohmann::json::parse(record.plan, nullptr, false);
  auto plan = fusion_space::PlanFromJson(*tasks_[t].space, plan_json);
  if (!plan.ok() || plan->groups.size() != 1) return false;
  const fusion_space::Tiling& tiling = plan->groups[0].tiling;
  const bool ok = record.status == db::RecordStatus::kOk;
  const auto m = measure::MetricsFromText(record.metrics);  // read once, for both uses
  if (m.ok() && m->search) plans_->speed.AddRun(m->search->anchor_seconds);
  searches_[t]->AddRecord(tiling, record, m);
  if (ok) {
    Measured facts{record.seconds, 0, -1, 0};
    if (m.ok()) {
      facts.bytes = static_cast<double>(m->measured.bytes_in + m->measured.bytes_out);
      facts.overlap = m->measured.overlap;
      facts.max_error = m->measured.max_error;
    }
    task_results_[t][fusion_space::TilingToString(tiling)] = facts;
  }
  return true;
}

double Tuner::Elapsed() const {
  return options_.seconds_before +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

const char* StopCauseName(StopCause cause) {
  static constexpr EnumNames<StopCause, 5> kNames{{{
      {StopCause::kInterrupted, "interrupted"},
      {StopCause::kTrials, "trials"},
      {StopCause::kTime, "time"},
      {StopCause::kConverged, "converged"},
      {StopCause::kWholeModel, "whole-model"},
  }}};
  return kNames.Name(cause);
}

bool Tuner::Interrupted() const { return callbacks_.should_stop && callbacks_.should_stop(); }

std::optional<StopCause> Tuner::DueStop() {
  if (Interrupted()) return StopCause::kInterrupted;
  if (options_.max_trials > 0 && options_.trials_before + trials_ >= options_.max_trials)
    return StopCause::kTrials;
  if (options_.max_seconds > 0 && Elapsed() >= options_.max_seconds) return StopCause::kTime;
  return std::nullopt;
}

void Tuner::ReportProgress(const std::string& current) {
  if (!callbacks_.progress) return;
  TunerProgress p;
  p.trials = options_.trials_before + trials_;
  p.max_trials = options_.max_trials;
  p.seconds = Elapsed();
  p.max_seconds = options_.max_seconds;
  p.tasks = static_cast<int>(tasks_.size());
  for (const auto& s : searches_) p.tasks_converged += s->converged();
  if (plans_->best.has_value()) p.best_model_seconds = plans_->measured[*plans_->best].seconds;
  if (plans_->unfused.has_value()) p.unfused_seconds = plans_->measured[*plans_->unfused].seconds;
  p.current = current;
  callbacks_.progress(p);
}

void Tuner::AddSample(int task, const fusion_space::Tiling& tiling,
                      const measure::MeasureResult& result, double seconds) {
  const std::string& key = tasks_[task].key.ToString();
  auto [it, added] =
      history_workloads_.emplace(key, static_cast<int>(history_.workload_keys.size()));
  if (added) history_.workload_keys.push_back(key);
  cost_model::Sample s;
  s.workload = it->second;
  // The label the stored records train on (cost_model::LoadDataset), so that
  // the history loaded at the start and the job's own samples agree.
  s.seconds = cost_model::DefaultLabelSeconds(seconds, result.time);
  s.traffic_bytes = static_cast<double>(result.bytes_in + result.bytes_out);
  s.overhead = result.overhead_seconds;
  s.eta = result.overlap;
  history_.x.Add(searches_[task]->group(), tiling, context_.target_features);
  history_.y.push_back(s);
}

Tuner::RoundTrial Tuner::MeasureProposal(int task, const Proposal& proposal) {
  RoundTrial r{proposal, {}, NoteOf(proposal, *model_)};
  r.trial = MeasureTrial(tasks_[task], proposal.tiling, measure_, context_.target, context_.job_id,
                         r.note);
  ++trials_;
  return r;
}

std::optional<AnchorReading> Tuner::AfterRound(std::optional<AnchorReading> before) {
  if (!before || before->now <= kRecheckAbove * before->reference || Interrupted())
    return before;
  const std::optional<AnchorReading> after = ReadAnchor(/*fresh=*/true);
  return after && after->now < before->now ? after : before;
}

Status Tuner::RecordTrial(int task, RoundTrial& r, std::optional<AnchorReading> anchor) {
  TaskSearch& search = *searches_[task];
  const measure::MeasureResult& result = r.trial.result;
  const double seconds = anchor ? anchor->Scale(result.time.median) : result.time.median;
  if (r.trial.record) {
    if (anchor) {
      anchor->WriteTo(&r.note);
      r.trial.record->metrics = measure::MetricsToText({result, r.note});
    }
    if (result.ok()) r.trial.record->seconds = seconds;
    FT_RETURN_IF_ERROR(callbacks_.commit(*r.trial.record));
  }
  search.AddMeasured(r.proposal.tiling, result.ok() ? std::optional<double>(seconds) : std::nullopt,
                     result.time);
  if (!result.ok()) {
    ++failed_;
    return Status::Ok();
  }
  task_results_[task][fusion_space::TilingToString(r.proposal.tiling)] = {
      seconds, static_cast<double>(result.bytes_in + result.bytes_out), result.overlap,
      result.max_error};
  if (tasks_[task].kind != fusion_space::KernelTemplate::kReference) {
    AddSample(task, r.proposal.tiling, result, seconds);
    ++new_ok_;
  }
  tasks_changed_ = true;
  return Status::Ok();
}

// A round's tilings are measured first and recorded after, so that a slow
// anchor reading can be checked against a second one (AfterRound).
Status Tuner::RunRound(int task) {
  TaskSearch& search = *searches_[task];
  const int count = search.rounds() == 0 ? options_.first_round_size : options_.round_size;
  const std::vector<Proposal> proposals =
      search.Propose(count, *model_, context_.target_features, SiblingBests(task));
  std::optional<AnchorReading> anchor = proposals.empty() ? std::nullopt : ReadAnchor();
  std::vector<RoundTrial> round;
  for (const Proposal& p : proposals) {
    if ((stop_ = DueStop())) break;
    ReportProgress(tasks_[task].summary);
    round.push_back(MeasureProposal(task, p));
  }
  if (!round.empty()) anchor = AfterRound(anchor);
  for (RoundTrial& r : round) FT_RETURN_IF_ERROR(RecordTrial(task, r, anchor));
  search.EndRound();
  ++rounds_;
  ++rounds_since_plan_;
  return Status::Ok();
}

// Retrains the XGBoost model on every sample so far, bounded in time; keeps
// the current model when training fails (too few samples, one workload).
void Tuner::UpdateModel() {
  if (!options_.guided || options_.model_update_every <= 0 || new_ok_ < options_.model_update_every)
    return;
  if (stop_) return;
  new_ok_ = 0;
  if (history_.size() < 2 * options_.model_update_every) return;
  cost_model::XgboostOptions o;
  o.form = "corrected";
  o.rounds = 150;
  o.seed = options_.seed;
  o.max_seconds = options_.model_update_seconds;
  o.should_stop = callbacks_.should_stop;
  std::vector<int> all(history_.workload_keys.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  ReportProgress("updating the cost model");
  auto model = cost_model::TrainXgboostModel(history_.Subset(all), o);
  if (!model.ok()) return;
  model_ = std::move(*model);
  ++model_updates_;
}

bool Tuner::ReopenConverged(std::vector<TaskStanding>* standing) {
  bool any = false;
  for (size_t t = 0; t < tasks_.size(); ++t) {
    TaskSearch& s = *searches_[t];
    if (s.exhausted()) continue;
    s.Reopen();
    (*standing)[t].converged = s.converged();
    any = any || !s.converged();
  }
  return any;
}

Status Tuner::Run() {
  start_ = std::chrono::steady_clock::now();
  stop_.reset();
  FT_RETURN_IF_ERROR(MeasureBaselines());
  if (options_.whole_model_only && !stop_) stop_ = StopCause::kWholeModel;
  while (!stop_) {
    if ((stop_ = DueStop())) break;
    std::vector<TaskStanding> standing(tasks_.size());
    const double scale = AnalyticalScale();
    bool all_started = true;
    for (size_t t = 0; t < tasks_.size(); ++t) {
      const TaskSearch& s = *searches_[t];
      // A sibling's best not tried here reopens a converged task, with the
      // gain its measured time promises.
      const std::optional<double> suggested_gain = SuggestionGain(static_cast<int>(t));
      standing[t] = {tasks_[t].occurrences,
                     s.best_seconds().value_or(PredictedSeconds(t, scale)),
                     std::max(s.recent_gain(), suggested_gain.value_or(0)),
                     s.rounds(),
                     (s.converged() || s.exhausted()) && !suggested_gain.has_value(),
                     in_plan_[t]};
      all_started = all_started && (s.rounds() > 0 || standing[t].converged);
    }
    if (all_started && (rounds_since_plan_ >= options_.partition_every || plans_->tuned_count == 0))
      FT_RETURN_IF_ERROR(MeasureTunedPlan());
    int next = PickTask(standing);
    if (next < 0 && !options_.stop_when_converged && ReopenConverged(&standing))
      next = PickTask(standing);
    if (next < 0) {
      stop_ = StopCause::kConverged;
      break;
    }
    FT_RETURN_IF_ERROR(RunRound(next));
    UpdateModel();
    if (callbacks_.checkpoint) FT_RETURN_IF_ERROR(callbacks_.checkpoint(SummaryToJson(Summary())));
  }
  if (stop_ != StopCause::kInterrupted) FT_RETURN_IF_ERROR(MeasureTunedPlan());
  if (stop_ != StopCause::kInterrupted && !Interrupted()) FT_RETURN_IF_ERROR(Showdown());
  ReportProgress("done");
  if (callbacks_.checkpoint) FT_RETURN_IF_ERROR(callbacks_.checkpoint(SummaryToJson(Summary())));
  return Status::Ok();
}

}  // namespace fusetune::search
