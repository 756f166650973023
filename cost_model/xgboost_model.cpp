// The XGBoost cost model: boosters per head through libxgboost's C API,
// handles owned by unique_ptr with deleters, serialized as CBOR holding each
// booster's UBJSON model.
#include "cost_model/xgboost_model.h"

#include <xgboost/c_api.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

namespace fusetune::cost_model {

namespace {

struct BoosterDeleter {
  void operator()(void* b) const { XGBoosterFree(b); }
};
struct MatrixDeleter {
  void operator()(void* m) const { XGDMatrixFree(m); }
};
using Booster = std::unique_ptr<void, BoosterDeleter>;
using Matrix = std::unique_ptr<void, MatrixDeleter>;

Error XgbError(const std::string& what) {
  return Error(ErrorCode::kInternal, fmt::format("xgboost: {}: {}", what, XGBGetLastError()));
}

#define FT_XGB(call, what) \
  if ((call) != 0) return XgbError(what)

Result<Matrix> MakeMatrix(const float* values, int64_t rows, int threads) {
  DMatrixHandle h = nullptr;
  FT_XGB(XGDMatrixCreateFromMat_omp(values, static_cast<bst_ulong>(rows),
                                    static_cast<bst_ulong>(NumFeatures()), NAN, &h, threads),
         "creating a matrix");
  return Matrix(h);
}

Result<Booster> NewBooster(DMatrixHandle train, const std::map<std::string, std::string>& params) {
  BoosterHandle b = nullptr;
  FT_XGB(XGBoosterCreate(train ? &train : nullptr, train ? 1 : 0, &b), "creating a booster");
  Booster booster(b);
  for (const auto& [k, v] : params) FT_XGB(XGBoosterSetParam(b, k.c_str(), v.c_str()), k);
  return booster;
}

Result<std::vector<float>> PredictWith(void* booster, DMatrixHandle m) {
  bst_ulong n = 0;
  const float* out = nullptr;
  FT_XGB(XGBoosterPredict(booster, m, 0, 0, 0, &n, &out), "predicting");
  return std::vector<float>(out, out + n);
}

double Log2Clamped(double x) { return std::log2(std::max(x, 1e-12)); }

struct Head {
  std::string name;
  std::vector<Booster> members;
};

class XgboostModel final : public CostModel {
 public:
  XgboostModel(std::string form, int threads) : form_(std::move(form)), threads_(threads) {}

  std::string name() const override { return "xgboost"; }
  std::string form() const override { return form_; }
  std::map<std::string, Head>& heads() { return heads_; }
  // The fastest and slowest training times (0, 0: unknown, as in models
  // stored before the range was kept): predictions beyond them,
  // kSupportMargin wide, are pulled in (Clamp).
  void set_seconds_range(double fastest, double slowest) {
    fastest_ = fastest;
    slowest_ = slowest;
  }

  std::vector<Prediction> Predict(const FeatureMatrix& x) const override {
    std::vector<Prediction> out(x.rows());
    if (x.rows() == 0) return out;
    auto m = MakeMatrix(x.values.data(), x.rows(), threads_);
    if (!m.ok()) return out;
    std::map<std::string, std::vector<std::vector<float>>> raw;
    for (const auto& [name, head] : heads_)
      for (const Booster& b : head.members) {
        auto p = PredictWith(b.get(), m->get());
        raw[name].push_back(p.ok() ? std::move(*p) : std::vector<float>(x.rows(), 0));
      }
    for (int64_t i = 0; i < x.rows(); ++i) Fill(x.parts[i], raw, i, &out[i]);
    return out;
  }

  std::string Serialize() const override {
    nlohmann::json j{
        {"format", "fusetune-xgboost"}, {"feature_version", kFeatureVersion}, {"form", form_}};
    if (slowest_ > 0) j["seconds_range"] = {fastest_, slowest_};
    for (const auto& [name, head] : heads_)
      for (const Booster& b : head.members) {
        bst_ulong len = 0;
        const char* buf = nullptr;
        if (XGBoosterSaveModelToBuffer(b.get(), R"({"format": "ubj"})", &len, &buf) != 0) continue;
        j["heads"][name].push_back(nlohmann::json::binary(std::vector<uint8_t>(buf, buf + len)));
      }
    const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(j);
    return std::string(bytes.begin(), bytes.end());
  }

