#include "cost_model/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "common/rng.h"
#include "fusion_space/plan_json.h"
#include "fusion_space/space.h"
#include "graph/text_format.h"
#include "graph/workload_key.h"
#include "measure/result.h"

namespace fusetune::cost_model {

namespace {

// A group workload rebuilt from its stored description.
struct Rebuilt {
  graph::Graph graph;
  std::unique_ptr<fusion_space::FusionSpace> space;
  GroupInfo info;
};

Result<std::unique_ptr<Rebuilt>> Rebuild(const db::WorkloadEntry& w, const TargetFeatures& t) {
  const auto desc = nlohmann::json::parse(w.description, nullptr, false);
  if (!desc.is_object() || !desc.contains("graph") || !desc["graph"].is_string())
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("workload {}: its description has no group graph", w.key));
  auto r = std::make_unique<Rebuilt>();
  FT_ASSIGN_OR_RETURN(r->graph, graph::ParseGraphText(desc["graph"].get<std::string>()));
  kernels::KernelConfig config;
  config.threads = t.threads;
  config.local_buffer_bytes = static_cast<size_t>(t.local_buffer_bytes);
  r->space = std::make_unique<fusion_space::FusionSpace>(r->graph, config);
  std::vector<int32_t> all(r->graph.nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  const fusion_space::GroupMatch& match = r->space->Match(all);
  if (!match.decision.allowed())
    return Error(ErrorCode::kInvalidArgument, fmt::format("workload {}: not one legal group: {}",
                                                          w.key, match.decision.ToString()));
  // Reference kernels have no tiling to rank: the tuner measures them once.
  if (match.instance.kind == fusion_space::KernelTemplate::kReference)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("workload {}: a reference kernel, nothing to rank", w.key));
  r->info = MakeGroupInfo(r->graph, match.instance);
  return r;
}

}  // namespace

Dataset Dataset::Subset(const std::vector<int>& workloads) const {
  std::vector<std::vector<int64_t>> rows_of(workload_keys.size());
  for (int64_t i = 0; i < size(); ++i) rows_of[y[i].workload].push_back(i);
  Dataset out;
  out.workload_keys = workload_keys;
  for (int w : workloads)
    for (int64_t i : rows_of[w]) out.Add(*this, i);
  return out;
}

std::vector<int64_t> Dataset::TuningRows() const {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < size(); ++i)
    if (y[i].tuning) rows.push_back(i);
  return rows;
}

Dataset Dataset::Rows(const std::vector<int64_t>& rows) const {
  Dataset out;
  out.workload_keys = workload_keys;
  for (int64_t i : rows) out.Add(*this, i);
  return out;
}

void Dataset::Add(const Dataset& other, int64_t row) {
  x.values.insert(x.values.end(), other.x.row(row), other.x.row(row) + NumFeatures());
  x.parts.push_back(other.x.parts[row]);
  y.push_back(other.y[row]);
}

