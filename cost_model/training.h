// Training from the tuning database and choosing what ranks.
//
// Retrain: load the samples, split workloads into training and validation
// (validation workloads are never seen in training), train every model form,
// keep the one that ranks validation workloads best, compare it with the
// active model on the same validation workloads, store it with its metrics
// and activate it when it is better (or when forced).
// EvaluateModels: the same split, every form against the active model, the
// analytical model and a random ranking, nothing stored. Every figure comes
// twice: on all the validation workloads' rows, and on those a tuning job
// measured (what the search ranks: candidates near the optimum, where the
// times of `collect`'s random samples spread much wider). With several splits
// (seeds seed, seed + 1, ...) each model's figures are the mean over them:
// one split of a few dozen workloads moves Spearman by +-0.015.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cost_model/evaluation.h"
#include "cost_model/xgboost_model.h"

namespace fusetune::cost_model {

inline constexpr const char* kXgboostModelName = "xgboost";

struct RetrainOptions {
  std::string target;  // only this target's records; "" for all
  TimeLabel label = kDefaultTimeLabel;  // what a sample's time is (time_label.h)
  double valid_fraction = 0.3;
  uint64_t seed = 1;
  XgboostOptions xgboost;
  std::vector<std::string> forms = {"composed", "corrected", "direct", "pairwise"};
  bool force = false;  // activate even when not better than the active model
  int splits = 1;      // EvaluateModels only: workload splits to average over
  // (stage, done, total): "loading", "training <form>".
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

struct ModelScore {
  std::string model;       // "xgboost/corrected", "analytical", "random", "active (#id)"
  RankingMetrics metrics;  // the mean over splits
  std::vector<double> split_spearman;  // per split, when more than one
  // The same on the validation workloads' tuning-job rows (Sample::tuning),
  // when they have any: the candidates the search measured.
  std::optional<RankingMetrics> tuning;
};

struct RetrainReport {
  DatasetSummary data;
  int train_workloads = 0, valid_workloads = 0;
  int64_t train_samples = 0, valid_samples = 0;  // per split
  int64_t valid_tuning_samples = 0;  // of valid_samples, measured by tuning jobs (per such split)
  int tuning_splits = 0;             // splits whose validation had tuning rows
  int splits = 1;
  std::vector<ModelScore> scores;  // every form, then the baselines
  std::string chosen_form;
  RankingMetrics chosen;
  std::optional<RankingMetrics> active;  // the active model's figures on the same split
  bool promoted = false;
  int64_t model_id = 0;
  double seconds = 0;
};

Result<RetrainReport> Retrain(db::Database& database, const RetrainOptions& options);
Result<RetrainReport> EvaluateModels(db::Database& database, const RetrainOptions& options);

nlohmann::json RetrainReportToJson(const RetrainReport& report);

// The active XGBoost model when one of this feature version is stored, else
// the analytical model.
std::unique_ptr<CostModel> ActiveOrAnalytical(db::ModelStore& database);

}  // namespace fusetune::cost_model
