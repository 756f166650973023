// Workload keys: a canonical hash of a (sub)graph that ignores tensor and
// node names, node order in the file, and the values of weights, and depends
// on op types, attributes, shapes, dtypes and structure. The same layer
// repeated N times yields one key; a different shape yields another.
//
// Constants count by value when they carry semantics rather than weights:
// non-float constants (shapes, axes, indices, masks) and float constants of
// at most kSemanticConstantElements elements (epsilon, scales; biases and weights are larger).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace fusetune::graph {

inline constexpr int64_t kSemanticConstantElements = 4;
// Bumped whenever the hashing scheme changes, so that stored keys go stale.
inline constexpr int kWorkloadKeyVersion = 1;

struct WorkloadKey {
  uint64_t hash = 0;
  std::string ToString() const;  // 16 hex digits
  bool operator==(const WorkloadKey&) const = default;
  auto operator<=>(const WorkloadKey&) const = default;
};

struct CanonicalSubgraph {
  WorkloadKey key;
  // The subset's node indices in canonical order: position i here is node
  // position i of the canonical graph, the same for every export of the
  // same structure (plans name nodes by these positions).
  std::vector<int32_t> node_order;
};

// kExact: the workload key. kStructure: the same hash without dimensions and
// integer constant values, so that one structure at two sequence lengths
// shares a structure key (the compiler's shape buckets).
enum class KeyScope { kExact, kStructure };

// `nodes` is a subset of node indices (any order). Values read from outside
// the subset are its inputs; values read outside it or graph outputs are its outputs.
// `uses`, when given, is Graph::Consumers() of `graph` (computed once by the
// caller): the cost is then proportional to the subset, not to the graph.
CanonicalSubgraph CanonicalizeSubgraph(const Graph& graph, std::span<const int32_t> nodes,
                                       KeyScope scope = KeyScope::kExact,
                                       const ValueUses* uses = nullptr);
WorkloadKey ComputeWorkloadKey(const Graph& graph, std::span<const int32_t> nodes,
                               const ValueUses* uses = nullptr);
// A hash of `nodes` in the order given (no canonical form: the same
// computation with its nodes listed in another order hashes differently),
// with the value `marked` read as a distinguished input: ops, attributes,
// output types, wiring, and leaves as in the exact key (small float
// constants by value). Equal hashes mean the same function of the same
// inputs. Linear in the subset: for memo keys of small chains, where the
// canonical key's cost is not worth paying.
uint64_t OrderedSubsetHash(const Graph& graph, std::span<const int32_t> nodes, ValueId marked);
// The whole graph.
CanonicalSubgraph CanonicalizeGraph(const Graph& graph, KeyScope scope = KeyScope::kExact);
// Every output dimension of the nodes in `node_order` (a canonical order):
// two workloads of one structure key have signatures of the same length,
// compared dimension by dimension to find the nearest tuned shape.
std::vector<int64_t> ShapeSignature(const Graph& graph, std::span<const int32_t> node_order);
// For each position of `exact`'s order (CanonicalizeGraph(graph)), that
// node's position in `structure`'s (CanonicalizeGraph(graph, kStructure)).
// Plans name nodes by exact positions, whose ties break on shapes, so
// another size of the model may number them otherwise; the structure order
// is the same at every size, and this maps one to the other.
std::vector<int32_t> StructurePositions(const CanonicalSubgraph& exact,
                                        const CanonicalSubgraph& structure);

}  // namespace fusetune::graph
