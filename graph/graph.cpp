#include "graph/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

namespace fusetune::graph {

std::string TensorType::ToString() const {
  std::string s = std::string(DataTypeName(dtype)) + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    if (i < symbols.size() && !symbols[i].empty()) s += symbols[i] + "=";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

namespace {
template <typename T>
Result<T> GetTyped(const std::map<std::string, AttrValue>& values, const std::string& name,
                   std::optional<T> fallback, const char* type_name) {
  auto it = values.find(name);
  if (it == values.end()) {
    if (fallback) return *fallback;
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("required attribute '{}' is missing", name));
  }
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("attribute '{}' is not of type {}", name, type_name));
}
}  // namespace

Result<int64_t> Attributes::GetInt(const std::string& name, std::optional<int64_t> fallback) const {
  return GetTyped<int64_t>(values_, name, fallback, "int");
}
Result<float> Attributes::GetFloat(const std::string& name, std::optional<float> fallback) const {
  auto it = values_.find(name);  // ints are accepted where a float is expected
  if (it != values_.end())
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) return static_cast<float>(*v);
  return GetTyped<float>(values_, name, fallback, "float");
}
Result<std::string> Attributes::GetString(const std::string& name,
                                          std::optional<std::string> fallback) const {
  return GetTyped<std::string>(values_, name, fallback, "string");
}
Result<std::vector<int64_t>> Attributes::GetInts(
    const std::string& name, std::optional<std::vector<int64_t>> fallback) const {
  return GetTyped<std::vector<int64_t>>(values_, name, fallback, "ints");
}
Result<std::vector<float>> Attributes::GetFloats(const std::string& name) const {
  return GetTyped<std::vector<float>>(values_, name, std::nullopt, "floats");
}
Result<Tensor> Attributes::GetTensor(const std::string& name) const {
  return GetTyped<Tensor>(values_, name, std::nullopt, "tensor");
}

bool Attributes::operator==(const Attributes& other) const { return values_ == other.values_; }

void Graph::IndexName(ValueId id) {
  if (!values[id].name.empty()) name_index_[values[id].name] = id;
}

ValueId Graph::AddValue(std::string value_name) {
  Value v;
  v.name = std::move(value_name);
  values.push_back(std::move(v));
  const ValueId id = static_cast<ValueId>(values.size() - 1);
  IndexName(id);
  return id;
}

ValueId Graph::AddInput(std::string value_name, TensorType type) {
  const ValueId id = AddValue(std::move(value_name));
  values[id].type = std::move(type);
  values[id].has_type = true;
  values[id].is_input = true;
  inputs.push_back(id);
  return id;
}

ValueId Graph::AddConstant(std::string value_name, Tensor tensor) {
  const ValueId id = AddValue(std::move(value_name));
  Value& v = values[id];
  v.type.dtype = tensor.dtype();
  v.type.dims = tensor.dims();
  v.has_type = true;
  v.constant = std::make_shared<const Tensor>(std::move(tensor));
  return id;
}

int32_t Graph::AddNode(Node node) {
  const auto index = static_cast<int32_t>(nodes.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    values[node.outputs[i]].producer = index;
    values[node.outputs[i]].producer_output = static_cast<int32_t>(i);
  }
  nodes.push_back(std::move(node));
  return index;
}

std::string Graph::UniqueName(const std::string& prefix) {
  for (int64_t i = static_cast<int64_t>(values.size());; ++i) {
    std::string candidate = fmt::format("{}_{}", prefix, i);
    if (!name_index_.count(candidate)) return candidate;
  }
}

std::optional<ValueId> Graph::FindValue(const std::string& value_name) const {
  auto it = name_index_.find(value_name);
  if (it == name_index_.end()) return std::nullopt;
  return it->second;
}

void Graph::Prefetch() const {
  auto fetch = [](const void* p) {
    if (p != nullptr) __builtin_prefetch(p);
  };
  for (const Node& node : nodes) {
    fetch(node.op_type.data());
    fetch(node.inputs.data());
    fetch(node.outputs.data());
    if (!node.attrs.empty()) fetch(&*node.attrs.all().begin());
  }
  for (const Value& value : values) {
    fetch(value.name.data());
    fetch(value.type.dims.data());
    fetch(value.constant.get());
  }
}

ValueUses::ValueUses(const Graph& graph) : begin_(graph.values.size() + 1, 0) {
  for (const Node& node : graph.nodes)
    for (ValueId v : node.inputs)
      if (v != kNoValue) ++begin_[v + 1];
  for (size_t v = 0; v < graph.values.size(); ++v) begin_[v + 1] += begin_[v];
  uses_.resize(begin_.back());
  std::vector<int32_t> fill(begin_.begin(), begin_.end() - 1);
  for (int32_t n = 0; n < static_cast<int32_t>(graph.nodes.size()); ++n)
    for (int32_t s = 0; s < static_cast<int32_t>(graph.nodes[n].inputs.size()); ++s)
      if (const ValueId v = graph.nodes[n].inputs[s]; v != kNoValue) uses_[fill[v]++] = {n, s};
}

ValueUses Graph::Consumers() const { return ValueUses(*this); }

