#include "cost_model/training.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/check.h"

namespace fusetune::cost_model {

namespace {

struct Prepared {
  Dataset train, valid;
  std::vector<int64_t> valid_tuning_rows;  // valid's rows a tuning job measured
  Dataset valid_tuning;                    // those rows
};

// A model's figures on the validation rows and on their tuning-job rows.
ModelScore Score(std::string model, const Prepared& p, const std::vector<Prediction>& predicted) {
  RowsAndTuning scored = EvaluateWithTuning(p.valid, predicted);
  return {std::move(model), scored.all, {}, scored.tuning};
}

Result<Dataset> Load(db::Database& database, const RetrainOptions& o, RetrainReport* report) {
  DatasetOptions d;
  d.target = o.target;
  d.label = o.label;
  if (o.progress) d.progress = [&](int64_t records, int64_t) { o.progress("loading", records, 0); };
  FT_ASSIGN_OR_RETURN(Dataset all, LoadDataset(database, d, &report->data));
  if (all.workload_keys.size() < 2)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} measured group workloads in the database ({} usable samples of {} "
                             "ok records): training needs at least 2, so that some are held out",
                             all.workload_keys.size(), all.size(), report->data.records));
  return all;
}

Result<Prepared> Prepare(const Dataset& all, const RetrainOptions& o, RetrainReport* report) {
  const Split split = SplitByWorkload(all, o.valid_fraction, o.seed);
  Prepared p{all.Subset(split.train), all.Subset(split.valid), {}, {}};
  p.valid_tuning_rows = p.valid.TuningRows();
  p.valid_tuning = p.valid.Rows(p.valid_tuning_rows);
  report->train_workloads = static_cast<int>(split.train.size());
  report->valid_workloads = static_cast<int>(split.valid.size());
  report->train_samples = p.train.size();
  report->valid_samples = p.valid.size();
  report->valid_tuning_samples = p.valid_tuning.size();
  if (p.train.size() < 10)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} training samples: at least 10 are needed", p.train.size()));
  return p;
}

// Trains every form; returns the best model (by validation ranking).
Result<std::unique_ptr<CostModel>> TrainForms(const Prepared& p, const RetrainOptions& o,
                                              RetrainReport* report) {
  std::unique_ptr<CostModel> best;
  for (const std::string& form : o.forms) {
    XgboostOptions x = o.xgboost;
    x.form = form;
    x.seed = o.seed;
    FT_ASSIGN_OR_RETURN(auto model, TrainXgboostModel(p.train, x, [&](int done, int total) {
                          if (o.progress) o.progress("training " + form, done, total);
                        }));
    ModelScore score = Score("xgboost/" + form, p, model->Predict(p.valid.x));
    // A pairwise score orders candidates; it is not a time to compare.
    if (form == "pairwise") {
      score.metrics.time_error = NAN;
      if (score.tuning) score.tuning->time_error = NAN;
    }
    const RankingMetrics m = score.metrics;
    report->scores.push_back(std::move(score));
    if (!best || m.BetterThan(report->chosen)) {
      best = std::move(model);
      report->chosen = m;
      report->chosen_form = form;
    }
  }
  return best;
}

void AddBaselines(db::Database& database, const Prepared& p, const RetrainOptions& o,
                  RetrainReport* report) {
  if (auto active = database.ActiveModel(kXgboostModelName); active.ok() && active->has_value()) {
    auto model = LoadCostModel((*active)->name, (*active)->blob);
    if (model.ok()) {
      ModelScore score =
          Score(fmt::format("active model #{}", (*active)->id), p, (*model)->Predict(p.valid.x));
      report->active = score.metrics;
      report->scores.push_back(std::move(score));
    }
  }
  report->scores.push_back(Score("analytical", p, MakeAnalyticalModel()->Predict(p.valid.x)));
  ModelScore random{"random", EvaluateRandom(p.valid, 20, o.seed), {}, std::nullopt};
  if (p.valid_tuning.size() > 0) {
    const RankingMetrics m = EvaluateRandom(p.valid_tuning, 20, o.seed);
    if (m.workloads > 0) random.tuning = m;
  }
  report->scores.push_back(std::move(random));
}

