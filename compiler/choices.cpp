#include "compiler/choices.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cost_model/features.h"
#include "fusion_space/plan_json.h"
#include "fusion_space/tiling_move.h"
#include "graph/subgraph.h"
#include "graph/workload_key.h"

namespace fusetune::compiler {

namespace {

// `wanted` when it is legal here, else the legal tiling nearest it. A
// precision the compile's space does not offer (a bf16 record reaching an
// f32 compile: an imported record, a hand-made plan) is not legal here: its
// nearest f32 tiling is taken.
std::optional<fusion_space::Tiling> NearestLegal(const fusion_space::Tiling& wanted,
                                                 const fusion_space::TilingSpace& tilings) {
  if (tilings.Offers(fusion_space::TilingPrecision(wanted)) && tilings.Check(wanted)) return wanted;
  return tilings.Nearest(wanted);
}

// Up to `limit` legal tilings spread evenly over the enumeration, the
// default included.
std::vector<fusion_space::Tiling> RankedTilings(const fusion_space::TilingSpace& tilings,
                                                int64_t limit) {
  const std::vector<fusion_space::Tiling>& all = tilings.Enumerate();
  std::vector<fusion_space::Tiling> out{tilings.Default()};
  const int64_t n = static_cast<int64_t>(all.size());
  const int64_t step = std::max<int64_t>(1, (n + limit - 1) / limit);
  for (int64_t i = 0; i < n; i += step) out.push_back(all[i]);
  return out;
}

struct KeyFacts {
  cost_model::GroupInfo info;
  const fusion_space::TilingSpace* tilings = nullptr;
};

class Chooser {
 public:
  Chooser(fusion_space::FusionSpace& space, TuningIndex& index, const CompileOptions& options)
      : space_(space), index_(index), options_(options) {}

  Result<CandidateChoices> Run();

 private:
  double Analytical(const KeyFacts& f, const fusion_space::Tiling& t) const {
    return cost_model::AnalyticalSeconds(f.info, t, index_.features());
  }
  Result<std::optional<GroupChoice>> Exact(const fusion_space::CandidateGroup& g,
                                           const KeyFacts& f);
  Result<std::optional<GroupChoice>> Bucket(const fusion_space::CandidateGroup& g,
                                            const KeyFacts& f);
  Result<std::optional<GroupChoice>> Model(const KeyFacts& f);
  GroupChoice Default(const KeyFacts& f);

