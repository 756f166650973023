#include "compiler/model.h"

#include "compiler/precision_check.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "compiler/remembered.h"
#include "cost_model/features.h"
#include "target/target.h"

namespace fusetune::compiler {

Result<std::unique_ptr<db::Database>> OpenTuningDatabase(const std::string& path) {
  if (!std::filesystem::exists(path))
    return Error(ErrorCode::kNotFound,
                 path + ": no such tuning database (`fusetune tune` writes one)");
  db::OpenOptions open;
  open.create = false;
  open.read_only = true;
  FT_ASSIGN_OR_RETURN(auto database, db::MakeSqliteDatabase(path, open));
  if (database->Generation().ok()) return database;
  // A file of an older schema reads as it is, without remembered compiles:
  // migrate it once where it is writable (as any writer would), so that
  // this compile's plan can be remembered.
  db::OpenOptions migrate;
  migrate.create = false;
  if (!db::MakeSqliteDatabase(path, migrate).ok()) return database;
  return db::MakeSqliteDatabase(path, open);
}

Result<std::unique_ptr<TuningIndex>> LoadIndexForThisMachine(
    db::Database& database, target::CacheProtocol caches,
    const target::PrecisionPolicy& precision) {
  const std::string target = target::ThisMachineKey(caches, precision);
  return TuningIndex::Load(database, target, caches);
}

namespace {

Result<bool> StoreCompiledPlan(const std::string& db_path, CompiledModel& model,
                               const std::string& target) {
  db::OpenOptions open;
  open.create = false;
  open.sync_full = false;  // a lost entry costs one compile, not a measurement
  FT_ASSIGN_OR_RETURN(auto database, db::MakeSqliteDatabase(db_path, open));
  return database->PutCompiledPlan(RememberedEntry(model.space(), model.compiled(), target));
}

}  // namespace

RememberNote RememberCompiledPlan(const std::string& db_path, CompiledModel& model,
                                  const std::string& target) {
  RememberNote note;
  if (!model.compiled().remember) return note;
  const auto start = std::chrono::steady_clock::now();
  const auto stored = StoreCompiledPlan(db_path, model, target);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!stored.ok())
    note.text = "plan not remembered for later compiles: " + stored.error().ToString();
  else if (!*stored)
    note.text = "plan not remembered: the database changed while compiling";
  else
    note.text = fmt::format("plan remembered for later compiles of this model ({:.1f} ms)", ms);
  note.stored = stored.ok() && *stored;
  return note;
}

CompiledModel::CompiledModel(graph::Graph graph, kernels::KernelConfig config)
    : graph_(std::make_unique<const graph::Graph>(std::move(graph))),
      space_(std::make_unique<fusion_space::FusionSpace>(*graph_, config)) {}

Status CompiledModel::Lower() {
  const auto start = std::chrono::steady_clock::now();
  FT_ASSIGN_OR_RETURN(program_, runtime::KernelProgram::Compile(*space_, compiled_.plan));
  lowering_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

Result<std::unique_ptr<CompiledModel>> CompiledModel::Compile(graph::Graph graph,
                                                              kernels::KernelConfig config,
                                                              TuningIndex& index,
                                                              const CompileOptions& options) {
  std::unique_ptr<CompiledModel> model(new CompiledModel(std::move(graph), config));
  FT_ASSIGN_OR_RETURN(model->compiled_, CompileGraph(*model->space_, index, options));
  // A whole-model plan was verified within the budget when it was measured
  // (the tuner's tolerance for bf16 candidates), a remembered one when it
  // was remembered: only a plan chosen from group records is checked here.
  CompiledPlan& chosen = model->compiled_;
  if (options.error_budget > 0 && (chosen.whole_model_record || chosen.remembered_generation)) {
    chosen.precision.emplace();
    chosen.precision->error_budget = options.error_budget;
    chosen.precision->bf16_groups = fusion_space::CountBf16Groups(chosen.plan);
  } else if (options.error_budget > 0) {
    fusion_space::FusionSpace& space = *model->space_;
    FT_ASSIGN_OR_RETURN(model->compiled_.precision,
                        EnforceErrorBudget(space, model->compiled_, options.error_budget,
                                           [&](const fusion_space::Plan& plan) {
                                             return runtime::KernelProgram::Compile(space, plan);
                                           }));
  }
  FT_RETURN_IF_ERROR(model->Lower());
  return model;
}

Result<std::unique_ptr<CompiledModel>> CompiledModel::FromPlan(
    graph::Graph graph, kernels::KernelConfig config,
    const std::function<Result<fusion_space::Plan>(fusion_space::FusionSpace&)>& make_plan) {
  std::unique_ptr<CompiledModel> model(new CompiledModel(std::move(graph), config));
  FT_ASSIGN_OR_RETURN(model->compiled_.plan, make_plan(*model->space_));
  FT_RETURN_IF_ERROR(model->Lower());
  return model;
}

}  // namespace fusetune::compiler
