// Candidate groups: every legal fusion group of a graph up to a size bound,
// with its kernel instance and workload key (equal keys: the same kernel,
// so repeated layers are tuned once).
//
// Enumeration visits each connected node set once (Wernicke's ESU
// algorithm over the undirected dataflow graph), skips sets whose op mix no
// template can implement (pruning their supersets too) and sets that are not
// convex (every template forbids them), and matches the rest.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"
#include "graph/workload_key.h"

namespace fusetune::fusion_space {

struct CandidateGroup {
  std::vector<int32_t> nodes;  // ascending
  std::shared_ptr<const KernelInstance> instance;
  graph::WorkloadKey key;
};

struct CandidateOptions {
  int max_group_size = 12;
  // Groups spanning more node positions than this (last - first) are left
  // out; partition search relies on the bound (and no template needs more).
  int max_span = 63;
  // Groups of repeated layers shifted from the previous layer rather than
  // enumerated again (fusion_space/layer_shift.h); the result is the same.
  bool shift_repeated_layers = true;
};

struct CandidateSet {
  std::vector<CandidateGroup> groups;  // singletons first (one per node), then by first node
  std::vector<std::vector<int32_t>> by_first_node;  // indices into groups
  int64_t sets_examined = 0;                        // connected sets matched
  int64_t groups_shifted = 0;                       // of them, shifted from the layer before
  double seconds = 0;
  std::map<KernelTemplate, int64_t> count_by_template;  // multi-node groups only
  int64_t multi_node() const { return static_cast<int64_t>(groups.size()) - num_nodes; }
  int64_t num_nodes = 0;
};

CandidateSet EnumerateCandidates(const graph::Graph& graph, const Dataflow& flow,
                                 const CandidateOptions& options = {});

}  // namespace fusetune::fusion_space