// Splits the samples, trains every form, scores the baselines.
Result<std::unique_ptr<CostModel>> TrainAndScore(db::Database& database, const Dataset& all,
                                                 const RetrainOptions& o, RetrainReport* report) {
  FT_ASSIGN_OR_RETURN(Prepared p, Prepare(all, o, report));
  FT_ASSIGN_OR_RETURN(auto best, TrainForms(p, o, report));
  AddBaselines(database, p, o, report);
  return best;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The mean of every model's figures over `o.splits` splits; the chosen form is
// the one best on the mean.
Result<RetrainReport> EvaluateOverSplits(db::Database& database, const RetrainOptions& o) {
  RetrainReport mean;
  FT_ASSIGN_OR_RETURN(const Dataset all, Load(database, o, &mean));
  // Per score: the means of its figures on all validation rows and on the
  // tuning-job rows (over the splits that had them).
  std::vector<MetricsMean> all_rows, tuning_rows;
  for (int k = 0; k < o.splits; ++k) {
    RetrainOptions one = o;
    one.seed = o.seed + static_cast<uint64_t>(k);
    if (o.progress && o.splits > 1)
      one.progress = [&, k](const std::string& stage, int64_t done, int64_t total) {
        o.progress(fmt::format("split {}/{}: {}", k + 1, o.splits, stage), done, total);
      };
    RetrainReport r;
    r.data = mean.data;
    auto trained = TrainAndScore(database, all, one, &r);
    if (!trained.ok()) return trained.error();
    if (k == 0) {
      mean = r;
      for (ModelScore& s : mean.scores) s.split_spearman.clear();
      mean.train_samples = mean.valid_samples = mean.valid_tuning_samples = 0;
      mean.tuning_splits = 0;
      all_rows.resize(r.scores.size());
      tuning_rows.resize(r.scores.size());
    }
    FT_CHECK(r.scores.size() == mean.scores.size(), "splits scored different models");
    for (size_t i = 0; i < r.scores.size(); ++i) {
      all_rows[i].Add(r.scores[i].metrics);
      mean.scores[i].split_spearman.push_back(r.scores[i].metrics.spearman);
      if (r.scores[i].tuning) tuning_rows[i].Add(*r.scores[i].tuning);
    }
    mean.train_samples += r.train_samples;
    mean.valid_samples += r.valid_samples;
    mean.valid_tuning_samples += r.valid_tuning_samples;
    mean.tuning_splits += r.valid_tuning_samples > 0;
  }
  mean.splits = o.splits;
  // Sample counts: summed over splits above, per split here.
  mean.train_samples /= o.splits;
  mean.valid_samples /= o.splits;
  if (mean.tuning_splits > 0) mean.valid_tuning_samples /= mean.tuning_splits;
  for (size_t i = 0; i < mean.scores.size(); ++i) {
    mean.scores[i].metrics = all_rows[i].Get();
    mean.scores[i].tuning = tuning_rows[i].splits() > 0
                                ? std::optional<RankingMetrics>(tuning_rows[i].Get())
                                : std::nullopt;
  }
  mean.chosen_form.clear();  // the first split's choice: chosen again on the means
  for (const ModelScore& s : mean.scores) {
    if (s.model.rfind("xgboost/", 0) != 0) continue;
    if (mean.chosen_form.empty() || s.metrics.BetterThan(mean.chosen)) {
      mean.chosen = s.metrics;
      mean.chosen_form = s.model.substr(8);
    }
  }
  if (const auto active =
          std::find_if(mean.scores.begin(), mean.scores.end(),
                       [](const ModelScore& s) { return s.model.rfind("active", 0) == 0; });
      active != mean.scores.end())
    mean.active = active->metrics;
  return mean;
}

}  // namespace

Result<RetrainReport> EvaluateModels(db::Database& database, const RetrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.splits < 1)
    return Error(ErrorCode::kInvalidArgument, fmt::format("{} splits: at least 1", o.splits));
  FT_ASSIGN_OR_RETURN(RetrainReport report, EvaluateOverSplits(database, o));
  report.seconds = SecondsSince(start);
  return report;
}

Result<RetrainReport> Retrain(db::Database& database, const RetrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RetrainReport report;
  FT_ASSIGN_OR_RETURN(const Dataset all, Load(database, o, &report));
  FT_ASSIGN_OR_RETURN(auto best, TrainAndScore(database, all, o, &report));
  report.promoted = o.force || !report.active || report.chosen.BetterThan(*report.active);
  db::ModelEntry entry;
  entry.name = kXgboostModelName;
  entry.target = o.target;
  entry.feature_version = kFeatureVersion;
  nlohmann::json metrics = MetricsToJson(report.chosen);
  metrics["form"] = report.chosen_form;
  metrics["label"] = kTimeLabelNames.Name(report.data.label);
  metrics["train_workloads"] = report.train_workloads;
  metrics["valid_workloads"] = report.valid_workloads;
  entry.metrics = metrics.dump();
  entry.blob = best->Serialize();
  FT_ASSIGN_OR_RETURN(report.model_id, database.SaveModel(entry));
  if (report.promoted) FT_RETURN_IF_ERROR(database.ActivateModel(report.model_id));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

nlohmann::json RetrainReportToJson(const RetrainReport& r) {
  nlohmann::json scores = nlohmann::json::array();
  for (const ModelScore& s : r.scores) {
    nlohmann::json score{{"model", s.model}, {"metrics", MetricsToJson(s.metrics)}};
    if (s.tuning) score["tuning"] = MetricsToJson(*s.tuning);
    if (s.split_spearman.size() > 1) score["split_spearman"] = s.split_spearman;
    scores.push_back(score);
  }
  nlohmann::json j{{"records", r.data.records},
                   {"samples", r.data.samples},
                   {"skipped", r.data.skipped_unreadable + r.data.skipped_graph_workloads},
                   {"merged_repeats", r.data.merged_repeats},
                   {"label", kTimeLabelNames.Name(r.data.label)},
                   {"train_workloads", r.train_workloads},
                   {"valid_workloads", r.valid_workloads},
                   {"train_samples", r.train_samples},
                   {"valid_samples", r.valid_samples},
                   {"valid_tuning_samples", r.valid_tuning_samples},
                   {"tuning_splits", r.tuning_splits},
                   {"splits", r.splits},
                   {"scores", scores},
                   {"chosen_form", r.chosen_form},
                   {"chosen", MetricsToJson(r.chosen)},
                   {"promoted", r.promoted},
                   {"model_id", r.model_id},
                   {"seconds", r.seconds}};
  if (r.active) j["active"] = MetricsToJson(*r.active);
  return j;
}

std::unique_ptr<CostModel> ActiveOrAnalytical(db::ModelStore& database) {
  auto active = database.ActiveModel(kXgboostModelName);
  if (active.ok() && active->has_value() && (*active)->feature_version == kFeatureVersion) {
    auto model = LoadCostModel((*active)->name, (*active)->blob);
    if (model.ok()) return std::move(*model);
  }
  return MakeAnalyticalModel();
}

}  // namespace fusetune::cost_model
