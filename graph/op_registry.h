// The op registry: for every supported ONNX op, its shape inference, its
// reference kernel (the correctness oracle) and its cost. An op that is not
// here is unsupported, and import says so, naming it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

// What inference sees of one node: input types, and the values of inputs
// that are constant (shape, axes and index inputs need them).
struct InferContext {
  const Node& node;
  std::string node_description;  // "node 'x' (Op)", for messages
  int64_t opset = 17;
  std::vector<const TensorType*> input_types;  // nullptr for omitted inputs
  std::vector<const Tensor*> input_constants;  // nullptr when not constant
  // The input RequireConstant last found without a value (-1: none), so that
  // inference can say which value it needs (InferOptions::needed_value).
  mutable int64_t missing_constant = -1;

  size_t num_inputs() const { return input_types.size(); }
  bool has_input(size_t i) const { return i < input_types.size() && input_types[i] != nullptr; }
  const TensorType& type(size_t i) const { return *input_types[i]; }
  // An error whose message starts with the node description.
  Error Fail(ErrorCode code, const std::string& message) const;
  // The constant value of input i, or an error saying it must be constant.
  Result<const Tensor*> RequireConstant(size_t i, const char* what) const;
};

// What a reference kernel sees: input tensors and the inferred output types.
struct KernelContext {
  const Node& node;
  int64_t opset = 17;
  std::vector<const Tensor*> inputs;  // nullptr for omitted inputs
  std::vector<TensorType> output_types;

  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const Tensor& in(size_t i) const { return *inputs[i]; }
};

enum class OpKind {
  kElementwise,    // one output element from the same-position input elements
  kReduction,      // reduces one or more axes
  kNormalization,  // softmax, layer norm: reduce then broadcast back
  kMatMul,         // MatMul, Gemm
  kDataMovement,   // transpose, reshape, slice, gather, concat...
  kConstant,       // produces values that do not depend on tensor data
};

struct OpCost {
  double flops = 0;            // arithmetic operations, counting FMA as 2
  double transcendentals = 0;  // exp, erf, tanh, sqrt... evaluations
};

using InferFn = Result<std::vector<TensorType>> (*)(const InferContext&);
using KernelFn = Result<std::vector<Tensor>> (*)(const KernelContext&);
using CostFn = OpCost (*)(const Node&, const std::vector<const TensorType*>& inputs,
                          const std::vector<const TensorType*>& outputs);

struct OpSchema {
  std::string op_type;
  OpKind kind;
  int min_inputs;
  int max_inputs;  // -1: variadic
  InferFn infer;
  KernelFn run;
  CostFn cost;
};

// nullptr when the op is not supported. Ops of the default domain ("" or
// "ai.onnx") are found; other domains are not supported.
const OpSchema* FindOpSchema(std::string_view domain, std::string_view op_type);
std::vector<std::string> SupportedOpTypes();

// Where a Slice node reads its input: per input axis the first index and the
// step, and the output dims. Starts, ends, axes and steps must be constants
// (initializers or, before opset 10, attributes); fusion reads a slice as a
// strided view of its input this way.
struct SliceWindow {
  Dims out;
  std::vector<int64_t> start, step;
};
Result<SliceWindow> ResolveSliceNode(const Graph& graph, const Node& node);

// Registration tables, one per op family (defined in ops_*.cpp).
void AppendElementwiseOps(std::vector<OpSchema>& table);
void AppendReductionOps(std::vector<OpSchema>& table);
void AppendShapeOps(std::vector<OpSchema>& table);
void AppendConvOps(std::vector<OpSchema>& table);
void AppendResizeOps(std::vector<OpSchema>& table);

}  // namespace fusetune::graph
