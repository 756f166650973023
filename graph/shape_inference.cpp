#include "graph/shape_inference.h"

#include <fmt/format.h>

#include <map>

#include "graph/op_registry.h"

namespace fusetune::graph {

Status CheckSupportedOps(const Graph& graph) {
  std::map<std::string, int32_t> first_use;  // "domain:op" -> node
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    const Node& node = graph.nodes[n];
    if (FindOpSchema(node.domain, node.op_type)) continue;
    const std::string key = node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type;
    first_use.emplace(key, n);
  }
  if (first_use.empty()) return Status::Ok();
  std::string list;
  for (const auto& [op, n] : first_use)
    list += fmt::format("\n  {} (first used by {})", op, graph.Describe(n));
  return Error(ErrorCode::kUnsupported, fmt::format("{} unsupported op type{}:{}", first_use.size(),
                                                    first_use.size() == 1 ? "" : "s", list));
}

namespace {

// A shape whose bytes do not fit int64 (or with a negative dimension) is an
// error where it appears: element counts and sizes downstream are int64
// products (onnx_import_fuzz found them overflowing).
Status CheckRepresentable(const TensorType& type, const std::string& what) {
  int64_t count = 1;
  bool ok = true;
  for (int64_t d : type.dims) ok = ok && d >= 0 && !__builtin_mul_overflow(count, d, &count);
  int64_t bytes = 0;
  if (ok && !__builtin_mul_overflow(count, static_cast<int64_t>(DataTypeSize(type.dtype)), &bytes))
    return Status::Ok();
  return Error(ErrorCode::kShapeMismatch,
               fmt::format("{}: shape {} is negative or too large", what, DimsToString(type.dims)));
}

// `known` holds the value of every value that is constant or computable from
// constants; inference reads shape inputs from it even when folding is off.
Status InferNode(Graph& graph, int32_t n, const InferOptions& options,
                 std::vector<std::shared_ptr<const Tensor>>& known, bool* folded) {
  Node& node = graph.nodes[n];
  *folded = false;
  const OpSchema* schema = FindOpSchema(node.domain, node.op_type);
  const std::string desc = graph.Describe(n);
  if (!schema)
    return Error(ErrorCode::kUnsupported, fmt::format("{}: op type is not supported", desc));
  const int num_in = static_cast<int>(node.inputs.size());
  if (num_in < schema->min_inputs || (schema->max_inputs >= 0 && num_in > schema->max_inputs))
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format(
            "{}: has {} inputs, expects {} to {}", desc, num_in, schema->min_inputs,
            schema->max_inputs < 0 ? std::string("any") : std::to_string(schema->max_inputs)));
  InferContext ctx{node, desc, graph.opset, {}, {}, -1};
  bool all_constant = true;
  for (int i = 0; i < num_in; ++i) {
    const ValueId v = node.inputs[i];
    if (v == kNoValue) {
      if (i < schema->min_inputs)
        return Error(ErrorCode::kInvalidArgument,
                     fmt::format("{}: required input {} is missing", desc, i));
      ctx.input_types.push_back(nullptr);
      ctx.input_constants.push_back(nullptr);
      continue;
    }
    const Value& value = graph.value(v);
    if (!value.has_type)
      return Error(ErrorCode::kInternal,
                   fmt::format("{}: input '{}' has no type", desc, value.name));
    ctx.input_types.push_back(&value.type);
    ctx.input_constants.push_back(known[v].get());
    all_constant = all_constant && known[v] != nullptr;
  }
  auto inferred = schema->infer(ctx);
  if (!inferred.ok()) {
    if (ctx.missing_constant >= 0 && options.needed_value != nullptr)
      *options.needed_value = node.inputs[ctx.missing_constant];
    return inferred.error();
  }
  std::vector<TensorType> types = std::move(*inferred);
  if (types.size() < node.outputs.size())
    return Error(ErrorCode::kInternal, fmt::format("{}: inference gave too few outputs", desc));
  for (const TensorType& type : types) FT_RETURN_IF_ERROR(CheckRepresentable(type, desc));
  size_t out_bytes = 0;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    Value& out = graph.value(node.outputs[i]);
    out.type = types[i];
    out.has_type = true;
    out_bytes += types[i].nbytes();
  }
  const bool foldable = all_constant || ReadsOnlyDims(node.op_type);
  if (!foldable || out_bytes > options.max_folded_bytes) return Status::Ok();

  KernelContext kctx{node, graph.opset, {}, {}};
  std::vector<Tensor> shape_only;  // Shape/Size read only dims: stand-ins without storage
  shape_only.reserve(num_in);
  for (int i = 0; i < num_in; ++i) {
    if (node.inputs[i] == kNoValue) {
      kctx.inputs.push_back(nullptr);
      continue;
    }
    const Value& value = graph.value(node.inputs[i]);
    if (known[node.inputs[i]]) {
      kctx.inputs.push_back(known[node.inputs[i]].get());
    } else {
      shape_only.push_back(Tensor::ShapeOnly(value.type.dtype, value.type.dims));
      kctx.inputs.push_back(&shape_only.back());
    }
  }
  for (ValueId v : node.outputs)
    kctx.output_types.push_back(v == kNoValue ? TensorType{} : graph.type(v));
  auto results = schema->run(kctx);
  if (!results.ok()) return results.error().WithContext(desc + " (while folding constants)");
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    known[node.outputs[i]] = std::make_shared<const Tensor>(std::move((*results)[i]));
    if (options.fold_constants) graph.value(node.outputs[i]).constant = known[node.outputs[i]];
  }
  *folded = options.fold_constants;
  return Status::Ok();
}

}  // namespace

bool ReadsOnlyDims(const std::string& op_type) { return op_type == "Shape" || op_type == "Size"; }

Status InferShapes(Graph& graph, const InferOptions& options) {
  FT_RETURN_IF_ERROR(graph.TopologicalSort());
  std::vector<bool> dead(graph.nodes.size(), false);
  std::vector<std::shared_ptr<const Tensor>> known(graph.values.size());
  for (size_t v = 0; v < graph.values.size(); ++v) known[v] = graph.values[v].constant;
  for (const Value& value : graph.values)
    if (value.has_type && value.producer < 0)
      FT_RETURN_IF_ERROR(CheckRepresentable(value.type, fmt::format("input '{}'", value.name)));
  bool any_folded = false;
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n) {
    bool folded = false;
    FT_RETURN_IF_ERROR(InferNode(graph, n, options, known, &folded));
    dead[n] = folded;
    any_folded = any_folded || folded;
  }
  if (any_folded) {
    // Folded outputs are constants now; their producers go.
    for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n)
      if (dead[n])
        for (ValueId v : graph.nodes[n].outputs)
          if (v != kNoValue) graph.value(v).producer = -1;
    graph.Compact(dead);
  }
  return graph.Validate();
}

}  // namespace fusetune::graph
