#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "fusion_space/match_gemm.h"
#include "fusion_space/match_util.h"
#include "fusion_space/view.h"

namespace fusetune::fusion_space {

namespace {

// A view's leading dims as (batch, head): rank 4 has both, rank 3 only batch.
struct Bh {
  int64_t b = 1, h = 1, b_stride = 0, h_stride = 0;
};

std::optional<Bh> LeadingBh(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  const size_t lead = dims.size() - 2;
  if (lead == 0) return Bh{};
  if (lead == 1) return Bh{dims[0], 1, strides[0], 0};
  if (lead == 2) return Bh{dims[0], dims[1], strides[0], strides[1]};
  return std::nullopt;
}

struct MaskInfo {
  kernels::MaskKind kind = kernels::MaskKind::kNone;
  graph::ValueId tensor = graph::kNoValue;     // additive mask read from a value
  std::shared_ptr<const graph::Tensor> owned;  // additive mask derived from a Where
  std::vector<int64_t> strides;                // of the mask, over the scores' dims
};

bool AllNonzero(const uint8_t* bytes, int64_t n) {
  return n <= 0 || std::memchr(bytes, 0, static_cast<size_t>(n)) == nullptr;
}

bool AllZero(const uint8_t* bytes, int64_t n) {
  uint64_t any = 0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    any |= word;
  }
  for (; i < n; ++i) any |= bytes[i];
  return any == 0;
}

// Whether a byte mask (bool or uint8, rows contiguous) keeps exactly the
// causal triangle: row i keeps its first i + (t - s) + 1 columns. A run
// check per row, since every compile of a model with a causal mask checks
// the whole s x t condition (an element at a time, it was a third of
// compiling a GPT-2 block).
bool ByteMaskIsCausal(const uint8_t* data, int64_t row_stride, int64_t s, int64_t t,
                      bool kept_where_nonzero) {
  for (int64_t i = 0; i < s; ++i) {
    const uint8_t* row = data + i * row_stride;
    const int64_t k = std::clamp<int64_t>(i + (t - s) + 1, 0, t);
    const bool ok = kept_where_nonzero ? AllNonzero(row, k) && AllZero(row + k, t - k)
                                       : AllZero(row, k) && AllNonzero(row + k, t - k);
    if (!ok) return false;
  }
  return true;
}

// Where(cond, a, b) with one branch the scores and the other a very negative
// constant: the kept positions, as a mask over the scores' dims.
FusionDecision WhereMask(const graph::Graph& g, int32_t p, graph::ValueId scores,
                         const graph::Dims& score_dims, MaskInfo* mask) {
  const graph::Node& node = g.nodes[p];
  const bool scores_if_true = node.inputs[1] == scores;
  const graph::ValueId other = scores_if_true ? node.inputs[2] : node.inputs[1];
  double fill;
  if (!ScalarConstant(g, other, &fill) || fill > -1e4)
    return FusionDecision::Forbid(fmt::format(
        "node {} (Where) does not fill masked scores with a large negative constant", p));
  const graph::Value& cond = g.value(node.inputs[0]);
  if (!cond.is_constant())
    return FusionDecision::Forbid(fmt::format("node {} (Where): the condition is not constant", p));
  auto strides = BroadcastStrides(cond.constant->dims(), score_dims);
  if (!strides)
    return FusionDecision::Forbid(
        fmt::format("node {} (Where): the condition does not broadcast", p));
  const size_t r = score_dims.size();
  const int64_t s = score_dims[r - 2], t = score_dims[r - 1];
  auto kept = [&](int64_t i, int64_t j) {
    const bool c = cond.constant->GetAsDouble(i * (*strides)[r - 2] + j * (*strides)[r - 1]) != 0;
    return c == scores_if_true;
  };
  bool leading_broadcast = true;
  for (size_t i = 0; i + 2 < r; ++i) leading_broadcast = leading_broadcast && (*strides)[i] == 0;
  bool causal = leading_broadcast;
  const graph::DataType dtype = cond.constant->dtype();
  if (causal && (dtype == graph::DataType::kBool || dtype == graph::DataType::kUInt8) &&
      (*strides)[r - 1] == 1) {
    causal = ByteMaskIsCausal(reinterpret_cast<const uint8_t*>(cond.constant->raw()),
                              (*strides)[r - 2], s, t, scores_if_true);
  } else {
    for (int64_t i = 0; causal && i < s; ++i)
      for (int64_t j = 0; causal && j < t; ++j) causal = kept(i, j) == (j <= i + (t - s));
  }
  if (causal) {
    mask->kind = kernels::MaskKind::kCausal;
    return FusionDecision::Allow();
  }
  // Any other constant mask: an additive tensor of 0 and -inf.
  const graph::Dims& cd = cond.constant->dims();
  graph::Tensor additive(graph::DataType::kFloat32, cd);
  float* out = additive.data<float>();
  for (int64_t i = 0; i < additive.numel(); ++i) {
    const bool c = cond.constant->GetAsDouble(i) != 0;
    out[i] = c == scores_if_true ? 0.0f : -std::numeric_limits<float>::infinity();
  }
  mask->kind = kernels::MaskKind::kAdditive;
  mask->owned = std::make_shared<const graph::Tensor>(std::move(additive));
  mask->strides = *strides;
  return FusionDecision::Allow();
}

}  // namespace

