// fusetune compile MODEL.onnx --db FILE -o PLAN.json [--explain]: the
// compile-time lookup. Every group's plan says where it came from; groups
// that are not exact hits are counted on stderr with their predicted loss.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <optional>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/compile_args.h"
#include "cli/compile_buckets.h"
#include "compiler/explain.h"
#include "compiler/fused_export.h"
#include "graph/model_file.h"
#include "search/tuned_sizes.h"
#include "target/target.h"

namespace fusetune::cli {

namespace {

struct CompileCommandArgs {
  std::string model;
  ModelOptions model_options;
  CompileArgs compile;
  std::string output, export_onnx;
  int threads = 2;
  bool explain = false, json = false;
};

Status WriteJsonFile(const nlohmann::json& j, const std::string& path) {
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (!out) return Error(ErrorCode::kIo, "cannot write " + path);
  return Status::Ok();
}

// Several sizes (--dim seq=1,16,64): each bucket's plan and where between
// neighbours the plan switches (compile_buckets.h).
int CompileBuckets(const CompileCommandArgs& args, TuningSource& source) {
  if (!args.output.empty() || !args.export_onnx.empty() || args.json)
    return ReportError(Error(ErrorCode::kInvalidArgument,
                             "several sizes compile one plan each: -o, --export-onnx and "
                             "--json take one value per dimension (--dim NAME=VALUE)"));
  auto report = ExplainBuckets(args.model, args.model_options, args.threads, args.compile, source);
  if (!report.ok()) return ReportError(report.error());
  std::cout << fmt::format("model       {}\n", args.model) << *report;
  return kExitOk;
}

// A model whose symbolic dimensions --dim leaves unbound, compiled at the
// sizes its tuning jobs recorded in the database (search/tuned_sizes.h):
// the arguments with those sizes bound, or nothing when the model has no
// such dimension or the database no such sizes.
std::optional<CompileCommandArgs> WithTunedSizes(const CompileCommandArgs& args,
                                                 TuningSource& source) {
  auto facts = graph::ReadModelFileFacts(args.model);
  auto bound = BoundDims(args.model_options);
  if (!facts.ok() || !bound.ok()) return std::nullopt;
  auto sizes = search::TunedSizes(*source.database, facts->key);
  if (!sizes.ok()) return std::nullopt;
  CompileCommandArgs with = args;
  std::vector<std::string> named;
  for (const std::string& dim : facts->symbolic_dims) {
    if (bound->count(dim)) continue;
    const auto tuned = sizes->find(dim);
    if (tuned == sizes->end()) return std::nullopt;
    named.push_back(fmt::format("{}={}", dim, fmt::join(tuned->second, ",")));
    with.model_options.dims.push_back(named.back());
  }
  if (named.empty()) return std::nullopt;
  fmt::print(stderr, "fusetune: note: --dim {}: the sizes {} was tuned at for this model\n",
             fmt::join(named, " --dim "), args.compile.db);
  return with;
}

int CompileWith(const CompileCommandArgs& args, TuningSource& source) {
  auto buckets = ExpandDimBuckets(args.model_options);
  if (!buckets.ok()) return ReportError(buckets.error());
  if (buckets->size() > 1) return CompileBuckets(args, source);
  auto graph = LoadModel(args.model, args.model_options);
  if (!graph.ok()) {
    // Only a model with unbound symbolic dimensions finds sizes (the
    // parse runs once more on this path only, not on every compile).
    if (auto with = WithTunedSizes(args, source)) return CompileWith(*with, source);
    return ReportError(graph.error());
  }
  compiler::RememberNote remembered;
  auto model = CompileWithDatabase(std::move(*graph), args.threads, args.compile, source,
                                   args.explain, &remembered);
  if (!model.ok()) return ReportError(model.error());
  compiler::CompiledModel& m = **model;
  const compiler::CompiledPlan& plan = m.compiled();
  const std::string target =
      source.index->target();  // the cache protocol and precision policy read
  if (!args.output.empty()) {
    auto written = WriteJsonFile(compiler::CompiledPlanFile(m.space(), plan, target), args.output);
    if (!written.ok()) return ReportError(written.error());
  }
  if (!args.export_onnx.empty()) {
    auto exported = compiler::ExportFusedOnnx(m.space(), plan, args.export_onnx);
    if (!exported.ok()) return ReportError(exported.error());
  }
  WarnAboutFallbacks(plan);
  if (args.json) {
    nlohmann::json j = compiler::CompiledSummaryJson(plan);
    j["model"] = args.model;
    j["lowering_ms"] = m.lowering_seconds() * 1e3;
    if (!args.output.empty()) j["plan"] = args.output;
    if (!remembered.text.empty()) j["remembered"] = remembered.text;
    if (args.explain) j["groups"] = compiler::CompiledPlanFile(m.space(), plan, target)["groups"];
    PrintJson(j);
    return kExitOk;
  }
  std::cout << fmt::format("model       {}\n", args.model)
            << compiler::ExplainPlan(m.space(), plan, args.explain)
            << fmt::format("compile     lookup and partition {:.3f} ms, lowering {:.3f} ms\n",
                           plan.lookup_seconds * 1e3, m.lowering_seconds() * 1e3);
  if (!remembered.text.empty()) std::cout << fmt::format("note        {}\n", remembered.text);
  if (!args.output.empty()) std::cout << fmt::format("wrote       {}\n", args.output);
  if (!args.export_onnx.empty()) std::cout << fmt::format("wrote       {}\n", args.export_onnx);
  return kExitOk;
}

int Compile(const CompileCommandArgs& args) {
  auto source = OpenTuningSource(args.compile);
  if (!source.ok()) return ReportError(source.error());
  return CompileWith(args, *source);
}

}  // namespace

void AddCompileCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<CompileCommandArgs>();
  CLI::App* cmd =
      app.add_subcommand("compile", "Compile a model with the plans of a tuning database");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_option("--db", args->compile.db, "Tuning database")->capture_default_str();
  cmd->add_option("-o,--output", args->output, "Write the plan (JSON) here");
  cmd->add_option("--export-onnx", args->export_onnx,
                  "Write the fused graph as ONNX: one ai.fusetune node per kernel");
  cmd->add_option("--dim", args->model_options.dims,
                  "Bind a symbolic dimension: NAME=VALUE (repeatable); NAME=V1,V2,... or "
                  "NAME=LO..HI compiles each size and shows where the plan switches between "
                  "them; without --dim, the sizes the database was tuned at for this model");
  AddValueOption(cmd, &args->model_options);
  cmd->add_option("--threads", args->threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  AddCompileOptions(cmd, &args->compile);
  cmd->add_flag("--explain", args->explain,
                "Print every kernel's decision: source, time, traffic, what bounded it");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Compile(*args)); });
}

}  // namespace fusetune::cli