 private:
  static double Mean(const std::vector<std::vector<float>>& members, int64_t i, double* spread) {
    double sum = 0, sq = 0;
    for (const auto& m : members) {
      sum += m[i];
      sq += static_cast<double>(m[i]) * m[i];
    }
    const double n = static_cast<double>(members.size()), mean = sum / n;
    if (spread) *spread = n > 1 ? std::sqrt(std::max(0.0, sq / n - mean * mean)) : 0;
    return mean;
  }

  void Fill(const AnalyticalParts& parts,
            const std::map<std::string, std::vector<std::vector<float>>>& raw, int64_t i,
            Prediction* p) const {
    auto head = [&](const char* name, double fallback, double* spread = nullptr) {
      auto it = raw.find(name);
      return it == raw.end() ? fallback : Mean(it->second, i, spread);
    };
    p->traffic_bytes = std::exp2(head("traffic", Log2Clamped(parts.traffic_bytes)));
    p->overhead = std::exp2(head("overhead", Log2Clamped(parts.overhead)));
    p->eta = std::clamp(head("eta", 0.5), 0.0, 1.0);
    p->compute = parts.compute;
    p->memory = parts.memory * p->traffic_bytes / std::max(parts.traffic_bytes, 1.0);
    p->composed = p->overhead + p->compute + p->memory - p->eta * std::min(p->compute, p->memory);
    double spread = 0;
    if (form_ == "composed") {
      p->seconds = p->composed;
    } else if (form_ == "corrected") {
      p->correction = std::exp2(head("correction", 0.0, &spread));
      p->seconds = p->composed * p->correction;
    } else if (form_ == "direct") {
      p->seconds = std::exp2(head("direct", Log2Clamped(p->composed), &spread));
    } else {  // pairwise: a higher score ranks better
      p->seconds = std::exp2(-head("pairwise", 0.0, &spread));
    }
    p->uncertainty = spread;
    Clamp(p);
  }

  // Beyond the range its training times support, a prediction is pulled
  // towards the range's edge, in order, and flagged (kBeyondRangeCompression).
  // A pairwise score is not in seconds; every other form is.
  void Clamp(Prediction* p) const {
    if (slowest_ <= 0 || form_ == "pairwise" || !(p->seconds > 0)) return;
    const double lo = fastest_ / kSupportMargin, hi = slowest_ * kSupportMargin;
    if (p->seconds >= lo && p->seconds <= hi) return;
    const double edge = p->seconds > hi ? hi : lo;
    p->seconds = edge * std::exp2(std::log2(p->seconds / edge) / kBeyondRangeCompression);
    p->out_of_range = true;
  }

