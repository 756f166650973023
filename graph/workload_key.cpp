#include "graph/workload_key.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_map>

#include "common/hash.h"

namespace fusetune::graph {

std::string WorkloadKey::ToString() const { return HashToHex(hash); }

namespace {

void HashType(Hasher& h, const TensorType& t, KeyScope scope = KeyScope::kExact) {
  h.AddInt(static_cast<int>(t.dtype)).Add(t.dims.size());
  if (scope == KeyScope::kExact)
    for (int64_t d : t.dims) h.AddInt(d);
}

void HashAttr(Hasher& h, const AttrValue& value) {
  h.Add(value.index());
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          h.AddInt(v);
        else if constexpr (std::is_same_v<T, float>)
          h.AddDouble(v);
        else if constexpr (std::is_same_v<T, std::string>)
          h.AddString(v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          h.Add(v.size());
          for (auto x : v) h.AddInt(x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          h.Add(v.size());
          for (auto x : v) h.AddDouble(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          h.Add(v.size());
          for (const auto& x : v) h.AddString(x);
        } else {
          HashType(h, TensorType{v.dtype(), v.dims(), {}});
          h.AddBytes(v.raw(), v.nbytes());
        }
      },
      value);
}

uint64_t NodeLocalHash(const Graph& g, const Node& node, KeyScope scope) {
  Hasher h;
  h.AddString(node.domain).AddString(node.op_type).Add(node.inputs.size()).Add(node.outputs.size());
  for (const auto& [name, value] : node.attrs.all()) {
    h.AddString(name);
    HashAttr(h, value);
  }
  for (ValueId v : node.outputs) {
    if (v == kNoValue)
      h.Add(0xdead);
    else
      HashType(h, g.type(v), scope);
  }
  return h.digest();
}

uint64_t LeafHash(const Graph& g, ValueId v, KeyScope scope) {
  const Value& value = g.value(v);
  Hasher h(0x6c656166);
  HashType(h, value.type, scope);
  h.Add(value.is_constant());
  if (value.is_constant()) {
    const Tensor& t = *value.constant;
    // Integer constants are shapes, axes and indices: their values follow
    // the shape (a Reshape target names the sequence length), so the
    // structure scope leaves them out with the dimensions.
    const bool semantic =
        IsFloat(t.dtype()) ? t.numel() <= kSemanticConstantElements : scope == KeyScope::kExact;
    // A shape-only constant (parsed for its structure) has no bytes to add.
    if (semantic && t.defined()) h.AddBytes(t.raw(), t.nbytes());
  }
  return h.digest();
}

}  // namespace

namespace {

// Whether each output of the subset's nodes leaves it: read by a node
// outside, or a graph output. By position in the subset, then output slot.
std::vector<std::pair<int32_t, int32_t>> Exits(const Graph& g, const std::vector<int32_t>& nodes,
                                               const std::vector<int32_t>& position,
                                               const std::function<int32_t(int32_t)>& local,
                                               const ValueUses* uses) {
  std::vector<bool> used_outside;
  if (uses == nullptr) {
    std::vector<bool> in_subset(g.nodes.size(), false);
    for (int32_t n : nodes) in_subset[n] = true;
    used_outside.assign(g.values.size(), false);
    for (int32_t n = 0; n < static_cast<int32_t>(g.nodes.size()); ++n)
      if (!in_subset[n])
        for (ValueId v : g.nodes[n].inputs)
          if (v != kNoValue) used_outside[v] = true;
  }
  auto leaves = [&](ValueId v) {
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return true;
    if (uses == nullptr) return static_cast<bool>(used_outside[v]);
    for (auto [consumer, slot] : (*uses)[v])
      if (local(consumer) < 0) return true;
    return false;
  };
  std::vector<std::pair<int32_t, int32_t>> exits;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = g.nodes[nodes[i]];
    for (int32_t k = 0; k < static_cast<int32_t>(node.outputs.size()); ++k) {
      const ValueId v = node.outputs[k];
      if (v != kNoValue && leaves(v)) exits.emplace_back(position[i], k);
    }
  }
  std::sort(exits.begin(), exits.end());
  return exits;
}

}  // namespace

