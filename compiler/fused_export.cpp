#include "compiler/fused_export.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "graph/onnx_io.h"

namespace fusetune::compiler {

namespace {

std::string FusedOpType(fusion_space::KernelTemplate kind) {
  std::string name = fusion_space::KernelTemplateName(kind);
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return "Fused" + name;
}

graph::Node FusedNode(const graph::Graph& graph, const fusion_space::KernelInstance& instance,
                      const GroupDecision& d, size_t index) {
  graph::Node node;
  node.domain = kFusedDomain;
  node.op_type = FusedOpType(instance.kind);
  node.name = fmt::format("fused_{}", index);
  node.inputs = instance.inputs;
  node.outputs = instance.outputs;
  std::vector<int64_t> nodes(d.nodes.begin(), d.nodes.end());
  std::vector<std::string> ops, names;
  for (int32_t n : d.nodes) {
    ops.push_back(graph.nodes[n].op_type);
    names.push_back(graph.nodes[n].name);
  }
  node.attrs.Set("kernel", instance.summary);
  node.attrs.Set("template", std::string(fusion_space::KernelTemplateName(instance.kind)));
  node.attrs.Set("tiling", fusion_space::TilingToJson(d.choice.tiling).dump());
  node.attrs.Set("source", std::string(PlanSourceName(d.choice.source)));
  node.attrs.Set("workload_key", d.workload_key);
  node.attrs.Set("nodes", nodes);
  node.attrs.Set("op_types", ops);
  node.attrs.Set("node_names", names);
  if (d.choice.measured_seconds)
    node.attrs.Set("measured_ms", static_cast<float>(*d.choice.measured_seconds * 1e3));
  else
    node.attrs.Set("predicted_ms", static_cast<float>(d.choice.predicted_seconds * 1e3));
  return node;
}

}  // namespace

Result<graph::Graph> FusedGraph(fusion_space::FusionSpace& space, const CompiledPlan& plan) {
  const graph::Graph& graph = space.graph();
  graph::Graph out = graph;
  out.nodes.clear();
  for (graph::Value& v : out.values) v.producer = -1;
  for (size_t i = 0; i < plan.plan.groups.size(); ++i) {
    const fusion_space::PlanGroup& g = plan.plan.groups[i];
    if (g.nodes.size() == 1) {
      out.AddNode(graph.nodes[g.nodes[0]]);
      continue;
    }
    out.AddNode(FusedNode(graph, space.Match(g.nodes).instance, plan.groups.at(i), i));
  }
  out.Compact(std::vector<bool>(out.nodes.size(), false));
  FT_RETURN_IF_ERROR(out.Validate());
  return out;
}

Status ExportFusedOnnx(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                       const std::string& path) {
  FT_ASSIGN_OR_RETURN(graph::Graph fused, FusedGraph(space, plan));
  return graph::ExportOnnxFile(fused, path);
}

}  // namespace fusetune::compiler
