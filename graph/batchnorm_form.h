// Internal to graph/'s BatchNormalization passes (fold_batchnorm.cpp,
// lower_batchnorm.cpp): the node form both rewrite.
#pragma once

#include "graph/graph.h"

namespace fusetune::graph {

// A BatchNormalization in inference form: default domain, the five inputs,
// no training-mode output read, training_mode 0 and per-channel (spatial)
// statistics. Whether the statistics are constants is each pass's check.
inline bool IsInferenceBatchNorm(const Node& bn) {
  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() != 5 ||
      bn.outputs.empty() || bn.outputs[0] == kNoValue)
    return false;
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (bn.outputs[i] != kNoValue) return false;  // training-mode outputs are read
  const auto training = bn.attrs.GetInt("training_mode", 0);
  const auto spatial = bn.attrs.GetInt("spatial", 1);
  return training.ok() && *training == 0 && spatial.ok() && *spatial == 1;
}

// A constant of a floating-point type (f32, f64, f16, bf16): the statistics
// a BN pass reads in double.
inline bool IsFloatConstant(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.value(v).is_constant()) return false;
  const DataType dt = g.value(v).constant->dtype();
  return dt == DataType::kFloat32 || dt == DataType::kFloat64 || dt == DataType::kFloat16 ||
         dt == DataType::kBFloat16;
}

}  // namespace fusetune::graph
