// The GEMM and attention matchers on PyTorch exports: activations recognised
// by what they compute, epilogue operands and their strides, attention with
// head-split views and masks, and the reasons groups are refused.
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>

#include "fusion_space/match.h"
#include "fusion_space/match_gemm.h"
#include "fusion_space/space.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::fusion_space {
namespace {

using kernels::EpilogueKind;

TEST(FitActivation, RecognisesActivationsWhateverTheirSpelling) {
  auto gelu = [](double x) { return x * 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  auto fit = FitActivation(gelu);
  ASSERT_TRUE(fit.found);
  EXPECT_EQ(fit.kind, EpilogueKind::kGeluErf);
  EXPECT_NEAR(fit.scale, 1.0, 1e-9);
  // x * (1 + erf(x / sqrt 2)) is twice GELU: the factor becomes a scale.
  fit = FitActivation([&](double x) { return 2 * gelu(x); });
  ASSERT_TRUE(fit.found);
  EXPECT_EQ(fit.kind, EpilogueKind::kGeluErf);
  EXPECT_NEAR(fit.scale, 2.0, 1e-9);
  fit = FitActivation([](double x) {
    return 0.5 * x * (1 + std::tanh(0.7978845608 * (x + 0.044715 * std::pow(x, 3.0))));
  });
  EXPECT_EQ(fit.kind, EpilogueKind::kGeluTanh);
  fit = FitActivation([](double x) { return x / (1 + std::exp(-x)); });
  EXPECT_EQ(fit.kind, EpilogueKind::kSilu);
  fit = FitActivation([](double x) { return std::max(x, 0.0); });
  EXPECT_EQ(fit.kind, EpilogueKind::kRelu);
  fit = FitActivation([](double x) { return x / 8; });
  EXPECT_TRUE(fit.identity);
  EXPECT_NEAR(fit.scale, 0.125, 1e-12);
  EXPECT_FALSE(FitActivation([](double x) { return x * x; }).found);
  EXPECT_FALSE(FitActivation([](double x) { return std::exp(x); }).found);
}

std::vector<int32_t> Range(int32_t a, int32_t b) {
  std::vector<int32_t> v;
  for (int32_t i = a; i <= b; ++i) v.push_back(i);
  return v;
}

// Finds the first node of an op type at or after `from`.
int32_t Find(const graph::Graph& g, const std::string& op, int32_t from = 0) {
  for (int32_t i = from; i < static_cast<int32_t>(g.nodes.size()); ++i)
    if (g.nodes[i].op_type == op) return i;
  return -1;
}

// The nearest MatMul at or before `node` (the GEMM whose chain ends there).
int32_t MatMulBefore(const graph::Graph& g, int32_t node) {
  while (node > 0 && g.nodes[node].op_type != "MatMul") --node;
  return node;
}

TEST(MatchGemm, LinearWithDecomposedGeluIsOneGemm) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  Dataflow flow(g);
  const int32_t erf = Find(g, "Erf");
  ASSERT_GT(erf, 0);
  // MatMul, bias Add, then x * 0.5, x / sqrt 2, Erf, + 1, Mul.
  const int32_t mm = MatMulBefore(g, erf);
  ASSERT_EQ(g.nodes[mm].op_type, "MatMul");
  GroupMatch m = MatchGroup(g, flow, Range(mm, erf + 2));
  ASSERT_TRUE(m.decision) << m.decision.reason();
  EXPECT_EQ(m.instance.kind, KernelTemplate::kGemm);
  const auto& ep = m.instance.gemm.outputs[0].epilogue;
  ASSERT_GE(ep.size(), 2u);
  EXPECT_EQ(ep[0].kind, EpilogueKind::kBiasAdd);
  EXPECT_EQ(ep[1].kind, EpilogueKind::kGeluErf);
  // Without the last Mul two values leave the group: a GEMM writes one.
  m = MatchGroup(g, flow, Range(mm, erf + 1));
  ASSERT_FALSE(m.decision);
  EXPECT_NE(m.decision.reason().find("read outside the group"), std::string::npos)
      << m.decision.reason();
  // Without the bias Add the group is not connected to the GEMM's chain.
  std::vector<int32_t> no_bias = Range(mm, erf + 2);
  no_bias.erase(no_bias.begin() + 1);
  EXPECT_FALSE(MatchGroup(g, flow, no_bias).decision);
}

TEST(MatchGemm, QkvProjectionsFuseHorizontally) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op13");
  Dataflow flow(g);
  // Q, K, V: MatMul + bias Add each, all reading x.
  GroupMatch m = MatchGroup(g, flow, Range(0, 5));
  ASSERT_TRUE(m.decision) << m.decision.reason();
  EXPECT_EQ(m.instance.gemm.outputs.size(), 3u);
  EXPECT_EQ(m.instance.outputs.size(), 3u);
}

