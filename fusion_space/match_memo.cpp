#include "fusion_space/match_memo.h"

#include <algorithm>
#include <cstring>

#include "common/hash.h"

namespace fusetune::fusion_space {

namespace {

// Constants up to this many elements are compared by value (scalars, axes,
// shapes); larger ones are weights bound as kernel operands, or masks, which
// the matchers read by value and which are compared when not bound.
constexpr int64_t kSmallConstant = 64;

int32_t LocalIndex(std::span<const int32_t> group, int32_t node) {
  auto it = std::lower_bound(group.begin(), group.end(), node);
  return it != group.end() && *it == node ? static_cast<int32_t>(it - group.begin()) : -1;
}

}  // namespace

bool MatchMemo::Pairing::Pair(graph::ValueId from, graph::ValueId to) {
  if (to_of.empty()) {  // first use: one slot per value of the graph
    to_of.assign(values, {0, graph::kNoValue});
    from_of.assign(values, {0, graph::kNoValue});
  }
  const bool from_paired = to_of[from].first == epoch, to_paired = from_of[to].first == epoch;
  if (from_paired || to_paired) return from_paired && to_paired && to_of[from].second == to;
  to_of[from] = {epoch, to};
  from_of[to] = {epoch, from};
  return true;
}

graph::ValueId MatchMemo::Pairing::To(graph::ValueId from) const {
  return !to_of.empty() && to_of[from].first == epoch ? to_of[from].second : graph::kNoValue;
}

void MatchMemo::Pairing::Reset() {
  if (++epoch == 0) {  // wrapped: forget every old mark
    to_of.clear();
    from_of.clear();
    epoch = 1;
  }
}

namespace {

// Maps every value id of an instance through `map`; false when one is missing.
bool Translate(const MatchMemo::Pairing& map, KernelInstance* k) {
  auto translate = [&](graph::ValueId& v) {
    if (v == graph::kNoValue) return true;
    v = map.To(v);
    return v != graph::kNoValue;
  };
  for (graph::ValueId& v : k->inputs)
    if (!translate(v)) return false;
  for (graph::ValueId& v : k->outputs)
    if (!translate(v)) return false;
  for (OperandSlot& slot : k->slots)
    if (!translate(slot.value)) return false;
  return true;
}

}  // namespace

uint64_t MatchMemo::ShapeHash(std::span<const int32_t> group) const {
  if (node_hash_.empty()) node_hash_.assign(graph_.nodes.size(), 0);
  uint64_t hash = group.size();
  for (int32_t n : group) {
    uint64_t& h = node_hash_[n];
    if (h == 0) {  // a bucket, not a key: a cheap mix of the op's name and output dims
      const std::string& op = graph_.nodes[n].op_type;
      uint64_t head = 0;
      std::memcpy(&head, op.data(), std::min<size_t>(op.size(), sizeof head));
      uint64_t x = head * 0x9e3779b97f4a7c15ULL + op.size();
      for (graph::ValueId v : graph_.nodes[n].outputs)
        if (v != graph::kNoValue)
          for (int64_t d : graph_.type(v).dims) x = x * 0x100000001b3ULL + static_cast<uint64_t>(d);
      h = Mix64(x) | 1;
    }
    hash = HashCombine(hash, h);
  }
  return hash;
}

bool MatchMemo::Correspond(const Entry& entry, std::span<const int32_t> group) const {
  const std::span<const int32_t> seen(entry.nodes);
  if (seen.size() != group.size()) return false;
  pairing_.Reset();
  auto same_uses = [&](graph::ValueId a, graph::ValueId b) {
    const auto& ua = flow_.uses(a);
    const auto& ub = flow_.uses(b);
    if (ua.size() != ub.size() || flow_.is_graph_output(a) != flow_.is_graph_output(b))
      return false;
    for (size_t u = 0; u < ua.size(); ++u)
      if (ua[u].second != ub[u].second ||
          LocalIndex(seen, ua[u].first) != LocalIndex(group, ub[u].first))
        return false;
    return true;
  };
  auto same_outside = [&](graph::ValueId a, graph::ValueId b) {
    const graph::Value& va = graph_.value(a);
    const graph::Value& vb = graph_.value(b);
    if (va.is_input != vb.is_input || va.is_constant() != vb.is_constant()) return false;
    if (!va.is_constant() || va.constant == vb.constant) return true;
    const bool by_type =
        va.constant->numel() > kSmallConstant && entry.match.instance.BindsValue(a);
    return by_type || *va.constant == *vb.constant;
  };
  for (size_t i = 0; i < group.size(); ++i) {
    const graph::Node& na = graph_.nodes[seen[i]];
    const graph::Node& nb = graph_.nodes[group[i]];
    if (na.op_type != nb.op_type || na.domain != nb.domain ||
        na.inputs.size() != nb.inputs.size() || na.outputs.size() != nb.outputs.size() ||
        !(na.attrs == nb.attrs))
      return false;
    for (size_t j = 0; j < na.inputs.size(); ++j) {
      const graph::ValueId a = na.inputs[j], b = nb.inputs[j];
      if ((a == graph::kNoValue) != (b == graph::kNoValue)) return false;
      if (a == graph::kNoValue) continue;
      const graph::Value& va = graph_.value(a);
      const graph::Value& vb = graph_.value(b);
      if (!va.type.SameShapeAndType(vb.type)) return false;
      const int32_t la = va.producer >= 0 ? LocalIndex(seen, va.producer) : -1;
      const int32_t lb = vb.producer >= 0 ? LocalIndex(group, vb.producer) : -1;
      if (la != lb) return false;
      if (la >= 0 ? va.producer_output != vb.producer_output : !same_outside(a, b)) return false;
      if (!pairing_.Pair(a, b)) return false;
    }
    for (size_t j = 0; j < na.outputs.size(); ++j) {
      const graph::ValueId a = na.outputs[j], b = nb.outputs[j];
      if ((a == graph::kNoValue) != (b == graph::kNoValue)) return false;
      if (a == graph::kNoValue) continue;
      if (!graph_.type(a).SameShapeAndType(graph_.type(b)) || !same_uses(a, b) ||
          !pairing_.Pair(a, b))
        return false;
    }
  }
  return true;
}

std::optional<GroupMatch> MatchMemo::Find(std::span<const int32_t> group) const {
  auto [first, last] = entries_.equal_range(ShapeHash(group));
  for (auto it = first; it != last; ++it) {
    const Entry& e = it->second;
    if (!Correspond(e, group)) continue;
    // Legal there; here only if no path leaves this group and comes back.
    if (group.size() > 1 && !flow_.CheckConvex(group)) return std::nullopt;
    GroupMatch m = e.match;
    m.instance.nodes.assign(group.begin(), group.end());
    if (!Translate(pairing_, &m.instance)) return std::nullopt;
    return m;
  }
  return std::nullopt;
}

void MatchMemo::Add(std::span<const int32_t> group, GroupMatch* match) {
  if (!match->decision.allowed() || match->instance.kind == KernelTemplate::kReference) return;
  match->structure = structures_++;
  Entry e;
  e.nodes.assign(group.begin(), group.end());
  e.match = *match;
  entries_.emplace(ShapeHash(group), std::move(e));
}

}  // namespace fusetune::fusion_space
