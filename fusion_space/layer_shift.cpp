#include "fusion_space/layer_shift.h"

#include <algorithm>
#include <map>

#include "graph/workload_key.h"

namespace fusetune::fusion_space {

namespace {

// (reader + period, slot) for every use of `from`, in the order of `to`'s uses.
bool UsesShift(const Dataflow& flow, graph::ValueId from, graph::ValueId to, int32_t period) {
  const auto& a = flow.uses(from);
  const auto& b = flow.uses(to);
  if (a.size() != b.size()) return false;
  std::vector<std::pair<int32_t, int32_t>> shifted(a.begin(), a.end()), other(b.begin(), b.end());
  for (auto& [reader, slot] : shifted) reader += period;
  std::sort(shifted.begin(), shifted.end());
  std::sort(other.begin(), other.end());
  return shifted == other;
}

bool OperandShifts(const graph::Graph& g, const Dataflow& flow, graph::ValueId x, graph::ValueId y,
                   int32_t period) {
  if (x == graph::kNoValue || y == graph::kNoValue) return x == y;
  const graph::Value& a = g.value(x);
  const graph::Value& b = g.value(y);
  if (!a.type.SameShapeAndType(b.type)) return false;
  if (a.producer >= 0)
    return b.producer == a.producer + period && b.producer_output == a.producer_output;
  if (b.producer >= 0) return false;
  if (x == y) return true;  // one value both layers read (an attention mask)
  // A layer's own weights: constants read once each (their semantic values
  // are in the node hashes compared already).
  return a.is_constant() && b.is_constant() && flow.uses(x).size() == 1 &&
         flow.uses(y).size() == 1 && !flow.is_graph_output(x) && !flow.is_graph_output(y);
}

// The first window start from which operand x of a node outside the window
// may stand for y of its shifted node: both non-constant values of one type
// made before their windows (graph inputs are made before every window).
int32_t LeafWindowStart(const graph::Graph& g, graph::ValueId x, graph::ValueId y, int32_t period) {
  if (x == graph::kNoValue || y == graph::kNoValue) return LayerShift::kNever;
  const graph::Value& a = g.value(x);
  const graph::Value& b = g.value(y);
  if (a.is_constant() || b.is_constant() || !a.type.SameShapeAndType(b.type))
    return LayerShift::kNever;
  return std::max({0, a.producer + 1, b.producer - period + 1});
}

// Node i + period is node i's twin but for its operands: the same op,
// attributes and types, its outputs read by the shifted readers.
bool SameNodeAndReaders(const graph::Graph& g, const Dataflow& flow,
                        const std::vector<uint64_t>& node_hash, int32_t i, int32_t period) {
  const int32_t j = i + period;
  if (period <= 0 || j >= static_cast<int32_t>(g.nodes.size())) return false;
  if (node_hash[i] != node_hash[j]) return false;
  const graph::Node& a = g.nodes[i];
  const graph::Node& b = g.nodes[j];
  if (a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size()) return false;
  for (size_t k = 0; k < a.outputs.size(); ++k) {
    const graph::ValueId x = a.outputs[k], y = b.outputs[k];
    if (x == graph::kNoValue || y == graph::kNoValue) {
      if (x != y) return false;
      continue;
    }
    if (flow.is_graph_output(x) != flow.is_graph_output(y) || !UsesShift(flow, x, y, period))
      return false;
  }
  return true;
}

// The first window start from which node i maps, with leaves standing for
// leaves, or kNever.
int32_t MapsFrom(const graph::Graph& g, const Dataflow& flow,
                 const std::vector<uint64_t>& node_hash, int32_t i, int32_t period) {
  if (!SameNodeAndReaders(g, flow, node_hash, i, period)) return LayerShift::kNever;
  const graph::Node& a = g.nodes[i];
  const graph::Node& b = g.nodes[i + period];
  int32_t from = 0;
  for (size_t s = 0; s < a.inputs.size() && from != LayerShift::kNever; ++s)
    if (!OperandShifts(g, flow, a.inputs[s], b.inputs[s], period))
      from = std::max(from, LeafWindowStart(g, a.inputs[s], b.inputs[s], period));
  return from;
}

// Node a's operands and outputs stand for node b's: in the image and, to
// keep it one to one, its inverse.
struct ValueImage {
  std::vector<graph::ValueId> image, preimage;
  bool KeepsOneToOne(const graph::Node& a, const graph::Node& b) const {
    for (size_t s = 0; s < a.inputs.size(); ++s) {
      const graph::ValueId x = a.inputs[s], y = b.inputs[s];
      if (x != graph::kNoValue && ((image[x] != graph::kNoValue && image[x] != y) ||
                                   (preimage[y] != graph::kNoValue && preimage[y] != x)))
        return false;
    }
    return true;
  }
  void Map(const graph::Node& a, const graph::Node& b) {
    auto map = [&](graph::ValueId x, graph::ValueId y) {
      if (x == graph::kNoValue) return;
      image[x] = y;
      preimage[y] = x;
    };
    for (size_t s = 0; s < a.inputs.size(); ++s) map(a.inputs[s], b.inputs[s]);
    for (size_t k = 0; k < a.outputs.size(); ++k) map(a.outputs[k], b.outputs[k]);
  }
};

std::vector<uint64_t> NodeHashes(const graph::Graph& g) {
  std::vector<uint64_t> hashes(g.nodes.size());
  for (int32_t i = 0; i < static_cast<int32_t>(g.nodes.size()); ++i) {
    const int32_t node[] = {i};
    hashes[i] = graph::OrderedSubsetHash(g, node, graph::kNoValue);
  }
  return hashes;
}

// The most frequent distances between consecutive nodes of one signature.
std::vector<int32_t> CandidatePeriods(const std::vector<uint64_t>& hashes, size_t how_many) {
  std::map<uint64_t, int32_t> last_seen;
  std::map<int32_t, int64_t> tally;
  for (int32_t i = 0; i < static_cast<int32_t>(hashes.size()); ++i) {
    auto [it, added] = last_seen.emplace(hashes[i], i);
    if (!added) {
      tally[i - it->second]++;
      it->second = i;
    }
  }
  std::vector<std::pair<int64_t, int32_t>> ranked;  // (-count, period)
  for (auto [period, count] : tally) ranked.emplace_back(-count, period);
  std::sort(ranked.begin(), ranked.end());
  std::vector<int32_t> out;
  for (size_t i = 0; i < ranked.size() && i < how_many; ++i) out.push_back(ranked[i].second);
  return out;
}

}  // namespace

bool ShiftMapsNode(const graph::Graph& g, const Dataflow& flow,
                   const std::vector<uint64_t>& node_hash, int32_t i, int32_t period) {
  if (!SameNodeAndReaders(g, flow, node_hash, i, period)) return false;
  const graph::Node& a = g.nodes[i];
  const graph::Node& b = g.nodes[i + period];
  for (size_t s = 0; s < a.inputs.size(); ++s)
    if (!OperandShifts(g, flow, a.inputs[s], b.inputs[s], period)) return false;
  return true;
}

LayerShift FindLayerShift(const graph::Graph& g, const Dataflow& flow) {
  LayerShift best;
  const int32_t n = static_cast<int32_t>(g.nodes.size());
  const std::vector<uint64_t> hashes = NodeHashes(g);
  int64_t best_mapped = 0;
  for (int32_t period : CandidatePeriods(hashes, 4)) {
    std::vector<char> maps(n, 0);
    int64_t mapped = 0;
    for (int32_t i = 0; i + period < n; ++i)
      mapped += maps[i] = ShiftMapsNode(g, flow, hashes, i, period);
    if (mapped >= period && mapped > best_mapped) {
      best_mapped = mapped;
      best.period = period;
      best.maps = std::move(maps);
    }
  }
  if (best.period == 0) return LayerShift{};
  // Exactly mapped nodes first, then those mapped from a window where they
  // keep the image one to one.
  ValueImage values{std::vector<graph::ValueId>(g.values.size(), graph::kNoValue),
                    std::vector<graph::ValueId>(g.values.size(), graph::kNoValue)};
  best.maps_from.assign(n, LayerShift::kNever);
  for (int32_t i = 0; i < n; ++i)
    if (best.maps[i]) {
      best.maps_from[i] = 0;
      values.Map(g.nodes[i], g.nodes[i + best.period]);
    }
  for (int32_t i = 0; i + best.period < n; ++i) {
    if (best.maps[i]) continue;
    const int32_t from = MapsFrom(g, flow, hashes, i, best.period);
    if (from == LayerShift::kNever || !values.KeepsOneToOne(g.nodes[i], g.nodes[i + best.period]))
      continue;
    best.maps_from[i] = from;
    values.Map(g.nodes[i], g.nodes[i + best.period]);
  }
  best.image = std::move(values.image);
  return best;
}

}  // namespace fusetune::fusion_space
