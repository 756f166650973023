// The tuner's whole plans: baselines, the exact partition over the best
// known group costs, end-to-end measurement, and the job's summary.
#include "search/tuner_plans.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <tuple>

#include "fusion_space/layout_choice.h"
#include "fusion_space/partition.h"
#include "fusion_space/plan_json.h"
#include "graph/workload_key.h"
#include "kernels/conv.h"

namespace fusetune::search {

using measure::PlanKind;

// A whole plan this much slower than the sum of its groups' measured times is
// measured again (on the Intel guest, one 30-minute MLP job measured the same
// partition at 62.8 and 91.0 ms; its groups summed to 60.6 ms).
constexpr double kRemeasureAbovePrediction = 1.15;

// Whole plans this close to the best so far are run kContenderRuns times
// (Tuner::ConfirmContender in tuner.h); those further off keep their one
// run, as only a run luckier than this could make them the best. Each
// confirmation run costs a run of the plan and one of the anchor.
constexpr double kContenderWithin = 1.05;
constexpr int kContenderRuns = 3;

bool Tuner::PlanState::AddPrior(const db::Record& record) {
  const auto plan = nlohmann::json::parse(record.plan, nullptr, false);
  const auto metrics = measure::MetricsFromText(record.metrics);
  if (!plan.is_object() || !metrics.ok()) return false;
  PlanReport r;
  r.kind =
      metrics->search ? metrics->search->plan_kind.value_or(PlanKind::kTuned) : PlanKind::kTuned;
  r.seconds = record.seconds;
  r.groups = plan.contains("groups") ? static_cast<int64_t>(plan["groups"].size()) : 0;
  r.bytes = static_cast<double>(metrics->measured.bytes_in + metrics->measured.bytes_out);
  r.record_id = record.id;
  // A greedy record's time is a run of the anchor, unless a showdown scaled
  // it to another record's (tuner_showdown.cpp).
  const bool showdown = metrics->search && metrics->search->showdown;
  if (record.status == db::RecordStatus::kOk && r.kind == PlanKind::kGreedy && !showdown)
    speed.AddRun(record.seconds);
  if (metrics->search) speed.AddRun(metrics->search->anchor_seconds);
  Add(r, plan, record.status);
  return true;
}

void Tuner::PlanState::Add(PlanReport report, nlohmann::json plan, db::RecordStatus status) {
  this->status[plan.dump()] = status;
  if (status != db::RecordStatus::kOk) return;
  const size_t i = measured.size();
  if (report.kind == PlanKind::kUnfused && !unfused.has_value()) unfused = i;
  if (report.kind == PlanKind::kGreedy && !greedy.has_value()) greedy = i;
  if (!best.has_value() || report.seconds < measured[*best].seconds) best = i;
  measured.push_back(std::move(report));
  plan_json.push_back(std::move(plan));
}

std::vector<fusion_space::KernelTemplate> PlanTemplates(fusion_space::FusionSpace& space,
                                                        const fusion_space::Plan& plan) {
  std::vector<fusion_space::KernelTemplate> templates;
  for (const fusion_space::PlanGroup& g : plan.groups)
    templates.push_back(space.Match(g.nodes).instance.kind);
  return templates;
}

Status Tuner::MeasurePlan(const fusion_space::Plan& plan, measure::PlanKind kind,
                          std::optional<double> predicted, db::RecordStatus* status) {
  measure::Candidate candidate = measure::PlanCandidate(graph_, space_, plan, PlanKindName(kind));
  if (auto it = plans_->status.find(candidate.plan.dump()); it != plans_->status.end()) {
    if (status != nullptr) *status = it->second;
    return Status::Ok();
  }
  const std::vector<fusion_space::KernelTemplate> templates = PlanTemplates(space_, plan);
  for (int attempt = 0; attempt < 2; ++attempt) {
    measure::SearchNote search_info;
    search_info.plan_kind = kind;
    search_info.remeasure = attempt > 0;  // measured twice on purpose
    ReportProgress(
        fmt::format("whole model, {} plan{}", PlanKindName(kind), attempt ? " again" : ""));
    PlanRun run = RunWholePlan(candidate, kind, /*fresh=*/false);
    const bool contender =
        run.result.ok() &&
        (!plans_->best.has_value() ||
         run.seconds <= kContenderWithin * plans_->measured[*plans_->best].seconds);
    if (contender)
      run = ConfirmContender(candidate, kind, std::move(run), &search_info.confirm_runs);
    if (run.anchor) run.anchor->WriteTo(&search_info);
    const std::optional<double> best_before =
        plans_->best ? std::optional(plans_->measured[*plans_->best].seconds) : std::nullopt;
    FT_ASSIGN_OR_RETURN(const db::Record record, CommitPlanRecord(candidate, templates, run.result,
                                                                  search_info, run.seconds));
    const bool slower_than_best = !best_before || record.seconds > *best_before;
    if (status != nullptr) *status = record.status;
    if (!run.result.ok() || !predicted || !slower_than_best ||
        record.seconds <= kRemeasureAbovePrediction * *predicted || Interrupted())
      break;
  }
  return Status::Ok();
}

Result<db::Record> Tuner::CommitPlanRecord(
    const measure::Candidate& candidate, const std::vector<fusion_space::KernelTemplate>& templates,
    const measure::MeasureResult& result, const measure::SearchNote& note, double seconds) {
  db::Record record =
      MakeRecord(graph_key_, candidate, result, context_.target, context_.job_id, templates, note);
  if (record.status == db::RecordStatus::kOk) record.seconds = seconds;
  FT_RETURN_IF_ERROR(callbacks_.commit(record));
  PlanReport report{note.plan_kind.value_or(PlanKind::kTuned), record.seconds,
                    static_cast<int64_t>(templates.size()),
                    static_cast<double>(result.bytes_in + result.bytes_out), record.id};
  plans_->Add(report, candidate.plan, record.status);
  return record;
}

std::optional<AnchorReading> Tuner::ReadAnchor(bool fresh) {
  if (!plans_->anchor) {
    plans_->anchor = measure::PlanCandidate(graph_, space_, space_.Greedy(), "greedy (anchor)");
    plans_->anchor->anchor = true;
  }
  return plans_->speed.Read(*plans_->anchor, measure_, fresh);
}

Tuner::PlanRun Tuner::RunWholePlan(const measure::Candidate& candidate, measure::PlanKind kind,
                                   bool fresh) {
  PlanRun run;
  if (kind != PlanKind::kGreedy) run.anchor = ReadAnchor(fresh);
  run.result = measure_(candidate);
  run.seconds = run.result.time.median;
  if (!run.result.ok()) return run;
  if (run.anchor) run.seconds = run.anchor->Scale(run.seconds);
  if (kind == PlanKind::kGreedy)
    plans_->speed.AddRun(run.result.time.median);  // its runs are the anchor's
  return run;
}

Tuner::PlanRun Tuner::ConfirmContender(const measure::Candidate& candidate, measure::PlanKind kind,
                                       PlanRun first, int* runs_taken) {
  std::vector<PlanRun> runs;
  runs.push_back(std::move(first));
  while (static_cast<int>(runs.size()) < kContenderRuns && !Interrupted()) {
    ReportProgress(fmt::format("whole model, {} plan, confirming ({} of {})", PlanKindName(kind),
                               runs.size() + 1, kContenderRuns));
    PlanRun run = RunWholePlan(candidate, kind, /*fresh=*/true);
    *runs_taken = static_cast<int>(runs.size()) + 1;
    if (!run.result.ok()) return run;  // a wrong output or a crash now is the plan's result
    runs.push_back(std::move(run));
  }
  return MedianBy(std::move(runs), [](const PlanRun& r) { return r.seconds; });
}

// The greedy plan first: it is the anchor the unfused one is timed beside.
Status Tuner::MeasureBaselines() {
  for (PlanKind kind : {PlanKind::kGreedy, PlanKind::kUnfused}) {
    if (Interrupted()) {
      stop_ = StopCause::kInterrupted;
      return Status::Ok();
    }
    const fusion_space::Plan plan = kind == PlanKind::kUnfused ? space_.Unfused() : space_.Greedy();
    FT_RETURN_IF_ERROR(MeasurePlan(plan, kind));
  }
  return Status::Ok();
}

using cost_model::AnalyticalSeconds;

// How far the analytical model is off on the tasks measured so far: the
// median of measured over analytical time of their best tilings (1 before any).
double Tuner::AnalyticalScale() const {
  std::vector<double> ratios;
  for (size_t t = 0; t < tasks_.size(); ++t) {
    const TaskSearch& s = *searches_[t];
    if (!s.best_seconds().has_value() || tasks_[t].kind == fusion_space::KernelTemplate::kReference)
      continue;
    const double a = AnalyticalSeconds(s.group(), *s.best_tiling(), context_.target_features);
    if (a > 0) ratios.push_back(*s.best_seconds() / a);
  }
  if (ratios.empty()) return 1;
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  return ratios[ratios.size() / 2];
}

// Absolute seconds for a task not measured yet: the analytical time of the
// model's best predicted tiling, times AnalyticalScale().
double Tuner::PredictedSeconds(int task, double scale) const {
  const TaskSearch& s = *searches_[task];
  return scale * AnalyticalSeconds(s.group(), s.predicted_best(), context_.target_features);
}

namespace {

bool InNchw(const fusion_space::Tiling& tiling) {
  const auto* t = std::get_if<kernels::ConvTiling>(&tiling);
  return t == nullptr || (t->in_layout == kernels::ActivationLayout::kNCHW &&
                          t->out_layout == kernels::ActivationLayout::kNCHW);
}

// A task's best measured tiling and seconds, in NCHW when asked (falling
// back to any layout when no NCHW tiling was measured).
std::optional<std::pair<fusion_space::Tiling, double>> BestOf(const TaskSearch& s, bool nchw_only) {
  if (nchw_only)
    if (auto best = s.BestMeasured(InNchw)) return best;
  if (s.best_tiling() && s.best_seconds())
    return std::make_pair(*s.best_tiling(), *s.best_seconds());
  return std::nullopt;
}

// The measured tiling of least `cost(tiling, seconds)`, with that cost.
std::optional<std::pair<fusion_space::Tiling, double>> LeastCost(
    const TaskSearch& s, const std::function<double(const fusion_space::Tiling&, double)>& cost) {
  std::optional<std::pair<fusion_space::Tiling, double>> least;
  for (const auto& [tiling, seconds] : s.measured_ok()) {
    const double c = cost(tiling, seconds);
    if (!least || c < least->second) least = std::make_pair(tiling, c);
  }
  return least;
}

// A predicted cost when there is one (0: none).
std::optional<double> PositiveOrNone(double predicted) {
  return predicted > 0 ? std::optional<double>(predicted) : std::nullopt;
}

}  // namespace

std::pair<fusion_space::Tiling, double> Tuner::BestOrPredicted(int task, Ranking ranking,
                                                               double scale) const {
  const TaskSearch& s = *searches_[task];
  if (ranking == Ranking::kWeightsStreamed) {
    auto streamed = [&](const fusion_space::Tiling& t, double seconds) {
      return seconds + ExtraWeightSeconds(task, t);
    };
    if (auto least = LeastCost(s, streamed)) return *least;
    return {s.predicted_best(), streamed(s.predicted_best(), PredictedSeconds(task, scale))};
  }
  if (auto best = BestOf(s, ranking == Ranking::kNchw)) return *best;
  return {s.predicted_best(), PredictedSeconds(task, scale)};
}

double Tuner::ExtraWeightSeconds(int task, const fusion_space::Tiling& tiling) const {
  const fusion_space::KernelInstance& instance = searches_[task]->group().instance;
  const auto* conv = std::get_if<kernels::ConvTiling>(&tiling);
  if (instance.kind != fusion_space::KernelTemplate::kConv || conv == nullptr) return 0;
  const kernels::ConvShape& shape = instance.conv.shape;
  const int64_t packed = kernels::PrePackedConvWeightFloats(instance.conv, *conv);
  const int64_t given = shape.out_channels * shape.in_per_group() * shape.kernel_h * shape.kernel_w;
  if (packed <= given) return 0;
  return static_cast<double>(packed - given) * sizeof(float) /
         (context_.target_features.dram_gbps * 1e9);
}

// The exact minimum-cost partition over the best known group costs, each
// group with its best measured tiling (else the predicted best).
fusion_space::Plan Tuner::TunedPlan(double* predicted, Ranking ranking) {
  const auto& groups = space_.candidates().groups;
  fusion_space::PartitionObjective objective;
  objective.group_cost.resize(groups.size());
  std::map<std::vector<int32_t>, int> task_of_nodes;
  const double scale = AnalyticalScale();
  for (size_t i = 0; i < groups.size(); ++i) {
    auto it = task_by_key_.find(groups[i].key.ToString());
    if (it != task_by_key_.end()) {
      objective.group_cost[i] = BestOrPredicted(it->second, ranking, scale).second;
      task_of_nodes[groups[i].nodes] = it->second;
      continue;
    }
    // No task (its group graph is not a legal group on its own): analytical.
    const cost_model::GroupInfo info =
        cost_model::MakeGroupInfo(space_.graph(), *groups[i].instance);
    const fusion_space::Tiling tiling = space_.Tilings(groups[i].nodes).Default();
    objective.group_cost[i] = AnalyticalSeconds(info, tiling, context_.target_features);
  }
  const fusion_space::PartitionChoice choice =
      fusion_space::SelectMinCostPartition(space_, objective);
  if (!choice.found) return space_.Greedy();
  if (predicted != nullptr) *predicted = choice.cost;
  fusion_space::Plan plan = fusion_space::PlanFromCandidates(space_, choice.groups);
  const fusion_space::Plan defaults = plan;
  // The min-cost partition's tasks are marked as in the plan (the scheduler
  // favours them); the variants ranked otherwise (NCHW, weights streamed)
  // leave the marks as they are.
  const bool mark = ranking == Ranking::kMeasured;
  if (mark) std::fill(in_plan_.begin(), in_plan_.end(), false);
  for (fusion_space::PlanGroup& g : plan.groups) {
    auto it = task_of_nodes.find(g.nodes);
    if (it == task_of_nodes.end()) continue;
    if (mark) in_plan_[it->second] = true;
    g.tiling = BestOrPredicted(it->second, ranking, scale).first;
  }
  return space_.Validate(plan) ? plan : defaults;
}

Status Tuner::MeasureTunedPlan() {
  if (!tasks_changed_ && plans_->tuned_count > 0) return Status::Ok();
  tasks_changed_ = false;
  rounds_since_plan_ = 0;
  ++plans_->tuned_count;
  double predicted = 0;
  const fusion_space::Plan plan = TunedPlan(&predicted);
  plans_->last_tuned = measure::PlanCandidate(graph_, space_, plan).plan.dump();
  const std::optional<double> expected = PositiveOrNone(predicted);
  FT_RETURN_IF_ERROR(MeasurePlanWithinBudget(plan, PlanKind::kTuned, expected));
  if (Interrupted()) return Status::Ok();
  double greedy_predicted = 0;
  const fusion_space::Plan greedy = TunedGreedyPlan(&greedy_predicted);
  FT_RETURN_IF_ERROR(
      MeasurePlanWithinBudget(greedy, PlanKind::kTuned, PositiveOrNone(greedy_predicted)));
  if (Interrupted()) return Status::Ok();
  if (context_.target_features.warm_weights) FT_RETURN_IF_ERROR(MeasureWeightsStreamedPlan());
  // The partition adds up group times measured alone, without the layout
  // transforms between groups that disagree: the same partition with the
  // layouts chosen across its groups (layout_choice.h), and in NCHW
  // throughout, are measured too, and the fastest plan wins.
  auto any_layout = [](const fusion_space::Plan& p) {
    return std::any_of(p.groups.begin(), p.groups.end(),
                       [](const fusion_space::PlanGroup& g) { return !InNchw(g.tiling); });
  };
  if (!any_layout(plan) || Interrupted()) return Status::Ok();
  const fusion_space::Plan harmonized = HarmonizedPlan(plan);
  if (fusion_space::PlanToJson(space_, harmonized) != fusion_space::PlanToJson(space_, plan) &&
      any_layout(harmonized))
    FT_RETURN_IF_ERROR(MeasurePlanWithinBudget(harmonized, PlanKind::kTuned, expected));
  if (Interrupted()) return Status::Ok();
  const fusion_space::Plan nchw = TunedPlan(&predicted, Ranking::kNchw);
  return MeasurePlanWithinBudget(nchw, PlanKind::kTuned, expected);
}

// Measured only under the warm protocol: the others' records already read
// the weights from DRAM. A measured plan is not measured again (MeasurePlan),
// so where no conv changes this costs nothing.
Status Tuner::MeasureWeightsStreamedPlan() {
  double predicted = 0;
  const fusion_space::Plan plan = TunedPlan(&predicted, Ranking::kWeightsStreamed);
  // Its expected time, against which a slow run is taken again, is what its
  // groups were measured at: without the weights' extra reads.
  for (const fusion_space::PlanGroup& g : plan.groups)
    if (auto it = task_by_key_.find(space_.Key(g.nodes).ToString()); it != task_by_key_.end())
      predicted -= ExtraWeightSeconds(it->second, g.tiling);
  return MeasurePlanWithinBudget(plan, PlanKind::kTuned, PositiveOrNone(predicted));
}

fusion_space::Plan Tuner::TunedGreedyPlan(double* predicted) {
  fusion_space::Plan plan = space_.Greedy();
  const fusion_space::Plan defaults = plan;
  const double scale = AnalyticalScale();
  double sum = 0;
  bool every_group_known = true;
  for (fusion_space::PlanGroup& g : plan.groups) {
    auto it = task_by_key_.find(space_.Key(g.nodes).ToString());
    if (it == task_by_key_.end()) {
      every_group_known = false;
      continue;
    }
    const auto [tiling, seconds] = BestOrPredicted(it->second, Ranking::kMeasured, scale);
    g.tiling = tiling;
    sum += seconds;
  }
  if (predicted != nullptr) *predicted = every_group_known ? sum : 0;
  return space_.Validate(plan) ? plan : defaults;
}

fusion_space::Plan Tuner::HarmonizedPlan(const fusion_space::Plan& plan) const {
  const auto cost = fusion_space::TransformCost::OfTarget(context_.target_features.launch_us,
                                                          context_.target_features.l2_gbps);
  return fusion_space::HarmonizeLayouts(
      space_, plan,
      [&](const fusion_space::PlanGroup& g) {
        auto it = task_by_key_.find(space_.Key(g.nodes).ToString());
        return it == task_by_key_.end() ? std::vector<std::pair<fusion_space::Tiling, double>>{}
                                        : searches_[it->second]->measured_ok();
      },
      cost);
}

TuneSummary Tuner::Summary() const {
  TuneSummary s;
  for (size_t t = 0; t < tasks_.size(); ++t) {
    const Task& task = tasks_[t];
    const TaskSearch& search = *searches_[t];
    TaskReport r;
    r.key = task.key.ToString();
    r.summary = task.summary;
    r.kind = fusion_space::KernelTemplateName(task.kind);
    r.occurrences = task.occurrences;
    r.space_size = task.tilings().size();
    r.measured = search.measured();
    r.rounds = search.rounds();
    r.converged = search.converged();
    const auto& results = task_results_[t];
    if (auto it = results.find(fusion_space::TilingToString(task.tilings().Default()));
        it != results.end()) {
      r.baseline_seconds = it->second.seconds;
      r.baseline_bytes = it->second.bytes;
    }
    if (search.best_tiling().has_value()) {
      r.best_tiling = fusion_space::TilingToString(*search.best_tiling());
      const Measured& m = results.at(r.best_tiling);
      r.best_seconds = m.seconds;
      r.best_bytes = m.bytes;
      r.best_overlap = m.overlap;
    }
    s.tasks.push_back(std::move(r));
  }
  s.plans = plans_->measured;
  if (plans_->unfused.has_value()) s.unfused = plans_->measured[*plans_->unfused];
  if (plans_->greedy.has_value()) s.greedy = plans_->measured[*plans_->greedy];
  if (plans_->best.has_value()) {
    s.best = plans_->measured[*plans_->best];
    s.best_plan = plans_->plan_json[*plans_->best];
  }
  s.showdown = plans_->showdown;
  s.trials = options_.trials_before + trials_;
  s.failed_trials = failed_;
  s.model_updates = model_updates_;
  s.seconds = Elapsed();
  s.stop_reason = stop_ ? StopCauseName(*stop_) : "";
  return s;
}

namespace {

nlohmann::json Optional(const std::optional<double>& v) {
  return v.has_value() ? nlohmann::json(*v) : nlohmann::json();
}
std::optional<double> OptionalFrom(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<double>();
}
nlohmann::json PlanToSummaryJson(const PlanReport& p) {
  return {{"kind", PlanKindName(p.kind)},
          {"seconds", p.seconds},
          {"groups", p.groups},
          {"bytes", p.bytes},
          {"record_id", p.record_id}};
}
nlohmann::json ShowdownToJson(const ShowdownReport& r) {
  return {
      {"plans", r.plans},     {"rounds", r.rounds},
      {"against", r.against}, {"fastest_other", r.fastest_other},
      {"ratio", r.ratio},     {"winner", r.winner ? nlohmann::json(*r.winner) : nlohmann::json()}};
}
ShowdownReport ShowdownFromJson(const nlohmann::json& j) {
  ShowdownReport r;
  r.plans = j.at("plans").get<int>();
  r.rounds = j.at("rounds").get<int>();
  r.against = j.at("against").get<int64_t>();
  r.fastest_other = j.at("fastest_other").get<int64_t>();
  r.ratio = j.at("ratio").get<double>();
  if (!j.at("winner").is_null()) r.winner = j["winner"].get<int64_t>();
  return r;
}
// A kind this version does not know (a newer one's) is a plan the search built.
PlanReport PlanFromSummaryJson(const nlohmann::json& j) {
  return {measure::PlanKindFromName(j.at("kind").get<std::string>()).value_or(PlanKind::kTuned),
          j.at("seconds").get<double>(), j.at("groups").get<int64_t>(), j.at("bytes").get<double>(),
          j.at("record_id").get<int64_t>()};
}

}  // namespace

nlohmann::json SummaryToJson(const TuneSummary& s) {
  nlohmann::json j{{"trials", s.trials},
                   {"failed_trials", s.failed_trials},
                   {"model_updates", s.model_updates},
                   {"seconds", s.seconds},
                   {"stop_reason", s.stop_reason},
                   {"tasks", nlohmann::json::array()},
                   {"plans", nlohmann::json::array()}};
  for (const TaskReport& t : s.tasks)
    j["tasks"].push_back({{"key", t.key},
                          {"summary", t.summary},
                          {"template", t.kind},
                          {"occurrences", t.occurrences},
                          {"space_size", t.space_size},
                          {"measured", t.measured},
                          {"rounds", t.rounds},
                          {"converged", t.converged},
                          {"baseline_seconds", Optional(t.baseline_seconds)},
                          {"best_seconds", Optional(t.best_seconds)},
                          {"baseline_bytes", t.baseline_bytes},
                          {"best_bytes", t.best_bytes},
                          {"best_overlap", t.best_overlap},
                          {"best_tiling", t.best_tiling}});
  for (const PlanReport& p : s.plans) j["plans"].push_back(PlanToSummaryJson(p));
  if (s.unfused) j["unfused"] = PlanToSummaryJson(*s.unfused);
  if (s.greedy) j["greedy"] = PlanToSummaryJson(*s.greedy);
  if (s.best) j["best"] = PlanToSummaryJson(*s.best);
  j["best_plan"] = s.best_plan;
  if (s.showdown) j["showdown"] = ShowdownToJson(*s.showdown);
  return j;
}

Result<TuneSummary> SummaryFromJson(const nlohmann::json& j) {
  try {
    TuneSummary s;
    s.trials = j.at("trials").get<int64_t>();
    s.failed_trials = j.at("failed_trials").get<int64_t>();
    s.model_updates = j.at("model_updates").get<int64_t>();
    s.seconds = j.at("seconds").get<double>();
    s.stop_reason = j.at("stop_reason").get<std::string>();
    for (const auto& t : j.at("tasks")) {
      TaskReport r;
      r.key = t.at("key").get<std::string>();
      r.summary = t.at("summary").get<std::string>();
      r.kind = t.at("template").get<std::string>();
      r.occurrences = t.at("occurrences").get<int64_t>();
      r.space_size = t.at("space_size").get<int64_t>();
      r.measured = t.at("measured").get<int64_t>();
      r.rounds = t.at("rounds").get<int>();
      r.converged = t.at("converged").get<bool>();
      r.baseline_seconds = OptionalFrom(t, "baseline_seconds");
      r.best_seconds = OptionalFrom(t, "best_seconds");
      r.baseline_bytes = t.at("baseline_bytes").get<double>();
      r.best_bytes = t.at("best_bytes").get<double>();
      r.best_overlap = t.at("best_overlap").get<double>();
      r.best_tiling = t.at("best_tiling").get<std::string>();
      s.tasks.push_back(std::move(r));
    }
    for (const auto& p : j.at("plans")) s.plans.push_back(PlanFromSummaryJson(p));
    if (j.contains("unfused")) s.unfused = PlanFromSummaryJson(j["unfused"]);
    if (j.contains("greedy")) s.greedy = PlanFromSummaryJson(j["greedy"]);
    if (j.contains("best")) s.best = PlanFromSummaryJson(j["best"]);
    s.best_plan = j.value("best_plan", nlohmann::json());
    if (j.contains("showdown")) s.showdown = ShowdownFromJson(j["showdown"]);
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("not a tuning summary: {}", e.what()));
  }
}

}  // namespace fusetune::search
