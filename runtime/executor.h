// runtime/: a plan lowered to a kernel program and executed.
//
// Map of the module: runtime/README.md (what it offers, one line per file).
//
// Every importable model runs: a node that no template implements is a
// single-node group that runs the registry's reference kernel inside the
// same program, reading and writing the same arena.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "fusion_space/space.h"
#include "graph/reference_executor.h"
#include "runtime/buffer_plan.h"
#include "runtime/kv_cache.h"
#include "runtime/layout_plan.h"

namespace fusetune::runtime {

struct StepReport {
  std::string kernel;  // the instance summary
  std::string tiling;
  bool layout_transform = false;  // a transform the program placed (layout_plan.h)
  kernels::KernelStats stats;     // reference steps: bytes of their inputs and outputs
  double seconds = 0;
};

struct RunReport {
  std::vector<StepReport> steps;
  kernels::KernelStats total;
  double seconds = 0;
};

class KernelProgram {
 public:
  // Validates the plan against the space and plans buffers. The space (and
  // its graph) must outlive the executable.
  static Result<std::unique_ptr<KernelProgram>> Compile(fusion_space::FusionSpace& space,
                                                        const fusion_space::Plan& plan);
  ~KernelProgram();

  // Feeds are checked like the reference executor's (names, shapes; f64/f16
  // converted to f32). Returns the graph outputs by name, in tensors the
  // program writes again on a later run once every copy the caller holds
  // is gone: keep the Tensor, not a pointer into it, for as long as its
  // values are needed.
  Result<graph::TensorMap> Run(const graph::TensorMap& feeds, RunReport* report = nullptr,
                               kernels::RunMode mode = kernels::RunMode::kFull);

  // Every block of memory a run reads or writes besides the feeds and the
  // kernels' local buffers: the arena, the outputs kept for the next run,
  // the graph's constants, tensors the kernel instances own (folded
  // operands) and pre-packed weights; with kWeights, only those that hold
  // constants (not the arena nor the outputs). Measurement
  // flushes these from the caches so that a run's global-memory traffic is
  // real (target::CacheProtocol).
  enum class MemoryScope { kAll, kWeights };
  void VisitMemory(const std::function<void(const std::byte*, size_t)>& visit,
                   MemoryScope scope = MemoryScope::kAll) const;

  // KV caches served in place (kv_cache.h): from now on the program keeps
  // each cache in its present output's buffer, a run is fed everything but
  // the past inputs, appends its new rows at the current length and returns
  // the outputs but the presents. An error says why the program cannot
  // (and leaves it running as written).
  Status ServeKvCacheInPlace();
  bool serves_kv_cache() const { return kv_.has_value(); }
  // Rows each cache holds now, and can hold (0 unless served in place).
  int64_t kv_cache_length() const { return kv_length_; }
  int64_t kv_cache_capacity() const { return kv_ ? kv_->capacity : 0; }
  // Sets every cache to the given rows (by past input name: a prefill's
  // presents), all of the same length; an empty map empties the caches.
  Status LoadKvCache(const graph::TensorMap& rows);
  // The plan of the caches served in place, if any.
  const std::optional<KvCachePlan>& kv_cache_plan() const { return kv_; }
  // The rows a cache holds now, by past input name, as a dense tensor.
  Result<graph::Tensor> KvCacheRows(const std::string& past_name) const;

  const BufferPlan& buffers() const { return buffers_; }
  // Bytes of pre-packed weights the runs so far have built (0 before the first).
  int64_t packed_weight_bytes() const;
  const graph::Graph& graph() const { return graph_; }
  int64_t num_steps() const { return static_cast<int64_t>(steps_.size()); }
  // Layout transforms the program placed between its steps (layout_plan.h).
  int64_t layout_transforms() const { return layout_transforms_; }

 private:
  // A GEMM output's constant B in the panel layout of the step's tiling, or
  // a convolution's W in its algorithm's layout (output 0).
  struct PackedWeight {
    int output;
    std::unique_ptr<float, void (*)(float*)> data{nullptr, nullptr};
    size_t floats = 0;
  };
  struct Step {
    fusion_space::KernelInstance instance;
    fusion_space::Tiling tiling;
    bool prepared = false;  // packed_b built (first run)
    std::vector<PackedWeight> packed_b;
    std::optional<LayoutTransformStep> transform;                    // set: a layout transform
    std::vector<std::pair<graph::ValueId, graph::ValueId>> renamed;  // reference reads moved
  };
  KernelProgram(const graph::Graph& graph, kernels::KernelConfig config)
      : graph_(graph), config_(config) {}
  Result<StepReport> RunStep(Step& step, const KvCacheStep* kv, kernels::RunMode mode);
  // Packs the constant B operands of a bound GEMM step once, so that every
  // run copies them into the local buffer as contiguous slivers: the packing
  // is paid once per program, as ONNX Runtime pre-packs weights per session.
  static void PrePackWeights(const graph::Graph& graph, const fusion_space::KernelInstance& bound,
                             Step& step);
  // The same for a convolution's constant W (Winograd: its transformed form).
  static void PrePackConvWeights(const graph::Graph& graph,
                                 const fusion_space::KernelInstance& bound, Step& step);
  // The same for a conv chain's constant expand and project weights.
  static void PrePackConvChainWeights(const graph::Graph& graph,
                                      const fusion_space::KernelInstance& bound, Step& step);
  // An aligned allocation for a packed weight (data null when there is no memory).
  static PackedWeight NewPackedWeight(int output, int64_t floats);
  std::byte* Address(graph::ValueId v);
  graph::Tensor* FindOutput(graph::ValueId v);  // null unless a step writes v into outputs_
  const graph::Tensor* FindOutput(graph::ValueId v) const;
  bool IsKvPresent(graph::ValueId v) const;  // a cache served in place
  Status RunReferenceStep(const Step& step, StepReport* report);
  Result<kernels::KernelStats> RunTransformStep(const Step& step, kernels::RunMode mode);

  const graph::Graph& graph_;
  kernels::KernelConfig config_;
  std::vector<Step> steps_;
  std::vector<int64_t> copy_bytes_;  // values the layout plan added, after the graph's
  int64_t layout_transforms_ = 0;
  BufferPlan buffers_;
  std::unique_ptr<std::byte, void (*)(std::byte*)> arena_{nullptr, nullptr};
  std::vector<graph::Tensor> feeds_;  // by ValueId, while running
  // The graph outputs the steps write (no arena slot), and their tensors:
  // kernels write them in place, so a run returns them without a copy out
  // of the arena. They are kept between runs and written again once the
  // caller has let go of the tensors a run returned: a fresh 16 MiB output
  // costs some 4,000 page faults per run (a decode step's KV cache: 10.2
  // against 14.0 ms, measured).
  std::vector<graph::ValueId> written_outputs_;
  std::vector<std::pair<graph::ValueId, graph::Tensor>> outputs_;
  void AllocateOutputs();
  std::optional<KvCachePlan> kv_;
  int64_t kv_length_ = 0;
  const KvCacheLink* FindKvLink(const std::string& past_name) const;
  Result<graph::TensorMap> CollectOutputs();
};

}  // namespace fusetune::runtime
