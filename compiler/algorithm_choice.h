// Internal to the compiler: for groups whose template chooses among
// algorithms (a convolution: implicit GEMM, direct, Winograd, depthwise),
// what `compile --explain` says of the choice: the algorithm the plan runs,
// the fastest record of any other algorithm for the same workload and how
// much slower it measured. One query of the workload's fastest records per
// conv group, made only when explaining.
#pragma once

#include "common/status.h"
#include "compiler/compile.h"
#include "compiler/tuning_index.h"

namespace fusetune::compiler {

// Appends to each conv group's choice.detail "algorithm winograd4, layout
// nchw -> nchw16c; runner-up algorithm im2col_gemm 0.412 ms (+18%);
// runner-up layout nchw -> nchw 0.371 ms (+6%)" ("no other algorithm
// measured", "no other layout measured" where none was); to each conv
// chain's "fused conv chain (layout nchw -> nchw); unfused 0.212 ms (+15%)
// as im2col_gemm, depthwise, im2col_gemm", the sum of the fastest records of
// its convs as groups of their own.
Status ExplainAlgorithmChoices(fusion_space::FusionSpace& space, TuningIndex& index,
                               CompiledPlan* plan);

}  // namespace fusetune::compiler