CanonicalSubgraph CanonicalizeSubgraph(const Graph& g, std::span<const int32_t> nodes_in,
                                       KeyScope scope, const ValueUses* uses) {
  std::vector<int32_t> nodes(nodes_in.begin(), nodes_in.end());
  std::sort(nodes.begin(), nodes.end());  // graph order is topological
  // Node index -> position in `nodes` (sorted), or -1.
  auto local_of = [&nodes](int32_t node) -> int32_t {
    auto it = std::lower_bound(nodes.begin(), nodes.end(), node);
    return it != nodes.end() && *it == node ? static_cast<int32_t>(it - nodes.begin()) : -1;
  };
  const auto count = static_cast<int32_t>(nodes.size());
  auto internal_producer = [&](ValueId v) -> int32_t {
    if (v == kNoValue) return -1;
    const int32_t p = g.value(v).producer;
    return p >= 0 ? local_of(p) : -1;
  };

  // Per node: its local hash; per input slot (flat, from in_begin[i]): the
  // internal producer (-1 outside) and, for leaves, the leaf hash.
  std::vector<uint64_t> node_hash(count), leaf_hash;
  std::vector<int32_t> in_begin(count + 1, 0), in_producer;
  for (int32_t i = 0; i < count; ++i) {
    const Node& node = g.nodes[nodes[i]];
    node_hash[i] = NodeLocalHash(g, node, scope);
    for (ValueId v : node.inputs) {
      const int32_t p = internal_producer(v);
      in_producer.push_back(p);
      leaf_hash.push_back(p < 0 && v != kNoValue ? LeafHash(g, v, scope) : 0);
    }
    in_begin[i + 1] = static_cast<int32_t>(in_producer.size());
  }

  // Upward (producer-side) and downward (consumer-side) structural hashes.
  std::vector<uint64_t> up(count), down(count), depth(count, 0);
  std::vector<int32_t> user_count(count + 1, 0);
  for (int32_t i = 0; i < count; ++i) {
    const Node& node = g.nodes[nodes[i]];
    Hasher h(node_hash[i]);
    for (int32_t k = in_begin[i]; k < in_begin[i + 1]; ++k) {
      const int32_t p = in_producer[k];
      if (p >= 0) {
        h.Add(up[p]).AddInt(g.value(node.inputs[k - in_begin[i]]).producer_output);
        depth[i] = std::max(depth[i], depth[p] + 1);
        ++user_count[p + 1];
      } else {
        h.Add(leaf_hash[k]);
      }
    }
    up[i] = h.digest();
  }
  // Users of each node as flat (user, slot) lists.
  for (int32_t i = 0; i < count; ++i) user_count[i + 1] += user_count[i];
  std::vector<std::pair<int32_t, int32_t>> users(user_count[count]);
  std::vector<int32_t> fill(user_count.begin(), user_count.end() - 1);
  for (int32_t i = 0; i < count; ++i)
    for (int32_t k = in_begin[i]; k < in_begin[i + 1]; ++k)
      if (in_producer[k] >= 0) users[fill[in_producer[k]]++] = {i, k - in_begin[i]};
  std::vector<uint64_t> parts;
  for (int32_t i = count - 1; i >= 0; --i) {
    parts.clear();
    for (int32_t k = user_count[i]; k < user_count[i + 1]; ++k)
      parts.push_back(HashCombine(down[users[k].first], static_cast<uint64_t>(users[k].second)));
    std::sort(parts.begin(), parts.end());
    Hasher h(up[i]);
    for (uint64_t p : parts) h.Add(p);
    down[i] = h.digest();
  }

  std::vector<int32_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (depth[a] != depth[b]) return depth[a] < depth[b];
    return down[a] < down[b];
  });
  std::vector<int32_t> position(count);
  for (int32_t i = 0; i < count; ++i) position[order[i]] = i;

  // Final hash over the canonical order, with leaves numbered by first use.
  std::unordered_map<ValueId, int32_t> leaf_index;
  Hasher h(0x776b6579 + kWorkloadKeyVersion + (scope == KeyScope::kStructure ? 0x100 : 0));
  h.Add(count);
  for (int32_t i : order) {
    const Node& node = g.nodes[nodes[i]];
    h.Add(node_hash[i]);
    for (int32_t k = in_begin[i]; k < in_begin[i + 1]; ++k) {
      const ValueId v = node.inputs[k - in_begin[i]];
      const int32_t p = in_producer[k];
      if (p >= 0) {
        h.Add(1).AddInt(position[p]).AddInt(g.value(v).producer_output);
      } else if (v == kNoValue) {
        h.Add(2);
      } else {
        auto [it, inserted] = leaf_index.emplace(v, static_cast<int32_t>(leaf_index.size()));
        h.Add(3).AddInt(it->second).Add(leaf_hash[k]);
      }
    }
  }
  // Which values leave the subgraph.
  const auto exits = Exits(g, nodes, position, local_of, uses);
  for (auto [p, k] : exits) h.AddInt(p).AddInt(k);

  CanonicalSubgraph result;
  result.key.hash = h.digest();
  for (int32_t i : order) result.node_order.push_back(nodes[i]);
  return result;
}

