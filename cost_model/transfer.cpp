#include "cost_model/transfer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/rng.h"

namespace fusetune::cost_model {

namespace {

// A training set built from rows of several datasets. A workload measured on
// both targets is two workloads here ("<tag>/<key>"), so that ranking
// objectives never compare one target's times with the other's.
class TrainingSet {
 public:
  // `rows` of `source`, which must keep each workload's rows together, each
  // counting `weight` in training.
  void Append(const Dataset& source, const std::vector<int64_t>& rows, const std::string& tag,
              float weight = 1) {
    for (int64_t row : rows) {
      data_.Add(source, row);
      data_.y.back().weight = weight;
      const std::string key = tag + "/" + source.workload_keys[source.y[row].workload];
      auto [it, added] = index_.emplace(key, static_cast<int>(data_.workload_keys.size()));
      if (added) data_.workload_keys.push_back(key);
      data_.y.back().workload = it->second;
    }
  }
  const Dataset& data() const { return data_; }

 private:
  Dataset data_;
  std::map<std::string, int> index_;
};

// Every row of `data` whose workload is (or is not, when `keep` is false)
// in `keys`, workload by workload.
std::vector<int64_t> RowsOf(const Dataset& data, const std::set<std::string>& keys, bool keep) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < data.size(); ++i)
    if (keys.count(data.workload_keys[data.y[i].workload]) == static_cast<size_t>(keep))
      rows.push_back(i);
  std::stable_sort(rows.begin(), rows.end(),
                   [&](int64_t a, int64_t b) { return data.y[a].workload < data.y[b].workload; });
  return rows;
}

// A random share of `rows` (at least two), workload by workload.
std::vector<int64_t> ShareOf(const Dataset& data, std::vector<int64_t> rows, double fraction,
                             uint64_t seed) {
  Rng rng(seed);
  for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[rng.Below(i)]);
  // Two rows at least: a model needs two samples.
  const size_t keep =
      std::min(rows.size(), std::max<size_t>(2, static_cast<size_t>(fraction * rows.size() + 0.5)));
  rows.resize(keep);
  std::sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) {
    return std::pair(data.y[a].workload, a) < std::pair(data.y[b].workload, b);
  });
  return rows;
}

struct SplitData {
  Dataset valid;                    // the new target's unseen workloads
  std::vector<int64_t> to_train;    // rows of the new target's training workloads
  std::vector<int64_t> from_train;  // the old target's rows, validation workloads left out
  int train_workloads = 0, valid_workloads = 0;
};

SplitData SplitTargets(const Dataset& from, const Dataset& to, double valid_fraction,
                       uint64_t seed) {
  const Split split = SplitByWorkload(to, valid_fraction, seed);
  std::set<std::string> valid_keys;
  for (int w : split.valid) valid_keys.insert(to.workload_keys[w]);
  SplitData s;
  s.valid = to.Subset(split.valid);
  s.to_train = RowsOf(to, valid_keys, false);
  s.from_train = RowsOf(from, valid_keys, false);
  s.train_workloads = static_cast<int>(split.train.size());
  s.valid_workloads = static_cast<int>(split.valid.size());
  return s;
}

std::string Percent(double fraction) { return fmt::format("{:g}%", fraction * 100); }

struct ArmSpec {
  std::string name;
  double fraction;  // of the new target's training rows; 0: none
  bool uses_from;
  bool analytical = false;  // no training: the analytical model
};

std::vector<ArmSpec> Arms(const TransferOptions& o) {
  std::vector<ArmSpec> arms{{"all of " + o.to, 1.0, false}};
  for (double f : o.fractions) {
    arms.push_back({fmt::format("{} + {} of {}", o.from, Percent(f), o.to), f, true});
    arms.push_back({fmt::format("{} of {}", Percent(f), o.to), f, false});
  }
  arms.push_back({o.from, 0.0, true});
  arms.push_back({"analytical", 0.0, false, true});
  return arms;
}

TransferArm Scored(const ArmSpec& spec, int64_t train_samples, const Dataset& valid,
                   const std::vector<Prediction>& predicted) {
  const RowsAndTuning scored = EvaluateWithTuning(valid, predicted);
  return {spec.name, spec.fraction, spec.uses_from, train_samples, scored.all, scored.tuning};
}

Result<TransferArm> TrainArm(const Dataset& from, const Dataset& to, const SplitData& split,
                             const ArmSpec& spec, const TransferOptions& o, uint64_t seed) {
  if (spec.analytical)
    return Scored(spec, 0, split.valid, MakeAnalyticalModel()->Predict(split.valid.x));
  TrainingSet train;
  if (spec.uses_from) train.Append(from, split.from_train, "from");
  if (spec.fraction >= 1.0) {
    train.Append(to, split.to_train, "to");
  } else if (spec.fraction > 0) {
    // The same share for both arms of a fraction: one seed per (split, fraction).
    const uint64_t share_seed = ForkSeed(seed, static_cast<uint64_t>(spec.fraction * 1e6));
    const std::vector<int64_t> share = ShareOf(to, split.to_train, spec.fraction, share_seed);
    // Balanced, the new target's few rows weigh as much as the old target's.
    const float weight = spec.uses_from && o.balance
                             ? static_cast<float>(split.from_train.size()) /
                                   static_cast<float>(std::max<size_t>(1, share.size()))
                             : 1.0f;
    train.Append(to, share, "to", std::max(1.0f, weight));
  }
  if (train.data().size() < 2)
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format("arm '{}': {} training samples (at least 2)", spec.name, train.data().size()));
  XgboostOptions x = o.xgboost;
  x.seed = seed;
  FT_ASSIGN_OR_RETURN(auto model, TrainXgboostModel(train.data(), x));
  return Scored(spec, train.data().size(), split.valid, model->Predict(split.valid.x));
}

