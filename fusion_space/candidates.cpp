#include "fusion_space/candidates.h"

#include <algorithm>
#include <chrono>

#include "fusion_space/layer_shift.h"
#include "fusion_space/match.h"
#include "fusion_space/match_memo.h"
#include "fusion_space/match_pool.h"

namespace fusetune::fusion_space {

namespace {

bool IsGemmOp(const graph::Node& node) {
  return node.op_type == "MatMul" || node.op_type == "Gemm";
}

// What a node contributes to the op mix of a set; a set is viable when some
// template could still implement it or one of its supersets.
struct OpMix {
  int gemms = 0, convs = 0, softmaxes = 0, reductions = 0, layer_norms = 0, unfusible = 0;
  int end_pools = 0;  // GlobalAveragePool/GlobalMaxPool/MaxPool: the end of a conv kernel
  // LayerNorm -> GEMM edges inside the set: a norm before a GEMM would be
  // its prologue, which no matcher takes, so no superset is legal either.
  int norm_into_gemm = 0;
  bool viable(size_t size) const {
    if (size > 1 && unfusible > 0) return false;
    if (norm_into_gemm > 0) return false;
    if (gemms > 3 || softmaxes > 1) return false;
    // The conv template computes one Conv with an elementwise epilogue, the
    // conv-chain template up to three (expand, depthwise, project).
    if (convs > 3 || (convs > 0 && (gemms + softmaxes + reductions + layer_norms) > 0))
      return false;
    // ... and may end with one pool, global or max (the conv template; a
    // conv chain writes its whole output).
    if (end_pools > 1 || (end_pools > 0 && convs > 1) ||
        (end_pools > 0 && (gemms + softmaxes + reductions + layer_norms) > 0))
      return false;
    if (softmaxes == 1 && gemms > 2) return false;
    // The GEMM template reduces rows only in a LayerNorm epilogue, one per output.
    if (gemms > 0 && (reductions > 0 || layer_norms > gemms || (softmaxes > 0 && layer_norms > 0)))
      return false;
    return true;
  }
};

// What one node adds to a set's op mix: classified once per node, since
// enumeration adds and removes each node many times.
struct NodeMix {
  int8_t gemm = 0, conv = 0, softmax = 0, reduction = 0, layer_norm = 0, unfusible = 0;
  int8_t end_pool = 0;
};

NodeMix ClassifyNode(const graph::Node& node) {
  const std::string& op = node.op_type;
  NodeMix m;
  if (IsGemmOp(node))
    m.gemm = 1;
  else if (op == "Conv")
    m.conv = 1;
  else if (op == "Softmax")
    m.softmax = 1;
  else if (op == "LayerNormalization")
    m.layer_norm = 1;
  else if (op.rfind("Reduce", 0) == 0)
    m.reduction = 1;
  m.end_pool = IsConvEndPoolOp(node) ? 1 : 0;
  m.unfusible = IsFusibleOp(node) || m.end_pool ? 0 : 1;
  return m;
}

void AddNodeToMix(const NodeMix& node, OpMix* mix, int sign) {
  mix->gemms += sign * node.gemm;
  mix->convs += sign * node.conv;
  mix->softmaxes += sign * node.softmax;
  mix->layer_norms += sign * node.layer_norm;
  mix->reductions += sign * node.reduction;
  mix->unfusible += sign * node.unfusible;
  mix->end_pools += sign * node.end_pool;
}

class Enumerator {
 public:
  Enumerator(const graph::Graph& g, const Dataflow& flow, const CandidateOptions& o,
             CandidateSet* out)
      : g_(g), flow_(flow), memo_(g, flow), o_(o), out_(out), n_(flow.num_nodes()) {
    adj_.resize(n_);
    for (int32_t i = 0; i < n_; ++i) {
      for (int32_t c : flow.consumers(i)) adj_[i].push_back(c);
      for (int32_t p : flow.producers(i)) adj_[i].push_back(p);
    }
    // GEMMs reading the same A are neighbours too: horizontal fusion (Q, K
    // and V projections) joins nodes that no edge connects.
    std::map<graph::ValueId, std::vector<int32_t>> gemms_by_a;
    for (int32_t i = 0; i < n_; ++i)
      if (IsGemmOp(g.nodes[i])) gemms_by_a[g.nodes[i].inputs[0]].push_back(i);
    for (auto& [a, list] : gemms_by_a)
      for (int32_t x : list)
        for (int32_t y : list)
          if (x != y) adj_[x].push_back(y);
    for (auto& list : adj_) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    in_sub_.assign(n_, 0);
    near_sub_.assign(n_, 0);
    for (int32_t i = 0; i < n_; ++i) node_mix_.push_back(ClassifyNode(g.nodes[i]));
    if (o.shift_repeated_layers) PrepareShift();
  }

