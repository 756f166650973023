// Training XGBoost models (the class itself is private to xgboost_model.cpp).
//
// Heads, each a booster over the same features:
//   traffic     log2 measured bytes
//   overhead    log2 schedule overhead seconds
//   eta         overlap efficiency in [0, 1] (logistic)
//   correction  log2(measured / composed): the direct head that corrects the
//               physical composition
//   direct      log2 measured seconds (plain regression)
//   pairwise    XGBoost's rank:pairwise within each workload
// A form names what ranks: "composed" (the first three, composed
// physically), "corrected" (composed x 2^correction), "direct" or
// "pairwise". The ranking head is an ensemble of boosters with different
// seeds and row/column subsamples; their spread is the uncertainty.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cost_model/dataset.h"

namespace fusetune::cost_model {

inline const char* const kModelForms[] = {"composed", "corrected", "direct", "pairwise"};

struct XgboostOptions {
  std::string form = "corrected";
  int rounds = 300;
  int max_depth = 4;  // 4 ranked unseen workloads best of 3-8 over 10 splits (docs/COST_MODEL.md)
  double learning_rate = 0.1;
  int ensemble = 3;
  int threads = 2;
  uint64_t seed = 1;
  // The pairwise head: partners drawn per candidate and boosting round
  // (libxgboost's num_pairsample), and the relative difference in measured
  // time below which two candidates of a workload count as tied.
  int pair_samples = 1;
  double tie_resolution = 0;
  // Stops adding trees when spent (online updates during a job); 0: no limit.
  double max_seconds = 0;
  // Polled after every boosting round: true abandons training (Ctrl-C during
  // an online update), which then returns an error.
  std::function<bool()> should_stop;
};

// progress(done, total) counts boosting rounds over all heads.
Result<std::unique_ptr<CostModel>> TrainXgboostModel(
    const Dataset& train, const XgboostOptions& options,
    const std::function<void(int, int)>& progress = {});

}  // namespace fusetune::cost_model
