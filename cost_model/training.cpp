#include "cost_model/training.h"

#include <fmt/format.h>
#include <chrono>
#include <nlohmann/json.hpp>

namespace fusetune::cost_model {

namespace {

struct Prepared {
  Dataset train, valid;
};

Result<Prepared> Prepare(db::Database& database, const RetrainOptions& o, RetrainReport* report) {
  DatasetOptions d;
  d.target = o.target;
  if (o.progress) d.progress = [&](int64_t records, int64_t) { o.progress("loading", records, 0); };
  FT_ASSIGN_OR_RETURN(Dataset all, LoadDataset(database, d, &report->data));
  if (all.workload_keys.size() < 2)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} measured group workloads in the database ({} usable samples of {} "
                             "ok records): training needs at least 2, so that some are held out",
                             all.workload_keys.size(), all.size(), report->data.records));
  const Split split = SplitByWorkload(all, o.valid_fraction, o.seed);
  Prepared p{all.Subset(split.train), all.Subset(split.valid)};
  report->train_workloads = static_cast<int>(split.train.size());
  report->valid_workloads = static_cast<int>(split.valid.size());
  report->train_samples = p.train.size();
  report->valid_samples = p.valid.size();
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
    const RankingMetrics m = Evaluate(p.valid, model->Predict(p.valid.x));
    report->scores.push_back({"xgboost/" + form, m});
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
      report->active = Evaluate(p.valid, (*model)->Predict(p.valid.x));
      report->scores.push_back({fmt::format("active model #{}", (*active)->id), *report->active});
    }
  }
  report->scores.push_back(
      {"analytical", Evaluate(p.valid, MakeAnalyticalModel()->Predict(p.valid.x))});
  report->scores.push_back({"random", EvaluateRandom(p.valid, 20, o.seed)});
}

// Loads and splits the samples, trains every form, scores the baselines.
Result<std::unique_ptr<CostModel>> TrainAndScore(db::Database& database, const RetrainOptions& o,
                                                 RetrainReport* report) {
  FT_ASSIGN_OR_RETURN(Prepared p, Prepare(database, o, report));
  FT_ASSIGN_OR_RETURN(auto best, TrainForms(p, o, report));
  AddBaselines(database, p, o, report);
  return best;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<RetrainReport> EvaluateModels(db::Database& database, const RetrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RetrainReport report;
  auto trained = TrainAndScore(database, o, &report);
  if (!trained.ok()) return trained.error();
  report.seconds = SecondsSince(start);
  return report;
}

Result<RetrainReport> Retrain(db::Database& database, const RetrainOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RetrainReport report;
  FT_ASSIGN_OR_RETURN(auto best, TrainAndScore(database, o, &report));
  report.promoted = o.force || !report.active || report.chosen.BetterThan(*report.active);
  db::ModelEntry entry;
  entry.name = kXgboostModelName;
  entry.target = o.target;
  entry.feature_version = kFeatureVersion;
  nlohmann::json metrics = MetricsToJson(report.chosen);
  metrics["form"] = report.chosen_form;
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
  for (const ModelScore& s : r.scores)
    scores.push_back({{"model", s.model}, {"metrics", MetricsToJson(s.metrics)}});
  nlohmann::json j{{"records", r.data.records},
                   {"samples", r.data.samples},
                   {"skipped", r.data.skipped_unreadable + r.data.skipped_graph_workloads},
                   {"train_workloads", r.train_workloads},
                   {"valid_workloads", r.valid_workloads},
                   {"train_samples", r.train_samples},
                   {"valid_samples", r.valid_samples},
                   {"scores", scores},
                   {"chosen_form", r.chosen_form},
                   {"chosen", MetricsToJson(r.chosen)},
                   {"promoted", r.promoted},
                   {"model_id", r.model_id},
                   {"seconds", r.seconds}};
  if (r.active) j["active"] = MetricsToJson(*r.active);
  return j;
}

std::unique_ptr<CostModel> ActiveOrAnalytical(db::Database& database) {
  auto active = database.ActiveModel(kXgboostModelName);
  if (active.ok() && active->has_value() && (*active)->feature_version == kFeatureVersion) {
    auto model = LoadCostModel((*active)->name, (*active)->blob);
    if (model.ok()) return std::move(*model);
  }
  return MakeAnalyticalModel();
}

}  // namespace fusetune::cost_model
