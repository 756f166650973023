// Mixed precision's end-to-end check (target::PrecisionPolicy,
// docs/PRECISION.md). Each bf16 tiling a compile takes was measured within
// the error budget on its own group; errors of several groups add up on the
// way to the outputs, so a plan with bf16 groups is run once against the
// reference executor on random inputs (graph::RandomFeeds, the seed the
// tuner's measurements use) and, while the outputs' error is over the
// budget, groups go back to f32, those that gain least from bf16 first.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/compile.h"
#include "runtime/executor.h"

namespace fusetune::compiler {

// Lowers `plan` (its groups' tilings as they stand) to a program.
using LowerFn = std::function<Result<std::unique_ptr<runtime::KernelProgram>>(
    const fusion_space::Plan& plan)>;

// Checks `compiled` against `error_budget` and demotes groups in place
// (their tilings made f32: the same blocks where they fit, else the
// group's default tiling), returning the report. A plan without bf16 groups
// is left alone and not run. When the check cannot run (the reference
// executor fails on random inputs), every bf16 group is demoted: f32 needs
// no budget.
// For --explain: each bf16 group's error as its record measured it, on the
// group alone (GroupChoice::measured_error); one query per such group.
Status ReadGroupErrors(TuningIndex& index, CompiledPlan* compiled);

Result<PrecisionReport> EnforceErrorBudget(fusion_space::FusionSpace& space,
                                           CompiledPlan& compiled, double error_budget,
                                           const LowerFn& lower);

}  // namespace fusetune::compiler
