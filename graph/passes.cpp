#include "graph/passes.h"

#include <fmt/format.h>

#include <unordered_map>

#include "common/hash.h"
#include "graph/shape_inference.h"

namespace fusetune::graph {

namespace {

// Graph outputs must keep their names: when a rewrite would replace a graph
// output value, the replacement takes over the output's name.
void ReplaceValue(Graph& graph, ValueId from, ValueId to) {
  bool is_output = false;
  for (ValueId o : graph.outputs) is_output = is_output || o == from;
  if (is_output && !graph.value(to).is_input) {
    bool to_is_output = false;
    for (ValueId o : graph.outputs) to_is_output = to_is_output || o == to;
    if (!to_is_output) std::swap(graph.value(from).name, graph.value(to).name);
  }
  graph.ReplaceAllUses(from, to);
}

}  // namespace

Result<int> FoldConstants(Graph& graph) {
  const size_t before = graph.nodes.size();
  FT_RETURN_IF_ERROR(InferShapes(graph, InferOptions{}));
  return static_cast<int>(before - graph.nodes.size());
}

Result<int> EliminateDeadCode(Graph& graph) {
  const auto n = static_cast<int32_t>(graph.nodes.size());
  std::vector<bool> live_value(graph.values.size(), false);
  for (ValueId v : graph.outputs) live_value[v] = true;
  std::vector<bool> dead(n, true);
  for (int32_t i = n - 1; i >= 0; --i) {
    const Node& node = graph.nodes[i];
    bool needed = false;
    for (ValueId v : node.outputs) needed = needed || (v != kNoValue && live_value[v]);
    if (!needed) continue;
    dead[i] = false;
    for (ValueId v : node.inputs)
      if (v != kNoValue) live_value[v] = true;
  }
  int removed = 0;
  for (bool d : dead) removed += d;
  size_t constants_before = 0, constants_after = 0;
  for (const Value& v : graph.values) constants_before += v.is_constant();
  graph.Compact(dead);  // also drops constants nobody reads
  for (const Value& v : graph.values) constants_after += v.is_constant();
  return removed + static_cast<int>(constants_before - constants_after);
}

Result<int> EliminateCommonSubexpressions(Graph& graph) {
  int merged = 0;
  // Equal small constants first, so that nodes reading them can merge.
  std::unordered_map<uint64_t, std::vector<ValueId>> by_content;
  for (ValueId v = 0; v < static_cast<ValueId>(graph.values.size()); ++v) {
    const Value& value = graph.value(v);
    if (!value.is_constant() || value.constant->numel() > 1024) continue;
    const Tensor& t = *value.constant;
    const uint64_t h = Hasher()
                           .AddInt(static_cast<int>(t.dtype()))
                           .AddBytes(t.dims().data(), t.dims().size() * 8)
                           .AddBytes(t.raw(), t.nbytes())
                           .digest();
    auto& bucket = by_content[h];
    bool done = false;
    for (ValueId other : bucket)
      if (graph.value(other).constant->BitwiseEquals(t)) {
        ReplaceValue(graph, v, other);
        ++merged;
        done = true;
        break;
      }
    if (!done) bucket.push_back(v);
  }
  std::unordered_map<uint64_t, std::vector<int32_t>> by_node;
  std::vector<bool> dead(graph.nodes.size(), false);
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    const Node& node = graph.nodes[n];
    Hasher h;
    h.AddString(node.domain).AddString(node.op_type).Add(node.outputs.size());
    for (ValueId v : node.inputs) h.AddInt(v);
    auto& bucket = by_node[h.digest()];
    bool done = false;
    for (int32_t other : bucket) {
      const Node& o = graph.nodes[other];
      if (o.op_type != node.op_type || o.domain != node.domain || o.inputs != node.inputs ||
          o.outputs.size() != node.outputs.size() || !(o.attrs == node.attrs))
        continue;
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (node.outputs[i] != kNoValue && o.outputs[i] != kNoValue)
          ReplaceValue(graph, node.outputs[i], o.outputs[i]);
      bool fully = true;
      for (size_t i = 0; i < node.outputs.size(); ++i)
        fully = fully && (node.outputs[i] == kNoValue || o.outputs[i] != kNoValue);
      if (!fully) break;
      dead[n] = true;
      ++merged;
      done = true;
      break;
    }
    if (!done) bucket.push_back(n);
  }
  graph.Compact(dead);
  return merged;
}

