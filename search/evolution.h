// The tiling search of one task: an evolutionary search over its tiling
// space, ranked by the cost model, one round at a time.
//
// A round: the population starts from uniform samples of the space and the
// best tilings measured so far; each generation keeps the better half by
// predicted time and refills the rest with mutations (one parameter moved to
// a neighbouring or random value) and crossovers (each parameter from either
// parent), legal ones only. The round proposes the predicted best tilings
// not measured yet, plus a share drawn at random from the unmeasured ones
// (epsilon-greedy: the model is wrong in places it has not seen). The first
// round always includes the default tiling, the baseline a rule-based
// compiler would run. The task has converged when its space is exhausted or
// when `patience` rounds in a row improved its best time by less than
// `min_gain`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/rng.h"
#include "cost_model/cost_model.h"
#include "measure/result.h"
#include "search/residuals.h"
#include "search/tasks.h"

namespace fusetune::search {

struct EvolutionOptions {
  int population = 256;
  int generations = 4;
  double crossover_share = 0.3;  // of the children; the rest are mutations
  double epsilon = 0.125;        // share of each round drawn at random
  // Optimism under uncertainty: rank by predicted x 2^(-explore x uncertainty).
  double explore = 0.5;
  int patience = 3;
  double min_gain = 0.01;
  // Correct the model's ranking by what this task's own measurements say of
  // it (search/residuals.h), from the fourth measured tiling on.
  bool correct_residuals = true;
};

struct Proposal {
  fusion_space::Tiling tiling;
  double predicted_seconds = 0;  // the model's ranking value (0 for random picks and suggestions)
  bool random = false;
  bool suggested = false;  // another task's best tiling
  // The model's prediction was clamped to what its training data supports
  // (cost_model::Prediction::out_of_range).
  bool out_of_range = false;
};

// What a record keeps of why `proposal` was measured, ranked by `model`.
measure::SearchNote NoteOf(const Proposal& proposal, const cost_model::CostModel& model);

class TaskSearch {
 public:
  TaskSearch(const Task& task, EvolutionOptions options, uint64_t seed);

  // A tiling measured (before this search: a resumed job, another job): it
  // is never proposed again; `seconds` when it ran correctly, what the search
  // compares. `time` summarises its repeats (empty when unknown): the model's
  // predictions are corrected against the same measurement as the model's
  // label (cost_model::DefaultLabelSeconds), so that the residuals do not
  // carry the difference between the two statistics.
  void AddMeasured(const fusion_space::Tiling& tiling, std::optional<double> seconds,
                   const measure::TimeStats& time = {});
  // The same for a stored record of `tiling`: its seconds when it ran
  // correctly, its repeats' summary from `metrics` (the record's metrics
  // column, parsed once by the caller, who may read more of it).
  void AddRecord(const fusion_space::Tiling& tiling, const db::Record& record,
                 const Result<measure::RecordMetrics>& metrics);
  // Up to `count` tilings not measured yet, best predicted first. Before
  // them, `suggestions` that are legal here and not measured yet: the best
  // tilings of tasks with the same tiling space (the same GEMM with another
  // epilogue), which a measured time on this task should confirm or refute
  // (one trial each) rather than the model.
  std::vector<Proposal> Propose(int count, const cost_model::CostModel& model,
                                const cost_model::TargetFeatures& target,
                                const std::vector<fusion_space::Tiling>& suggestions = {});
  // After the round's measurements: updates the best time and convergence.
  void EndRound();
  // A converged task searched further (budget left after every task
  // converged): it converges again after twice as many flat rounds.
  void Reopen();

  const Task& task() const { return *task_; }
  const cost_model::GroupInfo& group() const { return group_; }
  bool converged() const { return converged_; }
  bool exhausted() const;
  // Whether Propose would take `tiling` as a suggestion: legal here, not measured.
  bool WouldTry(const fusion_space::Tiling& tiling) const;
  int rounds() const { return rounds_; }
  int64_t measured() const { return static_cast<int64_t>(measured_.size()); }
  std::optional<double> best_seconds() const { return best_seconds_; }
  const std::optional<fusion_space::Tiling>& best_tiling() const { return best_tiling_; }
  const std::vector<std::pair<fusion_space::Tiling, double>>& measured_ok() const {
    return measured_ok_;
  }
  // The fastest measured tiling that `keep` accepts, with its seconds.
  std::optional<std::pair<fusion_space::Tiling, double>> BestMeasured(
      const std::function<bool(const fusion_space::Tiling&)>& keep) const;
  // Relative improvement of the best time over the last round (1 before any).
  double recent_gain() const { return recent_gain_; }
  // The model's best predicted tiling of the last round (or the default).
  const fusion_space::Tiling& predicted_best() const { return predicted_best_; }
  double predicted_best_seconds() const { return predicted_best_seconds_; }

 private:
  std::vector<fusion_space::Tiling> Evolve(const cost_model::CostModel& model,
                                           const cost_model::TargetFeatures& target,
                                           std::vector<double>* ranked_scores);
  void MarkOutOfRange(const cost_model::CostModel& model, const cost_model::TargetFeatures& target,
                      std::vector<Proposal>* proposals) const;
  std::vector<double> Score(const std::vector<fusion_space::Tiling>& tilings,
                            const cost_model::CostModel& model,
                            const cost_model::TargetFeatures& target) const;
  // Refits correction_ to the measured tilings under `model`.
  void FitCorrection(const cost_model::CostModel& model, const cost_model::TargetFeatures& target);
  std::optional<fusion_space::Tiling> Mutate(const fusion_space::Tiling& parent);
  std::optional<fusion_space::Tiling> Crossover(const fusion_space::Tiling& a,
                                                const fusion_space::Tiling& b);

  const Task* task_;
  cost_model::GroupInfo group_;
  EvolutionOptions options_;
  Rng rng_;
  std::map<std::string, std::optional<double>> measured_;             // TilingToString -> seconds
  std::vector<std::pair<fusion_space::Tiling, double>> measured_ok_;  // in the order measured
  std::vector<double> labels_ok_;  // measured_ok_'s labels (AddMeasured), in the same order
  ResidualCorrection correction_;
  std::optional<double> best_seconds_, best_at_round_start_;
  std::optional<fusion_space::Tiling> best_tiling_;
  fusion_space::Tiling predicted_best_;
  double predicted_best_seconds_ = 0;
  double recent_gain_ = 1;
  int rounds_ = 0, flat_rounds_ = 0;
  bool converged_ = false;
};

}  // namespace fusetune::search