// Post-LN: LayerNormalization(x + MatMul + bias) is the GEMM's epilogue, its
// gamma a row-norm op and its beta a bias, and the tiling space keeps to
// tiles of whole rows.
TEST(MatchGemm, PostLnLayerNormIsTheEpilogue) {
  graph::Graph g = testing::LoadTestModel("encoder_postln_op17");
  Dataflow flow(g);
  const int32_t ln = Find(g, "LayerNormalization");
  ASSERT_GT(ln, 0);
  const int32_t mm = MatMulBefore(g, ln);
  GroupMatch m = MatchGroup(g, flow, Range(mm, ln));
  ASSERT_TRUE(m.decision) << m.decision.reason();
  ASSERT_EQ(m.instance.kind, KernelTemplate::kGemm);
  std::vector<EpilogueKind> kinds;
  for (const auto& op : m.instance.gemm.outputs[0].epilogue) kinds.push_back(op.kind);
  EXPECT_EQ(kinds, (std::vector<EpilogueKind>{EpilogueKind::kBiasAdd, EpilogueKind::kResidualAdd,
                                              EpilogueKind::kLayerNorm, EpilogueKind::kBiasAdd}));
  EXPECT_NE(m.instance.summary.find("layer_norm"), std::string::npos) << m.instance.summary;
  const int64_t n = m.instance.gemm.outputs[0].n;
  TilingSpace space(m.instance, testing::SmallKernelConfig());
  Rng rng(3);
  for (int i = 0; i < 20; ++i) EXPECT_GE(std::get<kernels::GemmTiling>(space.Sample(rng)).nc, n);
  // Without the residual Add the norm's input is not on the GEMM's chain.
  std::vector<int32_t> gap = Range(mm, ln);
  gap.erase(gap.end() - 2);
  EXPECT_FALSE(MatchGroup(g, flow, gap).decision);
}

TEST(MatchGemm, RefusesWithReasons) {
  graph::Graph g = testing::LoadTestModel("llama_op17");
  Dataflow flow(g);
  // Without the gate's MatMul, the product combines the up GEMM with a value
  // computed inside the group, which no epilogue reads.
  const int32_t sig = Find(g, "Sigmoid");
  ASSERT_GT(sig, 0);
  GroupMatch m = MatchGroup(g, flow, Range(sig, sig + 3));
  ASSERT_FALSE(m.decision);
  EXPECT_NE(m.decision.reason().find("computed inside the group"), std::string::npos)
      << m.decision.reason();
  // RMSNorm feeding a GEMM: no GEMM template reduces rows.
  const int32_t first_mm = Find(g, "MatMul");
  m = MatchGroup(g, flow, Range(first_mm - 1, first_mm));
  EXPECT_FALSE(m.decision);
}

TEST(MatchGemm, SwigluIsOneGemm) {
  graph::Graph g = testing::LoadTestModel("llama_op17");
  Dataflow flow(g);
  // gate MatMul, Sigmoid, Mul (SiLU), up MatMul, Mul; then down MatMul.
  const int32_t sig = Find(g, "Sigmoid");
  GroupMatch m = MatchGroup(g, flow, Range(sig - 1, sig + 3));
  ASSERT_TRUE(m.decision) << m.decision.reason();
  EXPECT_TRUE(m.instance.gemm.swiglu);
  EXPECT_EQ(m.instance.gemm.outputs.size(), 2u);
  EXPECT_EQ(m.instance.outputs.size(), 1u);
}

struct AttentionCase {
  std::string model;
  kernels::MaskKind mask;
};

