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
#include "measure/result.h"
#include "runtime/executor.h"
#include "target/target.h"
#include "target/target.h"

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
  // What is evicted from the caches before each repeat (target.h): every
  // tensor the plan touches (so that what a kernel reads from global memory
  // comes from DRAM), only its weights, or nothing.
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
  // Copy-only and compute-only runs for the overlap efficiency.
  bool measure_overlap = true;
  bool verify = true;
  // False for a group measured alone (Measurer sets it from the candidate):
  // the layout transforms its program places at its edges, which vanish
  // between groups that agree (runtime/layout_plan.h), run and are verified
  // but are not timed or counted. A whole plan times every transform.
  bool time_layout_transforms = true;
  double tolerance = 1e-4;      // of the largest magnitude of each output
  // The tolerance of a candidate with a group in bf16 (Candidate::
  // reduced_precision): the error budget of a mixed-precision job
  // (target::PrecisionPolicy). 0: `tolerance`. The measurer puts it in
  // `tolerance` for such a candidate; it is not sent to the worker.
  double reduced_precision_tolerance = 0;
  double timeout_seconds = 60;  // per candidate, graph loading included
  // The roofline the fraction is taken against; zero leaves it unknown.
  double peak_gflops = 0, dram_gbps = 0;
};
nlohmann::json OptionsToJson(const MeasureOptions& o);
// The cache protocol of the target key these options' records go under.
target::CacheProtocol CacheProtocolOf(const MeasureOptions& o);
Result<MeasureOptions> OptionsFromJson(const nlohmann::json& j);

// Largest error of `got` against `want` over the outputs, each relative to
// its own largest magnitude; a non-finite value where the reference is finite
// is an infinite error. `worst`, when given, receives the worst element.
double CompareOutputs(const graph::TensorMap& got, const graph::TensorMap& want,
                      std::optional<WorstElement>* worst = nullptr);

// Points where a test can inject a fault into a measurement: before every run
// (crash, hang, throw) and on the outputs that are verified (wrong numbers).
struct MeasureHooks {
  std::function<void(const graph::Graph&)> before_run;
  std::function<void(const graph::Graph&, graph::TensorMap&)> on_outputs;
};

// What a measurement compares against: the inputs, the reference executor's
// outputs for them, and the work they imply.
struct ReferenceData {
  graph::TensorMap feeds;
  graph::TensorMap expected;
  double flops = 0;
  double compulsory_bytes = 0;
};
Result<ReferenceData> ComputeReference(const graph::Graph& graph, uint64_t seed);

// Measures an executable in this process (a worker calls this; tests may).
MeasureResult MeasureProgram(runtime::KernelProgram& exe, const ReferenceData& reference,
                             const MeasureOptions& options, const MeasureHooks& hooks = {});

}  // namespace fusetune::measure
