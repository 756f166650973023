// What this task's measurements say about the cost model here: a correction
// of the model's predictions, learned from the task's own measured tilings
// and applied before ranking the next round.
//
// The analytical model gives many tilings of a small GEMM the same time
// (their traffic and padded work are equal), and which of them runs best
// depends on effects it does not see (parallel split, double buffering on
// a short k loop, micro-kernel shape). The learned model updates only every
// few dozen results, across all tasks. In between, each measured tiling
// says by how much the model was wrong for its parameter values; tilings
// that share those values are likely wrong the same way. The correction is
// additive in log time over one-hot tiling parameters, each value's mean
// residual shrunk towards zero by the number of measurements behind it.
#pragma once

#include <vector>

#include "fusion_space/tiling_space.h"

namespace fusetune::search {

class ResidualCorrection {
 public:
  // No correction until `min_samples` tilings were measured; a value seen
  // in n of them weighs n / (n + shrinkage).
  explicit ResidualCorrection(int min_samples = 4, double shrinkage = 2.0)
      : min_samples_(min_samples), shrinkage_(shrinkage) {}

  // Fits the correction to log2(measured / predicted) of each measured
  // tiling, given as its choice of parameter values (TilingSpace::ChoiceOf).
  void Fit(const fusion_space::TilingSpace& space, const std::vector<std::vector<int>>& choices,
           const std::vector<double>& log2_residuals);
  // log2 of the factor the prediction for `choice` is multiplied by; 0
  // before the fit has enough samples.
  double Log2Factor(const std::vector<int>& choice) const;
  bool active() const { return !effect_.empty(); }

 private:
  int min_samples_;
  double shrinkage_;
  std::vector<std::vector<double>> effect_;  // [parameter][value index]
};

}  // namespace fusetune::search
