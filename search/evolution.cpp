#include "search/evolution.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "cost_model/time_label.h"
#include "search/sampling.h"

namespace fusetune::search {

TaskSearch::TaskSearch(const Task& task, EvolutionOptions options, uint64_t seed)
    : task_(&task),
      group_(cost_model::MakeGroupInfo(*task.graph, task.instance())),
      options_(options),
      rng_(seed),
      predicted_best_(task.tilings().Default()) {}

void TaskSearch::AddMeasured(const fusion_space::Tiling& tiling, std::optional<double> seconds,
                             const measure::TimeStats& time) {
  const auto [it, added] =
      measured_.insert_or_assign(fusion_space::TilingToString(tiling), seconds);
  if (added && seconds.has_value() && *seconds > 0) {
    measured_ok_.emplace_back(tiling, *seconds);
    labels_ok_.push_back(cost_model::DefaultLabelSeconds(*seconds, time));
  }
  if (seconds.has_value() && (!best_seconds_.has_value() || *seconds < *best_seconds_)) {
    best_seconds_ = seconds;
    best_tiling_ = tiling;
  }
}

void TaskSearch::AddRecord(const fusion_space::Tiling& tiling, const db::Record& record,
                           const Result<measure::RecordMetrics>& metrics) {
  AddMeasured(
      tiling,
      record.status == db::RecordStatus::kOk ? std::optional<double>(record.seconds) : std::nullopt,
      metrics.ok() ? metrics->measured.time : measure::TimeStats{});
}

bool TaskSearch::exhausted() const { return measured() >= task_->tilings().size(); }

bool TaskSearch::WouldTry(const fusion_space::Tiling& tiling) const {
  return !measured_.count(fusion_space::TilingToString(tiling)) &&
         task_->tilings().Check(tiling).allowed();
}

std::vector<double> TaskSearch::Score(const std::vector<fusion_space::Tiling>& tilings,
                                      const cost_model::CostModel& model,
                                      const cost_model::TargetFeatures& target) const {
  cost_model::FeatureMatrix x;
  for (const fusion_space::Tiling& t : tilings) x.Add(group_, t, target);
  const std::vector<cost_model::Prediction> predicted = model.Predict(x);
  std::vector<double> score(tilings.size());
  for (size_t i = 0; i < tilings.size(); ++i) {
    double log2_factor = -options_.explore * predicted[i].uncertainty;
    if (correction_.active())
      if (auto choice = task_->tilings().ChoiceOf(tilings[i]))
        log2_factor += correction_.Log2Factor(*choice);
    score[i] = predicted[i].seconds * std::exp2(log2_factor);
  }
  return score;
}

void TaskSearch::FitCorrection(const cost_model::CostModel& model,
                               const cost_model::TargetFeatures& target) {
  // The most recent measurements, enough to fit a handful of effects per
  // parameter; a long job's thousands would only cost prediction time.
  constexpr size_t kMaxSamples = 512;
  const size_t first = measured_ok_.size() > kMaxSamples ? measured_ok_.size() - kMaxSamples : 0;
  std::vector<std::vector<int>> choices;
  std::vector<double> seconds;
  cost_model::FeatureMatrix x;
  for (size_t i = first; i < measured_ok_.size(); ++i) {
    auto choice = task_->tilings().ChoiceOf(measured_ok_[i].first);
    if (!choice.has_value()) continue;
    choices.push_back(std::move(*choice));
    seconds.push_back(labels_ok_[i]);
    x.Add(group_, measured_ok_[i].first, target);
  }
  std::vector<double> residuals(choices.size());
  if (!choices.empty()) {
    const std::vector<cost_model::Prediction> predicted = model.Predict(x);
    for (size_t i = 0; i < choices.size(); ++i)
      residuals[i] = std::log2(seconds[i] / std::max(predicted[i].seconds, 1e-12));
  }
  correction_.Fit(task_->tilings(), choices, residuals);
}

std::optional<fusion_space::Tiling> TaskSearch::Mutate(const fusion_space::Tiling& parent) {
  const fusion_space::TilingSpace& space = task_->tilings();
  auto choice = space.ChoiceOf(parent);
  if (!choice.has_value() || space.params().empty()) return std::nullopt;
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::vector<int> c = *choice;
    const size_t p = rng_.Below(space.params().size());
    const int n = static_cast<int>(space.params()[p].values.size());
    if (n < 2) continue;
    if (rng_.Uniform() < 0.6)
      c[p] = std::clamp(c[p] + (rng_.Below(2) == 0 ? -1 : 1), 0, n - 1);
    else
      c[p] = static_cast<int>(rng_.Below(n));
    if (c == *choice) continue;
    fusion_space::Tiling child = space.At(c);
    if (space.Check(child)) return child;
  }
  return std::nullopt;
}

