// Graph passes. Each keeps the graph's outputs (names and values) unchanged
// and returns how many rewrites it made, so that a pipeline can run to a
// fixed point. All expect an inferred graph (shape_inference.h).
#pragma once

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

// Evaluates nodes whose inputs are all constant (and Shape/Size of static
// tensors) and replaces them with constants.
Result<int> FoldConstants(Graph& graph);
// Removes nodes whose outputs nobody reads and constants nobody uses.
Result<int> EliminateDeadCode(Graph& graph);
// Merges nodes with the same op, attributes and inputs, and equal small constants.
Result<int> EliminateCommonSubexpressions(Graph& graph);
// Removes Identity, inference-mode Dropout, Cast to the same type, and
// Reshape/Expand/Transpose that do not change anything.
Result<int> RemoveIdentities(Graph& graph);
// Merges Transpose->Transpose into one (or none), Reshape->Reshape into one,
// and rewrites Flatten/Squeeze/Unsqueeze as Reshape so that later matchers
// see one form of each view.
Result<int> CanonicalizeTransposeReshape(Graph& graph);

// Gemm(A, B, transB=1) with a constant float B becomes Gemm(A, B^T) with
// B^T stored as a constant: what PyTorch exports for nn.Linear on 2-D input.
// Kernels then read the weight row by row, its contiguous direction, as they
// do for MatMul weights (the same layout change ONNX Runtime makes when it
// prepacks a weight).
Result<int> PretransposeGemmWeights(Graph& graph);

// Conv -> BatchNormalization (inference form) where the Conv's output has no
// other use and its weight, bias and the BN's scale, B, mean and var are
// constants: the Conv gets W' = W * a and b' = (b - mean) * a + B per output
// channel, a = scale / sqrt(var + eps) (computed in double, rounded once),
// and produces the BN's output; the BN disappears. The same for a Gemm with
// a constant B and a per-column (or scalar) C, and for a 2-D MatMul with a
// constant weight, whose BN becomes the Add of the folded bias. Other BNs
// stay as they are (LowerBatchNorm rewrites them).
Result<int> FoldBatchNorm(Graph& graph);

// An inference-mode BatchNormalization with constant scale, B, mean and var
// on an f32 input [N, C, ...] becomes Mul(x, a) -> Add(., c) by constants
// shaped [C, 1, ..., 1], a = scale / sqrt(var + eps), c = B - mean * a
// (computed in double, rounded once), so that it runs as (and fuses into)
// an elementwise kernel. BNs with non-constant parameters stay BNs (the
// reference kernel runs them). Run it after FoldBatchNorm has reached its
// fixed point, so that no BN it could still fold is lowered instead.
Result<int> LowerBatchNorm(Graph& graph);

// ReduceMean or ReduceMax of an f32 [N, C, spatial...] over exactly its
// spatial axes becomes GlobalAveragePool or GlobalMaxPool (and a Flatten
// from axis 1 when the reduction drops the axes): `x.mean((2, 3))` in a
// PyTorch model then runs as a pool kernel or inside the conv before it. A
// 3-D [N, C, L] only when a conv or pool made it: a [B, S, D] mean over D is
// an RMSNorm's, which the row-reduction template fuses whole.
Result<int> ReduceToGlobalPool(Graph& graph);

// The standard pipeline, run to a fixed point, then LowerBatchNorm (and the
// pipeline again if it lowered any): what import-time users want.
Status RunStandardPasses(Graph& graph);

}  // namespace fusetune::graph