WorkloadKey ComputeWorkloadKey(const Graph& graph, std::span<const int32_t> nodes,
                               const ValueUses* uses) {
  return CanonicalizeSubgraph(graph, nodes, KeyScope::kExact, uses).key;
}

uint64_t OrderedSubsetHash(const Graph& graph, std::span<const int32_t> nodes, ValueId marked) {
  Hasher h(0x6f72646572656421ULL);
  h.Add(nodes.size());
  for (int32_t n : nodes) {
    const Node& node = graph.nodes[n];
    h.Add(NodeLocalHash(graph, node, KeyScope::kExact));
    for (ValueId v : node.inputs) {
      if (v == kNoValue) {
        h.Add(0xdead);
        continue;
      }
      if (v == marked) {
        h.Add(0x6d61726b);
        continue;
      }
      const int32_t p = graph.value(v).producer;
      const auto it = std::find(nodes.begin(), nodes.end(), p);
      if (p >= 0 && it != nodes.end())
        h.AddInt(it - nodes.begin()).AddInt(graph.value(v).producer_output);
      else
        h.Add(LeafHash(graph, v, KeyScope::kExact));
    }
  }
  return h.digest();
}

CanonicalSubgraph CanonicalizeGraph(const Graph& graph, KeyScope scope) {
  std::vector<int32_t> all(graph.nodes.size());
  std::iota(all.begin(), all.end(), 0);
  return CanonicalizeSubgraph(graph, all, scope);
}

std::vector<int32_t> StructurePositions(const CanonicalSubgraph& exact,
                                        const CanonicalSubgraph& structure) {
  std::unordered_map<int32_t, int32_t> structure_position;
  for (size_t i = 0; i < structure.node_order.size(); ++i)
    structure_position[structure.node_order[i]] = static_cast<int32_t>(i);
  std::vector<int32_t> positions;
  positions.reserve(exact.node_order.size());
  for (int32_t node : exact.node_order) {
    auto it = structure_position.find(node);
    positions.push_back(it == structure_position.end() ? -1 : it->second);
  }
  return positions;
}

std::vector<int64_t> ShapeSignature(const Graph& graph, std::span<const int32_t> node_order) {
  std::vector<int64_t> dims;
  for (int32_t n : node_order)
    for (ValueId v : graph.nodes[n].outputs)
      if (v != kNoValue)
        for (int64_t d : graph.type(v).dims) dims.push_back(d);
  return dims;
}

}  // namespace fusetune::graph