std::optional<fusion_space::Tiling> TaskSearch::Crossover(const fusion_space::Tiling& a,
                                                          const fusion_space::Tiling& b) {
  const fusion_space::TilingSpace& space = task_->tilings();
  auto ca = space.ChoiceOf(a), cb = space.ChoiceOf(b);
  if (!ca.has_value() || !cb.has_value()) return std::nullopt;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<int> c = *ca;
    for (size_t p = 0; p < c.size(); ++p)
      if (rng_.Below(2) == 1) c[p] = (*cb)[p];
    fusion_space::Tiling child = space.At(c);
    if (space.Check(child)) return child;
  }
  return std::nullopt;
}

// The population after the last generation, best predicted first.
std::vector<fusion_space::Tiling> TaskSearch::Evolve(const cost_model::CostModel& model,
                                                     const cost_model::TargetFeatures& target,
                                                     std::vector<double>* ranked_scores) {
  const fusion_space::TilingSpace& space = task_->tilings();
  if (options_.correct_residuals) FitCorrection(model, target);
  std::vector<fusion_space::Tiling> population = SampleTilings(space, options_.population, rng_);
  if (best_tiling_.has_value()) population.push_back(*best_tiling_);
  population.push_back(space.Default());
  std::vector<double> score;
  const bool whole_space = space.size() <= options_.population;
  for (int gen = 0;; ++gen) {
    // Deduplicate, score, sort.
    std::map<std::string, fusion_space::Tiling> unique;
    for (fusion_space::Tiling& t : population)
      unique.emplace(fusion_space::TilingToString(t), std::move(t));
    population.clear();
    for (auto& [key, t] : unique) population.push_back(std::move(t));
    score = Score(population, model, target);
    std::vector<size_t> order(population.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] < score[b]; });
    std::vector<fusion_space::Tiling> sorted;
    std::vector<double> sorted_score;
    for (size_t i : order) {
      sorted.push_back(population[i]);
      sorted_score.push_back(score[i]);
    }
    population = std::move(sorted);
    score = std::move(sorted_score);
    if (gen == options_.generations || whole_space) break;
    // The better half are parents; children refill the population.
    const size_t parents = std::max<size_t>(2, population.size() / 2);
    population.resize(std::min(parents, population.size()));
    const size_t target_size = static_cast<size_t>(options_.population);
    for (int tries = 0; population.size() < target_size && tries < options_.population * 4;
         ++tries) {
      const fusion_space::Tiling& a = population[rng_.Below(parents)];
      std::optional<fusion_space::Tiling> child;
      if (rng_.Uniform() < options_.crossover_share)
        child = Crossover(a, population[rng_.Below(parents)]);
      else
        child = Mutate(a);
      if (child.has_value()) population.push_back(std::move(*child));
    }
  }
  if (!population.empty()) {
    predicted_best_ = population.front();
    predicted_best_seconds_ = score.front();
  }
  *ranked_scores = std::move(score);
  return population;
}