FusionDecision MatchAttentionInstance(const graph::Graph& g, const Dataflow& flow,
                                      std::span<const int32_t> group, KernelInstance* k) {
  FT_RETURN_IF_DECISION(flow.CheckConvex(group));
  std::vector<char> inside(g.nodes.size(), 0);
  std::vector<int32_t> matmuls, softmaxes;
  for (int32_t n : group) {
    inside[n] = 1;
    if (g.nodes[n].op_type == "MatMul") matmuls.push_back(n);
    if (g.nodes[n].op_type == "Softmax") softmaxes.push_back(n);
  }
  if (matmuls.size() != 2 || softmaxes.size() != 1)
    return FusionDecision::Forbid("attention needs two MatMuls and one Softmax");
  std::sort(matmuls.begin(), matmuls.end());
  const int32_t m1 = matmuls[0], m2 = matmuls[1], sm = softmaxes[0];
  const graph::ValueId probs = g.nodes[sm].outputs[0];
  if (g.nodes[m2].inputs[0] != probs)
    return FusionDecision::Forbid("the second MatMul does not multiply the softmax by V");
  const graph::ValueId scores = g.nodes[m1].outputs[0];
  const graph::Dims& score_dims = g.type(scores).dims;
  const int64_t rank = static_cast<int64_t>(score_dims.size());
  int64_t axis = MatchIntAttr(g.nodes[sm], "axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) return FusionDecision::Forbid("softmax is not over the keys (last axis)");

  // Between the scores and the softmax: a scale, then at most one mask.
  std::set<int32_t> covered{m1, m2, sm};
  double scale = 1;
  bool seen_scale = false;  // walking back: a scale seen before a mask follows it
  MaskInfo mask;
  for (graph::ValueId v = g.nodes[sm].inputs[0]; v != scores;) {
    const int32_t p = g.value(v).producer;
    if (p < 0 || !inside[p])
      return FusionDecision::Forbid("the softmax does not read the first MatMul's scores");
    const graph::Node& node = g.nodes[p];
    covered.insert(p);
    double c;
    if ((node.op_type == "Div" || node.op_type == "Mul") && ScalarConstant(g, node.inputs[1], &c)) {
      scale *= node.op_type == "Div" ? 1 / c : c;
      seen_scale = true;
      v = node.inputs[0];
    } else if ((node.op_type == "Add" || node.op_type == "Where") && seen_scale) {
      return FusionDecision::Forbid("the scores are scaled after masking");
    } else if (node.op_type == "Add" && mask.kind == kernels::MaskKind::kNone) {
      const int32_t p0 = g.value(node.inputs[0]).producer;
      const bool chain_left = p0 >= 0 && inside[p0];
      const graph::ValueId t = chain_left ? node.inputs[1] : node.inputs[0];
      const int32_t pt = g.value(t).producer;
      if (pt >= 0 && inside[pt])
        return FusionDecision::Forbid("the mask is computed inside the group");
      auto strides = BroadcastStrides(g.type(t).dims, score_dims);
      if (!strides)
        return FusionDecision::Forbid("the additive mask does not broadcast to the scores");
      mask.kind = kernels::MaskKind::kAdditive;
      mask.tensor = t;
      mask.strides = *strides;
      v = chain_left ? node.inputs[0] : node.inputs[1];
    } else if (node.op_type == "Where" && mask.kind == kernels::MaskKind::kNone) {
      const graph::ValueId chain =
          (g.value(node.inputs[1]).producer >= 0 && inside[g.value(node.inputs[1]).producer])
              ? node.inputs[1]
              : node.inputs[2];
      FT_RETURN_IF_DECISION(WhereMask(g, p, chain, score_dims, &mask));
      v = chain;
    } else {
      return FusionDecision::Forbid(
          fmt::format("node {} ({}) between the scores and the softmax is not a scale or a mask", p,
                      node.op_type));
    }
  }

  StridedView q, kt, v, o;
  FT_RETURN_IF_DECISION(
      ResolveReadView(g, inside, g.nodes[m1].inputs[0], &q, /*allow_slices=*/true));
  FT_RETURN_IF_DECISION(
      ResolveReadView(g, inside, g.nodes[m1].inputs[1], &kt, /*allow_slices=*/true));
  FT_RETURN_IF_DECISION(
      ResolveReadView(g, inside, g.nodes[m2].inputs[1], &v, /*allow_slices=*/true));
  FT_RETURN_IF_DECISION(ResolveWriteView(g, inside, flow.all_uses(), g.nodes[m2].outputs[0], &o));
  for (const StridedView* view : {&q, &kt, &v}) {
    const int32_t p = g.value(view->base).producer;
    if (p >= 0 && inside[p])
      return FusionDecision::Forbid(fmt::format(
          "node {} ({}) computes an attention operand inside the group", p, g.nodes[p].op_type));
  }
  // Every view node between the bases and the MatMuls is part of the group.
  auto cover_read = [&](graph::ValueId from, graph::ValueId base) {
    for (graph::ValueId x = from; x != base; x = g.nodes[g.value(x).producer].inputs[0])
      covered.insert(g.value(x).producer);
  };
  cover_read(g.nodes[m1].inputs[0], q.base);
  cover_read(g.nodes[m1].inputs[1], kt.base);
  cover_read(g.nodes[m2].inputs[1], v.base);
  cover_read(o.base, g.nodes[m2].outputs[0]);
  if (covered.size() != group.size())
    return FusionDecision::Forbid("the group holds nodes outside the attention pattern");
  for (int32_t n : group)
    for (graph::ValueId out : g.nodes[n].outputs)
      if (out != graph::kNoValue && out != o.base && flow.LeavesGroup(out, inside))
        return FusionDecision::Forbid(fmt::format(
            "value {} inside the attention group is read outside it", g.value(out).name));

  auto qb = LeadingBh(q.dims, q.strides), kb = LeadingBh(kt.dims, kt.strides),
       vb = LeadingBh(v.dims, v.strides), ob = LeadingBh(o.dims, o.strides);
  if (!qb || !kb || !vb || !ob) return FusionDecision::Forbid("attention operands of rank above 4");
  if (qb->b != kb->b || qb->b != vb->b || qb->h != kb->h || qb->h != vb->h)
    return FusionDecision::Forbid("Q, K and V have different batch or head counts");
  if (o.strides.back() != 1)
    return FusionDecision::Forbid("the attention output is not written row-contiguously");

  *k = KernelInstance{};
  k->kind = KernelTemplate::kAttention;
  k->nodes.assign(group.begin(), group.end());
  std::sort(k->nodes.begin(), k->nodes.end());
  auto& d = k->attention;
  const size_t r = q.dims.size();
  d.batch = qb->b;
  d.heads = qb->h;
  d.seq_q = q.dims[r - 2];
  d.head_dim = q.dims[r - 1];
  d.seq_kv = kt.dims[r - 1];
  d.value_dim = v.dims[r - 1];
  d.q = {k->AddSlot(q.base, q.offset), qb->b_stride, qb->h_stride, q.strides[r - 2],
         q.strides[r - 1]};
  d.k = {k->AddSlot(kt.base, kt.offset), kb->b_stride, kb->h_stride, kt.strides[r - 1],
         kt.strides[r - 2]};
  d.v = {k->AddSlot(v.base, v.offset), vb->b_stride, vb->h_stride, v.strides[r - 2],
         v.strides[r - 1]};
  d.o = k->AddSlot(o.base);
  d.o_batch = ob->b_stride;
  d.o_head = ob->h_stride;
  d.o_row = o.strides[r - 2];
  d.scale = static_cast<float>(scale);
  d.mask = mask.kind;
  if (mask.kind == kernels::MaskKind::kAdditive) {
    auto mb = LeadingBh(score_dims, mask.strides);
    float* data = mask.owned ? k->AddOwned(mask.owned) : k->AddSlot(mask.tensor);
    d.mask_data = {data, mb->b_stride, mb->h_stride, mask.strides[r - 2], mask.strides[r - 1]};
  }
  k->outputs = {o.base};
  k->inputs = GroupInputs(g, k->nodes, inside);
  k->summary = fmt::format(
      "attention {}x{} heads, {}x{} keys, d={}{}", d.batch, d.heads, d.seq_q, d.seq_kv, d.head_dim,
      d.mask == kernels::MaskKind::kNone ? ""
                                         : fmt::format(" {} mask", kernels::MaskKindName(d.mask)));
  return FusionDecision::Allow();
}

}  // namespace fusetune::fusion_space
