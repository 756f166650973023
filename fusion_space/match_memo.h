// Reusing matches across repeated layers. A 12-layer encoder holds the same
// groups twelve times, differing only in which nodes and values they use;
// matching each from scratch was a third of compiling a stored plan. The
// memo keeps one allowed match per structure and, for a group of the same
// structure, translates it (node and value ids) instead of matching again.
//
// "The same structure" is everything a matcher can observe about a group:
// per node in order, the op, domain, attributes and operand types; the
// wiring inside the group; for each value the group produces, which of its
// uses are inside (and where) and whether it is a graph output; for each
// value it reads from outside, its type, whether it is a graph input or a
// constant, and a constant's value unless the kernel binds it as an operand
// (weights) rather than reading it while matching (scalars, masks). The
// group must also be convex in its own graph, which is checked afresh.
// Only allowed matches are kept: most forbidden sets are rejected by the
// matcher faster than they could be compared.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "fusion_space/dataflow.h"
#include "fusion_space/match.h"

namespace fusetune::fusion_space {

class MatchMemo {
 public:
  // Value ids of one group paired with another's, one to one: marks per
  // value (an epoch tells this pairing's from older ones), so a pair is
  // added and looked up in constant time.
  struct Pairing {
    explicit Pairing(size_t graph_values) : values(graph_values) {}
    size_t values;  // of the graph: the marks' size, allocated on first use
    uint32_t epoch = 1;
    std::vector<std::pair<uint32_t, graph::ValueId>> to_of, from_of;  // (epoch, partner)
    // Adds from -> to; false when either side is already paired otherwise.
    bool Pair(graph::ValueId from, graph::ValueId to);
    graph::ValueId To(graph::ValueId from) const;  // kNoValue when `from` is not paired
    void Reset();                                  // forgets every pair
  };

  MatchMemo(const graph::Graph& graph, const Dataflow& flow)
      : graph_(graph), flow_(flow), pairing_(graph.values.size()) {}

  // The match of `group` (ascending) translated from an allowed match of a
  // group of the same structure; nullopt when there is none.
  std::optional<GroupMatch> Find(std::span<const int32_t> group) const;
  // Remembers the match of `group`, for which Find found nothing, when it is
  // allowed (reference instances, single nodes, are cheaper to match again),
  // and gives it a structure id that Find's translations carry.
  void Add(std::span<const int32_t> group, GroupMatch* match);

 private:
  struct Entry {
    std::vector<int32_t> nodes;
    GroupMatch match;
  };
  // A hash of the cheap part of the structure (ops and output shapes): entries
  // under one hash are compared in full.
  uint64_t ShapeHash(std::span<const int32_t> group) const;
  // Whether `group` has the structure of `entry`'s group; if so pairing_
  // holds their value ids, one to one.
  bool Correspond(const Entry& entry, std::span<const int32_t> group) const;

  const graph::Graph& graph_;
  const Dataflow& flow_;
  mutable std::vector<uint64_t> node_hash_;  // per node, computed on first use (0: not yet)
  mutable Pairing pairing_;                  // Correspond's, reused
  std::multimap<uint64_t, Entry> entries_;
  int32_t structures_ = 0;
};

}  // namespace fusetune::fusion_space
