// What a tuning database knows for one target, loaded once per compiler:
// the best plan of every workload (one query), the active cost model with
// its validation figures, and, built on the first miss, the shape buckets:
// tuned group workloads by structure key (graph/workload_key.h), so a group
// at a sequence length never tuned finds the nearest tuned one.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "cost_model/cost_model.h"
#include "db/database.h"

namespace fusetune::compiler {

struct BucketMatch {
  std::string key;  // the tuned workload
  const db::BestPlan* best = nullptr;
  std::vector<int64_t> signature;  // its ShapeSignature
  double distance = 0;             // sum of |log2| dimension ratios to the asked shape
};

class TuningIndex {
 public:
  // Every best plan of `target` and the active XGBoost model (if one of this
  // feature version is stored). `database` must outlive the index.
  static Result<std::unique_ptr<TuningIndex>> Load(db::Database& database,
                                                   const std::string& target,
                                                   cost_model::TargetFeatures features);
  // No database: every group falls back to its default.
  static std::unique_ptr<TuningIndex> Empty(cost_model::TargetFeatures features);

  const db::BestPlan* Exact(const std::string& workload_key) const;
  // The best plan's JSON, parsed once per key (a whole-model plan is tens
  // of kilobytes: parsing it again costs a third of a compile).
  const nlohmann::json& BestPlanJson(const std::string& workload_key);
  // TilingToString of a one-group best plan's tiling ("" when it has none),
  // parsed once per key.
  const std::string& BestTilingText(const std::string& workload_key);
  // The tuned group workload of `structure_key` whose signature is nearest
  // to `signature` (same length), other than `exclude`.
  Result<std::optional<BucketMatch>> Nearest(const std::string& structure_key,
                                             const std::vector<int64_t>& signature,
                                             const std::string& exclude);

  // The active trained model, or null when the database holds none.
  const cost_model::CostModel* model() const { return model_.get(); }
  const std::string& model_label() const { return model_label_; }
  // Its validation top-1 score (best measured over the measured time of its
  // predicted best): 1/top1 - 1 is the loss expected from trusting it.
  std::optional<double> model_top1() const { return model_top1_; }
  const cost_model::TargetFeatures& features() const { return features_; }
  const std::string& target() const { return target_; }
  size_t size() const { return bests_.size(); }

 private:
  struct TunedShape {
    std::string key;
    std::vector<int64_t> signature;
  };
  Status BuildBuckets();

  db::Database* database_ = nullptr;
  std::string target_;
  cost_model::TargetFeatures features_;
  std::map<std::string, db::BestPlan> bests_;
  std::map<std::string, std::string> tiling_text_;
  std::map<std::string, nlohmann::json> plan_json_;
  std::unique_ptr<cost_model::CostModel> model_;
  std::string model_label_ = "none";
  std::optional<double> model_top1_;
  std::optional<std::map<std::string, std::vector<TunedShape>>> buckets_;
};

}  // namespace fusetune::compiler