TEST(MatchAttention, MatchesEveryExportWithViewsAndMasks) {
  for (const AttentionCase& c : {AttentionCase{"encoder_postln_op13", kernels::MaskKind::kNone},
                                 AttentionCase{"encoder_postln_op17", kernels::MaskKind::kNone},
                                 AttentionCase{"decoder_preln_op14", kernels::MaskKind::kCausal},
                                 AttentionCase{"decoder_preln_op17", kernels::MaskKind::kCausal},
                                 AttentionCase{"llama_op17", kernels::MaskKind::kCausal}}) {
    SCOPED_TRACE(c.model);
    graph::Graph g = testing::LoadTestModel(c.model);
    Dataflow flow(g);
    const int32_t sm = Find(g, "Softmax");
    // The largest attention group: from the QK^T MatMul's view inputs to the output reshape.
    const int32_t qk = Find(g, "MatMul", sm - 4);
    const int32_t pv = Find(g, "MatMul", sm);
    ASSERT_GT(qk, 0);
    std::vector<int32_t> group;
    for (int32_t i = qk; i <= pv + 2; ++i) group.push_back(i);
    // Add the view nodes feeding Q, K and V.
    for (int32_t v : {g.nodes[qk].inputs[0], g.nodes[qk].inputs[1], g.nodes[pv].inputs[1]})
      for (int32_t p = g.value(v).producer;
           p >= 0 && (g.nodes[p].op_type == "Transpose" || g.nodes[p].op_type == "Reshape");
           p = g.value(g.nodes[p].inputs[0]).producer)
        group.push_back(p);
    std::sort(group.begin(), group.end());
    group.erase(std::unique(group.begin(), group.end()), group.end());
    GroupMatch m = MatchGroup(g, flow, group);
    ASSERT_TRUE(m.decision) << m.decision.reason();
    EXPECT_EQ(m.instance.kind, KernelTemplate::kAttention);
    EXPECT_EQ(m.instance.attention.mask, c.mask);
    EXPECT_NEAR(m.instance.attention.scale, 1 / std::sqrt(8.0), 1e-6);
    // Q is read through the head-split view: head stride d, row stride H*d
    // (LLaMA's rotary embedding materialises Q as [B, H, S, d] first).
    const bool view = c.model != "llama_op17";
    EXPECT_EQ(m.instance.attention.q.head, view ? 8 : 64);
    EXPECT_EQ(m.instance.attention.q.row, view ? 32 : 8);
    // Leaving out the softmax breaks the pattern, with a reason.
    std::vector<int32_t> partial;
    for (int32_t n : group)
      if (n != sm) partial.push_back(n);
    EXPECT_FALSE(MatchGroup(g, flow, partial).decision);
  }
}

// A causal mask is recognised by whole runs of each row; flipping a single
// element on either side of the diagonal makes it an additive mask instead.
TEST(MatchAttention, OneFlippedMaskElementIsNotCausal) {
  for (bool above_diagonal : {true, false}) {
    graph::Graph g = testing::LoadTestModel("decoder_preln_op14");
    Dataflow flow(g);
    const int32_t sm = Find(g, "Softmax");
    const int32_t where = Find(g, "Where", sm - 4);
    ASSERT_GT(where, 0);
    graph::Value& cond = g.values[g.nodes[where].inputs[0]];
    ASSERT_TRUE(cond.is_constant());
    ASSERT_EQ(cond.constant->dtype(), graph::DataType::kBool);
    const graph::Dims& dims = cond.constant->dims();
    const int64_t t = dims.back();
    graph::Tensor flipped(cond.constant->dtype(), dims);  // a copy: tensors share their buffer
    std::memcpy(flipped.raw(), cond.constant->raw(), cond.constant->nbytes());
    auto* bytes = reinterpret_cast<uint8_t*>(flipped.raw());
    const int64_t i = 3, j = above_diagonal ? 5 : 1;  // row 3 keeps columns 0..3
    bytes[i * t + j] = bytes[i * t + j] ? 0 : 1;
    std::vector<int32_t> group;
    const int32_t qk = Find(g, "MatMul", sm - 4), pv = Find(g, "MatMul", sm);
    for (int32_t n = qk; n <= pv; ++n) group.push_back(n);
    GroupMatch causal = MatchGroup(g, flow, group);
    cond.constant = std::make_shared<const graph::Tensor>(std::move(flipped));
    GroupMatch additive = MatchGroup(g, flow, group);
    ASSERT_TRUE(causal.decision) << causal.decision.reason();
    ASSERT_TRUE(additive.decision) << additive.decision.reason();
    EXPECT_EQ(causal.instance.attention.mask, kernels::MaskKind::kCausal);
    EXPECT_EQ(additive.instance.attention.mask, kernels::MaskKind::kAdditive);
  }
}

// Memoised and unmemoised activation fits give the same kernels: every
// GEMM+GELU group of a 3-layer encoder (the memo filled by enumeration) is
// matched again with the memo cleared first.
TEST(MatchGemm, MemoisedActivationFitsEqualFreshOnes) {
  const graph::Graph g = testing::LoadTestModel("encoder_3layer_op13");
  FusionSpace space(g, {});
  std::vector<const CandidateGroup*> gelu;
  for (const CandidateGroup& c : space.candidates().groups)
    if (c.instance->kind == KernelTemplate::kGemm &&
        c.instance->summary.find("gelu") != std::string::npos)
      gelu.push_back(&c);
  ASSERT_GE(gelu.size(), 3u);
  const Dataflow flow(g);
  for (const CandidateGroup* c : gelu) {
    ClearActivationFitCache();
    const GroupMatch fresh = MatchGroup(g, flow, c->nodes);
    ASSERT_TRUE(fresh.decision.allowed());
    EXPECT_EQ(fresh.instance.summary, c->instance->summary);
    const GroupMatch memoised = MatchGroup(g, flow, c->nodes);
    EXPECT_EQ(memoised.instance.summary, fresh.instance.summary);
  }
}

}  // namespace
}  // namespace fusetune::fusion_space
