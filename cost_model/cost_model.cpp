#include "cost_model/cost_model.h"

#include <fmt/format.h>

#include <algorithm>

namespace fusetune::cost_model {

Result<std::unique_ptr<CostModel>> LoadXgboostModel(const std::string& blob);  // xgboost_model.cpp

void FeatureMatrix::Add(const GroupInfo& group, const fusion_space::Tiling& tiling,
                        const TargetFeatures& target) {
  const size_t at = values.size();
  values.resize(at + NumFeatures());
  parts.push_back(ExtractFeatures(group, tiling, target, values.data() + at));
}

std::string Prediction::ToString() const {
  std::string s = fmt::format(
      "{:.4g} ms = overhead {:.3g} + compute {:.3g} + memory {:.3g} ({:.3g} MB) - eta {:.2f} x "
      "min",
      composed * 1e3, overhead * 1e3, compute * 1e3, memory * 1e3, traffic_bytes / 1e6, eta);
  if (correction != 1)
    s += fmt::format("; x {:.3f} correction = {:.4g} ms", correction, seconds * 1e3);
  else if (seconds != composed)
    s += fmt::format("; ranks by {:.4g}", seconds);  // a direct head or a pairwise score
  if (uncertainty > 0) s += fmt::format(" (+-{:.2f} log2)", uncertainty);
  if (out_of_range) s += "; beyond the training data's range, compressed towards it";
  return s;
}

namespace {

class AnalyticalModel final : public CostModel {
 public:
  std::string name() const override { return "analytical"; }
  std::string form() const override { return "composed"; }
  std::vector<Prediction> Predict(const FeatureMatrix& x) const override {
    std::vector<Prediction> out(x.rows());
    for (int64_t i = 0; i < x.rows(); ++i) {
      const AnalyticalParts& a = x.parts[i];
      Prediction& p = out[i];
      p.traffic_bytes = a.traffic_bytes;
      p.overhead = a.overhead;
      p.eta = 0.5;
      p.compute = a.compute;
      p.memory = a.memory;
      p.composed = p.overhead + p.compute + p.memory - p.eta * std::min(p.compute, p.memory);
      p.seconds = p.composed;
    }
    return out;
  }
  std::string Serialize() const override { return "analytical"; }
};

}  // namespace

std::unique_ptr<CostModel> MakeAnalyticalModel() { return std::make_unique<AnalyticalModel>(); }

double AnalyticalSeconds(const GroupInfo& group, const fusion_space::Tiling& tiling,
                         const TargetFeatures& target) {
  static const AnalyticalModel analytical;
  FeatureMatrix x;
  x.Add(group, tiling, target);
  return analytical.Predict(x)[0].seconds;
}

Result<std::unique_ptr<CostModel>> LoadCostModel(const std::string& name, const std::string& blob) {
  if (name == "analytical") return MakeAnalyticalModel();
  if (name == "xgboost") return LoadXgboostModel(blob);
  return Error(ErrorCode::kInvalidArgument, fmt::format("unknown cost model '{}'", name));
}

bool PredictsSeconds(const std::string& name_and_form) {
  const size_t slash = name_and_form.find('/');
  const std::string name = name_and_form.substr(0, slash);
  const std::string form = slash == std::string::npos ? "" : name_and_form.substr(slash + 1);
  return name != "none" && form != "pairwise";
}

}  // namespace fusetune::cost_model
