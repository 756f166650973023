// The cost model interface: batched prediction of candidates' times, each
// broken into physical parts, behind one abstract class (the analytical
// model and the XGBoost model implement it), serialized into the tuning
// database's model store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "cost_model/features.h"

namespace fusetune::cost_model {

// Rows of features (NumFeatures() columns) with their analytical parts.
struct FeatureMatrix {
  std::vector<float> values;  // row-major
  std::vector<AnalyticalParts> parts;
  int64_t rows() const { return static_cast<int64_t>(parts.size()); }
  const float* row(int64_t i) const { return values.data() + i * NumFeatures(); }
  // Appends one candidate's features.
  void Add(const GroupInfo& group, const fusion_space::Tiling& tiling,
           const TargetFeatures& target);
};

// How far beyond its training data's fastest and slowest times a learned
// model's prediction is believed (Prediction::out_of_range).
inline constexpr double kSupportMargin = 4;
// Beyond that edge, the log2 distance from it is divided by this factor: a
// prediction 1000x past the edge lands 2x past it. Compressed, not cut, so
// that the candidates of a group slower than anything trained on (the
// composed forms follow the analytical parts there) keep their order.
inline constexpr double kBeyondRangeCompression = 10;

struct Prediction {
  // What ranks candidates: predicted seconds (lower is better). For the
  // pairwise-ranking form a score on the same scale, comparable within a
  // workload only.
  double seconds = 0;
  // The physical composition: overhead + compute + memory - eta x min(compute, memory).
  double traffic_bytes = 0, overhead = 0, eta = 0, compute = 0, memory = 0;
  double composed = 0;
  double correction = 1;   // factor the direct head applies to `composed` (1: none)
  double uncertainty = 0;  // spread of the ensemble, in log2 seconds
  // The model's seconds fell outside what its training data supports (a
  // factor kSupportMargin beyond the fastest and slowest time it was trained
  // on) and `seconds` was pulled towards that range (kBeyondRangeCompression),
  // keeping the order of such predictions.
  bool out_of_range = false;
  std::string ToString() const;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;  // "analytical", "xgboost"
  virtual std::string form() const = 0;  // which composition ranks
  virtual std::vector<Prediction> Predict(const FeatureMatrix& x) const = 0;
  virtual std::string Serialize() const = 0;
};

// overhead = launch cost, eta = 0.5, traffic and compute from the tiling's
// analytical figures: ranks from the first trial, with no data.
std::unique_ptr<CostModel> MakeAnalyticalModel();
// The analytical model's seconds for one candidate: absolute, unlike the
// ranking score of some learned forms, so the tuner and the compiler scale
// it by the measured/analytical ratio of measured groups to cost partitions.
double AnalyticalSeconds(const GroupInfo& group, const fusion_space::Tiling& tiling,
                         const TargetFeatures& target);

// Scores unrelated to speed (a hash of the candidate's features and `seed`):
// the search without a cost model, for measuring what the model saves
// (search::TunerOptions::guided).
std::unique_ptr<CostModel> MakeUnguidedModel(uint64_t seed);

// A model from the database's store (ModelEntry name and blob).
Result<std::unique_ptr<CostModel>> LoadCostModel(const std::string& name, const std::string& blob);

// Whether a model's predictions are seconds, by the "name/form" a search
// note records (measure::SearchNote::model): the pairwise form and the
// unguided "none" model give scores that only order candidates.
bool PredictsSeconds(const std::string& name_and_form);

}  // namespace fusetune::cost_model
