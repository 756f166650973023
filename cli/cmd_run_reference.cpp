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
  RunIoArgs io;
  bool json = false;
};

int Run(const RunReferenceArgs& args) {
  auto loaded = LoadRunModel(args.io);
  if (!loaded.ok()) return ReportError(loaded.error());
  const auto start = std::chrono::steady_clock::now();
  auto result = graph::RunReference(loaded->graph, loaded->feeds);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) return ReportError(result.error());
  auto outputs = WriteOutputs(loaded->graph, result->outputs, args.io.output_dir);
  if (!outputs.ok()) return ReportError(outputs.error());
  nlohmann::json j;
  j["model"] = args.io.model;
  j["milliseconds"] = ms;
  j["outputs"] = *outputs;
  if (args.json) {
    PrintJson(j);
  } else {
    std::cout << fmt::format("ran {} with the reference executor in {:.2f} ms\n", args.io.model,
                             ms);
    PrintOutputSummaries(j["outputs"]);
  }
  return kExitOk;
}

}  // namespace

void AddRunReferenceCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<RunReferenceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run-reference", "Run a model with the reference executor (the correctness oracle)");
  AddRunIoOptions(cmd, &args->io);
  cmd->add_flag("--no-passes", args->io.model_options.no_passes,
                "Skip the graph passes after import");
  cmd->add_flag("--json", args->json, "Print the summary as JSON");
  cmd->callback([args, set_result] { set_result(Run(*args)); });
}

}  // namespace fusetune::cli