  fusion_space::FusionSpace& space_;
  TuningIndex& index_;
  const CompileOptions& options_;
  double scale_ = 1;
};

Result<std::optional<GroupChoice>> Chooser::Exact(const fusion_space::CandidateGroup& g,
                                                  const KeyFacts& f) {
  FT_ASSIGN_OR_RETURN(const db::BestPlan* best, index_.Exact(g.key.ToString()));
  if (best == nullptr) return std::optional<GroupChoice>();
  auto tiling = TilingFromRecordPlan(best->plan, g.instance->kind, *f.tilings);
  if (!tiling || !f.tilings->Check(*tiling))
    return std::optional<GroupChoice>();  // not this build's space
  GroupChoice c;
  c.tiling = *tiling;
  c.source = PlanSource::kExact;
  c.cost = best->seconds;
  c.measured_seconds = best->seconds;
  c.predicted_loss = 0;
  c.record_id = best->record_id;
  c.detail = fmt::format("record {}", best->record_id);
  return std::optional<GroupChoice>(c);
}

Result<std::optional<GroupChoice>> Chooser::Bucket(const fusion_space::CandidateGroup& g,
                                                   const KeyFacts& f) {
  const auto group_graph = graph::ExtractSubgraph(space_.graph(), g.nodes);
  const graph::CanonicalSubgraph canonical =
      graph::CanonicalizeGraph(group_graph, graph::KeyScope::kStructure);
  const auto signature = graph::ShapeSignature(group_graph, canonical.node_order);
  FT_ASSIGN_OR_RETURN(auto match,
                      index_.Nearest(canonical.key.ToString(), signature, g.key.ToString()));
  if (!match) return std::optional<GroupChoice>();
  auto tiling = TilingFromRecordPlan(match->best->plan, g.instance->kind, *f.tilings);
  if (!tiling) return std::optional<GroupChoice>();
  // A block that covered a whole dimension there covers it here.
  if (auto whole = NearestLegal(
          fusion_space::ScaleWholeBlocks(*tiling, match->signature, signature), *f.tilings))
    tiling = whole;
  GroupChoice c;
  c.tiling = *tiling;
  c.source = PlanSource::kShapeBucket;
  c.predicted_seconds = c.cost = scale_ * Analytical(f, *tiling);
  c.record_id = match->best->record_id;
  // What the analytical model expects the moved tiling to lose against the
  // best it sees here: a lower bound on the loss against a tuned plan.
  double best_here = c.predicted_seconds;
  for (const fusion_space::Tiling& t : RankedTilings(*f.tilings, options_.max_model_tilings))
    best_here = std::min(best_here, scale_ * Analytical(f, t));
  c.predicted_loss = best_here > 0 ? c.predicted_seconds / best_here - 1 : 0;
  c.detail = fmt::format("nearest tuned shape: workload {} (record {}, shape distance {:.2f})",
                         match->key, match->best->record_id, match->distance);
  return std::optional<GroupChoice>(c);
}

Result<std::optional<GroupChoice>> Chooser::Model(const KeyFacts& f) {
  FT_ASSIGN_OR_RETURN(const cost_model::CostModel* model, index_.model());
  if (model == nullptr) return std::optional<GroupChoice>();
  const std::vector<fusion_space::Tiling> tilings =
      RankedTilings(*f.tilings, options_.max_model_tilings);
  cost_model::FeatureMatrix x;
  for (const fusion_space::Tiling& t : tilings) x.Add(f.info, t, index_.features());
  const auto predicted = model->Predict(x);
  size_t best = 0;
  for (size_t i = 1; i < predicted.size(); ++i)
    if (predicted[i].seconds < predicted[best].seconds) best = i;
  GroupChoice c;
  c.tiling = tilings[best];
  c.source = PlanSource::kCostModel;
  c.predicted_seconds = c.cost = scale_ * Analytical(f, c.tiling);
  if (index_.model_top1()) c.predicted_loss = 1 / *index_.model_top1() - 1;
  c.detail = fmt::format("best of {} tilings ranked by {}", tilings.size(), index_.model_label());
  return std::optional<GroupChoice>(c);
}

GroupChoice Chooser::Default(const KeyFacts& f) {
  GroupChoice c;
  c.tiling = f.tilings->Default();
  c.source = PlanSource::kDefault;
  c.predicted_seconds = c.cost = scale_ * Analytical(f, c.tiling);
  c.detail = "the template's default tiling: nothing tuned and no trained cost model";
  return c;
}

Result<CandidateChoices> Chooser::Run() {
  const auto& groups = space_.candidates().groups;
  CandidateChoices out;
  out.choices.resize(groups.size());
  std::vector<std::optional<KeyFacts>> facts(groups.size());
  std::map<graph::WorkloadKey, size_t> first_of_key;  // the first candidate of each workload
  std::vector<bool> done(groups.size(), false);
  std::vector<double> ratios;
  for (size_t i = 0; i < groups.size(); ++i) {
    const fusion_space::CandidateGroup& g = groups[i];
    if (!g.instance) continue;
    auto [it, added] = first_of_key.emplace(g.key, i);
    if (!added) continue;
    facts[i] =
        KeyFacts{cost_model::MakeGroupInfo(space_.graph(), *g.instance), &space_.Tilings(g.nodes)};
    FT_ASSIGN_OR_RETURN(auto c, Exact(g, *facts[i]));
    if (c) {
      const double a = Analytical(*facts[i], c->tiling);
      c->predicted_seconds = a;  // scaled below
      out.choices[i] = *c;
      done[i] = true;
      if (a > 0 && g.instance->kind != fusion_space::KernelTemplate::kReference)
        ratios.push_back(c->cost / a);
    }
  }
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    scale_ = ratios[ratios.size() / 2];
  }
  out.scale = scale_;
  for (auto& [key, i] : first_of_key) {
    if (done[i]) {
      out.choices[i].predicted_seconds *= scale_;
      out.any_known = true;
      continue;
    }
    FT_ASSIGN_OR_RETURN(auto bucket, Bucket(groups[i], *facts[i]));
    std::optional<GroupChoice> model;
    if (!bucket) {
      FT_ASSIGN_OR_RETURN(model, Model(*facts[i]));
    }
    out.choices[i] = bucket ? *bucket : model ? *model : Default(*facts[i]);
    out.any_known |= out.choices[i].source != PlanSource::kDefault;
  }
  for (size_t i = 0; i < groups.size(); ++i)
    if (groups[i].instance) out.choices[i] = out.choices[first_of_key.at(groups[i].key)];
  return out;
}

}  // namespace

std::optional<fusion_space::Tiling> TilingFromRecordPlan(const std::string& plan_json,
                                                         fusion_space::KernelTemplate kind,
                                                         const fusion_space::TilingSpace& tilings) {
  // Read in place: a compile by groups reads a record per distinct workload.
  const std::optional<fusion_space::Tiling> tiling = fusion_space::SingleGroupTiling(plan_json);
  if (!tiling || fusion_space::TilingTemplate(*tiling) != kind) return std::nullopt;
  if (kind == fusion_space::KernelTemplate::kReference) return tiling;
  return NearestLegal(*tiling, tilings);
}

Result<CandidateChoices> ChooseCandidates(fusion_space::FusionSpace& space, TuningIndex& index,
                                          const CompileOptions& options) {
  return Chooser(space, index, options).Run();
}

}  // namespace fusetune::compiler
