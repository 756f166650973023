// Internal to compile.cpp: the best known plan of every candidate group.
#pragma once

#include <vector>

#include "compiler/compile.h"

namespace fusetune::compiler {

struct CandidateChoices {
  std::vector<GroupChoice> choices;  // per space.candidates().groups
  double scale = 1;                  // median measured / analytical over exact hits
  bool any_known = false;            // some group has a source other than the default
};

// Exact keys first (their times calibrate the analytical model), then the
// shape buckets, the cost model and the defaults for the rest. Groups of
// one workload key share one lookup.
Result<CandidateChoices> ChooseCandidates(fusion_space::FusionSpace& space, TuningIndex& index,
                                          const CompileOptions& options);

}  // namespace fusetune::compiler