  // One group per node, first (the partition's fallback), each node the
  // layer before's shifted where the shift maps that node (from its own
  // position: a one-node set's window).
  void AddSingleNodes() {
    for (int32_t i = 0; i < n_; ++i) {
      const int32_t p = shift_.period;
      if (p > 0 && i >= p && shift_.maps_from[i - p] <= i - p) {
        out_->groups.push_back(Shifted(out_->groups[i - p]));
        continue;
      }
      const int32_t node[] = {i};
      GroupMatch m = MatchGroup(g_, flow_, node);
      CandidateGroup c;
      c.nodes = {i};
      c.key = graph::ComputeWorkloadKey(g_, c.nodes, &flow_.all_uses());
      c.instance = std::make_shared<const KernelInstance>(std::move(m.instance));
      out_->groups.push_back(std::move(c));
    }
  }

  void Run() {
    // One extension list per depth, reused: allocating one per visited set
    // was a fifth of the enumeration.
    ext_.resize(o_.max_group_size + 1);
    anchors_.resize(n_);
    for (int32_t v = 0; v < n_; ++v) {
      Anchor& a = anchors_[v];
      a.first_group = out_->groups.size();
      const int64_t examined = out_->sets_examined;
      if (Shifts(v)) {
        ShiftAnchor(v);
      } else {
        reach_ = v;
        ext_[0].clear();
        for (int32_t u : adj_[v])
          if (Joinable(u, v)) ext_[0].push_back(u);
        Push(v);
        Extend(0, v);
        Pop(v);
        a.reach = reach_;
      }
      a.end_group = out_->groups.size();
      a.examined = out_->sets_examined - examined;
    }
  }

 private:
  // What enumeration found for the sets whose smallest node is one anchor.
  struct Anchor {
    size_t first_group = 0, end_group = 0;  // in out_->groups
    int64_t examined = 0;
    int32_t reach = 0;  // the largest node any of its sets held
  };

  // A node shifts within the windows from which the layer shift maps it
  // and from which its neighbours in the enumeration (horizontal GEMM
  // partners included) shift with it: enumeration from anchor w joins only
  // neighbours after w.
  void PrepareShift() {
    shift_ = FindLayerShift(g_, flow_);
    const int32_t p = shift_.period;
    shifts_from_.assign(n_, LayerShift::kNever);
    for (int32_t i = 0; p > 0 && i + p < n_; ++i) {
      if (shift_.maps_from[i] == LayerShift::kNever) continue;
      // Match neighbours from the largest down; the largest left unmatched
      // on either side must fall before the window (the anchor included).
      const std::vector<int32_t>& a = adj_[i];
      const std::vector<int32_t>& b = adj_[i + p];
      size_t ka = a.size(), kb = b.size();
      while (ka > 0 && kb > 0 && a[ka - 1] + p == b[kb - 1]) --ka, --kb;
      int32_t from = shift_.maps_from[i];
      if (ka > 0) from = std::max(from, a[ka - 1] + 1);
      if (kb > 0) from = std::max(from, b[kb - 1] - p + 1);
      shifts_from_[i] = from;
    }
  }
  // Anchor v's sets are anchor v - period's, shifted, when every node from
  // that anchor to the farthest its sets reached shifts within the window
  // starting at that anchor: enumeration there saw only those nodes and
  // their neighbours, and convexity looks only between a set's first and
  // last node.
  bool Shifts(int32_t v) const {
    const int32_t p = shift_.period;
    if (p == 0 || v < p) return false;
    const int32_t w = v - p;
    for (int32_t i = w; i <= anchors_[w].reach; ++i)
      if (shifts_from_[i] > w) return false;
    return true;
  }
  void ShiftAnchor(int32_t v) {
    const Anchor& from = anchors_[v - shift_.period];
    for (size_t i = from.first_group; i < from.end_group; ++i) {
      CandidateGroup c = Shifted(out_->groups[i]);
      out_->count_by_template[c.instance->kind]++;
      out_->groups.push_back(std::move(c));
      out_->groups_shifted++;
    }
    out_->sets_examined += from.examined;
    anchors_[v].reach = from.reach + shift_.period;
  }

  // `group` (every node mapped by the shift) moved to the next layer: the
  // same subgraph there, so the same workload key and match, value ids
  // shifted.
  CandidateGroup Shifted(const CandidateGroup& group) const {
    CandidateGroup c;
    c.nodes = group.nodes;
    for (int32_t& node : c.nodes) node += shift_.period;
    c.key = group.key;
    KernelInstance instance = *group.instance;
    instance.nodes = c.nodes;
    auto image = [&](graph::ValueId& value) {
      if (value != graph::kNoValue) value = shift_.image[value];
    };
    for (graph::ValueId& value : instance.inputs) image(value);
    for (graph::ValueId& value : instance.outputs) image(value);
    for (OperandSlot& slot : instance.slots) image(slot.value);
    c.instance = std::make_shared<const KernelInstance>(std::move(instance));
    return c;
  }

