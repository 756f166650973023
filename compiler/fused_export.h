// The fused graph as ONNX: every kernel of several nodes becomes one node
// of the custom domain "ai.fusetune" (op type: its template, e.g.
// "FusedGemm"), reading the values its kernel reads and writing those it
// materialises, with its plan as attributes (kernel, tiling JSON, source,
// workload key, time, the original nodes and op types). Single-node kernels
// keep their standard ONNX node. The result opens in ONNX viewers (Netron)
// to show what was fused; it is a picture of the plan, not a model that
// other runtimes execute.
#pragma once

#include <string>

#include "compiler/compile.h"

namespace fusetune::compiler {

Result<graph::Graph> FusedGraph(fusion_space::FusionSpace& space, const CompiledPlan& plan);
Status ExportFusedOnnx(fusion_space::FusionSpace& space, const CompiledPlan& plan,
                       const std::string& path);

inline constexpr const char* kFusedDomain = "ai.fusetune";

}  // namespace fusetune::compiler
