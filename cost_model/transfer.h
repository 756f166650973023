// Across targets: how well a model trained on one target's records ranks
// another target's unseen workloads while the new target has few records of
// its own (a database imported from another machine, or this machine under
// another cache protocol: each is a target key with its own calibration and
// cache features).
//
// The new target's workloads are split into training and validation as
// EvaluateModels splits them; validation workloads are unseen by every arm,
// including in the old target's records. Arms, each one model form trained
// on:
//   all of TO          every training record of the new target (the yardstick)
//   FROM + f of TO     the old target's records and a random share f of the
//                      new target's training records, per fraction asked
//   f of TO            that share alone (what the old records add)
//   FROM               the old target's records alone
// plus the analytical model. Figures are means over `splits` splits, on all
// validation rows and on those a tuning job measured.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cost_model/evaluation.h"
#include "cost_model/xgboost_model.h"
#include "db/database.h"

namespace fusetune::cost_model {

struct TransferOptions {
  std::string from, to;                    // target keys (db stats lists them)
  TimeLabel label = kDefaultTimeLabel;     // what a sample's time is (time_label.h)
  std::vector<double> fractions = {0.05};  // of the new target's training records
  double valid_fraction = 0.3;
  // Weight the new target's share so that it counts as much in training as
  // all the old target's records (instance weights; the pairwise form
  // ignores them). Off by default: it helped in one direction of four
  // (2 -> 1 threads per kernel), hurt or did nothing in the others
  // (docs/COST_MODEL.md).
  bool balance = false;
  uint64_t seed = 1;
  int splits = 1;
  // The form trained for every arm: direct, the form that ranked tuning-job
  // records best (docs/COST_MODEL.md).
  XgboostOptions xgboost = [] {
    XgboostOptions x;
    x.form = "direct";
    return x;
  }();
  // (stage, done, total): "loading <key>", "split k/n: <arm>".
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

struct TransferArm {
  std::string name;     // "all of TO", "FROM + 5% of TO", ...
  double fraction = 0;  // of the new target's training records used
  bool uses_from = false;
  int64_t train_samples = 0;  // per split
  RankingMetrics metrics;
  std::optional<RankingMetrics> tuning;  // on the validation rows tuning jobs measured
};

struct TransferReport {
  std::string from, to, form;
  TimeLabel label = kDefaultTimeLabel;  // the samples' time label (TransferOptions)
  int64_t from_samples = 0, to_samples = 0;
  int train_workloads = 0, valid_workloads = 0;  // of the new target, per split
  int splits = 1;
  // All of TO first, then per fraction (FROM + f of TO, f of TO), FROM, and
  // the analytical model (no training: fraction 0, uses_from false).
  std::vector<TransferArm> arms;
  double seconds = 0;
  // The Spearman of arm `with` minus that of "all of TO" on all validation rows.
  double SpearmanGap(const TransferArm& with) const;
};

Result<TransferReport> EvaluateTransfer(db::Database& database, const TransferOptions& options);

nlohmann::json TransferReportToJson(const TransferReport& report);

}  // namespace fusetune::cost_model
