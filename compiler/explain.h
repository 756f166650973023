// What a compiled plan decided and why, for `fusetune compile --explain`,
// the plan file's annotations and the JSON report.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compiler/compile.h"

namespace fusetune::compiler {

// The summary (sources, predicted and measured time, traffic, memory) and,
// per group: its source and why, predicted against measured time, traffic
// saved, and what decided its boundary (a fusion constraint that forbids
// growing it, or the cost of the alternative).
std::string ExplainPlan(fusion_space::FusionSpace& space, const CompiledPlan& plan, bool per_group);

// The plan file (fusion_space/plan_json.h) with each group's provenance
// ("source", "workload_key", "measured_ms" or "predicted_ms",
// "predicted_loss", "record") and a "compiled" summary: loadable by
// `fusetune run --plan` like any plan.
nlohmann::json CompiledPlanFile(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                                const std::string& target);

// The summary alone, for --json.
nlohmann::json CompiledSummaryJson(const CompiledPlan& plan);

}  // namespace fusetune::compiler
