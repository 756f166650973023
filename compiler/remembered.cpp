#include "compiler/remembered.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/json_reader.h"
#include "fusion_space/kernel_instance.h"
#include "fusion_space/plan_json.h"

namespace fusetune::compiler {

std::string RememberContext(const CompileOptions& options) {
  std::string versions;
  for (const auto& [name, v] : fusion_space::KernelTemplateVersions())
    versions += fmt::format("{}{}={}", versions.empty() ? "" : ",", name, v);
  return fmt::format("choosing v{}; fusetune {}; kernels {}; max_memory {}; model_tilings {}",
                     kChoosingVersion, FUSETUNE_VERSION, versions,
                     options.max_memory_bytes ? std::to_string(*options.max_memory_bytes) : "none",
                     options.max_model_tilings);
}

namespace {

nlohmann::json Optional(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::optional<PlanSource> PlanSourceFromName(std::string_view name) {
  for (PlanSource s : {PlanSource::kWholeModel, PlanSource::kExact, PlanSource::kShapeBucket,
                       PlanSource::kCostModel, PlanSource::kDefault})
    if (name == PlanSourceName(s)) return s;
  return std::nullopt;
}

bool ReadOptional(JsonReader& r, std::optional<double>* out) {
  if (r.Peek() == JsonReader::Kind::kNull) return r.ReadNull();
  return r.ReadDouble(&out->emplace());
}

// [source, cost, measured|null, predicted, loss|null, record, detail]
bool ReadChoice(JsonReader& r, GroupChoice* c, std::string* error) {
  std::string_view source;
  if (!r.BeginArray() || !r.NextElement() || !r.ReadString(&source)) return false;
  const auto kind = PlanSourceFromName(source);
  if (!kind) {
    *error = fmt::format("unknown plan source '{}'", source);
    return false;
  }
  c->source = *kind;
  return r.NextElement() && r.ReadDouble(&c->cost) && r.NextElement() &&
         ReadOptional(r, &c->measured_seconds) && r.NextElement() &&
         r.ReadDouble(&c->predicted_seconds) && r.NextElement() &&
         ReadOptional(r, &c->predicted_loss) && r.NextElement() && r.ReadInt(&c->record_id) &&
         r.NextElement() && r.ReadString(&c->detail) && !r.NextElement();
}

}  // namespace

std::string DecisionsToText(const CompiledPlan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupDecision& d : plan.groups) {
    const GroupChoice& c = d.choice;
    groups.push_back({PlanSourceName(c.source), c.cost, Optional(c.measured_seconds),
                      c.predicted_seconds, Optional(c.predicted_loss), c.record_id, c.detail});
  }
  return nlohmann::json{{"partition", plan.partition},
                        {"model", plan.model},
                        {"predicted_seconds", plan.predicted_seconds},
                        {"scale", plan.scale},
                        {"groups", groups}}
      .dump();
}

Result<RememberedDecisions> DecisionsFromText(std::string_view text) {
  RememberedDecisions out;
  JsonReader r(text);
  std::string error;
  auto bad = [&] {
    return Error(ErrorCode::kParse, "remembered decisions: " + (error.empty() ? r.error() : error));
  };
  if (!r.BeginObject()) return bad();
  std::string_view key;
  while (r.NextKey(&key)) {
    bool read = true;
    if (key == "partition") {
      read = r.ReadString(&out.partition);
    } else if (key == "model") {
      read = r.ReadString(&out.model);
    } else if (key == "predicted_seconds") {
      read = r.ReadDouble(&out.predicted_seconds);
    } else if (key == "scale") {
      read = r.ReadDouble(&out.scale);
    } else if (key == "groups") {
      read = r.BeginArray();
      while (read && r.NextElement()) read = ReadChoice(r, &out.choices.emplace_back(), &error);
    } else {
      read = r.Skip();
    }
    if (!read) return bad();
  }
  if (!r.ok() || !r.AtEnd()) return bad();
  return out;
}

db::CompiledPlanEntry RememberedEntry(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                                      const std::string& target) {
  db::CompiledPlanEntry e;
  e.graph_key = plan.graph_key;
  e.target = target;
  e.context = plan.remember->context;
  e.generation = plan.remember->generation;
  e.plan = fusion_space::PlanToJson(space, plan.plan).dump();
  e.decisions = DecisionsToText(plan);
  return e;
}

}  // namespace fusetune::compiler
