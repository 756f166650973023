#include "graph/input_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

namespace fusetune::graph {

std::vector<ValueId> GraphInputsReaching(const Graph& graph, ValueId value) {
  std::vector<ValueId> inputs, stack{value};
  std::vector<bool> seen(graph.values.size(), false);
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (v == kNoValue || seen[v]) continue;
    seen[v] = true;
    const Value& val = graph.value(v);
    if (val.is_constant()) continue;
    if (val.is_input) inputs.push_back(v);
    if (val.producer < 0) continue;
    const Node& producer = graph.nodes[val.producer];
    if (ReadsOnlyDims(producer.op_type)) continue;
    for (ValueId in : producer.inputs) stack.push_back(in);
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

namespace {

// `given` as the input's declared type: converted when the conversion is
// exact, a one-element rank-1 value taken as a scalar.
Result<Tensor> AsDeclared(const Value& input, const Tensor& given) {
  const TensorType& want = input.type;
  Tensor t = given;
  if (t.dtype() != want.dtype) {
    // Floats to integers: whole values in range only (the cast of any
    // other is undefined).
    bool whole = true;
    if (IsFloat(t.dtype()) && !IsFloat(want.dtype))
      for (int64_t i = 0; i < t.numel() && whole; ++i) {
        const double v = t.GetAsDouble(i);
        whole = std::isfinite(v) && v == std::trunc(v) && std::abs(v) < 0x1p62;
      }
    Tensor converted = whole ? t.CastTo(want.dtype) : t;
    if (!whole || !converted.CastTo(t.dtype()).BitwiseEquals(t))
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("the value of input '{}' is {} and does not convert exactly to "
                               "its declared {}",
                               input.name, DataTypeName(t.dtype()), DataTypeName(want.dtype)));
    t = std::move(converted);
  }
  if (t.dims() != want.dims && want.dims.empty() && t.numel() == 1) t = t.Reshaped({});
  if (t.dims() != want.dims)
    return Error(ErrorCode::kShapeMismatch,
                 fmt::format("the value of input '{}' has shape {}; the model declares {}",
                             input.name, DimsToString(t.dims()), want.ToString()));
  return t;
}

// Makes the graph input `v` a constant with `value`.
void BindInput(Graph& graph, ValueId v, Tensor value) {
  Value& input = graph.value(v);
  input.is_input = false;
  input.constant = std::make_shared<const Tensor>(std::move(value));
  graph.bound_inputs[input.name] = input.constant;
  graph.inputs.erase(std::remove(graph.inputs.begin(), graph.inputs.end(), v), graph.inputs.end());
}

}  // namespace

Status InferShapesBindingInputs(Graph& graph, const std::map<std::string, Tensor>& values,
                                const InferOptions& options, std::vector<std::string>* bound) {
  // Inference folds and compacts: each retry starts from the graph as
  // given, copied only when there are values to bind.
  std::optional<Graph> given;
  if (!values.empty()) given = graph;
  for (;;) {
    ValueId needed = kNoValue;
    InferOptions o = options;
    o.needed_value = &needed;
    Status status = InferShapes(graph, o);
    if (status.ok() || needed == kNoValue) return status;
    // A failed inference has not compacted: the ids are still the given ones.
    const Graph& before = given ? *given : graph;
    const std::vector<ValueId> sources = GraphInputsReaching(before, needed);
    if (sources.empty()) return status;
    for (ValueId v : sources) {
      const Value& input = before.value(v);
      auto it = values.find(input.name);
      if (it == values.end())
        return Error(ErrorCode::kUnsupported,
                     fmt::format("{}: it is computed from graph input '{}' ({}), whose value "
                                 "must be given when the model is loaded (fusetune: --input "
                                 "{}=FILE.npy, or --value {}=V1,V2,...)",
                                 status.error().message(), input.name, input.type.ToString(),
                                 input.name, input.name));
      FT_ASSIGN_OR_RETURN(Tensor value, AsDeclared(input, it->second));
      if (bound) bound->push_back(input.name);
      BindInput(*given, v, std::move(value));
    }
    graph = *given;
  }
}

}  // namespace fusetune::graph
