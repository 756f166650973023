// Matching node groups to the GEMM and attention templates of kernels/.
//
// GEMM: one MatMul/Gemm, or several sharing the same A (horizontal fusion,
// e.g. the Q, K and V projections), each followed by a chain of epilogue
// nodes: bias or residual adds and multiplies by any tensor that broadcasts
// (read through strides), scales by constants (Mul or Div), and activations.
// Activations are recognised by what they compute, not by how the exporter
// spelled them: the nodes between a value and its single consumer chain are
// evaluated as a scalar function and compared with ReLU, erf- and tanh-GELU,
// SiLU and sigmoid (up to a constant factor, which becomes a scale).
//
// Attention: MatMul(Q, K^T), optional scale (Div/Mul by a constant), an
// optional mask (Add of a tensor, or Where with a constant condition, causal
// when it is the lower triangle), Softmax on the last axis, MatMul with V,
// with the Reshape/Transpose views around Q, K, V and the output read and
// written through strides.
#pragma once

#include <span>

#include "fusion_space/dataflow.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::fusion_space {

FusionDecision MatchGemmInstance(const graph::Graph& graph, const Dataflow& flow,
                                 std::span<const int32_t> group, KernelInstance* instance);
FusionDecision MatchAttentionInstance(const graph::Graph& graph, const Dataflow& flow,
                                      std::span<const int32_t> group, KernelInstance* instance);

// The activation a scalar function computes, for the epilogue matcher (and
// its tests): evaluates f at sample points and fits f = scale * act(x).
struct ActivationFit {
  bool found = false;
  bool identity = false;  // f(x) = scale * x
  kernels::EpilogueKind kind = kernels::EpilogueKind::kRelu;
  double scale = 1.0;
};
template <typename F>
ActivationFit FitActivation(F&& f);

// Matching memoises activation fits per process by the workload key of the
// chain (repeated layers fit once); tests clear the memo to compare.
void ClearActivationFitCache();

}  // namespace fusetune::fusion_space

#include "fusion_space/match_gemm_inl.h"