Result<Dataset> LoadTarget(db::Database& database, const std::string& key,
                           const TransferOptions& o) {
  if (key.empty()) return Error(ErrorCode::kInvalidArgument, "a target key is empty");
  DatasetOptions d;
  d.target = key;
  d.label = o.label;
  if (o.progress)
    d.progress = [&](int64_t records, int64_t) { o.progress("loading " + key, records, 0); };
  FT_ASSIGN_OR_RETURN(Dataset data, LoadDataset(database, d));
  if (data.workload_keys.size() < 2)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("target {}: {} measured group workloads ({} samples); a transfer "
                             "evaluation needs at least 2 (db stats lists the targets)",
                             key, data.workload_keys.size(), data.size()));
  return data;
}

Status Check(const TransferOptions& o) {
  if (o.from == o.to)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--from and --to are the same target ({})", o.from));
  if (o.splits < 1)
    return Error(ErrorCode::kInvalidArgument, fmt::format("{} splits: at least 1", o.splits));
  for (double f : o.fractions)
    if (!(f > 0 && f < 1))
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("fraction {}: between 0 and 1, both excluded", f));
  return Status::Ok();
}

}  // namespace

double TransferReport::SpearmanGap(const TransferArm& with) const {
  return arms.empty() ? 0 : with.metrics.spearman - arms.front().metrics.spearman;
}

Result<TransferReport> EvaluateTransfer(db::Database& database, const TransferOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  FT_RETURN_IF_ERROR(Check(o));
  FT_ASSIGN_OR_RETURN(const Dataset from, LoadTarget(database, o.from, o));
  FT_ASSIGN_OR_RETURN(const Dataset to, LoadTarget(database, o.to, o));
  TransferReport report;
  report.from = o.from;
  report.to = o.to;
  report.form = o.xgboost.form;
  report.label = o.label;
  report.from_samples = from.size();
  report.to_samples = to.size();
  report.splits = o.splits;
  const std::vector<ArmSpec> specs = Arms(o);
  // Per arm: the means over splits on all validation rows and on the tuning rows.
  std::vector<MetricsMean> all_rows(specs.size()), tuning_rows(specs.size());
  std::vector<int64_t> train_samples(specs.size(), 0);
  for (int k = 0; k < o.splits; ++k) {
    const uint64_t seed = o.seed + static_cast<uint64_t>(k);
    const SplitData split = SplitTargets(from, to, o.valid_fraction, seed);
    report.train_workloads = split.train_workloads;
    report.valid_workloads = split.valid_workloads;
    for (size_t a = 0; a < specs.size(); ++a) {
      if (o.progress)
        o.progress(fmt::format("split {}/{}: {}", k + 1, o.splits, specs[a].name),
                   static_cast<int64_t>(k * specs.size() + a),
                   static_cast<int64_t>(o.splits * specs.size()));
      FT_ASSIGN_OR_RETURN(TransferArm arm, TrainArm(from, to, split, specs[a], o, seed));
      all_rows[a].Add(arm.metrics);
      if (arm.tuning) tuning_rows[a].Add(*arm.tuning);
      train_samples[a] += arm.train_samples;
    }
  }
  for (size_t a = 0; a < specs.size(); ++a) {
    TransferArm arm{specs[a].name,      specs[a].fraction,
                    specs[a].uses_from, train_samples[a] / o.splits,
                    all_rows[a].Get(),  std::nullopt};
    if (tuning_rows[a].splits() > 0) arm.tuning = tuning_rows[a].Get();
    report.arms.push_back(std::move(arm));
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

nlohmann::json TransferReportToJson(const TransferReport& r) {
  nlohmann::json arms = nlohmann::json::array();
  for (const TransferArm& a : r.arms) {
    nlohmann::json j{{"arm", a.name},
                     {"fraction", a.fraction},
                     {"uses_from", a.uses_from},
                     {"train_samples", a.train_samples},
                     {"metrics", MetricsToJson(a.metrics)},
                     {"spearman_gap", r.SpearmanGap(a)}};
    if (a.tuning) j["tuning"] = MetricsToJson(*a.tuning);
    arms.push_back(j);
  }
  return {{"from", r.from},
          {"to", r.to},
          {"form", r.form},
          {"label", kTimeLabelNames.Name(r.label)},
          {"from_samples", r.from_samples},
          {"to_samples", r.to_samples},
          {"train_workloads", r.train_workloads},
          {"valid_workloads", r.valid_workloads},
          {"splits", r.splits},
          {"arms", arms},
          {"seconds", r.seconds}};
}

}  // namespace fusetune::cost_model
