// compiler/: compile-time lookup of tuned plans, plan selection, and the
// embedding API (issue 9).
//
// Map of the module: compiler/README.md (what it offers, one line per file).
//
// Sources, best first, never silently: a measured whole-model plan of this
// exact graph; else the plan an earlier compile chose for it from the same
// database state (remembered.h: the choice below, not made again); else,
// at sizes never tuned of a model tuned at others (no group of this size has
// a record), the measured whole-model plan of the nearest tuned size, its
// partition kept and its tilings moved here; else
// per candidate group its exact workload key; else the
// nearest tuned shape of the same structure (its tiling moved to the nearest
// legal tiling here); else the active cost model's best tiling; else the
// template's default. The partition is then the exact minimum over the
// groups' costs (measured, or predicted and scaled by measured/analytical),
// within an optional limit on peak activation memory. With nothing tuned
// and no model, the plan is the greedy plan.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/tuning_index.h"
#include "fusion_space/space.h"

namespace fusetune::compiler {

enum class PlanSource { kWholeModel, kExact, kShapeBucket, kCostModel, kDefault };
const char* PlanSourceName(PlanSource source);  // "whole-model", "exact", ...

// One candidate group's best known plan.
struct GroupChoice {
  fusion_space::Tiling tiling;
  PlanSource source = PlanSource::kDefault;
  double cost = 0;  // seconds the partition compares: measured, else predicted
  std::optional<double> measured_seconds;
  double predicted_seconds = 0;  // analytical x scale, of `tiling`
  // Expected fraction slower than a tuned plan of this group: 0 for
  // measured plans, nullopt where nothing estimates it.
  std::optional<double> predicted_loss;
  int64_t record_id = 0;  // the record the tiling comes from (exact, bucket)
  std::string detail;     // how the source was found, for --explain
  // A bf16 tiling's error measured on the group alone (its record's), for
  // --explain (CompileOptions::explain_alternatives).
  std::optional<double> measured_error;
};

// One group of the compiled plan, in kernel order.
struct GroupDecision {
  int32_t candidate = -1;  // index in space.candidates().groups; -1 for whole-model plans
  std::vector<int32_t> nodes;
  std::string workload_key;
  fusion_space::KernelTemplate kind = fusion_space::KernelTemplate::kReference;
  std::string kernel;  // the instance summary
  GroupChoice choice;
  double bytes = 0;          // analytical traffic at the group's boundary
  double unfused_bytes = 0;  // the same for its nodes as separate kernels
};

struct CompileOptions {
  std::optional<int64_t> max_memory_bytes;  // peak bytes of live intermediates
  bool whole_model_plans = true;
  int64_t max_model_tilings = 4096;  // tilings the cost model ranks per group
  // Fill CompiledPlan::target even when no group needed a prediction (a
  // whole-model plan): `--explain` shows each kernel's analytical parts.
  bool target_features = false;
  // Take a remembered compile of this graph when the database holds one
  // (remembered.h), and mark a plan chosen from its groups for remembering.
  // Off for --explain, which shows the candidates a remembered plan skips.
  bool remembered_plans = true;
  // Compare each measured conv choice with the fastest record of another
  // algorithm (one more query per conv workload): for --explain.
  bool explain_alternatives = false;
  // A mixed precision policy's error budget (target::PrecisionPolicy; 0:
  // f32): a plan with bf16 groups is checked end to end and groups go back
  // to f32 until its outputs are within it (CompiledModel::Compile,
  // precision_check.h).
  double error_budget = 0;
};

// What mixed precision's end-to-end check found (precision_check.h), for
// --explain and the JSON report.
struct PrecisionReport {
  double error_budget = 0;
  int bf16_groups = 0;  // in the plan after the check
  int demoted = 0;      // groups the check put back to f32
  // The largest error of the plan's outputs, each relative to its own
  // largest magnitude (measure::CompareOutputs), against the reference.
  std::optional<double> end_to_end_error;
  std::string note;  // why the check could not measure, when it could not
};

// Where a plan chosen from its groups would be remembered (remembered.h).
struct RememberKey {
  std::string context;     // RememberContext(options)
  int64_t generation = 0;  // the database's, read before the compile's lookups
};

struct CompiledPlan {
  fusion_space::Plan plan;
  std::vector<GroupDecision> groups;  // one per plan group
  std::string graph_key;
  std::optional<int64_t> whole_model_record;
  std::string partition;  // how the partition was chosen, one line
  double predicted_seconds = 0;
  std::optional<double> measured_seconds;  // whole-model plans
  int64_t peak_bytes = 0;
  double bytes = 0, unfused_bytes = 0;
  double scale = 1;  // median measured / analytical time over exact hits
  // The machine the analytical parts are for: set when groups were
  // predicted, or when CompileOptions::target_features asks for it.
  std::optional<cost_model::TargetFeatures> target;
  std::map<PlanSource, int> count;
  std::string model;  // the cost model consulted, or "none"
  // Per candidate group (empty for whole-model and remembered plans), for explanations.
  std::vector<GroupChoice> candidates;
  // A plan chosen from its groups, when it can be remembered: under what.
  std::optional<RememberKey> remember;
  // A remembered plan: the database generation it was chosen at.
  std::optional<int64_t> remembered_generation;
  double lookup_seconds = 0;
  std::optional<PrecisionReport> precision;  // set when CompileOptions::error_budget was
};

Result<CompiledPlan> CompileGraph(fusion_space::FusionSpace& space, TuningIndex& index,
                                  const CompileOptions& options = {});

// The group's plan from a stored one-group plan: its tiling when it fits
// `tilings`, else the legal tiling nearest to it (parameter by parameter).
std::optional<fusion_space::Tiling> TilingFromRecordPlan(const std::string& plan_json,
                                                         fusion_space::KernelTemplate kind,
                                                         const fusion_space::TilingSpace& tilings);

}  // namespace fusetune::compiler
