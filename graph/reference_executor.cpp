#include "graph/reference_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/rng.h"
#include "graph/op_registry.h"

namespace fusetune::graph {

namespace {

Result<Tensor> AdaptFeed(const Value& input, const Tensor& feed) {
  if (feed.dims() != input.type.dims)
    return Error(ErrorCode::kShapeMismatch,
                 fmt::format("input '{}' expects shape {} but was given {}", input.name,
                             DimsToString(input.type.dims), DimsToString(feed.dims())));
  if (feed.dtype() == input.type.dtype) return feed;
  const bool both_float = IsFloat(feed.dtype()) && IsFloat(input.type.dtype);
  const bool both_int = !IsFloat(feed.dtype()) && !IsFloat(input.type.dtype) &&
                        feed.dtype() != DataType::kBool && input.type.dtype != DataType::kBool;
  if (both_float || both_int) return feed.CastTo(input.type.dtype);
  return Error(ErrorCode::kShapeMismatch,
               fmt::format("input '{}' expects {} but was given {}", input.name,
                           DataTypeName(input.type.dtype), DataTypeName(feed.dtype())));
}

// A feed of an input bound when the model was loaded must repeat the bound
// value (the shapes were resolved with it): the same elements, compared as
// doubles across types (3.5 is not 3).
Status CheckBoundFeed(const std::string& name, const Tensor& bound, const Tensor& feed) {
  bool same = feed.numel() == bound.numel();
  if (same && feed.dtype() == bound.dtype())
    same = std::memcmp(feed.raw(), bound.raw(), bound.nbytes()) == 0;
  for (int64_t i = 0; same && feed.dtype() != bound.dtype() && i < feed.numel(); ++i)
    same = feed.GetAsDouble(i) == bound.GetAsDouble(i);
  if (same) return Status::Ok();
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("input '{}' was bound to a value when the model was loaded (shapes "
                           "depend on it); this run feeds another one: load the model again "
                           "with the new value",
                           name));
}

}  // namespace

Result<std::vector<Tensor>> BindFeeds(const Graph& graph, const TensorMap& feeds,
                                      const std::vector<ValueId>& held) {
  std::vector<Tensor> values(graph.values.size());
  for (ValueId v = 0; v < static_cast<ValueId>(graph.values.size()); ++v)
    if (graph.value(v).is_constant()) values[v] = *graph.value(v).constant;
  for (ValueId v : graph.inputs) {
    const Value& input = graph.value(v);
    auto it = feeds.find(input.name);
    if (std::find(held.begin(), held.end(), v) != held.end()) {
      if (it != feeds.end())
        return Error(ErrorCode::kInvalidArgument,
                     fmt::format("input '{}' is held by the executable's KV cache: not fed by "
                                 "a run (load the cache's rows instead)",
                                 input.name));
      continue;
    }
    if (it == feeds.end())
      return Error(ErrorCode::kNotFound, fmt::format("no value given for input '{}'", input.name));
    FT_ASSIGN_OR_RETURN(values[v], AdaptFeed(input, it->second));
  }
  for (const auto& [name, tensor] : feeds) {
    if (auto bound = graph.bound_inputs.find(name); bound != graph.bound_inputs.end()) {
      FT_RETURN_IF_ERROR(CheckBoundFeed(name, *bound->second, tensor));
      continue;
    }
    auto id = graph.FindValue(name);
    if (!id || !graph.value(*id).is_input)
      return Error(ErrorCode::kNotFound, fmt::format("'{}' is not an input of the graph", name));
  }
  return values;
}

Result<ReferenceResult> RunReference(const Graph& graph, const TensorMap& feeds,
                                     const ReferenceOptions& options) {
  FT_ASSIGN_OR_RETURN(std::vector<Tensor> values, BindFeeds(graph, feeds));

  // Last reader of each value, to release intermediates early.
  std::vector<int32_t> last_use(graph.values.size(), -1);
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n)
    for (ValueId v : graph.nodes[n].inputs)
      if (v != kNoValue) last_use[v] = n;
  std::vector<bool> is_output(graph.values.size(), false);
  for (ValueId v : graph.outputs) is_output[v] = true;

  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    const Node& node = graph.nodes[n];
    const OpSchema* schema = FindOpSchema(node.domain, node.op_type);
    if (!schema)
      return Error(ErrorCode::kUnsupported,
                   fmt::format("{}: op type is not supported", graph.Describe(n)));
    KernelContext ctx{node, graph.opset, {}, {}};
    for (ValueId v : node.inputs) ctx.inputs.push_back(v == kNoValue ? nullptr : &values[v]);
    for (ValueId v : node.outputs)
      ctx.output_types.push_back(v == kNoValue ? TensorType{} : graph.type(v));
    auto results = schema->run(ctx);
    if (!results.ok()) return results.error().WithContext(graph.Describe(n));
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ValueId v = node.outputs[i];
      if (v == kNoValue) continue;
      Tensor& r = (*results)[i];
      if (r.dims() != graph.type(v).dims || r.dtype() != graph.type(v).dtype)
        return Error(ErrorCode::kInternal,
                     fmt::format("{}: kernel produced {}{} for output '{}' typed {}",
                                 graph.Describe(n), DataTypeName(r.dtype()), DimsToString(r.dims()),
                                 graph.value(v).name, graph.type(v).ToString()));
      values[v] = std::move(r);
    }
    if (!options.keep_intermediates)
      for (ValueId v : node.inputs)
        if (v != kNoValue && last_use[v] == n && !is_output[v] && !graph.value(v).is_constant())
          values[v] = Tensor();
  }

  ReferenceResult result;
  for (ValueId v : graph.outputs) result.outputs[graph.value(v).name] = values[v];
  if (options.keep_intermediates) result.values = std::move(values);
  return result;
}

TensorMap RandomFeeds(const Graph& graph, uint64_t seed) {
  TensorMap feeds;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const Value& input = graph.value(graph.inputs[i]);
    Rng rng(ForkSeed(seed, i));
    Tensor t(DataType::kFloat32, input.type.dims);
    if (IsFloat(input.type.dtype)) {
      for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = static_cast<float>(rng.Normal());
      feeds[input.name] = input.type.dtype == DataType::kFloat32 ? t : t.CastTo(input.type.dtype);
    } else if (input.type.dtype == DataType::kBool) {
      Tensor b(DataType::kBool, input.type.dims);
      for (int64_t k = 0; k < b.numel(); ++k) b.data<uint8_t>()[k] = rng.Below(2);
      feeds[input.name] = b;
    } else {
      Tensor b(DataType::kInt64, input.type.dims);
      for (int64_t k = 0; k < b.numel(); ++k)
        b.data<int64_t>()[k] = static_cast<int64_t>(rng.Below(4));
      feeds[input.name] = b.CastTo(input.type.dtype);
    }
  }
  return feeds;
}

}  // namespace fusetune::graph