Result<Dataset> LoadDataset(db::Database& database, const DatasetOptions& options,
                            DatasetSummary* summary) {
  DatasetSummary local;
  DatasetSummary& s = summary ? *summary : local;
  s.label = options.label;
  Dataset data;
  std::map<std::string, TargetFeatures> targets;
  std::map<std::string, std::unique_ptr<Rebuilt>> rebuilt;  // null: unusable workload
  std::map<std::string, int> workload_index;
  // (workload, target, tiling) -> row: a candidate measured again (the same
  // group in two models, or two jobs) is one sample, its lowest label (so a
  // candidate measured more often sits a little lower than its neighbours).
  // Repeats differ by what else ran on the host; as two samples they would
  // teach the ranking that one candidate is both faster and slower than its
  // neighbours.
  std::map<std::string, int64_t> candidate_row;
  db::RecordFilter filter;
  filter.status = db::RecordStatus::kOk;
  filter.fresh_only = true;
  if (!options.target.empty()) filter.target = options.target;
  Status st = database.ForEachRecord(filter, [&](const db::Record& r) {
    ++s.records;
    if (options.progress && s.records % 500 == 0) options.progress(s.records, s.samples);
    if (!targets.count(r.target)) {
      auto t = database.GetTarget(r.target);
      const auto calibration = t.ok() && t->has_value()
                                   ? nlohmann::json::parse((*t)->calibration, nullptr, false)
                                   : nlohmann::json();
      targets[r.target] =
          TargetFeaturesFromCalibration(calibration, target::CacheProtocolOfTargetKey(r.target));
    }
    const TargetFeatures& target = targets[r.target];
    auto it = rebuilt.find(r.workload_key);
    if (it == rebuilt.end()) {
      auto w = database.GetWorkload(r.workload_key);
      std::unique_ptr<Rebuilt> made;
      if (w.ok() && w->has_value() && (*w)->kind == db::WorkloadKind::kGroup) {
        auto rb = Rebuild(**w, target);
        if (rb.ok()) made = std::move(*rb);
      } else if (w.ok() && w->has_value()) {
        ++s.skipped_graph_workloads;
      }
      it = rebuilt.emplace(r.workload_key, std::move(made)).first;
    }
    if (!it->second) {
      ++s.skipped_unreadable;
      return true;
    }
    const auto plan_json = nlohmann::json::parse(r.plan, nullptr, false);
    auto plan = fusion_space::PlanFromJson(*it->second->space, plan_json);
    const auto metrics = measure::MetricsFromText(r.metrics);
    if (!plan.ok() || plan->groups.size() != 1 || !metrics.ok()) {
      ++s.skipped_unreadable;
      return true;
    }
    auto [wi, added] =
        workload_index.emplace(r.workload_key, static_cast<int>(data.workload_keys.size()));
    if (added) data.workload_keys.push_back(r.workload_key);
    const std::string candidate = r.workload_key + "|" + r.target + "|" +
                                  fusion_space::TilingToString(plan->groups[0].tiling);
    Sample sample;
    sample.workload = wi->second;
    const measure::MeasureResult& m = metrics->measured;
    sample.seconds = LabelSeconds(r.seconds, m.time, options.label);
    sample.traffic_bytes = static_cast<double>(m.bytes_in + m.bytes_out);
    sample.overhead = m.overhead_seconds;
    sample.eta = m.overlap;
    // A job's id does not survive `db merge` or an export (the job is the
    // other database's), the search's note on why it measured does.
    sample.tuning = r.job_id != 0 || metrics->search.has_value();
    if (auto seen = candidate_row.find(candidate); seen != candidate_row.end()) {
      ++s.merged_repeats;
      Sample& kept = data.y[seen->second];
      const bool tuning = kept.tuning || sample.tuning;  // a candidate some job measured
      if (sample.seconds < kept.seconds) kept = sample;
      kept.tuning = tuning;
      return true;
    }
    candidate_row.emplace(candidate, data.size());
    data.x.Add(it->second->info, plan->groups[0].tiling, target);
    data.y.push_back(sample);
    ++s.samples;
    return true;
  });
  FT_RETURN_IF_ERROR(st);
  if (options.progress) options.progress(s.records, s.samples);
  // Rows grouped by workload, as ranking objectives need.
  std::vector<int> all(data.workload_keys.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return data.Subset(all);
}

Split SplitByWorkload(const Dataset& data, double valid_fraction, uint64_t seed) {
  std::vector<int> order(data.workload_keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  // By key, not by load order: the same database and seed give the same split.
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return HashBytes(data.workload_keys[a].data(), data.workload_keys[a].size(), seed) <
           HashBytes(data.workload_keys[b].data(), data.workload_keys[b].size(), seed);
  });
  Split split;
  const size_t valid =
      order.empty()
          ? 0
          : std::clamp<size_t>(static_cast<size_t>(std::lround(valid_fraction * order.size())), 1,
                               order.size());
  split.valid.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(valid));
  split.train.assign(order.begin() + static_cast<std::ptrdiff_t>(valid), order.end());
  std::sort(split.valid.begin(), split.valid.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

std::string GroupWorkloadDescription(const graph::Graph& group_graph,
                                     const fusion_space::KernelInstance& instance) {
  graph::TextPrintOptions print;
  print.max_inline_elements = 16;
  // Constants the matcher reads by value (an attention mask, say) must come
  // back as they were for the group to be rebuilt; weights, bound as kernel
  // operands, need only their shape. Up to a million elements (a mask of
  // sequence 1024), beyond which the description would outweigh its records.
  for (graph::ValueId v = 0; v < static_cast<graph::ValueId>(group_graph.values.size()); ++v) {
    const graph::Value& value = group_graph.value(v);
    if (value.is_constant() && !instance.BindsValue(v) &&
        value.constant->numel() <= (int64_t{1} << 20))
      print.inline_values.insert(v);
  }
  // The text form's graph name is a plain identifier; exporters' names
  // ("torch_jit/...") are not.
  graph::Graph named = group_graph;
  named.name = "group";
  // The structure key and shape signature, so that the compiler's shape
  // buckets need not parse the graph (TuningIndex::BuildBuckets).
  const graph::CanonicalSubgraph canonical =
      graph::CanonicalizeGraph(group_graph, graph::KeyScope::kStructure);
  return nlohmann::json{{"graph", graph::PrintGraphText(named, print)},
                        {"structure", canonical.key.ToString()},
                        {"signature", graph::ShapeSignature(group_graph, canonical.node_order)},
                        {"template", fusion_space::KernelTemplateName(instance.kind)},
                        {"summary", instance.summary},
                        {"nodes", instance.nodes.size()}}
      .dump();
}

}  // namespace fusetune::cost_model