namespace {

bool IsIdentityNode(const Graph& g, const Node& node) {
  if (node.inputs.empty() || node.inputs[0] == kNoValue || node.outputs.empty() ||
      node.outputs[0] == kNoValue)
    return false;
  const TensorType& in = g.type(node.inputs[0]);
  const TensorType& out = g.type(node.outputs[0]);
  if (node.op_type == "Identity") return true;
  if (node.op_type == "Dropout") {
    const bool mask_used = node.outputs.size() > 1 && node.outputs[1] != kNoValue;
    return !mask_used;  // inference mode is checked by shape inference
  }
  if (!in.SameShapeAndType(out)) return false;
  if (node.op_type == "Cast" || node.op_type == "Reshape" || node.op_type == "Expand" ||
      node.op_type == "Squeeze" || node.op_type == "Unsqueeze" || node.op_type == "Flatten")
    return true;
  if (node.op_type == "Transpose") {
    auto perm = node.attrs.GetInts("perm", std::vector<int64_t>{});
    if (!perm.ok()) return false;
    if (perm->empty()) return in.rank() <= 1;
    for (size_t i = 0; i < perm->size(); ++i)
      if ((*perm)[i] != static_cast<int64_t>(i)) return false;
    return true;
  }
  return false;
}

}  // namespace

Result<int> RemoveIdentities(Graph& graph) {
  std::vector<bool> dead(graph.nodes.size(), false);
  int removed = 0;
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    const Node& node = graph.nodes[n];
    if (!IsIdentityNode(graph, node)) continue;
    const ValueId in = node.inputs[0], out = node.outputs[0];
    // A graph input passed straight to a graph output keeps its node: the
    // output needs a producer with the output's own name.
    bool out_is_output = false;
    for (ValueId o : graph.outputs) out_is_output = out_is_output || o == out;
    if (out_is_output && (graph.value(in).is_input || graph.value(in).is_constant())) continue;
    ReplaceValue(graph, out, in);
    dead[n] = true;
    ++removed;
  }
  if (removed) graph.Compact(dead);
  return removed;
}

Result<int> CanonicalizeTransposeReshape(Graph& graph) {
  int rewrites = 0;
  // Views to Reshape with a constant target shape.
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    Node& node = graph.nodes[n];
    if (node.op_type != "Flatten" && node.op_type != "Squeeze" && node.op_type != "Unsqueeze")
      continue;
    if (node.outputs[0] == kNoValue) continue;
    const Dims& dims = graph.type(node.outputs[0]).dims;
    Tensor shape =
        Tensor::FromVector<int64_t>(DataType::kInt64, {static_cast<int64_t>(dims.size())}, dims);
    const ValueId shape_v = graph.AddConstant(graph.UniqueName("shape"), shape);
    Node& same = graph.nodes[n];  // AddConstant does not move nodes
    same.op_type = "Reshape";
    same.inputs = {same.inputs[0], shape_v};
    same.attrs = Attributes();
    ++rewrites;
  }
  // Chains: X -> Transpose(p1) -> Transpose(p2) becomes X -> Transpose(p1 o p2);
  // X -> Reshape -> Reshape becomes X -> Reshape (the second's static shape).
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    Node& node = graph.nodes[n];
    if (node.op_type != "Transpose" && node.op_type != "Reshape") continue;
    const ValueId src = node.inputs[0];
    const int32_t prod = graph.value(src).producer;
    if (prod < 0 || graph.nodes[prod].op_type != node.op_type) continue;
    const Node& first = graph.nodes[prod];
    if (node.op_type == "Transpose") {
      const int64_t rank = graph.type(first.inputs[0]).rank();
      std::vector<int64_t> p1(rank), p2(rank);
      for (int64_t i = 0; i < rank; ++i) p1[i] = p2[i] = rank - 1 - i;
      if (first.attrs.Has("perm")) p1 = first.attrs.GetInts("perm").value();
      if (node.attrs.Has("perm")) p2 = node.attrs.GetInts("perm").value();
      std::vector<int64_t> composed(rank);
      for (int64_t i = 0; i < rank; ++i) composed[i] = p1[p2[i]];
      node.attrs.Set("perm", composed);
    } else {
      const Dims& dims = graph.type(node.outputs[0]).dims;
      Tensor shape =
          Tensor::FromVector<int64_t>(DataType::kInt64, {static_cast<int64_t>(dims.size())}, dims);
      const ValueId shape_v = graph.AddConstant(graph.UniqueName("shape"), shape);
      graph.nodes[n].inputs[1] = shape_v;
      graph.nodes[n].attrs.Erase("allowzero");
    }
    graph.nodes[n].inputs[0] = graph.nodes[prod].inputs[0];
    ++rewrites;
  }
  if (rewrites) {
    FT_ASSIGN_OR_RETURN(int removed, EliminateDeadCode(graph));
    (void)removed;
    FT_ASSIGN_OR_RETURN(int ids, RemoveIdentities(graph));
    rewrites += ids;
  }
  return rewrites;
}

