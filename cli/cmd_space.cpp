// fusetune space MODEL.onnx: the fusion space of a model. Candidate groups by
// template, the size of the partition space, and the greedy plan with its
// analytical traffic against the unfused plan; optionally saves plans.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <set>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "fusion_space/partition.h"
#include "fusion_space/plan_json.h"

namespace fusetune::cli {

namespace {

struct SpaceArgs {
  std::string model;
  ModelOptions model_options;
  bool json = false;
  bool list = false;
  int max_group_size = 12;
  int threads = 2;
  int64_t local_buffer = 0;
  std::string save_greedy, save_unfused;
};

nlohmann::json PlanSummary(fusion_space::FusionSpace& space, const fusion_space::Plan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  for (const fusion_space::PlanGroup& g : plan.groups) {
    const fusion_space::KernelInstance& k = space.Match(g.nodes).instance;
    groups.push_back({{"nodes", g.nodes},
                      {"template", fusion_space::KernelTemplateName(k.kind)},
                      {"kernel", k.summary},
                      {"tiling", fusion_space::TilingToString(g.tiling)},
                      {"tilings", space.Tilings(g.nodes).size()}});
  }
  return {{"kernels", plan.groups.size()},
          {"traffic_bytes", space.Traffic(plan)},
          {"peak_intermediate_bytes", space.PeakIntermediateBytes(plan)},
          {"groups", groups}};
}

nlohmann::json BuildReport(fusion_space::FusionSpace& space, const SpaceArgs& args,
                           const fusion_space::Plan& unfused, const fusion_space::Plan& greedy,
                           double partitions) {
  const fusion_space::CandidateSet& c = space.candidates();
  nlohmann::json by_template = nlohmann::json::object();
  for (auto [kind, count] : c.count_by_template)
    by_template[fusion_space::KernelTemplateName(kind)] = count;
  std::set<graph::WorkloadKey> keys;
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = c.num_nodes; i < c.groups.size(); ++i) {
    keys.insert(c.groups[i].key);
    if (args.list)
      list.push_back({{"nodes", c.groups[i].nodes},
                      {"template", fusion_space::KernelTemplateName(c.groups[i].instance->kind)},
                      {"kernel", c.groups[i].instance->summary},
                      {"key", c.groups[i].key.ToString()}});
  }
  nlohmann::json report = {
      {"model", args.model},
      {"nodes", space.graph().nodes.size()},
      {"max_group_size", args.max_group_size},
      {"candidates",
       {{"multi_node_groups", c.multi_node()},
        {"connected_sets_examined", c.sets_examined},
        {"distinct_keys", keys.size()},
        {"seconds", c.seconds},
        {"by_template", by_template}}},
      {"partitions", {{"count_upper_bound", partitions}, {"exact_covers", true}}},
      {"unfused", PlanSummary(space, unfused)},
      {"greedy", PlanSummary(space, greedy)}};
  if (args.list) report["candidates"]["groups"] = list;
  return report;
}

void PrintSpaceReport(const nlohmann::json& r) {
  const auto& c = r["candidates"];
  fmt::print("model        {}  ({} nodes)\n", r["model"].get<std::string>(), r["nodes"].get<int>());
  fmt::print(
      "candidates   {} multi-node groups ({} distinct workload keys) from {} connected sets "
      "of up to {} nodes, in {:.3f} s\n",
      c["multi_node_groups"].get<int64_t>(), c["distinct_keys"].get<int64_t>(),
      c["connected_sets_examined"].get<int64_t>(), r["max_group_size"].get<int>(),
      c["seconds"].get<double>());
  std::string templates;
  for (auto& [name, count] : c["by_template"].items())
    templates += fmt::format("  {} {}", name, count.get<int64_t>());
  fmt::print("by template {}\n", templates);
  fmt::print(
      "partitions   {:.4g} exact covers of the nodes by candidate groups (an upper bound: "
      "covers whose kernels would wait on each other are counted too)\n",
      r["partitions"]["count_upper_bound"].get<double>());
  const auto& u = r["unfused"];
  const auto& g = r["greedy"];
  const double ut = u["traffic_bytes"].get<double>(), gt = g["traffic_bytes"].get<double>();
  fmt::print("unfused      {} kernels, traffic {}, peak intermediates {}\n",
             u["kernels"].get<int64_t>(), HumanBytes(ut),
             HumanBytes(u["peak_intermediate_bytes"].get<double>()));
  fmt::print("greedy       {} kernels, traffic {} ({:.2f}x the unfused), peak intermediates {}\n",
             g["kernels"].get<int64_t>(), HumanBytes(gt), ut > 0 ? gt / ut : 0.0,
             HumanBytes(g["peak_intermediate_bytes"].get<double>()));
  fmt::print("\ngreedy plan (kernel order):\n  {:>3}  {:<11}  {:<18}  {:<44}  {}\n", "#",
             "template", "nodes", "kernel", "tiling (legal tilings)");
  int i = 0;
  for (const auto& grp : g["groups"]) {
    std::string nodes;
    for (const auto& n : grp["nodes"])
      nodes += (nodes.empty() ? "" : ",") + std::to_string(n.get<int>());
    if (nodes.size() > 18) nodes = nodes.substr(0, 15) + "...";
    fmt::print("  {:>3}  {:<11}  {:<18}  {:<44}  {} ({})\n", i++,
               grp["template"].get<std::string>(), nodes, grp["kernel"].get<std::string>(),
               grp["tiling"].get<std::string>(), grp["tilings"].get<int64_t>());
  }
  if (r["candidates"].contains("groups")) {
    fmt::print("\ncandidate groups:\n");
    for (const auto& grp : r["candidates"]["groups"]) {
      std::string nodes;
      for (const auto& n : grp["nodes"])
        nodes += (nodes.empty() ? "" : ",") + std::to_string(n.get<int>());
      fmt::print("  {}  {:<11}  {:<30}  {}\n", grp["key"].get<std::string>(),
                 grp["template"].get<std::string>(), nodes, grp["kernel"].get<std::string>());
    }
  }
}

int Run(const SpaceArgs& args) {
  auto graph = LoadModel(args.model, args.model_options);
  if (!graph.ok()) return ReportError(graph.error());
  if (args.max_group_size < 1 || args.max_group_size > 16)
    return ReportError(Error(ErrorCode::kInvalidArgument, "--max-group-size must be 1..16"));
  kernels::KernelConfig config;
  config.threads = args.threads;
  if (args.local_buffer > 0) config.local_buffer_bytes = static_cast<size_t>(args.local_buffer);
  fusion_space::CandidateOptions options;
  options.max_group_size = args.max_group_size;
  fusion_space::FusionSpace space(*graph, config, options);
  const fusion_space::Plan unfused = space.Unfused();
  const fusion_space::Plan greedy = space.Greedy();
  const double partitions = fusion_space::CountPartitions(space.candidates());
  const nlohmann::json report = BuildReport(space, args, unfused, greedy, partitions);
  for (auto [path, plan] : {std::pair{args.save_greedy, &greedy}, {args.save_unfused, &unfused}})
    if (!path.empty())
      if (Status s = fusion_space::WritePlanFile(space, *plan, path); !s.ok())
        return ReportError(s.error());
  if (args.json)
    PrintJson(report);
  else
    PrintSpaceReport(report);
  return kExitOk;
}

}  // namespace

void AddSpaceCommand(CLI::App& app, std::function<void(int)> set_result) {
  auto args = std::make_shared<SpaceArgs>();
  CLI::App* cmd = app.add_subcommand(
      "space", "Show a model's fusion space: candidate groups, partitions, the greedy plan");
  cmd->add_option("model", args->model, "ONNX model file")->required();
  cmd->add_option("--dim", args->model_options.dims,
                  "Bind a symbolic dimension: NAME=VALUE (repeatable)");
  AddValueOption(cmd, &args->model_options);
  cmd->add_option("--max-group-size", args->max_group_size, "Largest group enumerated (1..16)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads per kernel")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--local-buffer", args->local_buffer,
                  "Local buffer bytes per thread (default: the per-core L2)");
  cmd->add_flag("--list", args->list, "List every candidate group");
  cmd->add_option("--save-greedy", args->save_greedy, "Write the greedy plan to this JSON file");
  cmd->add_option("--save-unfused", args->save_unfused, "Write the unfused plan to this JSON file");
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  cmd->callback([args, set_result] { set_result(Run(*args)); });
}

}  // namespace fusetune::cli
