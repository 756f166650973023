// graph/: the intermediate representation and everything that reads or
// rewrites it without knowing about kernels.
//
// Map of the module: graph/README.md (what it offers, one line per file).
//
// Invariants of a Graph: nodes are in topological order; each value has at
// most one producer; a value is either a graph input, an initializer
// (constant), or a node output.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"
#include "graph/tensor.h"

namespace fusetune::graph {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

// A static shape. Dimensions that the model declared symbolically (batch,
// sequence) keep their name in `symbols` (empty string otherwise), so that
// shape buckets can find the dimension that varies.
struct TensorType {
  DataType dtype = DataType::kFloat32;
  Dims dims;
  std::vector<std::string> symbols;  // empty, or one entry per dim

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numel() const { return NumElements(dims); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DataTypeSize(dtype); }
  std::string ToString() const;  // "f32[B=2, 16]"
  bool SameShapeAndType(const TensorType& o) const { return dtype == o.dtype && dims == o.dims; }
};

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>,
                               std::vector<float>, std::vector<std::string>, Tensor>;

// Typed node attributes, kept sorted by name so printing and hashing are stable.
class Attributes {
 public:
  bool Has(const std::string& name) const { return values_.count(name) != 0; }
  void Set(const std::string& name, AttrValue value) { values_[name] = std::move(value); }
  void Erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, AttrValue>& all() const { return values_; }
  bool empty() const { return values_.empty(); }

  // Typed getters; the fallback is returned when the attribute is absent.
  // A present attribute of another type is a programmer-visible error value.
  Result<int64_t> GetInt(const std::string& name, std::optional<int64_t> fallback = {}) const;
  Result<float> GetFloat(const std::string& name, std::optional<float> fallback = {}) const;
  Result<std::string> GetString(const std::string& name,
                                std::optional<std::string> fallback = {}) const;
  Result<std::vector<int64_t>> GetInts(const std::string& name,
                                       std::optional<std::vector<int64_t>> fallback = {}) const;
  Result<std::vector<float>> GetFloats(const std::string& name) const;
  Result<Tensor> GetTensor(const std::string& name) const;

  bool operator==(const Attributes& other) const;

 private:
  std::map<std::string, AttrValue> values_;
};

struct Node {
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  std::string name;
  std::vector<ValueId> inputs;   // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue for an omitted optional output
  Attributes attrs;
};

struct Value {
  std::string name;
  TensorType type;
  bool has_type = false;
  int32_t producer = -1;  // node index, -1 for inputs and initializers
  int32_t producer_output = 0;
  bool is_input = false;
  std::shared_ptr<const Tensor> constant;  // set for initializers and folded values
  bool is_constant() const { return constant != nullptr; }
};

class Graph;

// The (node index, input slot) pairs that read each value, by node then
// slot, in one array (a graph's uses without an allocation per value).
class ValueUses {
 public:
  using Use = std::pair<int32_t, int32_t>;
  ValueUses() = default;
  explicit ValueUses(const Graph& graph);
  std::span<const Use> operator[](int32_t value) const {
    return {uses_.data() + begin_[value], uses_.data() + begin_[value + 1]};
  }
  size_t size() const { return begin_.empty() ? 0 : begin_.size() - 1; }

 private:
  std::vector<int32_t> begin_;  // value v's uses: [begin_[v], begin_[v + 1])
  std::vector<Use> uses_;
};

class Graph {
 public:
  std::string name;
  int64_t opset = 17;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  // Graph inputs whose value was bound when the model was loaded, because
  // shapes depend on them (input_values.h): constants now (and maybe folded
  // away), which a run may still feed, with the same value.
  std::map<std::string, std::shared_ptr<const Tensor>> bound_inputs;

  ValueId AddValue(std::string value_name);
  ValueId AddInput(std::string value_name, TensorType type);
  ValueId AddConstant(std::string value_name, Tensor tensor);
  // Appends a node and sets the producer of its outputs. Returns its index.
  int32_t AddNode(Node node);

  // A fresh value name not used yet, with the given prefix.
  std::string UniqueName(const std::string& prefix);
  std::optional<ValueId> FindValue(const std::string& value_name) const;

  const Value& value(ValueId id) const { return values.at(id); }
  Value& value(ValueId id) { return values.at(id); }
  const TensorType& type(ValueId id) const { return values.at(id).type; }

  // Consumers()[v] lists the (node index, input slot) pairs that read value v.
  ValueUses Consumers() const;
  // Asks the CPU to fetch every node's and value's heap data (operand
  // lists, attributes, dimensions, constants' headers) without waiting for
  // any: a pass over a graph whose data a large model's import has pushed
  // out of the caches then waits on memory in parallel, not one miss at a time.
  void Prefetch() const;
  // Redirects every use of `from` (node inputs and graph outputs) to `to`.
  void ReplaceAllUses(ValueId from, ValueId to);
  // Drops nodes whose index is marked in `dead`, then unreferenced values,
  // renumbering ids. Keeps graph inputs.
  void Compact(const std::vector<bool>& dead_nodes);
  // Reorders nodes topologically (stable), or returns an error naming a cycle.
  Status TopologicalSort();
  // Sets every node output's producer and producer_output from the node
  // list: after a pass put nodes in place of others.
  void IndexProducers();
  // Checks the invariants listed at the top of this file.
  Status Validate() const;

  // "node 'name' (Op)" or "node #i (Op)" for messages.
  std::string Describe(int32_t node_index) const;
  // Name index, rebuilt lazily when values are added.
 private:
  std::map<std::string, ValueId> name_index_;
  void IndexName(ValueId id);
};

}  // namespace fusetune::graph