  void Push(int32_t w) {
    reach_ = std::max(reach_, w);
    sub_.push_back(w);
    in_sub_[w] = 1;
    near_sub_[w]++;
    for (int32_t u : adj_[w]) near_sub_[u]++;
    AddNodeToMix(node_mix_[w], &mix_, +1);
    mix_.norm_into_gemm += NormGemmEdges(w);
  }
  void Pop(int32_t w) {
    mix_.norm_into_gemm -= NormGemmEdges(w);
    sub_.pop_back();
    in_sub_[w] = 0;
    near_sub_[w]--;
    for (int32_t u : adj_[w]) near_sub_[u]--;
    AddNodeToMix(node_mix_[w], &mix_, -1);
  }
  // LayerNorm -> GEMM edges between w and the rest of the set.
  int NormGemmEdges(int32_t w) const {
    int edges = 0;
    if (node_mix_[w].layer_norm)
      for (int32_t c : flow_.consumers(w)) edges += c != w && in_sub_[c] && node_mix_[c].gemm;
    else if (node_mix_[w].gemm)
      for (int32_t p : flow_.producers(w)) edges += p != w && in_sub_[p] && node_mix_[p].layer_norm;
    return edges;
  }

  // Whether node u may join a set whose smallest node is v: a larger node,
  // within the span a recorded set may have (a set past it is never
  // recorded, nor is any superset, so it is not explored either).
  bool Joinable(int32_t u, int32_t v) const { return u > v && u - v <= o_.max_span; }

  // ESU's extension step: ext_[depth] holds the nodes that may join the
  // set sub_ (depth + 1 nodes, the smallest v).
  void Extend(size_t depth, int32_t v) {
    if (!mix_.viable(sub_.size())) return;
    if (sub_.size() > 1) Record();
    if (static_cast<int>(sub_.size()) == o_.max_group_size) return;
    std::vector<int32_t>& ext = ext_[depth];
    std::vector<int32_t>& next = ext_[depth + 1];
    while (!ext.empty()) {
      const int32_t w = ext.back();
      ext.pop_back();
      next.assign(ext.begin(), ext.end());
      for (int32_t u : adj_[w])
        if (Joinable(u, v) && !near_sub_[u] && std::find(next.begin(), next.end(), u) == next.end())
          next.push_back(u);
      Push(w);
      Extend(depth + 1, v);
      Pop(w);
    }
  }

  void Record() {
    std::vector<int32_t>& nodes = sorted_;
    nodes.assign(sub_.begin(), sub_.end());
    std::sort(nodes.begin(), nodes.end());
    if (nodes.back() - nodes.front() > o_.max_span) return;
    out_->sets_examined++;
    // Every template forbids a set that is not convex; checked here without
    // allocating or explaining, since enumeration drops forbidden sets (the
    // most common reason in repeated transformer layers).
    if (flow_.FindReentry(nodes, in_sub_, &walk_)) return;
    // Repeated layers repeat their node sets: reuse what matching found there.
    std::optional<GroupMatch> reused = memo_.Find(nodes);
    GroupMatch m = reused ? std::move(*reused) : MatchGroup(g_, flow_, nodes);
    if (!reused) memo_.Add(nodes, &m);
    if (!m.decision) return;
    CandidateGroup c;
    c.nodes = nodes;
    c.key = graph::ComputeWorkloadKey(g_, c.nodes, &flow_.all_uses());
    out_->count_by_template[m.instance.kind]++;
    c.instance = std::make_shared<const KernelInstance>(std::move(m.instance));
    out_->groups.push_back(std::move(c));
  }

  const graph::Graph& g_;
  const Dataflow& flow_;
  MatchMemo memo_;
  const CandidateOptions& o_;
  CandidateSet* out_;
  int32_t n_;
  std::vector<std::vector<int32_t>> adj_;
  std::vector<int32_t> sub_;
  std::vector<char> in_sub_;
  std::vector<int> near_sub_;  // how many of sub_ and their neighbours' marks cover a node
  std::vector<NodeMix> node_mix_;
  std::vector<std::vector<int32_t>> ext_;  // per depth
  std::vector<int32_t> sorted_;            // the set being recorded, ascending
  Dataflow::WalkScratch walk_;             // convexity checks
  OpMix mix_;
  LayerShift shift_;
  std::vector<int32_t> shifts_from_;  // per node: first window start it shifts from
  std::vector<Anchor> anchors_;
  int32_t reach_ = 0;  // of the anchor being enumerated
};

}  // namespace

CandidateSet EnumerateCandidates(const graph::Graph& g, const Dataflow& flow,
                                 const CandidateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CandidateSet set;
  set.num_nodes = flow.num_nodes();
  Enumerator enumerator(g, flow, options, &set);
  enumerator.AddSingleNodes();
  enumerator.Run();
  std::stable_sort(set.groups.begin() + set.num_nodes, set.groups.end(),
                   [](const CandidateGroup& a, const CandidateGroup& b) {
                     return a.nodes.front() < b.nodes.front();
                   });
  set.by_first_node.resize(set.num_nodes);
  for (size_t i = 0; i < set.groups.size(); ++i)
    set.by_first_node[set.groups[i].nodes.front()].push_back(static_cast<int32_t>(i));
  set.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return set;
}

}  // namespace fusetune::fusion_space
