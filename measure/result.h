// What one measurement found: its status and its metrics (MeasureResult),
// with the search's note on why it was measured (RecordMetrics), and their
// text forms: the worker pipe's JSON (ResultToJson/ResultFromJson) and a
// database record's metrics column (MetricsToText/MetricsFromText), each
// decoded in that one place. Kept apart from measurement.h, which needs
// graphs and programs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/enum_names.h"
#include "common/status.h"

namespace fusetune::measure {

enum class MeasureStatus { kOk, kFailed, kTimeout, kWrong };
// The status's text, as piped and stored: "ok", "failed", "timeout", "wrong".
inline constexpr EnumNames<MeasureStatus, 4> kMeasureStatusNames{{{
    {MeasureStatus::kOk, "ok"},
    {MeasureStatus::kFailed, "failed"},
    {MeasureStatus::kTimeout, "timeout"},
    {MeasureStatus::kWrong, "wrong"},
}}};
inline constexpr auto kAllMeasureStatuses = kMeasureStatusNames.Values();
inline const char* StatusName(MeasureStatus status) {
  return kMeasureStatusNames.Name(status, "failed");
}
inline std::optional<MeasureStatus> StatusFromName(std::string_view name) {
  return kMeasureStatusNames.FromName(name);
}

// Which whole plan the search measured: one of its two baselines, or a
// plan it built from its tasks' measurements.
enum class PlanKind { kUnfused, kGreedy, kTuned };
// The kind's text, as stored: "unfused", "greedy", "tuned".
inline constexpr EnumNames<PlanKind, 3> kPlanKindNames{{{
    {PlanKind::kUnfused, "unfused"},
    {PlanKind::kGreedy, "greedy"},
    {PlanKind::kTuned, "tuned"},
}}};
inline constexpr auto kAllPlanKinds = kPlanKindNames.Values();
inline const char* PlanKindName(PlanKind kind) { return kPlanKindNames.Name(kind, "tuned"); }
inline std::optional<PlanKind> PlanKindFromName(std::string_view name) {
  return kPlanKindNames.FromName(name);
}

struct TimeStats {
  double median = 0, min = 0, max = 0;
  double spread = 0;  // interquartile range / median
  int64_t count = 0;
};
TimeStats Summarize(std::vector<double> seconds);

// The element that differs most from the reference executor.
struct WorstElement {
  std::string output;
  std::vector<int64_t> position;
  double got = 0, want = 0;
  double error = 0;  // |got - want| / largest |want| of the output
};

struct MeasureResult {
  MeasureStatus status = MeasureStatus::kFailed;
  std::string error;  // why, when status is not kOk

  TimeStats time;                     // full runs: plan wall time
  TimeStats busy;                     // full runs: time inside kernels
  TimeStats copy_busy, compute_busy;  // copy-only and compute-only runs (when measured)
  int threads = 0;
  bool caches_flushed = false;
  int64_t launches = 0;  // kernels per run

  int64_t bytes_in = 0, bytes_out = 0;  // the kernels' global-memory copies, one run
  double bandwidth_gbps = 0;            // (bytes_in + bytes_out) / median time
  double overhead_seconds = 0;          // median of (wall - inside kernels)
  double overhead_per_launch_seconds = 0;
  double overlap = -1;  // eta in [0, 1]; -1 when not measured
  double flops = 0;
  double compulsory_bytes = 0;   // inputs, weights and outputs, once each
  double roofline_fraction = 0;  // max(flops/peak, compulsory/bandwidth) / median; 0 unknown

  double max_error = 0;  // of the full run's outputs, relative to each output's scale
  std::optional<WorstElement> worst;
  double run_seconds = 0;      // the candidate's own runs: warm-up and timed, every mode
  double measure_seconds = 0;  // everything this measurement took, loading included

  bool ok() const { return status == MeasureStatus::kOk; }
  static MeasureResult Failure(MeasureStatus status, std::string why);
};
nlohmann::json ResultToJson(const MeasureResult& r);
Result<MeasureResult> ResultFromJson(const nlohmann::json& j);
std::string ResultSummary(const MeasureResult& r);  // one line for logs

// Why the search measured a candidate, stored beside its measurement. A note
// is either a whole plan's (plan_kind set) or a proposed tiling's.
struct SearchNote {
  std::optional<PlanKind> plan_kind;  // none for a tiling
  bool remeasure = false;             // a whole plan measured twice on purpose
  // A whole plan run this many times (each beside its own anchor run) and
  // recorded at its median run (search/tuner.h: ConfirmContender); 0: once.
  int confirm_runs = 0;
  // A whole plan run head to head with the job's best record at the job's
  // end (search/tuner.h: Showdown), in `runs` alternated rounds: its record's
  // seconds are that record's (`against`) times `ratio`, the median over the
  // rounds of its time over that plan's in the same round.
  struct Showdown {
    int runs = 0;
    int64_t against = 0;
    double ratio = 0;
    bool operator==(const Showdown&) const = default;
  };
  std::optional<Showdown> showdown;
  // A candidate timed beside an anchor (search/tuner.h: the greedy plan for
  // whole plans, the task's best tiling for a round's tilings): the
  // anchor's time just before it and its recorded time. The record's
  // seconds are the candidate's time scaled by reference / now; the
  // measured median stays as it was.
  double anchor_seconds = 0, anchor_reference_seconds = 0;
  double predicted_seconds = 0;            // the model's prediction for the tiling
  std::string model;                       // name/form of the model that predicted it
  bool random = false, suggested = false;  // how the tiling was proposed
  bool out_of_range = false;  // the prediction was clamped to the model's training range

  bool operator==(const SearchNote&) const = default;
};

// A database record's metrics: what the measurement found and, for the
// tuner's records, why it was measured.
struct RecordMetrics {
  MeasureResult measured;
  std::optional<SearchNote> search;
};

// The metrics column's JSON text (ResultToJson with the note as "search").
// MetricsFromText explains text that is not JSON, has no known status, or
// has fields of the wrong type.
std::string MetricsToText(const RecordMetrics& metrics);
Result<RecordMetrics> MetricsFromText(std::string_view text);

}  // namespace fusetune::measure
