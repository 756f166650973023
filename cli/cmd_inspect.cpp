// fusetune inspect MODEL.onnx: what a model contains and what it costs.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "graph/analysis.h"
#include "graph/text_format.h"
#include "graph/workload_key.h"

namespace fusetune::cli {

namespace {

struct InspectArgs {
  std::string model;
  ModelOptions model_options;
  bool json = false;
  bool nodes = false;
  bool text = false;
};

nlohmann::json TypeJson(const graph::Graph& g, graph::ValueId v) {
  return {{"name", g.value(v).name},
          {"dtype", graph::DataTypeName(g.type(v).dtype)},
          {"shape", g.type(v).dims},
          {"type", g.type(v).ToString()}};
}

nlohmann::json BuildReport(const graph::Graph& g, const std::string& path, bool with_nodes) {
  const graph::GraphSummary summary = graph::SummarizeGraph(g);
  const graph::LayerStructure layers = graph::FindLayers(g);
  nlohmann::json j;
  j["model"] = path;
  j["opset"] = g.opset;
  j["nodes"] = summary.nodes;
  j["parameters"] = summary.parameters;
  j["parameter_bytes"] = summary.parameter_bytes;
  j["flops"] = summary.flops;
  j["bytes"] = summary.bytes;
  j["graph_key"] = graph::CanonicalizeGraph(g).key.ToString();
  for (graph::ValueId v : g.inputs) j["inputs"].push_back(TypeJson(g, v));
  for (graph::ValueId v : g.outputs) j["outputs"].push_back(TypeJson(g, v));
  j["op_types"] = nlohmann::json::array();
  for (const auto& [op, s] : summary.by_op_type)
    j["op_types"].push_back(
        {{"op_type", op}, {"count", s.count}, {"flops", s.flops}, {"bytes", s.bytes}});
  auto blocks = [&](const std::vector<graph::RepeatedBlock>& list) {
    nlohmann::json arr = nlohmann::json::array();
    for (const graph::RepeatedBlock& b : list)
      arr.push_back({{"key", b.key.ToString()},
                     {"count", b.count},
                     {"nodes", b.instances[0].size()},
                     {"flops", b.flops},
                     {"first_node", b.instances[0].front()}});
    return arr;
  };
  j["layers"] = blocks(layers.layers);
  j["segments"] = blocks(layers.segment_keys);
  if (with_nodes) {
    for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n) {
      const graph::NodeCost c = graph::ComputeNodeCost(g, n);
      const graph::Node& node = g.nodes[n];
      j["node_costs"].push_back(
          {{"index", n},
           {"name", node.name},
           {"op_type", node.op_type},
           {"output", node.outputs.empty() || node.outputs[0] == graph::kNoValue
                          ? ""
                          : g.type(node.outputs[0]).ToString()},
           {"flops", c.flops},
           {"bytes_read", c.bytes_read},
           {"bytes_written", c.bytes_written}});
    }
  }
  return j;
}

void PrintInspectReport(const nlohmann::json& j) {
  std::cout << fmt::format("model      {}  (opset {}, {} nodes)\n", j["model"].get<std::string>(),
                           j["opset"].get<int64_t>(), j["nodes"].get<int64_t>());
  for (const auto& v : j["inputs"])
    std::cout << fmt::format("input      {}: {}\n", v["name"].get<std::string>(),
                             v["type"].get<std::string>());
  for (const auto& v : j["outputs"])
    std::cout << fmt::format("output     {}: {}\n", v["name"].get<std::string>(),
                             v["type"].get<std::string>());
  std::cout << fmt::format("parameters {} ({})\n", HumanCount(j["parameters"].get<double>()),
                           HumanBytes(j["parameter_bytes"].get<double>()));
  const double flops = j["flops"].get<double>();
  std::cout << fmt::format("work       {}FLOP, {} read+written by ops\n", HumanCount(flops),
                           HumanBytes(j["bytes"].get<double>()));
  std::cout << fmt::format("graph key  {}\n\n", j["graph_key"].get<std::string>());
  std::cout << fmt::format("{:<22}{:>7}{:>14}{:>8}{:>14}\n", "op type", "count", "FLOP", "%FLOP",
                           "bytes");
  std::vector<nlohmann::json> ops(j["op_types"].begin(), j["op_types"].end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return a["flops"].template get<double>() > b["flops"].template get<double>();
  });
  for (const auto& op : ops) {
    const double f = op["flops"].get<double>();
    std::cout << fmt::format("{:<22}{:>7}{:>14}{:>7.1f}%{:>14}\n", op["op_type"].get<std::string>(),
                             op["count"].get<int64_t>(), HumanCount(f),
                             flops > 0 ? 100.0 * f / flops : 0.0,
                             HumanBytes(op["bytes"].get<double>()));
  }
  std::cout << "\nrepeated layers (workload key, occurrences, nodes each, FLOP each):\n";
  if (j["layers"].empty()) std::cout << "  none: no block of nodes repeats\n";
  for (const auto& b : j["layers"])
    std::cout << fmt::format("  {}  x{}  {} nodes  {}FLOP\n", b["key"].get<std::string>(),
                             b["count"].get<int64_t>(), b["nodes"].get<int64_t>(),
                             HumanCount(b["flops"].get<double>()));
  std::cout << fmt::format("\nsegments between single-activation cuts: {} distinct\n",
                           j["segments"].size());
  for (const auto& b : j["segments"])
    std::cout << fmt::format("  {}  x{}  {} nodes  {}FLOP  (first at node {})\n",
                             b["key"].get<std::string>(), b["count"].get<int64_t>(),
                             b["nodes"].get<int64_t>(), HumanCount(b["flops"].get<double>()),
                             b["first_node"].get<int64_t>());
  if (j.contains("node_costs")) {
    std::cout << fmt::format("\n{:>5}  {:<20}{:<26}{:>12}{:>12}{:>12}\n", "#", "op", "output",
                             "FLOP", "read", "written");
    for (const auto& n : j["node_costs"])
      std::cout << fmt::format("{:>5}  {:<20}{:<26}{:>12}{:>12}{:>12}\n", n["index"].get<int64_t>(),
                               n["op_type"].get<std::string>(), n["output"].get<std::string>(),
                               HumanCount(n["flops"].get<double>()),
                               HumanBytes(n["bytes_read"].get<double>()),
                               HumanBytes(n["bytes_written"].get<double>()));
  }
}

}  // namespace

void AddInspectCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Show a model's ops, parameters, FLOPs, bytes and repeated layers");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_option("--dim", args->model_options.dims,
                  "Bind a symbolic dimension: NAME=VALUE (repeatable)");
  AddValueOption(cmd, &args->model_options);
  cmd->add_flag("--no-passes", args->model_options.no_passes, "Skip the graph passes after import");
  cmd->add_flag("--nodes", args->nodes, "Also list FLOPs and bytes per node");
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  cmd->add_flag("--text", args->text,
                "Print the graph (after the passes) in the text form tests use, with types");
  cmd->callback([args, set_result] {
    auto graph = LoadModel(args->model, args->model_options);
    if (!graph.ok()) return set_result(ReportError(graph.error()));
    if (args->text) {
      graph::TextPrintOptions options;
      options.print_types = true;
      std::cout << graph::PrintGraphText(*graph, options);
      return set_result(kExitOk);
    }
    const nlohmann::json report = BuildReport(*graph, args->model, args->nodes);
    if (args->json)
      PrintJson(report);
    else
      PrintInspectReport(report);
    set_result(kExitOk);
  });
}

}  // namespace fusetune::cli