  std::string form_;
  int threads_;
  std::map<std::string, Head> heads_;
  double fastest_ = 0, slowest_ = 0;
};

// Label of each head for one sample; NaN leaves the sample out of that head.
double Label(const std::string& head, const Sample& s, const Prediction& composed,
             double tie_resolution) {
  if (head == "traffic") return Log2Clamped(s.traffic_bytes);
  if (head == "overhead") return Log2Clamped(std::max(s.overhead, 1e-7));
  if (head == "eta") return s.eta >= 0 ? std::clamp(s.eta, 0.0, 1.0) : NAN;
  if (head == "correction") return Log2Clamped(s.seconds) - Log2Clamped(composed.composed);
  if (head == "direct") return Log2Clamped(s.seconds);
  // pairwise: a higher label ranks better; within tie_resolution, equal.
  if (tie_resolution > 0)
    return -std::round(Log2Clamped(s.seconds) / std::log2(1 + tie_resolution));
  return -Log2Clamped(s.seconds);
}

std::map<std::string, std::string> HeadParams(const std::string& head, const XgboostOptions& o,
                                              int member) {
  std::map<std::string, std::string> p = {
      {"max_depth", std::to_string(o.max_depth)},
      {"eta", fmt::format("{}", o.learning_rate)},
      {"nthread", std::to_string(o.threads)},
      {"seed", std::to_string(o.seed * 7919 + static_cast<uint64_t>(member))},
      {"tree_method", "hist"},
      {"verbosity", "0"},
      {"objective", head == "eta"        ? "reg:logistic"
                    : head == "pairwise" ? "rank:pairwise"
                                         : "reg:squarederror"}};
  if (head == "pairwise") p["num_pairsample"] = std::to_string(std::max(1, o.pair_samples));
  if (member > 0) {  // ensemble members see different rows and columns
    p["subsample"] = "0.8";
    p["colsample_bytree"] = "0.8";
  }
  return p;
}

// Where a head's trees start from: the mean label. libxgboost 1.7 starts
// every regression at 0.5 otherwise, which for a head in log2 seconds is
// 1.4 s: a head that an online update's time budget cut to a tree or two
// (Tuner::UpdateModel, 10 s) then predicted overheads of 0.1-0.5 s for
// groups that run in 10 us, and the composed and corrected forms added
// them to every candidate (issue 38: candidates measured at 0.01 ms,
// predicted at 100-195 ms). From the mean, a short head predicts about the
// average, and each tree refines it.
double BaseScore(const std::string& head, const std::vector<float>& labels) {
  double sum = 0;
  for (float v : labels) sum += v;
  const double mean = labels.empty() ? 0.0 : sum / static_cast<double>(labels.size());
  // reg:logistic needs a base in (0, 1).
  return head == "eta" ? std::clamp(mean, 0.01, 0.99) : mean;
}

// Trains one booster on the rows whose label is not NaN.
Result<Booster> TrainHead(const std::string& head, const Dataset& data,
                          const std::vector<float>& labels, const XgboostOptions& o, int member,
                          const std::function<bool()>& tick) {
  std::vector<float> values;
  std::vector<float> y, weights;
  std::vector<unsigned> groups;
  int last_workload = -1;
  for (int64_t i = 0; i < data.size(); ++i) {
    if (std::isnan(labels[i])) continue;
    values.insert(values.end(), data.x.row(i), data.x.row(i) + NumFeatures());
    y.push_back(labels[i]);
    weights.push_back(data.y[i].weight);
    if (data.y[i].workload != last_workload) groups.push_back(0);
    ++groups.back();
    last_workload = data.y[i].workload;
  }
  if (y.empty())
    return Error(ErrorCode::kInvalidArgument, fmt::format("no samples with a '{}' label", head));
  FT_ASSIGN_OR_RETURN(Matrix m,
                      MakeMatrix(values.data(), static_cast<int64_t>(y.size()), o.threads));
  FT_XGB(XGDMatrixSetFloatInfo(m.get(), "label", y.data(), y.size()), "setting labels");
  if (head == "pairwise")
    FT_XGB(XGDMatrixSetUIntInfo(m.get(), "group", groups.data(), groups.size()), "setting groups");
  const bool weighted =
      std::any_of(weights.begin(), weights.end(), [](float w) { return w != 1.0f; });
  if (weighted && head != "pairwise")
    FT_XGB(XGDMatrixSetFloatInfo(m.get(), "weight", weights.data(), weights.size()),
           "setting weights");
  std::map<std::string, std::string> params = HeadParams(head, o, member);
  if (head != "pairwise") params["base_score"] = fmt::format("{}", BaseScore(head, y));
  FT_ASSIGN_OR_RETURN(Booster b, NewBooster(m.get(), params));
  for (int round = 0; round < o.rounds; ++round) {
    FT_XGB(XGBoosterUpdateOneIter(b.get(), round, m.get()), "training " + head);
    if (!tick()) break;
  }
  return b;
}

std::vector<std::string> HeadsOf(const std::string& form) {
  std::vector<std::string> heads = {"traffic", "overhead", "eta"};
  if (form == "corrected") heads.push_back("correction");
  if (form == "direct") heads.push_back("direct");
  if (form == "pairwise") heads.push_back("pairwise");
  return heads;
}

}  // namespace

Result<std::unique_ptr<CostModel>> TrainXgboostModel(
    const Dataset& train, const XgboostOptions& o, const std::function<void(int, int)>& progress) {
  if (std::find(std::begin(kModelForms), std::end(kModelForms), o.form) == std::end(kModelForms))
    return Error(ErrorCode::kInvalidArgument, fmt::format("unknown model form '{}'", o.form));
  if (train.size() < 2)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("{} training samples: at least 2 are needed", train.size()));
  auto model = std::make_unique<XgboostModel>(o.form, o.threads);
  double fastest = INFINITY, slowest = 0;
  for (const Sample& s : train.y)
    if (s.seconds > 0) {
      fastest = std::min(fastest, s.seconds);
      slowest = std::max(slowest, s.seconds);
    }
  if (slowest > 0) model->set_seconds_range(fastest, slowest);
  const std::vector<std::string> heads = HeadsOf(o.form);
  const int ranking_members = std::max(1, o.ensemble);
  const int total = o.rounds * (static_cast<int>(heads.size()) - 1 + ranking_members);
  int done = 0;
  auto booster_start = std::chrono::steady_clock::now();
  bool stopped = false;
  // Each booster has its own share of max_seconds (its rounds over all) and
  // adds trees until that share is spent. Paced instead (stop once behind
  // max_seconds * rounds done / total), every booster of a large history
  // whose rounds took longer than the pace stopped after one tree, and a
  // head of one tree predicts little more than its starting point (from
  // the former 0.5 base score: overheads of 0.1-0.5 s; issue 38).
  auto tick = [&] {
    ++done;
    if (o.should_stop && o.should_stop()) {
      stopped = true;
      return false;
    }
    if (progress && done % 10 == 0) progress(done, total);
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - booster_start).count();
    return o.max_seconds <= 0 || spent < o.max_seconds * o.rounds / total;
  };
  for (const std::string& head : heads) {
    // The composition the correction head corrects uses the heads trained so far.
    std::vector<Prediction> composed(train.size());
    if (head == "correction") composed = model->Predict(train.x);
    std::vector<float> labels(train.size());
    for (int64_t i = 0; i < train.size(); ++i)
      labels[i] = static_cast<float>(Label(head, train.y[i], composed[i], o.tie_resolution));
    // Overlap is measured only when a job asks for copy- and compute-only
    // runs; without it the composition uses the default eta.
    if (head == "eta" &&
        std::all_of(labels.begin(), labels.end(), [](float v) { return std::isnan(v); }))
      continue;
    const bool ranking = head == "correction" || head == "direct" || head == "pairwise";
    for (int member = 0; member < (ranking ? ranking_members : 1); ++member) {
      booster_start = std::chrono::steady_clock::now();
      FT_ASSIGN_OR_RETURN(Booster b, TrainHead(head, train, labels, o, member, tick));
      if (stopped) return Error(ErrorCode::kInvalidArgument, "training stopped");
      model->heads()[head].name = head;
      model->heads()[head].members.push_back(std::move(b));
    }
  }
  if (progress) progress(total, total);
  return std::unique_ptr<CostModel>(std::move(model));
}

