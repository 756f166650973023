#include "compiler/fused_export.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "graph/onnx_io.h"

namespace fusetune::compiler {

namespace {

std::string FusedOpType(KernelTemplate kind) {
  std::string name = KernelTemplateName(kind);
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return "Fused" + name;
}

Node FusedNode(const Graph& graph, const KernelInstance& instance, const GroupDecision& d,
               size_t index) {
  Node node;
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
  node.attrs.Set("template", std::string(KernelTemplateName(instance.kind)));
  node.attrs.Set("tiling", TilingToJson(d.choice.tiling).dump());
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

Result<Graph> FusedGraph(FusionSpace& space, const CompiledPlan& plan) {
  const Graph& graph = space.graph();
  Graph out = graph;
  out.nodes.clear();
  for (Value& v : out.values) v.producer = -1;
  for (size_t i = 0; i < plan.plan.groups.size(); ++i) {
    const PlanGroup& g = plan.plan.groups[i];
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

Status ExportFusedOnnx(FusionSpace& space, const CompiledPlan& plan, const std::string& path) {
  FT_ASSIGN_OR_RETURN(Graph fused, FusedGraph(space, plan));
  return ExportOnnxFile(fused, path);
}

}  // namespace fusetune::compiler
