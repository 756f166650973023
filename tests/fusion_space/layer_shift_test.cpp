// Layer shifts: candidate groups shifted from the layer before are exactly
// the groups a full enumeration finds (nodes, workload keys, instances),
// on every test model, on post-LN and pre-LN stacks, and on a stack whose
// middle layer differs.
#include <gtest/gtest.h>

#include <algorithm>

#include "fusion_space/candidates.h"
#include "fusion_space/layer_shift.h"
#include "tests/fusion_space/model_util.h"

namespace fusetune::fusion_space {
namespace {

CandidateSet Enumerate(const graph::Graph& g, const Dataflow& flow, bool shift) {
  CandidateOptions options;
  options.shift_repeated_layers = shift;
  return EnumerateCandidates(g, flow, options);
}

std::vector<graph::ValueId> SlotValues(const KernelInstance& k) {
  std::vector<graph::ValueId> values;
  for (const OperandSlot& slot : k.slots) values.push_back(slot.value);
  return values;
}

void ExpectSameCandidates(const CandidateSet& full, const CandidateSet& shifted) {
  ASSERT_EQ(full.groups.size(), shifted.groups.size());
  EXPECT_EQ(full.sets_examined, shifted.sets_examined);
  EXPECT_EQ(full.count_by_template, shifted.count_by_template);
  EXPECT_EQ(full.by_first_node, shifted.by_first_node);
  for (size_t i = 0; i < full.groups.size(); ++i) {
    const CandidateGroup& a = full.groups[i];
    const CandidateGroup& b = shifted.groups[i];
    ASSERT_EQ(a.nodes, b.nodes) << "group " << i;
    EXPECT_EQ(a.key, b.key) << "group " << i;
    EXPECT_EQ(a.instance->kind, b.instance->kind);
    EXPECT_EQ(a.instance->nodes, b.instance->nodes);
    EXPECT_EQ(a.instance->inputs, b.instance->inputs);
    EXPECT_EQ(a.instance->outputs, b.instance->outputs);
    EXPECT_EQ(SlotValues(*a.instance), SlotValues(*b.instance));
    EXPECT_EQ(a.instance->summary, b.instance->summary);
  }
}

TEST(LayerShift, ShiftedCandidatesAreTheEnumeratedOnes) {
  for (const std::string& model : testing::AllTestModels()) {
    SCOPED_TRACE(model);
    const graph::Graph g = testing::LoadTestModel(model);
    const Dataflow flow(g);
    const CandidateSet full = Enumerate(g, flow, false);
    const CandidateSet shifted = Enumerate(g, flow, true);
    EXPECT_EQ(full.groups_shifted, 0);
    ExpectSameCandidates(full, shifted);
  }
}

TEST(LayerShift, ThreeLayersShiftByOneLayer) {
  const graph::Graph one = testing::LoadTestModel("encoder_postln_op13");
  const graph::Graph three = testing::LoadTestModel("encoder_3layer_op13");
  const Dataflow flow(three);
  const LayerShift shift = FindLayerShift(three, flow);
  const int32_t layer = static_cast<int32_t>(three.nodes.size() - one.nodes.size()) / 2;
  EXPECT_EQ(shift.period, layer);
  const CandidateSet shifted = Enumerate(three, flow, true);
  EXPECT_GT(shifted.groups_shifted, 0);
  EXPECT_LT(shifted.groups_shifted, shifted.multi_node());
}

// The first layer reads the graph input where the second reads the first's
// output: not the exact shift, but both values come from outside every
// window enumeration sees (fusion_space/layer_shift.h), so such nodes map
// from every window, and the groups shifted from there are the enumerated
// ones, on a post-LN and a pre-LN stack.
TEST(LayerShift, GraphInputReadersMapFromAWindowAndShiftExactly) {
  for (const char* model : {"encoder_3layer_op13", "decoder_3layer_op17"}) {
    SCOPED_TRACE(model);
    const graph::Graph g = testing::LoadTestModel(model);
    const Dataflow flow(g);
    const LayerShift shift = FindLayerShift(g, flow);
    ASSERT_GT(shift.period, 0);
    int readers = 0;
    for (int32_t i = 0; i < shift.period; ++i) {
      const auto& inputs = g.nodes[i].inputs;
      if (std::find(inputs.begin(), inputs.end(), g.inputs[0]) == inputs.end()) continue;
      ++readers;
      EXPECT_FALSE(shift.maps[i]) << "node " << i;
      // From every window: both values are made before any window's start.
      EXPECT_EQ(shift.maps_from[i], 0) << "node " << i;
      // Its image is what the second layer reads in its place.
      const auto slot = std::find(inputs.begin(), inputs.end(), g.inputs[0]) - inputs.begin();
      EXPECT_EQ(shift.image[g.inputs[0]], g.nodes[i + shift.period].inputs[slot]);
    }
    EXPECT_GT(readers, 0);
    const CandidateSet shifted = Enumerate(g, flow, true);
    EXPECT_GT(shifted.groups_shifted, 0);
    ExpectSameCandidates(Enumerate(g, flow, false), shifted);
  }
}

TEST(LayerShift, ANodeThatDiffersIsNotMappedAndGroupsStayExact) {
  graph::Graph g = testing::LoadTestModel("encoder_3layer_op13");
  const int32_t period = FindLayerShift(g, Dataflow(g)).period;
  ASSERT_GT(period, 0);
  // Write the middle layer's Softmax axis as 3 instead of -1: the same
  // computation, another attribute, so no group holding it may be a shift.
  int32_t changed = -1;
  for (int32_t i = period; i < 2 * period && changed < 0; ++i)
    if (g.nodes[i].op_type == "Softmax") changed = i;
  ASSERT_GE(changed, 0);
  ASSERT_EQ(g.type(g.nodes[changed].outputs[0]).dims.size(), 4u);
  g.nodes[changed].attrs.Set("axis", int64_t{3});
  const Dataflow flow(g);
  const LayerShift shift = FindLayerShift(g, flow);
  EXPECT_EQ(shift.period, period);
  EXPECT_FALSE(shift.maps[changed]);
  EXPECT_FALSE(shift.maps[changed - period]);
  ExpectSameCandidates(Enumerate(g, flow, false), Enumerate(g, flow, true));
}

TEST(LayerShift, NoRepetitionNoShift) {
  const graph::Graph g = testing::LoadTestModel("mlp");
  const Dataflow flow(g);
  EXPECT_EQ(Enumerate(g, flow, true).groups_shifted, 0);
}

}  // namespace
}  // namespace fusetune::fusion_space
