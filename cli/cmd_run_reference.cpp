// fusetune run-reference MODEL.onnx --input NAME=x.npy ... --output-dir DIR:
// runs the reference executor and writes one .npy per graph output.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "graph/npy.h"
#include "graph/reference_executor.h"

namespace fusetune::cli {

namespace {

struct RunReferenceArgs {
  std::string model;
  ModelOptions model_options;
  std::vector<std::string> inputs;
  std::string output_dir;
  int64_t random_seed = -1;
  bool json = false;
};

int Run(const RunReferenceArgs& args) {
  auto graph = LoadModel(args.model, args.model_options);
  if (!graph.ok()) return ReportError(graph.error());
  auto feeds = LoadFeeds(*graph, args.inputs, args.random_seed);
  if (!feeds.ok()) return ReportError(feeds.error());
  const auto start = std::chrono::steady_clock::now();
  auto result = RunReference(*graph, *feeds);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) return ReportError(result.error());
  auto outputs = WriteOutputs(*graph, result->outputs, args.output_dir);
  if (!outputs.ok()) return ReportError(outputs.error());
  nlohmann::json j;
  j["model"] = args.model;
  j["milliseconds"] = ms;
  j["outputs"] = *outputs;
  if (args.json) {
    PrintJson(j);
  } else {
    std::cout << fmt::format("ran {} with the reference executor in {:.2f} ms\n", args.model, ms);
    for (const auto& o : j["outputs"])
      std::cout << fmt::format("  {}: {}{}  mean {:.6g}  mean|x| {:.6g}{}\n",
                               o["name"].get<std::string>(), o["dtype"].get<std::string>(),
                               DimsToString(o["shape"].get<Dims>()), o["mean"].get<double>(),
                               o["mean_abs"].get<double>(),
                               o.contains("file") ? "  -> " + o["file"].get<std::string>() : "");
  }
  return kExitOk;
}

}  // namespace

void AddRunReferenceCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<RunReferenceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run-reference", "Run a model with the reference executor (the correctness oracle)");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_option("--input", args->inputs, "Graph input from a .npy file: NAME=FILE (repeatable)");
  cmd->add_option("--random-inputs", args->random_seed,
                  "Generate every input from this seed instead of --input");
  cmd->add_option("--output-dir", args->output_dir, "Write one NAME.npy per graph output here");
  cmd->add_option("--dim", args->model_options.dims,
                  "Bind a symbolic dimension: NAME=VALUE (repeatable)");
  cmd->add_flag("--no-passes", args->model_options.no_passes, "Skip the graph passes after import");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Run(*args)); });
}

}  // namespace fusetune::cli
