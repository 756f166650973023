#include "fusion_space/plan_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "graph/workload_key.h"

namespace fusetune {

using nlohmann::json;

namespace {

Error Bad(const std::string& message) {
  return Error(ErrorCode::kInvalidArgument, "plan: " + message);
}

// Canonical position <-> node index.
struct Positions {
  std::vector<int32_t> node_at;      // position -> node
  std::vector<int32_t> position_of;  // node -> position
  WorkloadKey key;
  explicit Positions(const FusionSpace& space) {
    const Graph& g = space.graph();
    const CanonicalSubgraph& c = space.canonical();
    key = c.key;
    node_at = c.node_order;
    position_of.assign(g.nodes.size(), -1);
    for (size_t p = 0; p < node_at.size(); ++p) position_of[node_at[p]] = static_cast<int32_t>(p);
  }
};

}  // namespace

json PlanToJson(FusionSpace& space, const Plan& plan) {
  const Positions pos(space);
  json groups = json::array();
  for (const PlanGroup& g : plan.groups) {
    std::vector<int32_t> positions;
    for (int32_t n : g.nodes) positions.push_back(pos.position_of[n]);
    std::sort(positions.begin(), positions.end());
    const KernelInstance& k = space.Match(g.nodes).instance;
    groups.push_back({{"nodes", positions},
                      {"template", KernelTemplateName(k.kind)},
                      {"tiling", TilingToJson(g.tiling)},
                      {"kernel", k.summary},
                      {"workload_key", space.Key(g.nodes).ToString()}});
  }
  return {{"format", "fusetune-plan"},
          {"version", kPlanFormatVersion},
          {"graph_key", pos.key.ToString()},
          {"nodes", space.graph().nodes.size()},
          {"groups", groups}};
}

Result<Plan> PlanFromJson(FusionSpace& space, const json& j) {
  if (!j.is_object() || j.value("format", "") != "fusetune-plan")
    return Bad("not a fusetune plan (\"format\" is not \"fusetune-plan\")");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return Bad("\"version\" is missing");
  const int version = j["version"].get<int>();
  if (version != kPlanFormatVersion)
    return Bad(fmt::format("unknown version {} (this fusetune reads version {})", version,
                           kPlanFormatVersion));
  const Positions pos(space);
  const int64_t n = static_cast<int64_t>(space.graph().nodes.size());
  if (j.contains("nodes") && j["nodes"].is_number_integer() && j["nodes"].get<int64_t>() != n)
    return Bad(fmt::format("it was made for a graph of {} nodes; this graph has {}",
                           j["nodes"].get<int64_t>(), n));
  if (!j.contains("groups") || !j["groups"].is_array()) return Bad("\"groups\" is not an array");
  Plan plan;
  const json& groups = j["groups"];
  for (size_t i = 0; i < groups.size(); ++i) {
    const json& g = groups[i];
    const std::string where = fmt::format("groups[{}]", i);
    if (!g.is_object() || !g.contains("nodes") || !g["nodes"].is_array() || g["nodes"].empty())
      return Bad(where + ".nodes is not a non-empty array");
    PlanGroup group;
    for (const json& p : g["nodes"]) {
      if (!p.is_number_integer()) return Bad(where + ".nodes holds a non-integer");
      const int64_t position = p.get<int64_t>();
      if (position < 0 || position >= n)
        return Bad(
            fmt::format("{}: node {} out of range (the graph has {} nodes)", where, position, n));
      group.nodes.push_back(pos.node_at[position]);
    }
    std::sort(group.nodes.begin(), group.nodes.end());
    if (std::adjacent_find(group.nodes.begin(), group.nodes.end()) != group.nodes.end())
      return Bad(where + ".nodes lists a node twice");
    const GroupMatch& m = space.Match(group.nodes);
    if (!m.decision)
      return Bad(fmt::format("{} is not a legal group: {}", where, m.decision.reason()));
    const std::string name = g.value("template", "");
    auto kind = KernelTemplateFromName(name);
    if (!kind) return Bad(fmt::format("{}.template \"{}\" is unknown", where, name));
    if (*kind != m.instance.kind)
      return Bad(fmt::format("{}.template is \"{}\" but the group is a {} kernel", where, name,
                             KernelTemplateName(m.instance.kind)));
    const FusionDecision t =
        TilingFromJson(*kind, g.value("tiling", json::object()), &group.tiling);
    if (!t) return Bad(fmt::format("{}.tiling: {}", where, t.reason()));
    plan.groups.push_back(std::move(group));
  }
  const FusionDecision valid = space.Validate(plan);
  if (!valid) return Bad(valid.reason());
  return plan;
}

Status WritePlanFile(FusionSpace& space, const Plan& plan, const std::string& path) {
  std::ofstream out(path);
  if (!out) return Error(ErrorCode::kIo, fmt::format("cannot write plan file {}", path));
  out << PlanToJson(space, plan).dump(1) << "\n";
  if (!out) return Error(ErrorCode::kIo, fmt::format("writing {} failed", path));
  return Status::Ok();
}

Result<Plan> ReadPlanFile(FusionSpace& space, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(ErrorCode::kNotFound, fmt::format("cannot open plan file {}", path));
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(ErrorCode::kParse, fmt::format("{}: not valid JSON", path));
  auto plan = PlanFromJson(space, j);
  if (!plan.ok()) return Error(plan.error().code(), path + ": " + plan.error().message());
  return plan;
}

}  // namespace fusetune