Result<int> PretransposeGemmWeights(Graph& graph) {
  int rewritten = 0;
  std::unordered_map<ValueId, ValueId> transposed;  // a weight shared by Gemms is copied once
  for (Node& node : graph.nodes) {
    if (node.op_type != "Gemm" || !node.domain.empty() || node.inputs.size() < 2) continue;
    FT_ASSIGN_OR_RETURN(int64_t trans_b, node.attrs.GetInt("transB", 0));
    const ValueId b = node.inputs[1];
    if (trans_b == 0 || b == kNoValue || !graph.value(b).is_constant()) continue;
    auto it = transposed.find(b);
    if (it == transposed.end()) {
      const Tensor& w = *graph.value(b).constant;
      if (!w.defined() || w.dtype() != DataType::kFloat32 || w.rank() != 2) continue;
      const int64_t rows = w.dims()[0], cols = w.dims()[1];
      Tensor t(DataType::kFloat32, {cols, rows});
      const float* src = w.data<float>();
      float* dst = t.data<float>();
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
      const std::string name = graph.UniqueName(graph.value(b).name + "_transposed");
      it = transposed.emplace(b, graph.AddConstant(name, std::move(t))).first;
    }
    node.inputs[1] = it->second;
    node.attrs.Erase("transB");
    ++rewritten;
  }
  return rewritten;
}

namespace {

Status RunToFixedPoint(Graph& graph) {
  for (int round = 0; round < 8; ++round) {
    FT_ASSIGN_OR_RETURN(int transposed, PretransposeGemmWeights(graph));
    FT_ASSIGN_OR_RETURN(int folded, FoldConstants(graph));
    FT_ASSIGN_OR_RETURN(int bn, FoldBatchNorm(graph));
    FT_ASSIGN_OR_RETURN(int pools, ReduceToGlobalPool(graph));
    FT_ASSIGN_OR_RETURN(int ids, RemoveIdentities(graph));
    FT_ASSIGN_OR_RETURN(int canon, CanonicalizeTransposeReshape(graph));
    FT_ASSIGN_OR_RETURN(int cse, EliminateCommonSubexpressions(graph));
    FT_ASSIGN_OR_RETURN(int dce, EliminateDeadCode(graph));
    if (transposed + folded + bn + pools + ids + canon + cse + dce == 0) break;
  }
  return Status::Ok();
}

}  // namespace

Status RunStandardPasses(Graph& graph) {
  FT_RETURN_IF_ERROR(RunToFixedPoint(graph));
  // BNs left after folding reached its fixed point (a fold can become legal
  // only after a later pass, e.g. DCE removing the Conv output's other use)
  // become Mul and Add; the passes then run again over the new nodes.
  FT_ASSIGN_OR_RETURN(const int lowered, LowerBatchNorm(graph));
  if (lowered) FT_RETURN_IF_ERROR(RunToFixedPoint(graph));
  return graph.Validate();
}

}  // namespace fusetune::graph
