#include "fusion_space/plan_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/json_reader.h"
#include "graph/workload_key.h"

namespace fusetune::fusion_space {

using nlohmann::json;

namespace {

Error Bad(const std::string& message) {
  return Error(ErrorCode::kInvalidArgument, "plan: " + message);
}

// Canonical position <-> node index.
struct Positions {
  std::vector<int32_t> node_at;      // position -> node
  std::vector<int32_t> position_of;  // node -> position
  graph::WorkloadKey key;
  explicit Positions(const FusionSpace& space) {
    const graph::Graph& g = space.graph();
    const graph::CanonicalSubgraph& c = space.canonical();
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

namespace {

// A plan as read from JSON, its structure checked, before it is checked
// against a graph. Built from a document (PlanFromJson) or straight from the
// text (PlanFromJsonText), so that both apply one set of graph checks.
struct PlanDocument {
  struct Group {
    std::vector<int64_t> positions;
    std::string template_name;
    TilingFields tiling;
    bool tiling_is_object = true;  // absent: an empty object, whose fields are missing
    std::string workload_key;
  };
  int64_t version = 0;
  std::optional<int64_t> nodes;
  std::vector<Group> groups;
};

Error Malformed(const JsonReader& r) { return Error(ErrorCode::kParse, "plan: " + r.error()); }

std::string GroupWhere(size_t i) { return fmt::format("groups[{}]", i); }

Result<PlanDocument> DocumentFromJson(const json& j) {
  PlanDocument doc;
  // (value() would throw for a "format" that is not a string: plan_json_fuzz)
  if (!j.is_object() || !j.contains("format") || j["format"] != "fusetune-plan")
    return Bad("not a fusetune plan (\"format\" is not \"fusetune-plan\")");
  if (!j.contains("version") || !j["version"].is_number_integer())
    return Bad("\"version\" is missing");
  doc.version = j["version"].get<int64_t>();
  if (j.contains("nodes") && j["nodes"].is_number_integer()) doc.nodes = j["nodes"].get<int64_t>();
  if (!j.contains("groups") || !j["groups"].is_array()) return Bad("\"groups\" is not an array");
  for (size_t i = 0; i < j["groups"].size(); ++i) {
    const json& g = j["groups"][i];
    if (!g.is_object() || !g.contains("nodes") || !g["nodes"].is_array() || g["nodes"].empty())
      return Bad(GroupWhere(i) + ".nodes is not a non-empty array");
    PlanDocument::Group group;
    for (const json& p : g["nodes"]) {
      if (!p.is_number_integer()) return Bad(GroupWhere(i) + ".nodes holds a non-integer");
      group.positions.push_back(p.get<int64_t>());
    }
    if (g.contains("template") && g["template"].is_string()) group.template_name = g["template"];
    if (g.contains("tiling")) {
      const json& t = g["tiling"];
      group.tiling_is_object = t.is_object();
      if (t.is_object()) group.tiling = TilingFieldsFromJson(t);
    }
    if (g.contains("workload_key") && g["workload_key"].is_string())
      group.workload_key = g["workload_key"];
    doc.groups.push_back(std::move(group));
  }
  return doc;
}

// A tiling's fields are scalars; a nested value is kept as null, which the
// tiling reader reports for a field it needs.
bool ReadTilingObject(JsonReader& r, PlanDocument::Group* group) {
  if (r.Peek() != JsonReader::Kind::kObject) {
    group->tiling_is_object = false;
    return r.Skip();
  }
  group->tiling_is_object = true;
  group->tiling.clear();
  group->tiling.reserve(8);  // a GEMM tiling's fields: one allocation
  r.BeginObject();
  std::string_view key;
  while (r.NextKey(&key)) {
    TilingField& field = group->tiling.emplace_back();
    field.name = key;
    switch (r.Peek()) {
      case JsonReader::Kind::kString:
        if (!r.ReadString(&field.value.emplace<std::string>())) return false;
        break;
      case JsonReader::Kind::kBool:
        if (!r.ReadBool(&field.value.emplace<bool>())) return false;
        break;
      case JsonReader::Kind::kNumber: {
        int64_t n = 0;
        double d = 0;
        bool integer = false;
        if (!r.ReadNumber(&n, &d, &integer)) return false;
        if (integer)
          field.value = n;
        else
          field.value = d;
        break;
      }
      default:
        if (!r.Skip()) return false;
    }
  }
  return r.ok();
}

// One element of "groups"; `error` is set for a structure error.
bool ReadGroup(JsonReader& r, size_t i, PlanDocument::Group* group, std::string* error) {
  const auto where = [i] { return GroupWhere(i); };  // only for errors
  if (r.Peek() != JsonReader::Kind::kObject) {
    *error = where() + ".nodes is not a non-empty array";
    return false;
  }
  r.BeginObject();
  bool has_nodes = false;
  std::string_view key;
  while (r.NextKey(&key)) {
    if (key == "nodes") {
      if (r.Peek() != JsonReader::Kind::kArray) {
        *error = where() + ".nodes is not a non-empty array";
        return false;
      }
      r.BeginArray();
      while (r.NextElement()) {
        int64_t position = 0;
        if (r.Peek() != JsonReader::Kind::kNumber || !r.ReadInt(&position)) {
          *error = where() + ".nodes holds a non-integer";
          return false;
        }
        group->positions.push_back(position);
      }
      has_nodes = !group->positions.empty();
    } else if (key == "template" && r.Peek() == JsonReader::Kind::kString) {
      if (!r.ReadString(&group->template_name)) break;
    } else if (key == "workload_key" && r.Peek() == JsonReader::Kind::kString) {
      if (!r.ReadString(&group->workload_key)) break;
    } else if (key == "tiling") {
      if (!ReadTilingObject(r, group)) break;
    } else if (!r.Skip()) {
      break;
    }
  }
  if (r.ok() && !has_nodes) *error = where() + ".nodes is not a non-empty array";
  return r.ok() && has_nodes;
}

Result<PlanDocument> DocumentFromText(std::string_view text) {
  PlanDocument doc;
  JsonReader r(text);
  std::string_view key;
  std::string format;
  bool has_version = false, has_groups = false;
  auto not_a_plan = [] { return Bad("not a fusetune plan (\"format\" is not \"fusetune-plan\")"); };
  if (r.Peek() != JsonReader::Kind::kObject) return r.ok() ? not_a_plan() : Malformed(r);
  r.BeginObject();
  while (r.NextKey(&key)) {
    const JsonReader::Kind kind = r.Peek();
    if (key == "format" && kind == JsonReader::Kind::kString) {
      r.ReadString(&format);
    } else if (key == "version" && kind == JsonReader::Kind::kNumber) {
      double unused = 0;
      if (!r.ReadNumber(&doc.version, &unused, &has_version)) return Malformed(r);
      if (!has_version) return Bad("\"version\" is missing");
    } else if (key == "nodes" && kind == JsonReader::Kind::kNumber) {
      int64_t n = 0;
      double unused = 0;
      bool integer = false;
      if (r.ReadNumber(&n, &unused, &integer) && integer) doc.nodes = n;
    } else if (key == "groups" && kind == JsonReader::Kind::kArray) {
      has_groups = true;
      r.BeginArray();
      while (r.NextElement()) {
        std::string error;
        doc.groups.emplace_back();
        if (!ReadGroup(r, doc.groups.size() - 1, &doc.groups.back(), &error))
          return error.empty() ? Malformed(r) : Bad(error);
      }
    } else {
      r.Skip();
    }
  }
  if (!r.ok()) return Malformed(r);
  if (!r.AtEnd()) return Error(ErrorCode::kParse, "plan: text after the plan object");
  if (format != "fusetune-plan") return not_a_plan();
  if (!has_version) return Bad("\"version\" is missing");
  if (!has_groups) return Bad("\"groups\" is not an array");
  return doc;
}

// With `move_tilings`, a tiling not legal here is replaced by the nearest one
// that is (a plan of the same structure at other sizes).
// `node_at`: the node of each of the document's positions; empty: this
// graph's exact canonical order (Positions).
Result<Plan> PlanFromDocument(FusionSpace& space, const PlanDocument& doc,
                              std::vector<std::string>* workload_keys, bool move_tilings = false,
                              std::vector<int32_t> node_at = {}) {
  if (doc.version != kPlanFormatVersion)
    return Bad(fmt::format("unknown version {} (this fusetune reads version {})", doc.version,
                           kPlanFormatVersion));
  if (node_at.empty()) node_at = Positions(space).node_at;
  const int64_t n = static_cast<int64_t>(space.graph().nodes.size());
  if (doc.nodes && *doc.nodes != n)
    return Bad(
        fmt::format("it was made for a graph of {} nodes; this graph has {}", *doc.nodes, n));
  Plan plan;
  for (size_t i = 0; i < doc.groups.size(); ++i) {
    const PlanDocument::Group& g = doc.groups[i];
    const auto where = [i] { return GroupWhere(i); };  // only for errors
    PlanGroup group;
    for (int64_t position : g.positions) {
      if (position < 0 || position >= n)
        return Bad(
            fmt::format("{}: node {} out of range (the graph has {} nodes)", where(), position, n));
      group.nodes.push_back(node_at[position]);
    }
    std::sort(group.nodes.begin(), group.nodes.end());
    if (std::adjacent_find(group.nodes.begin(), group.nodes.end()) != group.nodes.end())
      return Bad(where() + ".nodes lists a node twice");
    const GroupMatch& m = space.Match(group.nodes);
    if (!m.decision)
      return Bad(fmt::format("{} is not a legal group: {}", where(), m.decision.reason()));
    auto kind = KernelTemplateFromName(g.template_name);
    if (!kind) return Bad(fmt::format("{}.template \"{}\" is unknown", where(), g.template_name));
    if (*kind != m.instance.kind)
      return Bad(fmt::format("{}.template is \"{}\" but the group is a {} kernel", where(),
                             g.template_name, KernelTemplateName(m.instance.kind)));
    const FusionDecision t = g.tiling_is_object ? TilingFromFields(*kind, g.tiling, &group.tiling)
                                                : FusionDecision::Forbid("tiling is not an object");
    if (!t) return Bad(fmt::format("{}.tiling: {}", where(), t.reason()));
    if (move_tilings) {
      const TilingSpace& tilings = space.Tilings(group.nodes);
      if (!tilings.Offers(TilingPrecision(group.tiling)) || !tilings.Check(group.tiling)) {
        std::optional<Tiling> nearest = tilings.Nearest(group.tiling);
        if (!nearest) return Bad(fmt::format("{}.tiling has no legal neighbour here", where()));
        group.tiling = std::move(*nearest);
      }
    }
    plan.groups.push_back(std::move(group));
  }
  const FusionDecision valid = space.Validate(plan);
  if (!valid) return Bad(valid.reason());
  if (workload_keys != nullptr) {
    workload_keys->clear();
    for (const auto& g : doc.groups) workload_keys->push_back(g.workload_key);
  }
  return plan;
}

}  // namespace

Result<Plan> PlanFromJson(FusionSpace& space, const json& j) {
  FT_ASSIGN_OR_RETURN(const PlanDocument doc, DocumentFromJson(j));
  return PlanFromDocument(space, doc, nullptr);
}

Result<Plan> PlanFromJsonText(FusionSpace& space, std::string_view text,
                              std::vector<std::string>* workload_keys) {
  FT_ASSIGN_OR_RETURN(const PlanDocument doc, DocumentFromText(text));
  return PlanFromDocument(space, doc, workload_keys);
}

Result<Plan> MovedPlanFromJsonText(FusionSpace& space, std::string_view text,
                                   std::span<const int32_t> structure_positions) {
  FT_ASSIGN_OR_RETURN(const PlanDocument doc, DocumentFromText(text));
  std::vector<int32_t> node_at;
  if (!structure_positions.empty()) {
    const std::vector<int32_t> here =
        graph::CanonicalizeGraph(space.graph(), graph::KeyScope::kStructure).node_order;
    if (structure_positions.size() != here.size())
      return Bad(fmt::format("its structure order has {} positions; this graph has {} nodes",
                             structure_positions.size(), here.size()));
    for (const int32_t q : structure_positions) {
      if (q < 0 || q >= static_cast<int32_t>(here.size()))
        return Bad(fmt::format("structure position {} out of range", q));
      node_at.push_back(here[q]);
    }
  }
  return PlanFromDocument(space, doc, nullptr, /*move_tilings=*/true, std::move(node_at));
}

std::optional<Tiling> SingleGroupTiling(std::string_view text) {
  auto doc = DocumentFromText(text);
  if (!doc.ok() || doc->groups.size() != 1) return std::nullopt;
  const auto kind = KernelTemplateFromName(doc->groups[0].template_name);
  if (kind == KernelTemplate::kReference) return Tiling{};
  Tiling tiling;
  if (!kind || !doc->groups[0].tiling_is_object ||
      !TilingFromFields(*kind, doc->groups[0].tiling, &tiling))
    return std::nullopt;
  return tiling;
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
  auto plan = PlanFromJsonText(space, text.str());
  if (!plan.ok()) return Error(plan.error().code(), path + ": " + plan.error().message());
  return plan;
}

}  // namespace fusetune::fusion_space
