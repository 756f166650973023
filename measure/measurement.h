// One candidate's measurement: the options that fix how it is measured and
// the result, which carries either metrics or the reason it has none.
// Failures are data: a crash, a hang, an exception or wrong numbers give a
// result with a status other than kOk, never an exception.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "graph/reference_executor.h"
#include "target/target.h"
#include "runtime/executor.h"

namespace fusetune::measure {

struct MeasureOptions {
  int threads = 2;
  int64_t local_buffer_bytes = 0;  // 0: the kernels' default (the per-core L2)
  uint64_t input_seed = 0x5eed;    // inputs are RandomFeeds(graph, input_seed)
  int warmup_runs = 1;
  // Repeats of each run mode continue until both minimums are reached, and
  // stop at max_repeats whatever the time.
  int min_repeats = 5;
  double min_seconds = 0.02;
  int max_repeats = 200;
  // Evict every tensor the plan touches from the caches before each repeat,
  // so that what a kernel reads from global memory comes from DRAM.
  bool flush_caches = true;
  // Copy-only and compute-only runs for the overlap efficiency.
  bool measure_overlap = true;
  bool verify = true;
  double tolerance = 1e-4;      // of the largest magnitude of each output
  double timeout_seconds = 60;  // per candidate, graph loading included
  // The roofline the fraction is taken against; zero leaves it unknown.
  double peak_gflops = 0, dram_gbps = 0;
};
nlohmann::json OptionsToJson(const MeasureOptions& o);
// The cache protocol of the target key these options' records go under.
target::CacheProtocol CacheProtocolOf(const MeasureOptions& o);
Result<MeasureOptions> OptionsFromJson(const nlohmann::json& j);

enum class MeasureStatus { kOk, kFailed, kTimeout, kWrong };
const char* StatusName(MeasureStatus status);  // "ok", "failed", "timeout", "wrong"
std::optional<MeasureStatus> StatusFromName(const std::string& name);

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

// Largest error of `got` against `want` over the outputs, each relative to
// its own largest magnitude; a non-finite value where the reference is finite
// is an infinite error. `worst`, when given, receives the worst element.
double CompareOutputs(const TensorMap& got, const TensorMap& want,
                      std::optional<WorstElement>* worst = nullptr);

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

// Points where a test can inject a fault into a measurement: before every run
// (crash, hang, throw) and on the outputs that are verified (wrong numbers).
struct MeasureHooks {
  std::function<void(const Graph&)> before_run;
  std::function<void(const Graph&, TensorMap&)> on_outputs;
};

// What a measurement compares against: the inputs, the reference executor's
// outputs for them, and the work they imply.
struct ReferenceData {
  TensorMap feeds;
  TensorMap expected;
  double flops = 0;
  double compulsory_bytes = 0;
};
Result<ReferenceData> ComputeReference(const Graph& graph, uint64_t seed);

// Measures an executable in this process (a worker calls this; tests may).
MeasureResult MeasureProgram(KernelProgram& exe, const ReferenceData& reference,
                             const MeasureOptions& options, const MeasureHooks& hooks = {});

}  // namespace fusetune::measure
