// cost_model/: a learned, retrainable cost model (issue 7).
//
// Map of the module: cost_model/README.md (what it offers, one line per file).
//
// A candidate here is one fused group with one tiling; a whole plan costs the
// sum of its groups. docs/COST_MODEL.md explains each feature group.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fusion_space/tiling_space.h"
#include "graph/graph.h"
#include "target/calibration.h"
#include "target/target.h"

namespace fusetune::cost_model {

// Bump when features change meaning: stored models of another version are
// not used to rank.
// 2: GEMM work counts micro-kernel call costs; 3: the cache protocol is a feature;
// 4: the convolution template (is_conv, its shape and tiling slots);
// 5: the pooling template (is_pool, its shape and tiling slots);
// 6: the conv-chain template (is_conv_chain, its shape and tiling slots, its
// recomputed expand rows in the analytical compute);
// 7: a conv's input and output activation layouts (layout_in, layout_out);
// 8: the cache protocol as two features, warm weights and warm activations
// (cold weights with warm activations is the third protocol).
// 9: a GEMM tiling's precision (bf16), its compute at the BF16 dot peak.
// 10: a GEMM tiling's refilling of B in place (GemmTiling::refill).
// 11: a conv chain's precision (bf16 products), its compute at the BF16 dot peak.
inline constexpr int kFeatureVersion = 11;

// What the model knows of the machine, from its stored calibration
// (target::CalibrationToJson), and of how candidates were measured there, so
// that one model can serve several targets and every cache protocol: warm,
// cold-weights and flushed times of one tiling differ, and without the
// protocol as features a model trained on several would see one candidate
// with several times.
struct TargetFeatures {
  double peak_gflops = 400, dram_gbps = 40, l2_gbps = 250, launch_us = 3;
  double bf16_gflops = 0;  // the BF16 dot peak; 0: unknown, taken as peak_gflops
  double local_buffer_bytes = 1 << 20;
  int threads = 2;
  // What each run finds in the caches (target::CacheProtocol): flushed
  // neither, cold-weights the activations, warm both.
  bool warm_weights = false, warm_activations = false;
};
// Missing fields keep the defaults above.
TargetFeatures TargetFeaturesFromCalibration(const nlohmann::json& calibration,
                                             target::CacheProtocol caches);

// What does not depend on the tiling: computed once per group.
struct GroupInfo {
  fusion_space::KernelInstance instance;
  double flops = 0, transcendentals = 0;
  double compulsory_bytes = 0;  // the group's inputs and outputs, each once
  double output_elements = 0;
};
GroupInfo MakeGroupInfo(const graph::Graph& graph, const fusion_space::KernelInstance& instance);

// The analytical parts of a candidate's time, in seconds: what the
// analytical model adds up and what the learned heads correct.
struct AnalyticalParts {
  double compute = 0, memory = 0, overhead = 0, traffic_bytes = 0;
};

const std::vector<std::string>& FeatureNames();
int NumFeatures();

// Writes NumFeatures() values to `out`; returns the analytical parts.
AnalyticalParts ExtractFeatures(const GroupInfo& group, const fusion_space::Tiling& tiling,
                                const TargetFeatures& target, float* out);

// Memoised ExtractFeatures keyed by (workload key, tiling): search evaluates
// the same tilings again across rounds. One cache serves one target.
// Thread-safe.
class FeatureCache {
 public:
  AnalyticalParts Get(const std::string& workload_key, const GroupInfo& group,
                      const fusion_space::Tiling& tiling, const TargetFeatures& target, float* out);
  size_t size() const;

 private:
  struct Entry {
    std::vector<float> features;
    AnalyticalParts parts;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace fusetune::cost_model
