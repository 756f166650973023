// Internal to the compiler (compile.cpp): a plan assembled from group
// records takes its conv layouts across groups (fusion_space/layout_choice.h)
// among each conv group's recorded tilings of its exact workload. Each
// record was measured alone, without the transforms at its edges, so the
// fastest of each group may disagree with its neighbours on a layout; this
// picks, walking the plan, the recorded tiling with the least time plus the
// transforms it causes. Whole-model and remembered plans were measured
// whole and are kept as they are.
#pragma once

#include <map>
#include <vector>

#include "common/status.h"
#include "compiler/compile.h"
#include "compiler/tuning_index.h"

namespace fusetune::compiler {

// `choices` holds each plan group's choice, by its nodes; a conv group whose
// tiling changes gets the record's tiling, time and id, and a note in its
// detail.
Status ChooseRecordedLayouts(fusion_space::FusionSpace& space, TuningIndex& index,
                             fusion_space::Plan* plan,
                             std::map<std::vector<int32_t>, GroupChoice>* choices);

}  // namespace fusetune::compiler