std::vector<Proposal> TaskSearch::Propose(int count, const cost_model::CostModel& model,
                                          const cost_model::TargetFeatures& target,
                                          const std::vector<fusion_space::Tiling>& suggestions) {
  best_at_round_start_ = best_seconds_;
  std::vector<Proposal> out;
  std::set<std::string> taken;
  auto fresh = [&](const fusion_space::Tiling& t) {
    const std::string key = fusion_space::TilingToString(t);
    return !measured_.count(key) && taken.insert(key).second;
  };
  if (rounds_ == 0) {
    const fusion_space::Tiling baseline = task_->tilings().Default();
    if (fresh(baseline)) out.push_back({baseline, 0, false});
  }
  // On top of `count`: a suggestion costs one trial, once.
  int extra = 0;
  for (const fusion_space::Tiling& t : suggestions)
    if (WouldTry(t) && fresh(t)) {
      out.push_back({t, 0, false, true});
      ++extra;
    }
  count += extra;
  std::vector<double> score;
  const std::vector<fusion_space::Tiling> ranked = Evolve(model, target, &score);
  const int random_picks = static_cast<int>(std::floor(count * options_.epsilon));
  for (size_t i = 0; i < ranked.size() && static_cast<int>(out.size()) < count - random_picks; ++i)
    if (fresh(ranked[i])) out.push_back({ranked[i], score[i], false});
  // Random unmeasured picks, then fill from the ranking if the space is small.
  const fusion_space::TilingSpace& space = task_->tilings();
  for (int tries = 0; static_cast<int>(out.size()) < count && tries < count * 8; ++tries) {
    fusion_space::Tiling t = space.Sample(rng_);
    if (fresh(t)) out.push_back({t, 0, true});
  }
  if (static_cast<int>(out.size()) < count)
    for (const fusion_space::Tiling& t : space.Enumerate()) {
      if (static_cast<int>(out.size()) >= count) break;
      if (fresh(t)) out.push_back({t, 0, true});
    }
  MarkOutOfRange(model, target, &out);
  return out;
}

// Which of the round's ranked proposals the model predicted beyond what its
// training data supports: their notes say so, and `report` shows them apart.
// Predicted again here (a round's few proposals: microseconds against the
// milliseconds of measuring them) so that ranking keeps its plain scores;
// the flag is the model's, `predicted_seconds` the search's ranked score.
void TaskSearch::MarkOutOfRange(const cost_model::CostModel& model,
                                const cost_model::TargetFeatures& target,
                                std::vector<Proposal>* proposals) const {
  cost_model::FeatureMatrix x;
  std::vector<Proposal*> ranked;
  for (Proposal& p : *proposals)
    if (p.predicted_seconds > 0) {
      x.Add(group_, p.tiling, target);
      ranked.push_back(&p);
    }
  if (ranked.empty()) return;
  const std::vector<cost_model::Prediction> predicted = model.Predict(x);
  for (size_t i = 0; i < ranked.size() && i < predicted.size(); ++i)
    ranked[i]->out_of_range = predicted[i].out_of_range;
}

void TaskSearch::EndRound() {
  ++rounds_;
  if (best_seconds_.has_value() && best_at_round_start_.has_value())
    recent_gain_ = std::max(0.0, (*best_at_round_start_ - *best_seconds_) / *best_at_round_start_);
  else
    recent_gain_ = 1;
  flat_rounds_ = recent_gain_ < options_.min_gain ? flat_rounds_ + 1 : 0;
  converged_ = exhausted() || flat_rounds_ >= options_.patience;
}

void TaskSearch::Reopen() {
  options_.patience *= 2;
  flat_rounds_ = 0;
  converged_ = exhausted();
}

std::optional<std::pair<fusion_space::Tiling, double>> TaskSearch::BestMeasured(
    const std::function<bool(const fusion_space::Tiling&)>& keep) const {
  std::optional<std::pair<fusion_space::Tiling, double>> best;
  for (const auto& [tiling, seconds] : measured_ok_)
    if (keep(tiling) && (!best || seconds < best->second)) best.emplace(tiling, seconds);
  return best;
}

measure::SearchNote NoteOf(const Proposal& proposal, const cost_model::CostModel& model) {
  measure::SearchNote note;
  note.predicted_seconds = proposal.predicted_seconds;
  note.model = model.name() + "/" + model.form();
  note.random = proposal.random;
  note.suggested = proposal.suggested;
  note.out_of_range = proposal.out_of_range;
  return note;
}

}  // namespace fusetune::search
