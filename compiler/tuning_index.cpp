#include "compiler/tuning_index.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "cost_model/training.h"
#include "fusion_space/plan_json.h"
#include "graph/text_format.h"
#include "graph/workload_key.h"

namespace fusetune::compiler {

Result<std::unique_ptr<TuningIndex>> TuningIndex::Load(db::Database& database,
                                                       const std::string& target,
                                                       target::CacheProtocol caches) {
  auto index = std::unique_ptr<TuningIndex>(new TuningIndex());
  index->database_ = &database;
  index->target_ = target;
  index->caches_ = caches;
  // Before any other read: a plan chosen from what the index reads is
  // remembered only if nothing was committed since (PutCompiledPlan). A
  // file of an older schema has none; one that cannot be read fails here.
  if (auto generation = database.Generation(); generation.ok())
    index->generation_ = *generation;
  else if (generation.error().code() != ErrorCode::kUnsupported)
    return generation.error();
  return index;
}

Result<std::optional<db::CompiledPlanEntry>> TuningIndex::Remembered(const std::string& graph_key,
                                                                     const std::string& context) {
  if (database_ == nullptr) return std::optional<db::CompiledPlanEntry>();
  FT_RETURN_IF_ERROR(AdoptPreload());
  // A preloaded entry of another generation than the index's (a commit came
  // between the load and the preload) is asked for again.
  for (const db::CompiledPlanEntry& e : remembered_)
    if (e.graph_key == graph_key && e.context == context && e.generation == generation_)
      return std::optional<db::CompiledPlanEntry>(e);
  return database_->FindCompiledPlan(graph_key, target_, context);
}

const cost_model::TargetFeatures& TuningIndex::features() {
  if (features_) return *features_;
  nlohmann::json calibration;
  if (database_ != nullptr) {
    auto stored = database_->GetTarget(target_);
    if (!stored.ok())
      read_error_ = stored.error();  // read_status() returns it: the compile fails
    else if (stored->has_value())
      calibration = nlohmann::json::parse((*stored)->calibration, nullptr, false);
  }
  features_ = cost_model::TargetFeaturesFromCalibration(calibration, caches_);
  return *features_;
}

std::unique_ptr<TuningIndex> TuningIndex::Empty(cost_model::TargetFeatures features) {
  auto index = std::unique_ptr<TuningIndex>(new TuningIndex());
  index->features_ = features;
  return index;
}

Result<const cost_model::CostModel*> TuningIndex::model() {
  if (model_loaded_) return model_.get();
  model_loaded_ = true;
  model_label_ = "none";
  if (database_ == nullptr) return model_.get();
  FT_ASSIGN_OR_RETURN(auto active, database_->ActiveModel(cost_model::kXgboostModelName));
  if (!active.has_value() || active->feature_version != cost_model::kFeatureVersion)
    return model_.get();
  auto model = cost_model::LoadCostModel(active->name, active->blob);
  if (!model.ok())
    return model.error().WithContext(fmt::format("loading the active cost model #{}", active->id));
  model_ = std::move(*model);
  const auto metrics = nlohmann::json::parse(active->metrics, nullptr, false);
  std::string form;
  if (metrics.is_object()) {
    form = metrics.value("form", "");
    if (metrics.contains("top1") && metrics["top1"].is_number() && metrics["top1"] > 0)
      model_top1_ = metrics["top1"].get<double>();
  }
  model_label_ =
      fmt::format("{}{} (#{})", active->name, form.empty() ? "" : "/" + form, active->id);
  return model_.get();
}

const db::BestPlan* TuningIndex::Cached(const std::string& workload_key) const {
  auto it = bests_.find(workload_key);
  return it == bests_.end() || !it->second ? nullptr : &*it->second;
}

void TuningIndex::PreloadInBackground(const std::string& path) {
  if (database_ == nullptr || all_bests_ || preload_.valid()) return;
  // The index waits for its preload when it is destroyed: a compile that
  // finished first (a small model) would wait on a huge database's read.
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  if (error || bytes > kPreloadMaxFileBytes) return;
  try {
    preload_ = std::async(std::launch::async, &TuningIndex::Preload, path, target_);
  } catch (const std::system_error&) {  // no thread: lookups go key by key
  }
}

Result<TuningIndex::Preloaded> TuningIndex::Preload(const std::string& path,
                                                    const std::string& target) {
  db::OpenOptions open;
  open.create = false;
  open.read_only = true;
  FT_ASSIGN_OR_RETURN(auto database, db::MakeSqliteDatabase(path, open));
  Preloaded out;
  FT_ASSIGN_OR_RETURN(out.remembered, database->CompiledPlans(target));
  FT_ASSIGN_OR_RETURN(auto bests, database->BestPlans(target));
  FT_ASSIGN_OR_RETURN(const auto graphs, database->WorkloadKeys(db::WorkloadKind::kGraph));
  for (const std::string& key : graphs)
    if (bests.count(key)) {
      FT_ASSIGN_OR_RETURN(out.faster_stale[key], database->FasterStaleSeconds(key, target));
    }
  out.bests = AllBests(std::move(bests));
  return out;
}

void TuningIndex::WaitForPreload() {
  (void)AdoptPreload(/*wait=*/true);  // an error stays for the next lookup to return
}

Status TuningIndex::AdoptPreload(bool wait) {
  if (preload_.valid() &&
      (wait || preload_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
    auto read = preload_.get();
    if (read.ok()) {
      faster_stale_.merge(read->faster_stale);
      remembered_ = std::move(read->remembered);
      TakeAllBests(std::move(read->bests));
    } else if (read.error().code() == ErrorCode::kCorrupt) {
      // The file is damaged: the compile fails rather than choose from what
      // the lookups key by key happen to reach.
      preload_error_ = read.error();
    } else {  // an older schema without remembered compiles, or a busy file:
              // the lookups key by key read (and report) for themselves
      FT_LOG_DEBUG("best plans not preloaded: {}", read.error().ToString());
    }
  }
  if (preload_error_) return *preload_error_;
  return Status::Ok();
}

std::map<std::string, std::optional<db::BestPlan>> TuningIndex::AllBests(
    std::map<std::string, db::BestPlan> bests) {
  std::map<std::string, std::optional<db::BestPlan>> all;
  for (auto& [key, best] : bests) all.emplace_hint(all.end(), key, std::move(best));
  return all;
}

void TuningIndex::TakeAllBests(std::map<std::string, std::optional<db::BestPlan>> all) {
  // Keys read before stay as they are: callers hold pointers to them.
  if (bests_.empty())
    bests_.swap(all);
  else
    bests_.merge(all);
  all_bests_ = true;
}

Result<const db::BestPlan*> TuningIndex::Exact(const std::string& workload_key) {
  FT_RETURN_IF_ERROR(AdoptPreload());
  if (all_bests_ || database_ == nullptr || bests_.count(workload_key)) return Cached(workload_key);
  FT_ASSIGN_OR_RETURN(auto best, database_->Best(workload_key, target_));
  bests_.emplace(workload_key, std::move(best));
  return Cached(workload_key);
}

Result<std::optional<double>> TuningIndex::FasterStale(const std::string& workload_key) {
  if (database_ == nullptr) return std::optional<double>();
  FT_RETURN_IF_ERROR(AdoptPreload());
  if (auto it = faster_stale_.find(workload_key); it != faster_stale_.end()) return it->second;
  FT_ASSIGN_OR_RETURN(auto stale, database_->FasterStaleSeconds(workload_key, target_));
  return faster_stale_[workload_key] = stale;
}

Result<std::vector<db::Record>> TuningIndex::TopRecords(const std::string& workload_key, int k) {
  if (database_ == nullptr) return std::vector<db::Record>();
  return database_->TopK(workload_key, target_, k);
}

const std::optional<fusion_space::Tiling>& TuningIndex::BestTiling(
    const std::string& workload_key) {
  auto [it, added] = best_tilings_.emplace(workload_key, std::nullopt);
  if (!added) return it->second;
  if (const db::BestPlan* best = Cached(workload_key))
    it->second = fusion_space::SingleGroupTiling(best->plan);
  return it->second;
}

// The structure key and shape signature of a tuned workload: stored in
// its description since the tuner writes them, else from its group graph,
// parsed for structure and shapes only.
std::optional<std::pair<std::string, TuningIndex::TunedShape>> TuningIndex::ReadTunedShape(
    const std::string& key, const std::string& description_text) {
  const auto description = nlohmann::json::parse(description_text, nullptr, false);
  if (!description.is_object()) return std::nullopt;
  if (description.contains("structure") && description.contains("signature") &&
      description["structure"].is_string() && description["signature"].is_array()) {
    TunedShape shape{key, {}, {}};
    for (const auto& d : description["signature"])
      if (d.is_number_integer()) shape.signature.push_back(d.get<int64_t>());
    if (description.contains("structure_positions") &&
        description["structure_positions"].is_array())
      for (const auto& p : description["structure_positions"])
        if (p.is_number_integer()) shape.structure_positions.push_back(p.get<int32_t>());
    return std::make_pair(description["structure"].get<std::string>(), shape);
  }
  if (!description.contains("graph") || !description["graph"].is_string()) return std::nullopt;
  graph::TextParseOptions parse;
  parse.constant_data = false;
  auto graph = graph::ParseGraphText(description["graph"].get<std::string>(), parse);
  if (!graph.ok()) return std::nullopt;  // written by another version of the text form
  const graph::CanonicalSubgraph canonical =
      graph::CanonicalizeGraph(*graph, graph::KeyScope::kStructure);
  return std::make_pair(canonical.key.ToString(),
                        TunedShape{key, graph::ShapeSignature(*graph, canonical.node_order), {}});
}

// Files every tuned group workload and whole model under its structure key,
// once.
Status TuningIndex::BuildBuckets() {
  if (buckets_) return Status::Ok();
  // Every best plan is read below anyway: wait for the preload's.
  FT_RETURN_IF_ERROR(AdoptPreload(/*wait=*/true));
  buckets_.emplace();
  if (database_ == nullptr) return Status::Ok();
  if (!all_bests_) {
    FT_ASSIGN_OR_RETURN(auto all, database_->BestPlans(target_));
    TakeAllBests(AllBests(std::move(all)));
  }
  for (const auto& [key, best] : bests_) {
    if (!best) continue;
    FT_ASSIGN_OR_RETURN(auto workload, database_->GetWorkload(key));
    if (!workload.has_value()) continue;
    Buckets& into = workload->kind == db::WorkloadKind::kGroup ? *buckets_ : model_buckets_;
    if (auto shape = ReadTunedShape(key, workload->description))
      into[shape->first].push_back(std::move(shape->second));
  }
  return Status::Ok();
}

std::optional<BucketMatch> TuningIndex::NearestIn(const Buckets& buckets,
                                                  const std::string& structure_key,
                                                  const std::vector<int64_t>& signature,
                                                  const std::string& exclude) const {
  auto it = buckets.find(structure_key);
  if (it == buckets.end()) return std::nullopt;
  std::optional<BucketMatch> nearest;
  for (const TunedShape& shape : it->second) {
    if (shape.key == exclude || shape.signature.size() != signature.size()) continue;
    double distance = 0;
    for (size_t i = 0; i < signature.size(); ++i)
      distance += std::abs(
          std::log2(std::max<double>(1, signature[i]) / std::max<double>(1, shape.signature[i])));
    if (!nearest || distance < nearest->distance)
      nearest = BucketMatch{shape.key, Cached(shape.key), shape.signature, distance,
                            shape.structure_positions};
  }
  return nearest;
}

Result<std::optional<BucketMatch>> TuningIndex::Nearest(const std::string& structure_key,
                                                        const std::vector<int64_t>& signature,
                                                        const std::string& exclude) {
  FT_RETURN_IF_ERROR(BuildBuckets());
  return NearestIn(*buckets_, structure_key, signature, exclude);
}

Result<std::optional<BucketMatch>> TuningIndex::NearestModel(const std::string& structure_key,
                                                             const std::vector<int64_t>& signature,
                                                             const std::string& exclude) {
  FT_RETURN_IF_ERROR(BuildBuckets());
  return NearestIn(model_buckets_, structure_key, signature, exclude);
}

}  // namespace fusetune::compiler
