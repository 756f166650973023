#include "graph/analysis.h"

#include <algorithm>
#include <map>

#include "graph/op_registry.h"

namespace fusetune::graph {

NodeCost ComputeNodeCost(const Graph& graph, int32_t n) {
  const Node& node = graph.nodes[n];
  NodeCost cost;
  std::vector<const TensorType*> ins, outs;
  for (ValueId v : node.inputs) {
    ins.push_back(v == kNoValue ? nullptr : &graph.type(v));
    if (v != kNoValue) cost.bytes_read += static_cast<double>(graph.type(v).nbytes());
  }
  for (ValueId v : node.outputs) {
    outs.push_back(v == kNoValue ? nullptr : &graph.type(v));
    if (v != kNoValue) cost.bytes_written += static_cast<double>(graph.type(v).nbytes());
  }
  if (const OpSchema* schema = FindOpSchema(node.domain, node.op_type)) {
    const OpCost c = schema->cost(node, ins, outs);
    cost.flops = c.flops;
    cost.transcendentals = c.transcendentals;
  }
  return cost;
}

GraphSummary SummarizeGraph(const Graph& graph) {
  GraphSummary s;
  s.nodes = static_cast<int64_t>(graph.nodes.size());
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    const NodeCost c = ComputeNodeCost(graph, n);
    OpTypeSummary& op = s.by_op_type[graph.nodes[n].op_type];
    ++op.count;
    op.flops += c.flops;
    op.bytes += c.bytes_read + c.bytes_written;
    s.flops += c.flops;
    s.bytes += c.bytes_read + c.bytes_written;
  }
  for (const Value& v : graph.values)
    if (v.is_constant() && IsFloat(v.type.dtype)) {
      s.parameters += v.constant->numel();
      s.parameter_bytes += static_cast<double>(v.constant->nbytes());
    }
  return s;
}

namespace {

// Splits the node sequence where exactly one produced, non-constant value is live.
std::vector<std::vector<int32_t>> Segment(const Graph& graph) {
  const auto count = static_cast<int32_t>(graph.nodes.size());
  std::vector<int32_t> last_use(graph.values.size(), -1);
  for (int32_t n = 0; n < count; ++n)
    for (ValueId v : graph.nodes[n].inputs)
      if (v != kNoValue) last_use[v] = n;
  for (ValueId v : graph.outputs) last_use[v] = count;
  std::vector<std::vector<int32_t>> segments(1);
  // Graph inputs are live until their last reader: in the first layer the
  // residual stream is a graph input.
  int32_t live = 0;
  for (ValueId v : graph.inputs) live += last_use[v] >= 0;
  for (int32_t n = 0; n < count; ++n) {
    const Node& node = graph.nodes[n];
    for (ValueId v : node.outputs)
      if (v != kNoValue && last_use[v] > n) ++live;
    for (ValueId v : node.inputs)  // values whose last reader is this node die here
      if (v != kNoValue && !graph.value(v).is_constant() && last_use[v] == n) {
        --live;
        last_use[v] = -2;  // count each value once even if read twice by this node
      }
    segments.back().push_back(n);
    if (live == 1 && n + 1 < count) segments.emplace_back();
  }
  return segments;
}

double BlockFlops(const Graph& graph, const std::vector<int32_t>& nodes) {
  double f = 0;
  for (int32_t n : nodes) f += ComputeNodeCost(graph, n).flops;
  return f;
}

}  // namespace

LayerStructure FindLayers(const Graph& graph) {
  LayerStructure out;
  if (graph.nodes.empty()) return out;
  out.segments = Segment(graph);
  const auto m = static_cast<int64_t>(out.segments.size());
  std::vector<WorkloadKey> keys;
  for (const auto& seg : out.segments) keys.push_back(ComputeWorkloadKey(graph, seg));

  std::map<WorkloadKey, size_t> seen;
  for (int64_t i = 0; i < m; ++i) {
    auto [it, inserted] = seen.emplace(keys[i], out.segment_keys.size());
    if (inserted) out.segment_keys.push_back({keys[i], 0, {}, BlockFlops(graph, out.segments[i])});
    RepeatedBlock& b = out.segment_keys[it->second];
    ++b.count;
    b.instances.push_back(out.segments[i]);
  }

  // The repeating unit: period p from offset s covering the most segments.
  int64_t best_p = 0, best_s = 0, best_r = 1;
  for (int64_t p = 1; p <= m / 2; ++p)
    for (int64_t s = 0; s + 2 * p <= m; ++s) {
      int64_t r = 1;
      while (s + (r + 1) * p <= m &&
             std::equal(keys.begin() + s, keys.begin() + s + p, keys.begin() + s + r * p))
        ++r;
      if (r >= 2 && r * p > best_r * best_p) {
        best_p = p;
        best_s = s;
        best_r = r;
      }
    }
  if (best_p > 0) {
    RepeatedBlock layer;
    for (int64_t r = 0; r < best_r; ++r) {
      std::vector<int32_t> nodes;
      for (int64_t k = 0; k < best_p; ++k) {
        const auto& seg = out.segments[best_s + r * best_p + k];
        nodes.insert(nodes.end(), seg.begin(), seg.end());
      }
      layer.instances.push_back(nodes);
    }
    layer.count = best_r;
    layer.key = ComputeWorkloadKey(graph, layer.instances[0]);
    layer.flops = BlockFlops(graph, layer.instances[0]);
    out.layers.push_back(std::move(layer));
  }
  return out;
}

}  // namespace fusetune::graph
