// fusetune run MODEL.onnx --plan PLAN.json --input NAME=x.npy --output-dir out/:
// executes a plan with the runtime (fused kernels, reference kernels for the
// rest) and writes the outputs; --verify compares them with the reference
// executor.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "graph/reference_executor.h"
#include "measure/measurement.h"
#include "runtime/executor.h"

namespace fusetune::cli {

namespace {

struct RunArgs {
  RunIoArgs io;
  std::string plan;
  int threads = 2;
  bool verify = false, json = false, steps = false;
};

int Run(const RunArgs& args) {
  auto graph = LoadModel(args.io.model, args.io.model_options);
  if (!graph.ok()) return ReportError(graph.error());
  kernels::KernelConfig config;
  config.threads = args.threads;
  FusionSpace space(*graph, config);
  auto plan = LoadPlanArg(space, args.plan);
  if (!plan.ok()) return ReportError(plan.error());
  auto feeds = LoadFeeds(*graph, args.io.inputs, args.io.random_seed);
  if (!feeds.ok()) return ReportError(feeds.error());
  auto exe = KernelProgram::Compile(space, *plan);
  if (!exe.ok()) return ReportError(exe.error());
  RunReport report;
  auto result = (*exe)->Run(*feeds, &report);
  if (!result.ok()) return ReportError(result.error());
  auto outputs = WriteOutputs(*graph, *result, args.io.output_dir);
  if (!outputs.ok()) return ReportError(outputs.error());
  nlohmann::json j{{"model", args.io.model},
                   {"plan", args.plan},
                   {"kernels", (*exe)->num_steps()},
                   {"milliseconds", report.seconds * 1e3},
                   {"bytes_global_to_local", report.total.bytes_global_to_local},
                   {"bytes_local_to_global", report.total.bytes_local_to_global},
                   {"arena_bytes", (*exe)->buffers().arena_bytes},
                   {"peak_live_bytes", (*exe)->buffers().peak_live_bytes},
                   {"outputs", *outputs}};
  if (args.verify) {
    auto want = RunReference(*graph, *feeds);
    if (!want.ok()) return ReportError(want.error());
    j["max_scaled_error"] = measure::CompareOutputs(*result, want->outputs);
  }
  if (args.steps)
    for (const StepReport& s : report.steps)
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
      "{})\n",
      args.io.model, args.plan, (*exe)->num_steps(), report.seconds * 1e3,
      HumanBytes(static_cast<double>(report.total.bytes_global_to_local)),
      HumanBytes(static_cast<double>(report.total.bytes_local_to_global)),
      HumanBytes(static_cast<double>((*exe)->buffers().arena_bytes)),
      HumanBytes(static_cast<double>((*exe)->buffers().peak_live_bytes)));
  if (args.steps)
    for (const StepReport& s : report.steps)
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
  cmd->add_option("--plan", args->plan, "Plan JSON file, or 'unfused' or 'greedy'")->required();
  cmd->add_option("--threads", args->threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--verify", args->verify, "Compare the outputs with the reference executor");
  cmd->add_flag("--steps", args->steps, "Report every kernel's time and traffic");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Run(*args)); });
}

}  // namespace fusetune::cli
