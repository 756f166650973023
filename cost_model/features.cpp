#include "cost_model/features.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "graph/analysis.h"

namespace fusetune::cost_model {

namespace {

// Feature layout, in the order FeatureNames() lists them.
const std::vector<std::string> kNames = {
    // template
    "is_gemm", "is_rowwise", "is_elementwise", "is_attention", "is_conv", "is_pool",
    "is_conv_chain",
    // work
    "log_flops", "log_transcendentals", "log_output_elements", "log_compulsory_bytes",
    // analytical traffic of the tiling
    "log_bytes_in", "log_bytes_out", "log_traffic", "traffic_over_compulsory",
    "log_arithmetic_intensity",
    // tiles and balance
    "log_tiles", "log_tiles_per_thread", "load_imbalance", "log_steps_per_thread",
    // local buffer and vector lanes
    "buffer_utilisation", "lane_utilisation",
    // problem shape (template-specific slots)
    "log_shape_0", "log_shape_1", "log_shape_2", "log_shape_3", "shape_4",
    // tiling parameters (template-specific slots)
    "tiling_0", "tiling_1", "tiling_2", "tiling_3", "tiling_4", "tiling_5", "tiling_6",
    // activation layouts a conv reads and writes (kernels/layout.h; 0 = NCHW)
    "layout_in", "layout_out",
    // the precision a GEMM, attention or conv computes in (kernels/precision.h; 0 = f32, 1 = bf16)
    "bf16",
    // op mix of prologue and epilogue (or the tile program)
    "ops_operand", "ops_activation", "ops_reduction", "ops_total", "outputs",
    // target
    "log_peak_gflops", "log_dram_gbps", "log_l2_gbps", "launch_us", "threads", "warm_weights",
    "warm_activations",
    // analytical time parts (seconds, log2)
    "log_compute_s", "log_memory_s", "log_overhead_s", "log_analytical_s"};

double Log2(double x) { return std::log2(std::max(x, 1e-30) + 1.0); }
double LogSeconds(double s) { return std::log2(std::max(s, 1e-9)); }

struct OpMix {
  double operand = 0, activation = 0, reduction = 0, total = 0;
};

OpMix EpilogueMix(const std::vector<kernels::EpilogueOp>& ops, OpMix mix = {}) {
  for (const kernels::EpilogueOp& op : ops) {
    if (kernels::IsRowNorm(op.kind))
      mix.reduction += 1;
    else
      (op.data ? mix.operand : mix.activation) += 1;
    mix.total += 1;
  }
  return mix;
}

OpMix ProgramMix(const kernels::TileProgram& program) {
  OpMix mix;
  for (const kernels::TileInstr& instr : program.instrs()) {
    if (instr.op == kernels::TileOp::kInput) {
      mix.operand += 1;
    } else if (kernels::IsReduction(instr.op)) {
      mix.reduction += 1;
    } else if (kernels::IsUnary(instr.op)) {
      mix.activation += 1;
    }
    if (instr.op != kernels::TileOp::kInput && instr.op != kernels::TileOp::kConst) mix.total += 1;
  }
  return mix;
}

// Template-specific shape and tiling slots and op mix.
void TemplateFeatures(const fusion_space::KernelInstance& in, const fusion_space::Tiling& tiling,
                      double* shape, double* params, OpMix* mix, double* outputs) {
  switch (in.kind) {
    case fusion_space::KernelTemplate::kGemm: {
      const auto& g = in.gemm;
      const auto& t = std::get<kernels::GemmTiling>(tiling);
      int64_t n = 0;
      for (const auto& o : g.outputs) n += o.n;
      shape[0] = Log2(static_cast<double>(g.m));
      shape[1] = Log2(static_cast<double>(n));
      shape[2] = Log2(static_cast<double>(g.k));
      shape[3] = Log2(static_cast<double>(g.batch));
      shape[4] = g.swiglu ? 1 : 0;
      params[0] = Log2(static_cast<double>(t.mc));
      params[1] = Log2(static_cast<double>(t.nc));
      params[2] = Log2(static_cast<double>(t.kc));
      params[3] = t.mr;
      params[4] = t.nr;
      params[5] = t.order == kernels::LoopOrder::kMN ? 0 : 1;
      params[6] = static_cast<double>(t.split) + (t.double_buffer ? 4 : 0) + (t.refill ? 8 : 0);
      *mix = EpilogueMix(g.prologue.elementwise);
      if (g.prologue.norm != kernels::NormKind::kNone) mix->reduction += 1;
      for (const auto& o : g.outputs) *mix = EpilogueMix(o.epilogue, *mix);
      *outputs = static_cast<double>(g.outputs.size());
      break;
    }
    case fusion_space::KernelTemplate::kRowwise: {
      const auto& r = in.rowwise;
      const auto& t = std::get<kernels::RowwiseTiling>(tiling);
      double rows = 1;
      for (int64_t d : r.row_dims) rows *= static_cast<double>(d);
      shape[0] = Log2(rows);
      shape[1] = Log2(static_cast<double>(r.cols));
      shape[4] = static_cast<double>(r.row_dims.size());
      params[0] = Log2(static_cast<double>(t.rows_per_tile));
      params[1] = t.unroll;
      params[2] = t.prefetch;
      *mix = ProgramMix(r.program);
      *outputs = static_cast<double>(r.outputs.size());
      break;
    }
    case fusion_space::KernelTemplate::kElementwise: {
      const auto& e = in.elementwise;
      const auto& t = std::get<kernels::ElementwiseTiling>(tiling);
      auto elements = [](const std::vector<int64_t>& dims) {
        double n = 1;
        for (int64_t d : dims) n *= static_cast<double>(d);
        return n;
      };
      double total = elements(e.dims);  // over every piece (a Concat's inputs)
      for (const auto& p : e.pieces) total += elements(p.dims);
      shape[0] = Log2(total);
      shape[1] = Log2(static_cast<double>(e.dims.empty() ? 1 : e.dims.back()));
      shape[4] = static_cast<double>(e.dims.size());
      params[0] = Log2(static_cast<double>(t.tile));
      *mix = ProgramMix(e.program);
      *outputs = static_cast<double>(e.outputs.size());
      break;
    }
    case fusion_space::KernelTemplate::kAttention: {
      const auto& a = in.attention;
      const auto& t = std::get<kernels::AttentionTiling>(tiling);
      shape[0] = Log2(static_cast<double>(a.seq_q));
      shape[1] = Log2(static_cast<double>(a.seq_kv));
      shape[2] = Log2(static_cast<double>(a.head_dim));
      shape[3] = Log2(static_cast<double>(a.batch * a.heads));
      shape[4] = static_cast<double>(a.mask);
      params[0] = Log2(static_cast<double>(t.br));
      params[1] = Log2(static_cast<double>(t.bc));
      params[3] = t.mr;
      params[4] = t.nr;
      mix->reduction = 2;  // the online softmax's max and sum
      *outputs = 1;
      break;
    }
    case fusion_space::KernelTemplate::kConv: {
      // As the implicit GEMM sees it: M = output channels per group, N =
      // output positions, K = the reduction; the algorithm as a category.
      const kernels::ConvShape& s = in.conv.shape;
      const auto& t = std::get<kernels::ConvTiling>(tiling);
      shape[0] = Log2(static_cast<double>(s.out_per_group()));
      shape[1] = Log2(static_cast<double>(s.pixels() * s.batch));
      shape[2] = Log2(static_cast<double>(s.in_per_group() * s.kernel_h * s.kernel_w));
      shape[3] = Log2(static_cast<double>(s.groups));
      shape[4] = static_cast<double>(s.kernel_h * s.kernel_w);
      params[0] = Log2(static_cast<double>(t.oc_block));
      params[1] = Log2(static_cast<double>(t.pixel_block));
      params[2] = Log2(static_cast<double>(t.k_block));
      params[3] = t.mr;
      params[4] = t.nr;
      params[5] = static_cast<double>(t.algorithm);
      params[6] = static_cast<double>(s.stride_h * s.stride_w);
      *mix = EpilogueMix(in.conv.epilogue);
      if (in.conv.bias) mix->operand += 1;
      // A pooled conv reduces each tile's rows (global) or windows (max).
      if (in.conv.global_pool != kernels::ConvGlobalPool::kNone || in.conv.max_pool.active())
        mix->reduction += 1;
      *outputs = 1;
      break;
    }
    case fusion_space::KernelTemplate::kPool: {
      // Planes, output positions per plane, window area; the kind as a
      // category, the stride; the tiling's blocks.
      const kernels::PoolDesc& d = in.pool;
      const auto& t = std::get<kernels::PoolTiling>(tiling);
      const bool global = kernels::IsGlobalPool(d.kind);
      shape[0] = Log2(static_cast<double>(d.batch * d.channels));
      shape[1] = Log2(static_cast<double>(global ? 1 : d.out_h * d.out_w));
      shape[2] = Log2(static_cast<double>(global ? d.in_h * d.in_w : d.kernel_h * d.kernel_w));
      shape[3] = Log2(static_cast<double>(d.in_h * d.in_w));
      shape[4] = static_cast<double>(d.kind);
      params[0] = Log2(static_cast<double>(t.channel_block));
      params[1] = Log2(static_cast<double>(t.row_block));
      params[6] = global ? 1 : static_cast<double>(d.stride_h * d.stride_w);
      *outputs = 1;
      break;
    }
    case fusion_space::KernelTemplate::kConvChain: {
      // Output channels, output positions, expanded and input channels, the
      // depthwise window; the tiling's rows and block, micro-tile, stride.
      const kernels::ConvChainDesc& d = in.conv_chain;
      const auto& t = std::get<kernels::ConvChainTiling>(tiling);
      shape[0] = Log2(static_cast<double>(d.out_channels));
      shape[1] = Log2(static_cast<double>(d.depthwise.pixels() * d.depthwise.batch));
      shape[2] = Log2(static_cast<double>(d.depthwise.in_channels));
      shape[3] = Log2(static_cast<double>(d.in_channels));
      shape[4] = static_cast<double>(d.depthwise.kernel_h * d.depthwise.kernel_w);
      params[0] = Log2(static_cast<double>(t.rows));
      params[1] = Log2(static_cast<double>(t.e_block));
      params[2] = d.expand ? 1 : 0;
      params[3] = t.mr;
      params[4] = t.nr;
      params[5] = t.split_expanded ? 1 : 0;
      params[6] = static_cast<double>(d.depthwise.stride_h * d.depthwise.stride_w);
      *mix = EpilogueMix(d.epilogue, EpilogueMix(d.dw_act, EpilogueMix(d.expand_act)));
      for (const float* bias : {d.expand_bias, d.dw_bias, d.project_bias})
        if (bias) mix->operand += 1;  // as a conv's bias counts
      *outputs = 1;
      break;
    }
    case fusion_space::KernelTemplate::kReference:
      break;
  }
}

// Multiplications per multiply-add of the group's definition: below 1 for
// algorithms that compute the same result with fewer (Winograd), so the
// analytical compute does not rank them by the direct form's FLOPs; above 1
// for a conv chain's expand rows recomputed in neighbouring bands.
double ArithmeticFactor(const fusion_space::KernelInstance& in, const fusion_space::Tiling& t) {
  if (const auto* chain = std::get_if<kernels::ConvChainTiling>(&t);
      chain != nullptr && in.kind == fusion_space::KernelTemplate::kConvChain)
    return kernels::ConvChainWorkRatio(in.conv_chain, *chain);
  const auto* conv = std::get_if<kernels::ConvTiling>(&t);
  if (in.kind != fusion_space::KernelTemplate::kConv || conv == nullptr) return 1.0;
  return kernels::ConvMultiplicationRatio(conv->algorithm);
}

}  // namespace

TargetFeatures TargetFeaturesFromCalibration(const nlohmann::json& c,
                                             target::CacheProtocol caches) {
  TargetFeatures t;
  t.warm_weights = caches == target::CacheProtocol::kWarm;
  t.warm_activations = caches != target::CacheProtocol::kFlushed;
  if (!c.is_object()) return t;
  auto positive = [&](const char* key, double fallback) {
    const double v = c.value(key, 0.0);
    return v > 0 ? v : fallback;
  };
  t.peak_gflops = positive("fma_gflops", t.peak_gflops);
  t.bf16_gflops = positive("bf16_dot_gflops", t.bf16_gflops);
  t.dram_gbps = positive("dram_read_gbps", t.dram_gbps);
  t.l2_gbps = positive("l2_read_gbps", t.l2_gbps);
  t.launch_us = positive("launch_overhead_us", t.launch_us);
  t.local_buffer_bytes = positive("local_buffer_bytes", t.local_buffer_bytes);
  t.threads = c.value("threads", t.threads);
  return t;
}

GroupInfo MakeGroupInfo(const graph::Graph& graph, const fusion_space::KernelInstance& instance) {
  GroupInfo g;
  g.instance = instance;
  for (int32_t n : instance.nodes) {
    const graph::NodeCost cost = graph::ComputeNodeCost(graph, n);
    g.flops += cost.flops;
    g.transcendentals += cost.transcendentals;
  }
  for (graph::ValueId v : instance.inputs) g.compulsory_bytes += 4.0 * graph.type(v).numel();
  for (graph::ValueId v : instance.outputs) {
    g.compulsory_bytes += 4.0 * graph.type(v).numel();
    g.output_elements += static_cast<double>(graph.type(v).numel());
  }
  return g;
}

const std::vector<std::string>& FeatureNames() { return kNames; }
int NumFeatures() { return static_cast<int>(kNames.size()); }

AnalyticalParts ExtractFeatures(const GroupInfo& group, const fusion_space::Tiling& tiling,
                                const TargetFeatures& target, float* out) {
  const fusion_space::KernelInstance& in = group.instance;
  const kernels::TilingEstimate e = fusion_space::EstimateTiling(in, tiling, target.threads);
  double shape[5] = {}, params[7] = {}, outputs = 0;
  OpMix mix;
  TemplateFeatures(in, tiling, shape, params, &mix, &outputs);
  double layouts[2] = {};
  if (const auto* conv = std::get_if<kernels::ConvTiling>(&tiling)) {
    layouts[0] = static_cast<double>(conv->in_layout);
    layouts[1] = static_cast<double>(conv->out_layout);
  }

  AnalyticalParts parts;
  parts.traffic_bytes = e.bytes_in + e.bytes_out;
  // Compute: padded work on the busiest thread at the FMA peak of one thread;
  // a transcendental costs about 20 FMA lanes.
  const bool bf16 = fusion_space::TilingPrecision(tiling) == kernels::Precision::kBf16;
  const double peak = bf16 && target.bf16_gflops > 0 ? target.bf16_gflops : target.peak_gflops;
  const double per_thread_peak = peak * 1e9 / std::max(1, target.threads);
  const double work = (group.flops * ArithmeticFactor(in, tiling) + 20 * group.transcendentals) /
                      std::max(e.lane_utilisation, 1e-3) *
                      std::max(e.max_thread_work, 1.0 / target.threads);
  parts.compute = work / per_thread_peak;
  parts.memory = parts.traffic_bytes / (target.dram_gbps * 1e9);
  parts.overhead = target.launch_us * 1e-6;
  const double analytical = parts.overhead + std::max(parts.compute, parts.memory) +
                            0.5 * std::min(parts.compute, parts.memory);

  const double values[] = {in.kind == fusion_space::KernelTemplate::kGemm ? 1.0 : 0.0,
                           in.kind == fusion_space::KernelTemplate::kRowwise ? 1.0 : 0.0,
                           in.kind == fusion_space::KernelTemplate::kElementwise ? 1.0 : 0.0,
                           in.kind == fusion_space::KernelTemplate::kAttention ? 1.0 : 0.0,
                           in.kind == fusion_space::KernelTemplate::kConv ? 1.0 : 0.0,
                           in.kind == fusion_space::KernelTemplate::kPool ? 1.0 : 0.0,
                           in.kind == fusion_space::KernelTemplate::kConvChain ? 1.0 : 0.0,
                           Log2(group.flops),
                           Log2(group.transcendentals),
                           Log2(group.output_elements),
                           Log2(group.compulsory_bytes),
                           Log2(e.bytes_in),
                           Log2(e.bytes_out),
                           Log2(parts.traffic_bytes),
                           parts.traffic_bytes / std::max(group.compulsory_bytes, 1.0),
                           Log2(group.flops / std::max(parts.traffic_bytes, 1.0)),
                           Log2(static_cast<double>(e.tiles)),
                           Log2(static_cast<double>(e.max_thread_tiles)),
                           e.max_thread_work * target.threads,
                           Log2(static_cast<double>(e.steps)),
                           static_cast<double>(e.local_bytes) / target.local_buffer_bytes,
                           e.lane_utilisation,
                           shape[0],
                           shape[1],
                           shape[2],
                           shape[3],
                           shape[4],
                           params[0],
                           params[1],
                           params[2],
                           params[3],
                           params[4],
                           params[5],
                           params[6],
                           layouts[0],
                           layouts[1],
                           bf16 ? 1.0 : 0.0,
                           mix.operand,
                           mix.activation,
                           mix.reduction,
                           mix.total,
                           outputs,
                           Log2(target.peak_gflops),
                           Log2(target.dram_gbps),
                           Log2(target.l2_gbps),
                           target.launch_us,
                           static_cast<double>(target.threads),
                           target.warm_weights ? 1.0 : 0.0,
                           target.warm_activations ? 1.0 : 0.0,
                           LogSeconds(parts.compute),
                           LogSeconds(parts.memory),
                           LogSeconds(parts.overhead),
                           LogSeconds(analytical)};
  FT_CHECK(std::size(values) == kNames.size(), "feature list and names differ");
  for (size_t i = 0; i < std::size(values); ++i) out[i] = static_cast<float>(values[i]);
  return parts;
}

AnalyticalParts FeatureCache::Get(const std::string& workload_key, const GroupInfo& group,
                                  const fusion_space::Tiling& tiling, const TargetFeatures& target,
                                  float* out) {
  const std::string key = workload_key + "|" + fusion_space::TilingToString(tiling);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      std::copy(it->second.features.begin(), it->second.features.end(), out);
      return it->second.parts;
    }
  }
  Entry entry;
  entry.features.resize(NumFeatures());
  entry.parts = ExtractFeatures(group, tiling, target, entry.features.data());
  std::copy(entry.features.begin(), entry.features.end(), out);
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.emplace(key, entry);
  return entry.parts;
}

size_t FeatureCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace fusetune::cost_model