void Graph::ReplaceAllUses(ValueId from, ValueId to) {
  for (Node& node : nodes)
    for (ValueId& in : node.inputs)
      if (in == from) in = to;
  for (ValueId& out : outputs)
    if (out == from) out = to;
}

void Graph::Compact(const std::vector<bool>& dead_nodes) {
  std::vector<Node> kept;
  for (size_t n = 0; n < nodes.size(); ++n)
    if (n >= dead_nodes.size() || !dead_nodes[n]) kept.push_back(std::move(nodes[n]));
  nodes = std::move(kept);

  std::vector<bool> used(values.size(), false);
  for (ValueId v : inputs) used[v] = true;
  for (ValueId v : outputs) used[v] = true;
  for (const Node& node : nodes) {
    for (ValueId v : node.inputs)
      if (v != kNoValue) used[v] = true;
    for (ValueId v : node.outputs)
      if (v != kNoValue) used[v] = true;
  }
  std::vector<ValueId> remap(values.size(), kNoValue);
  std::vector<Value> new_values;
  for (size_t v = 0; v < values.size(); ++v) {
    if (!used[v]) continue;
    remap[v] = static_cast<ValueId>(new_values.size());
    new_values.push_back(std::move(values[v]));
  }
  values = std::move(new_values);
  auto fix = [&](ValueId& v) {
    if (v != kNoValue) v = remap[v];
  };
  for (ValueId& v : inputs) fix(v);
  for (ValueId& v : outputs) fix(v);
  for (Value& v : values) v.producer = -1;
  for (int32_t n = 0; n < static_cast<int32_t>(nodes.size()); ++n) {
    for (ValueId& v : nodes[n].inputs) fix(v);
    for (size_t i = 0; i < nodes[n].outputs.size(); ++i) {
      fix(nodes[n].outputs[i]);
      if (nodes[n].outputs[i] != kNoValue) {
        values[nodes[n].outputs[i]].producer = n;
        values[nodes[n].outputs[i]].producer_output = static_cast<int32_t>(i);
      }
    }
  }
  name_index_.clear();
  for (ValueId v = 0; v < static_cast<ValueId>(values.size()); ++v) IndexName(v);
}

Status Graph::TopologicalSort() {
  const auto n = static_cast<int32_t>(nodes.size());
  std::vector<int32_t> pending(n, 0);
  std::vector<int32_t> producer_of(values.size(), -1);
  for (int32_t i = 0; i < n; ++i)
    for (ValueId v : nodes[i].outputs)
      if (v != kNoValue) producer_of[v] = i;
  std::vector<std::vector<int32_t>> users(n);
  for (int32_t i = 0; i < n; ++i)
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue && producer_of[v] >= 0) {
        users[producer_of[v]].push_back(i);
        ++pending[i];
      }
  // A min-heap on the original index keeps the existing order where legal.
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
  for (int32_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<int32_t> order;
  while (!ready.empty()) {
    const int32_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int32_t u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (static_cast<int32_t>(order.size()) != n) {
    for (int32_t i = 0; i < n; ++i)
      if (pending[i] > 0)
        return Error(ErrorCode::kInvalidArgument,
                     fmt::format("graph has a cycle through {}", Describe(i)));
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (int32_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  IndexProducers();
  return Status::Ok();
}

void Graph::IndexProducers() {
  for (int32_t i = 0; i < static_cast<int32_t>(nodes.size()); ++i)
    for (size_t k = 0; k < nodes[i].outputs.size(); ++k)
      if (nodes[i].outputs[k] != kNoValue) {
        values[nodes[i].outputs[k]].producer = i;
        values[nodes[i].outputs[k]].producer_output = static_cast<int32_t>(k);
      }
}

Status Graph::Validate() const {
  std::vector<bool> defined(values.size(), false);
  for (ValueId v = 0; v < static_cast<ValueId>(values.size()); ++v)
    if (values[v].is_input || values[v].is_constant()) defined[v] = true;
  for (int32_t n = 0; n < static_cast<int32_t>(nodes.size()); ++n) {
    for (ValueId v : nodes[n].inputs) {
      if (v == kNoValue) continue;
      if (v < 0 || v >= static_cast<ValueId>(values.size()))
        return Error(ErrorCode::kInternal,
                     fmt::format("{} reads value id {} out of range", Describe(n), v));
      if (!defined[v])
        return Error(ErrorCode::kInvalidArgument, fmt::format("{} reads '{}' before it is produced",
                                                              Describe(n), values[v].name));
    }
    for (ValueId v : nodes[n].outputs) {
      if (v == kNoValue) continue;
      if (defined[v])
        return Error(
            ErrorCode::kInvalidArgument,
            fmt::format("value '{}' is produced twice (again by {})", values[v].name, Describe(n)));
      defined[v] = true;
    }
  }
  for (ValueId v : outputs)
    if (v == kNoValue || !defined[v])
      return Error(ErrorCode::kInvalidArgument, fmt::format("graph output '{}' is never produced",
                                                            v == kNoValue ? "?" : values[v].name));
  return Status::Ok();
}

std::string Graph::Describe(int32_t node_index) const {
  const Node& node = nodes.at(node_index);
  if (!node.name.empty()) return fmt::format("node '{}' ({})", node.name, node.op_type);
  return fmt::format("node #{} ({})", node_index, node.op_type);
}

}  // namespace fusetune::graph
