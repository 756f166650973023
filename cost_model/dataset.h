// Training samples from the tuning database: every fresh ok record of a
// group workload whose description carries the group's graph, turned into
// features (with its target's calibration) and labels (measured time,
// traffic, schedule overhead, overlap).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "cost_model/cost_model.h"
#include "cost_model/time_label.h"
#include "db/database.h"
#include "measure/result.h"

namespace fusetune::cost_model {

struct Sample {
  int workload = 0;  // index into Dataset::workload_keys
  double seconds = 0, traffic_bytes = 0, overhead = 0;
  double eta = -1;  // -1: not measured
  // Measured by a tuning job (the record has a job id or the search's note),
  // not by `collect`'s sampling: the candidates a search proposes, mostly
  // near the optimum (with its epsilon-random picks), where ranking is
  // hardest and matters most.
  bool tuning = false;
  // How much the sample counts in training (XGBoost's instance weight; the
  // pairwise form ignores it): 1 unless a caller balances two sources, as
  // EvaluateTransfer balances a new target's few records against an old one's.
  float weight = 1;
};

struct Dataset {
  FeatureMatrix x;
  std::vector<Sample> y;
  std::vector<std::string> workload_keys;
  int64_t size() const { return static_cast<int64_t>(y.size()); }
  // The samples of the given workloads, grouped by workload (ranking needs
  // each workload's rows contiguous).
  Dataset Subset(const std::vector<int>& workloads) const;
  // The indices of the rows a tuning job measured, in row order.
  std::vector<int64_t> TuningRows() const;
  // The given rows (in the order given: row order keeps workloads contiguous).
  Dataset Rows(const std::vector<int64_t>& rows) const;
  void Add(const Dataset& other, int64_t row);
};

struct DatasetOptions {
  std::string target;  // fingerprint; "" for every target
  TimeLabel label = kDefaultTimeLabel;
  // Called as records are read: (records read, samples made).
  std::function<void(int64_t, int64_t)> progress;
};

struct DatasetSummary {
  TimeLabel label = kDefaultTimeLabel;  // the labels' statistic (DatasetOptions)
  int64_t records = 0, samples = 0;
  int64_t skipped_graph_workloads = 0, skipped_unreadable = 0;
  // Records of a candidate already read (same workload, target and tiling):
  // merged into its sample, which keeps the fastest measurement.
  int64_t merged_repeats = 0;
};

Result<Dataset> LoadDataset(db::Database& database, const DatasetOptions& options,
                            DatasetSummary* summary = nullptr);

// Workloads split at random (by `seed`) so that validation workloads are
// never seen in training: about `valid_fraction` of them, at least one.
struct Split {
  std::vector<int> train, valid;  // workload indices
};
Split SplitByWorkload(const Dataset& data, double valid_fraction, uint64_t seed);

// The description a group workload stores so that training can rebuild it:
// {"graph": graph text (graph/text_format.h), "summary": ..., "template": ...}.
std::string GroupWorkloadDescription(const graph::Graph& group_graph,
                                     const fusion_space::KernelInstance& instance);

}  // namespace fusetune::cost_model
