// Ranking quality on held-out workloads, averaged over workloads:
//   spearman   rank correlation of predicted and measured times
//   pairwise   share of candidate pairs (different measured times) ordered right
//   top1, top5 TenSet's top-k score: a workload's best measured time over the
//              best measured time among the model's k best-predicted candidates
//   regret1, regret8  what the search loses by trusting the model: the best
//              measured time among its k best-predicted candidates over the
//              workload's best, minus 1 (0.05: 5% slower than the best);
//              regret8 over the workloads with more than 8 candidates only
//              (with fewer the top 8 hold the best by construction)
// and, per head, the median relative error of its predictions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cost_model/cost_model.h"
#include "cost_model/dataset.h"

namespace fusetune::cost_model {

struct RankingMetrics {
  double spearman = 0, pairwise = 0, top1 = 0, top5 = 0, regret1 = 0, regret8 = 0;
  int workloads = 0;
  int regret8_workloads = 0;  // of `workloads`, those with more than 8 candidates
  int64_t samples = 0;
  // Median |predicted / measured - 1| of each head; eta: median |difference|.
  double traffic_error = 0, overhead_error = 0, eta_error = 0, time_error = 0;
  // Better in ranking: top-1, then Spearman.
  bool BetterThan(const RankingMetrics& other) const;
};

nlohmann::json MetricsToJson(const RankingMetrics& m);

// Metrics of `predicted` seconds for `data` (one prediction per row).
RankingMetrics Evaluate(const Dataset& data, const std::vector<Prediction>& predicted);
// A random ranking's expected figures, averaged over `draws` shuffles.
RankingMetrics EvaluateRandom(const Dataset& data, int draws, uint64_t seed);

// The figures on every row and on the rows a tuning job measured (nullopt
// when no workload has two such rows).
struct RowsAndTuning {
  RankingMetrics all;
  std::optional<RankingMetrics> tuning;
};
RowsAndTuning EvaluateWithTuning(const Dataset& data, const std::vector<Prediction>& predicted);

// The mean of one model's figures over workload splits. A split whose
// figures cover no workload (no validation workload with two rows) is left
// out; counts (workloads, samples) are per split.
class MetricsMean {
 public:
  void Add(const RankingMetrics& m);
  int splits() const { return splits_; }
  RankingMetrics Get() const;

 private:
  RankingMetrics sum_;  // means of the rates, sums of the counts
  int splits_ = 0;
};

}  // namespace fusetune::cost_model