Result<std::unique_ptr<CostModel>> LoadXgboostModel(const std::string& blob) {
  const auto j = nlohmann::json::from_cbor(blob.begin(), blob.end(), true, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "fusetune-xgboost")
    return Error(ErrorCode::kInvalidArgument, "the stored model is not a fusetune XGBoost model");
  if (j.value("feature_version", 0) != kFeatureVersion)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("the stored model uses feature version {}, this build {}",
                             j.value("feature_version", 0), kFeatureVersion));
  auto model = std::make_unique<XgboostModel>(j.value("form", "corrected"), 2);
  if (const auto range = j.find("seconds_range"); range != j.end()) {
    const bool pair = range->is_array() && range->size() == 2 && (*range)[0].is_number() &&
                      (*range)[1].is_number();
    const double fastest = pair ? (*range)[0].get<double>() : 0;
    const double slowest = pair ? (*range)[1].get<double>() : 0;
    if (!(fastest > 0 && fastest <= slowest))
      return Error(
          ErrorCode::kInvalidArgument,
          fmt::format("the stored model's seconds_range is not two times, fastest first: {}",
                      range->dump()));
    model->set_seconds_range(fastest, slowest);
  }
  if (!j.contains("heads") || !j["heads"].is_object())
    return Error(ErrorCode::kInvalidArgument, "the stored model has no heads");
  for (const auto& [name, members] : j["heads"].items())
    for (const auto& member : members) {
      if (!member.is_binary())
        return Error(ErrorCode::kInvalidArgument, "a stored booster is not binary");
      const auto& bytes = member.get_binary();
      FT_ASSIGN_OR_RETURN(Booster b, NewBooster(nullptr, {{"nthread", "2"}}));
      FT_XGB(XGBoosterLoadModelFromBuffer(b.get(), bytes.data(), bytes.size()),
             "loading head " + name);
      model->heads()[name].name = name;
      model->heads()[name].members.push_back(std::move(b));
    }
  return std::unique_ptr<CostModel>(std::move(model));
}

}  // namespace fusetune::cost_model
