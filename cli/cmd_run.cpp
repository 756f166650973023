// fusetune run MODEL.onnx (--db FILE | --plan PLAN.json) --input NAME=x.npy
// --output-dir out/ [--bench N]: compiles the model from the tuning database
// (or loads a plan), executes it with the runtime (fused kernels, reference
// kernels for the rest) and writes the outputs; --verify compares them with
// the reference executor; --bench reports the median latency of N runs.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/compile_args.h"
#include "compiler/explain.h"
#include "graph/analysis.h"
#include "graph/reference_executor.h"
#include "measure/measurement.h"
#include "runtime/executor.h"

namespace fusetune::cli {

namespace {

struct RunArgs {
  RunIoArgs io;
  std::string plan;
  CompileArgs compile;
  bool from_db = false;
  int threads = 2;
  int bench = 0;
  bool verify = false, json = false, steps = false;
};

Result<std::unique_ptr<compiler::CompiledModel>> Prepare(graph::Graph graph, const RunArgs& args,
                                                         TuningSource* source) {
  if (args.from_db) {
    compiler::RememberNote remembered;
    auto model = CompileWithDatabase(std::move(graph), args.threads, args.compile, *source,
                                     /*explain=*/false, &remembered);
    if (model.ok() && !remembered.text.empty() && !remembered.stored)
      fmt::print(stderr, "fusetune: note: {}\n", remembered.text);
    if (model.ok()) WarnAboutFallbacks((*model)->compiled());
    return model;
  }
  kernels::KernelConfig config;
  config.threads = args.threads;
  return compiler::CompiledModel::FromPlan(
      std::move(graph), config,
      [&](fusion_space::FusionSpace& space) { return LoadPlanArg(space, args.plan); });
}

// Median, 10th and 90th percentile of `runs` timed runs after one warm-up.
// With `step_ms`, also each kernel's median over the same runs (the first
// run's step times include page faults and cold caches).
Result<nlohmann::json> Bench(runtime::KernelProgram& program, const graph::TensorMap& feeds,
                             int runs, double flops, std::vector<double>* step_ms) {
  FT_RETURN_IF_ERROR(program.Run(feeds));
  std::vector<double> ms;
  std::vector<std::vector<double>> per_step;
  for (int i = 0; i < runs; ++i) {
    runtime::RunReport report;
    const auto start = std::chrono::steady_clock::now();
    FT_RETURN_IF_ERROR(program.Run(feeds, step_ms != nullptr ? &report : nullptr));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    per_step.resize(report.steps.size());
    for (size_t s = 0; s < report.steps.size(); ++s)
      per_step[s].push_back(report.steps[s].seconds * 1e3);
  }
  auto median_of = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (step_ms != nullptr)
    for (auto& v : per_step) step_ms->push_back(median_of(v));
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[static_cast<size_t>(q * static_cast<double>(ms.size() - 1))];
  };
  const double median = at(0.5);
  return nlohmann::json{{"runs", runs},
                        {"median_ms", median},
                        {"p10_ms", at(0.1)},
                        {"p90_ms", at(0.9)},
                        {"inferences_per_second", 1e3 / median},
                        {"gflops", flops / (median * 1e6)}};
}

int Run(const RunArgs& args) {
  TuningSource source;
  if (args.from_db) {
    auto opened = OpenTuningSource(args.compile);
    if (!opened.ok()) return ReportError(opened.error());
    source = std::move(*opened);
  }
  auto loaded = LoadRunModel(args.io);
  if (!loaded.ok()) return ReportError(loaded.error());
  const double flops = graph::SummarizeGraph(loaded->graph).flops;
  auto model = Prepare(std::move(loaded->graph), args, &source);
  if (!model.ok()) return ReportError(model.error());
  runtime::KernelProgram* exe = &(*model)->program();
  const graph::Graph& g = (*model)->graph();
  runtime::RunReport report;
  auto result = exe->Run(loaded->feeds, &report);
  if (!result.ok()) return ReportError(result.error());
  auto outputs = WriteOutputs(g, *result, args.io.output_dir);
  if (!outputs.ok()) return ReportError(outputs.error());
  const std::string plan_name = args.from_db ? "compiled from " + args.compile.db : args.plan;
  nlohmann::json j{{"model", args.io.model},
                   {"plan", plan_name},
                   {"kernels", exe->num_steps()},
                   {"milliseconds", report.seconds * 1e3},
                   {"bytes_global_to_local", report.total.bytes_global_to_local},
                   {"bytes_local_to_global", report.total.bytes_local_to_global},
                   {"arena_bytes", exe->buffers().arena_bytes},
                   {"peak_live_bytes", exe->buffers().peak_live_bytes},
                   {"packed_weight_bytes", exe->packed_weight_bytes()},
                   {"outputs", *outputs}};
  if (args.from_db) j["compiled"] = compiler::CompiledSummaryJson((*model)->compiled());
  if (args.bench > 0) {
    std::vector<double> step_ms;
    auto bench = Bench(*exe, loaded->feeds, args.bench, flops, args.steps ? &step_ms : nullptr);
    if (!bench.ok()) return ReportError(bench.error());
    j["bench"] = *bench;
    // Steps then report the bench's medians, not the first run's times.
    for (size_t s = 0; s < step_ms.size() && s < report.steps.size(); ++s)
      report.steps[s].seconds = step_ms[s] / 1e3;
  }
  if (args.verify) {
    auto want = graph::RunReference(g, loaded->feeds);
    if (!want.ok()) return ReportError(want.error());
    j["max_scaled_error"] = measure::CompareOutputs(*result, want->outputs);
  }
  if (args.steps)
    for (const runtime::StepReport& s : report.steps)
      j["steps"].push_back({{"kernel", s.kernel},
                            {"tiling", s.tiling},
                            {"milliseconds", s.seconds * 1e3},
                            {"bytes_in", s.stats.bytes_global_to_local},
                            {"bytes_out", s.stats.bytes_local_to_global}});
  if (args.json) {
    PrintJson(j);
    return kExitOk;
  }
  std::cout << fmt::format(
      "ran {} with plan {}: {} kernels in {:.3f} ms, traffic {} in / {} out, arena {} (peak live "
      "{}), pre-packed weights {}\n",
      args.io.model, plan_name, exe->num_steps(), report.seconds * 1e3,
      HumanBytes(static_cast<double>(report.total.bytes_global_to_local)),
      HumanBytes(static_cast<double>(report.total.bytes_local_to_global)),
      HumanBytes(static_cast<double>(exe->buffers().arena_bytes)),
      HumanBytes(static_cast<double>(exe->buffers().peak_live_bytes)),
      HumanBytes(static_cast<double>(exe->packed_weight_bytes())));
  if (args.from_db) {
    std::string sources;
    for (const auto& [source, n] : j["compiled"]["sources"].items())
      sources += fmt::format("{}{} {}", sources.empty() ? "" : ", ", n.get<int>(), source);
    std::cout << fmt::format("  plan sources: {}\n", sources);
  }
  if (args.bench > 0) {
    const auto& b = j["bench"];
    std::cout << fmt::format(
        "  bench: median {:.3f} ms over {} runs (p10 {:.3f}, p90 {:.3f}), {:.1f} inferences/s, "
        "{:.1f} GFLOP/s\n",
        b["median_ms"].get<double>(), args.bench, b["p10_ms"].get<double>(),
        b["p90_ms"].get<double>(), b["inferences_per_second"].get<double>(),
        b["gflops"].get<double>());
  }
  if (args.steps)
    for (const runtime::StepReport& s : report.steps)
      std::cout << fmt::format("  {:8.3f} ms  {:<48}  {}\n", s.seconds * 1e3, s.kernel, s.tiling);
  PrintOutputSummaries(j["outputs"]);
  if (args.verify)
    std::cout << fmt::format(
        "  max error against the reference executor: {:.3g} of the output "
        "scale\n",
        j["max_scaled_error"].get<double>());
  return kExitOk;
}

}  // namespace

void AddRunCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model with a fusion plan");
  AddRunIoOptions(cmd, &args->io);
  auto* plan = cmd->add_option("--plan", args->plan, "Plan JSON file, or 'unfused' or 'greedy'");
  auto* db = cmd->add_option("--db", args->compile.db,
                             "Compile from this tuning database (as `fusetune compile` does)");
  plan->excludes(db);
  AddCompileOptions(cmd, &args->compile);
  cmd->add_option("--bench", args->bench, "Time N runs and report the median latency")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--threads", args->threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--verify", args->verify, "Compare the outputs with the reference executor");
  cmd->add_flag("--steps", args->steps,
                "Report every kernel's time and traffic (with --bench: the median over its runs)");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result, db, plan] {
    args->from_db = db->count() > 0;
    if (!args->from_db && plan->count() == 0) {
      set_result(ReportError(Error(ErrorCode::kInvalidArgument,
                                   "run needs --db FILE (compile from a tuning database) or "
                                   "--plan PLAN.json|unfused|greedy")));
      return;
    }
    set_result(Run(*args));
  });
}

}  // namespace fusetune::cli
