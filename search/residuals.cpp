#include "search/residuals.h"

#include <numeric>

namespace fusetune::search {

void ResidualCorrection::Fit(const fusion_space::TilingSpace& space,
                             const std::vector<std::vector<int>>& choices,
                             const std::vector<double>& log2_residuals) {
  effect_.clear();
  const size_t n = choices.size();
  if (static_cast<int>(n) < min_samples_) return;
  const size_t params = space.params().size();
  // Centred residuals: the overall level of the model's error does not
  // change the ranking, only what differs between parameter values does.
  const double mean =
      std::accumulate(log2_residuals.begin(), log2_residuals.end(), 0.0) / static_cast<double>(n);
  std::vector<double> left(n);
  for (size_t i = 0; i < n; ++i) left[i] = log2_residuals[i] - mean;
  effect_.resize(params);
  for (size_t p = 0; p < params; ++p) effect_[p].assign(space.params()[p].values.size(), 0.0);
  // A few rounds of backfitting: each parameter's effects are fitted to what
  // the others leave, so that two correlated parameters (mc and the split
  // among the first measured tilings) do not both take the same error.
  for (int sweep = 0; sweep < 3; ++sweep) {
    for (size_t p = 0; p < params; ++p) {
      std::vector<double> sum(effect_[p].size(), 0.0), count(effect_[p].size(), 0.0);
      for (size_t i = 0; i < n; ++i) {
        const int v = choices[i][p];
        sum[v] += left[i] + effect_[p][v];  // the residual without this parameter's part
        count[v] += 1;
      }
      for (size_t v = 0; v < sum.size(); ++v) {
        const double fitted = sum[v] / (count[v] + shrinkage_);
        const double change = fitted - effect_[p][v];
        for (size_t i = 0; i < n; ++i)
          if (choices[i][p] == static_cast<int>(v)) left[i] -= change;
        effect_[p][v] = fitted;
      }
    }
  }
}

double ResidualCorrection::Log2Factor(const std::vector<int>& choice) const {
  double f = 0;
  for (size_t p = 0; p < effect_.size() && p < choice.size(); ++p) f += effect_[p][choice[p]];
  return f;
}

}  // namespace fusetune::search
