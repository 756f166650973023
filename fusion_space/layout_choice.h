// Activation layouts chosen across a plan's groups, for the tuner's tuned
// plans (search/tuner_plans.cpp) and the compiler's plans from group
// records. Each group's tilings were measured alone, with the transforms at
// its edges left out (measure/measurement.h), so the best of
// each group may disagree with its neighbours' on a layout, and the program
// then places a transform between them (runtime/layout_plan.h). Walking the
// groups in plan order, each conv group takes the measured tiling whose
// time plus the transforms it causes is least: reading its input or a
// residual in a layout other than the one its producer wrote, or writing a
// value that a reader needs in NCHW (a graph output, a kernel that reads
// NCHW only) in another layout, plus, one step ahead, the least its conv
// readers will take with its output in that layout. A producer's layout is
// known when its readers choose, so they adapt to it.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "fusion_space/space.h"

namespace fusetune::fusion_space {

// What a transform of `bytes` costs: a launch and a read and a write of it.
struct TransformCost {
  double launch_seconds = 3e-6;
  double seconds_per_byte = 1 / 100e9;
  double Of(double bytes) const { return launch_seconds + 2 * bytes * seconds_per_byte; }
  // From a target's calibration: a kernel launch, and a copy at L2 bandwidth.
  static TransformCost OfTarget(double launch_us, double l2_gbps) {
    return {launch_us * 1e-6, 1 / (l2_gbps * 1e9)};
  }
};

// The measured (tiling, seconds) of a plan group: empty keeps its tiling.
using MeasuredTilings = std::function<std::vector<std::pair<Tiling, double>>(const PlanGroup&)>;

Plan HarmonizeLayouts(FusionSpace& space, Plan plan, const MeasuredTilings& measured,
                      const TransformCost& cost);

}  // namespace fusetune::fusion_space
