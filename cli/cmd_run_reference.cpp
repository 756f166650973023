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

// Output files are named after the output; characters that cannot be in a
// file name become '_'.
std::string FileNameFor(const std::string& output) {
  std::string s = output;
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':' || c == '\0') c = '_';
  return s + ".npy";
}

Result<TensorMap> LoadFeeds(const Graph& graph, const RunReferenceArgs& args) {
  if (args.random_seed >= 0) {
    if (!args.inputs.empty())
      return Error(ErrorCode::kInvalidArgument, "--input and --random-inputs cannot be combined");
    return RandomFeeds(graph, static_cast<uint64_t>(args.random_seed));
  }
  FT_ASSIGN_OR_RETURN(auto pairs, ParseAssignments(args.inputs, "--input"));
  TensorMap feeds;
  for (const auto& [name, path] : pairs) {
    FT_ASSIGN_OR_RETURN(Tensor t, ReadNpy(path));
    feeds[name] = std::move(t);
  }
  for (ValueId v : graph.inputs)
    if (!feeds.count(graph.value(v).name))
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("input '{}' ({}) has no --input {}=FILE.npy", graph.value(v).name,
                               graph.type(v).ToString(), graph.value(v).name));
  return feeds;
}

int Run(const RunReferenceArgs& args) {
  auto graph = LoadModel(args.model, args.model_options);
  if (!graph.ok()) return ReportError(graph.error());
  auto feeds = LoadFeeds(*graph, args);
  if (!feeds.ok()) return ReportError(feeds.error());
  const auto start = std::chrono::steady_clock::now();
  auto result = RunReference(*graph, *feeds);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) return ReportError(result.error());
  std::error_code ec;
  if (!args.output_dir.empty()) {
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec)
      return ReportError(Error(
          ErrorCode::kIo, fmt::format("cannot create '{}': {}", args.output_dir, ec.message())));
  }
  nlohmann::json j;
  j["model"] = args.model;
  j["milliseconds"] = ms;
  for (ValueId v : graph->outputs) {
    const std::string& name = graph->value(v).name;
    const Tensor& t = result->outputs.at(name);
    nlohmann::json o{{"name", name}, {"dtype", DataTypeName(t.dtype())}, {"shape", t.dims()}};
    if (!args.output_dir.empty()) {
      const std::string path =
          (std::filesystem::path(args.output_dir) / FileNameFor(name)).string();
      auto status = WriteNpy(path, t);
      if (!status.ok()) return ReportError(status.error());
      o["file"] = path;
    }
    double sum = 0, sum_abs = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      sum += t.GetAsDouble(i);
      sum_abs += std::abs(t.GetAsDouble(i));
    }
    o["mean"] = t.numel() ? sum / t.numel() : 0.0;
    o["mean_abs"] = t.numel() ? sum_abs / t.numel() : 0.0;
    j["outputs"].push_back(o);
  }
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
