// A model ready to run, owned in one piece: the graph, its fusion space, the
// compiled plan and the kernel program lowered from it (the program and the
// space refer to the graph, so they live and die together).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "compiler/compile.h"
#include "db/database.h"
#include "runtime/executor.h"
#include "target/target.h"

namespace fusetune::compiler {

// Opens a tuning database for compiling: read-only, and it must exist. A
// file of an older schema is first migrated when it is writable.
Result<std::unique_ptr<db::Database>> OpenTuningDatabase(const std::string& path);

// The tuning index of this machine under a cache protocol and a precision
// policy: its target key (target::TargetKey), the calibration stored for it
// (the cost model's target features) and its best plans.
Result<std::unique_ptr<TuningIndex>> LoadIndexForThisMachine(
    db::Database& database, target::CacheProtocol caches = target::CacheProtocol::kFlushed,
    const target::PrecisionPolicy& precision = {});

class CompiledModel;

// What remembering a compiled plan came to, for the user: `text` is empty
// when there was nothing to remember (a whole-model or remembered plan, or
// remembering off); a failure to store is a note, never an error.
struct RememberNote {
  bool stored = false;
  std::string text;
};
// Remembers `model`'s plan for later compiles of its graph (remembered.h)
// when it was chosen from its groups (CompiledPlan::remember): opens the
// database at `db_path` writable for the write, which migrates an older
// file. Nothing is stored when a commit since the compile read the
// database made its choice out of date.
RememberNote RememberCompiledPlan(const std::string& db_path, CompiledModel& model,
                                  const std::string& target);

class CompiledModel {
 public:
  // Looks the graph's groups up in `index`, selects the partition, lowers it.
  static Result<std::unique_ptr<CompiledModel>> Compile(graph::Graph graph,
                                                        kernels::KernelConfig config,
                                                        TuningIndex& index,
                                                        const CompileOptions& options = {});
  // Lowers the plan `make_plan` builds in the model's space (a plan file,
  // validated against the graph, or a baseline plan).
  static Result<std::unique_ptr<CompiledModel>> FromPlan(
      graph::Graph graph, kernels::KernelConfig config,
      const std::function<Result<fusion_space::Plan>(fusion_space::FusionSpace&)>& make_plan);

  const graph::Graph& graph() const { return *graph_; }
  fusion_space::FusionSpace& space() { return *space_; }
  const CompiledPlan& compiled() const { return compiled_; }  // from a file: plan only
  runtime::KernelProgram& program() { return *program_; }
  const runtime::KernelProgram& program() const { return *program_; }
  double lowering_seconds() const { return lowering_seconds_; }

 private:
  CompiledModel(graph::Graph graph, kernels::KernelConfig config);
  Status Lower();

  std::unique_ptr<const graph::Graph> graph_;
  std::unique_ptr<fusion_space::FusionSpace> space_;
  CompiledPlan compiled_;
  std::unique_ptr<runtime::KernelProgram> program_;
  double lowering_seconds_ = 0;
};

}  // namespace fusetune::compiler
