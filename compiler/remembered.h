// Remembered compiles (issue 9 point 4). A plan chosen from group records
// costs a compile the enumeration of every candidate group, each group's
// choice and the partition: milliseconds for a 12-layer model, where a
// measured whole-model plan is read in place in half a millisecond. So a
// plan chosen from its groups is stored in the tuning database
// (db::CompiledPlanEntry) with the database generation its compile read and
// what else shaped it (the context below). A later compile of the same
// graph and context reads it as it would a whole-model record while the
// generation has not moved: the same plan, the same provenance per group,
// not chosen again. Any commit that could change the choice (a record, a
// best plan, a cost model, a calibration) moves the generation, and the
// next compile chooses anew and remembers that.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/compile.h"
#include "db/database.h"

namespace fusetune::compiler {

// Bumped whenever the compiler chooses differently from the same records
// (choices, costs, partition): remembered plans of older logic go unused.
inline constexpr int kChoosingVersion = 2;  // 2: untuned sizes move the nearest tuned plan

// What shapes a choice beside the database and the graph: the options,
// kChoosingVersion, this build's version and kernel template versions.
std::string RememberContext(const CompileOptions& options);

// What a remembered plan keeps beside the plan file: the partition's line,
// the predicted time, scale and cost model, and each group's choice in
// kernel order (its tiling is the plan's).
struct RememberedDecisions {
  std::string partition, model;
  double predicted_seconds = 0, scale = 1;
  std::vector<GroupChoice> choices;
};
std::string DecisionsToText(const CompiledPlan& plan);
Result<RememberedDecisions> DecisionsFromText(std::string_view text);

// The entry that remembers `plan` (chosen from its groups: plan.remember is set).
db::CompiledPlanEntry RememberedEntry(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                                      const std::string& target);

}  // namespace fusetune::compiler
