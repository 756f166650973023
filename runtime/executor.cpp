#include "runtime/executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "graph/op_registry.h"
#include "kernels/traffic.h"

namespace fusetune::runtime {

namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void FreeArena(std::byte* p) { std::free(p); }

// A graph constant: not a value computed at run time, nor a layout copy
// (runtime/layout_plan.h numbers those after the graph's values).
bool IsConstant(const graph::Graph& graph, graph::ValueId v) {
  return static_cast<size_t>(v) < graph.values.size() && graph.value(v).is_constant();
}

void FreeFloats(float* p) { std::free(p); }

}  // namespace

KernelProgram::~KernelProgram() = default;

Result<std::unique_ptr<KernelProgram>> KernelProgram::Compile(fusion_space::FusionSpace& space,
                                                              const fusion_space::Plan& plan) {
  const fusion_space::FusionDecision valid = space.Validate(plan);
  if (!valid) return Error(ErrorCode::kInvalidArgument, "invalid plan: " + valid.reason());
  const graph::Graph& g = space.graph();
  std::unique_ptr<KernelProgram> exe(new KernelProgram(g, space.config()));
  std::vector<LayoutStep> groups;
  groups.reserve(plan.groups.size());
  for (const fusion_space::PlanGroup& group : plan.groups)
    groups.push_back({space.Match(group.nodes).instance, group.tiling, std::nullopt, {}});
  FT_ASSIGN_OR_RETURN(PlacedLayouts placed, PlaceLayouts(g, std::move(groups)));
  exe->copy_bytes_ = std::move(placed.copy_bytes);
  exe->layout_transforms_ = placed.transforms;
  exe->steps_.reserve(placed.steps.size());
  for (LayoutStep& s : placed.steps) {
    exe->steps_.push_back(
        {std::move(s.instance), std::move(s.tiling), false, {}, s.transform, std::move(s.renamed)});
  }

  // Lifetimes of the values the steps write, by value id (the layout plan's
  // copies after the graph's values).
  const int64_t steps = static_cast<int64_t>(exe->steps_.size());
  const size_t values = g.values.size();
  auto bytes = [&](graph::ValueId v) {
    return static_cast<size_t>(v) < values ? static_cast<int64_t>(g.type(v).nbytes())
                                           : exe->copy_bytes_[static_cast<size_t>(v) - values];
  };
  std::vector<BufferLifetime> life(values + exe->copy_bytes_.size(),
                                   BufferLifetime{graph::kNoValue, 0, -1, -1});
  for (int64_t s = 0; s < steps; ++s) {
    const Step& step = exe->steps_[s];
    std::vector<graph::ValueId> reads = step.instance.inputs, writes = step.instance.outputs;
    if (step.transform) {
      reads = {step.transform->from_value};
      writes = {step.transform->to_value};
    }
    for (auto [value, copy] : step.renamed) reads.push_back(copy);
    for (graph::ValueId v : reads)
      if (life[v].value != graph::kNoValue) life[v].last_step = s;
    for (graph::ValueId v : writes) life[v] = {v, bytes(v), s, s};
  }
  // Graph outputs live in the tensors a run returns, not in the arena.
  for (graph::ValueId v : g.outputs)
    if (life[v].value != graph::kNoValue) {  // once, if listed twice
      exe->written_outputs_.push_back(v);
      life[v].value = graph::kNoValue;
    }
  std::vector<BufferLifetime> lifetimes;
  for (const BufferLifetime& l : life)
    if (l.value != graph::kNoValue) lifetimes.push_back(l);
  exe->buffers_ = PlanBuffers(lifetimes, steps);
  const size_t arena = static_cast<size_t>(std::max<int64_t>(exe->buffers_.arena_bytes, 64));
  exe->arena_ = {static_cast<std::byte*>(std::aligned_alloc(64, (arena + 63) / 64 * 64)),
                 FreeArena};
  if (!exe->arena_)
    return Error(ErrorCode::kInternal, fmt::format("cannot allocate an arena of {} bytes", arena));
  return exe;
}

graph::Tensor* KernelProgram::FindOutput(graph::ValueId v) {
  return const_cast<graph::Tensor*>(std::as_const(*this).FindOutput(v));
}

const graph::Tensor* KernelProgram::FindOutput(graph::ValueId v) const {
  for (const auto& [id, tensor] : outputs_)
    if (id == v) return &tensor;
  return nullptr;
}

std::byte* KernelProgram::Address(graph::ValueId v) {
  if (graph::Tensor* output = FindOutput(v)) return output->raw();
  if (auto it = buffers_.offset.find(v); it != buffers_.offset.end())
    return arena_.get() + it->second;
  return feeds_[v].raw();  // a graph input or a constant
}

void KernelProgram::VisitMemory(const std::function<void(const std::byte*, size_t)>& visit,
                                MemoryScope scope) const {
  if (scope == MemoryScope::kAll) {
    visit(arena_.get(), static_cast<size_t>(buffers_.arena_bytes));
    for (const auto& [v, kept] : outputs_) visit(kept.raw(), kept.nbytes());  // the next run's
  }
  for (const graph::Value& v : graph_.values)
    if (v.is_constant()) visit(v.constant->raw(), v.constant->nbytes());
  for (const Step& step : steps_) {
    for (const auto& owned : step.instance.owned) visit(owned->raw(), owned->nbytes());
    for (const PackedWeight& w : step.packed_b)
      visit(reinterpret_cast<const std::byte*>(w.data.get()), w.floats * sizeof(float));
  }
}

int64_t KernelProgram::packed_weight_bytes() const {
  int64_t bytes = 0;
  for (const Step& step : steps_)
    for (const PackedWeight& w : step.packed_b)
      bytes += static_cast<int64_t>(w.floats * sizeof(float));
  return bytes;
}

void KernelProgram::AllocateOutputs() {
  if (outputs_.size() != written_outputs_.size()) outputs_.clear();
  for (size_t i = 0; i < written_outputs_.size(); ++i) {
    const graph::ValueId v = written_outputs_[i];
    if (i < outputs_.size() && !outputs_[i].second.SharesBuffer()) continue;  // kept: reuse
    // A cache kept in place is never returned, so never shared: a fresh one
    // would lose its rows.
    FT_CHECK(!(i < outputs_.size() && kv_ && IsKvPresent(v)), "a KV cache's buffer is shared");
    graph::Tensor fresh = graph::Tensor::Uninitialized(graph_.type(v).dtype, graph_.type(v).dims);
    if (i < outputs_.size())
      outputs_[i].second = std::move(fresh);
    else
      outputs_.emplace_back(v, std::move(fresh));
  }
}

Result<graph::TensorMap> KernelProgram::Run(const graph::TensorMap& feeds, RunReport* report,
                                            kernels::RunMode mode) {
  std::vector<graph::ValueId> held;
  if (kv_) {
    if (kv_length_ + kv_->new_rows > kv_->capacity)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("the KV cache is full: it holds {} of {} rows and a run appends {}",
                               kv_length_, kv_->capacity, kv_->new_rows));
    for (const KvCacheLink& link : kv_->links) held.push_back(link.past);
  }
  FT_ASSIGN_OR_RETURN(feeds_, graph::BindFeeds(graph_, feeds, held));
  const auto start = std::chrono::steady_clock::now();
  AllocateOutputs();
  if (kv_)  // the past rows lie in the present's buffer (a run reads them there)
    for (const KvCacheLink& link : kv_->links) feeds_[link.past] = *FindOutput(link.present);
  RunReport local;
  Status ran = Status::Ok();
  for (size_t s = 0; s < steps_.size() && ran.ok(); ++s) {
    auto r = RunStep(steps_[s], kv_ ? &kv_->steps[s] : nullptr, mode);
    if (!r.ok()) {
      ran = r.error();
      break;
    }
    local.total += r->stats;
    local.steps.push_back(std::move(*r));
  }
  Result<graph::TensorMap> outputs =
      ran.ok() ? CollectOutputs() : Result<graph::TensorMap>(ran.error());
  feeds_.clear();  // before anything returns: the outputs kept must not look shared
  if (!outputs.ok()) return outputs.error();
  if (kv_) kv_length_ += kv_->new_rows;
  local.seconds = Since(start);
  if (report) *report = std::move(local);
  return outputs;
}

bool KernelProgram::IsKvPresent(graph::ValueId v) const {
  return kv_ && std::any_of(kv_->links.begin(), kv_->links.end(),
                            [&](const KvCacheLink& link) { return link.present == v; });
}

Result<graph::TensorMap> KernelProgram::CollectOutputs() {
  graph::TensorMap outputs;
  for (graph::ValueId v : graph_.outputs) {
    if (IsKvPresent(v)) continue;  // the cache stays in the program
    if (const graph::Tensor* written = FindOutput(v)) {
      outputs[graph_.value(v).name] = *written;
      continue;
    }
    // A graph input or constant that is also an output.
    graph::Tensor t = graph::Tensor::Uninitialized(graph_.type(v).dtype, graph_.type(v).dims);
    std::memcpy(t.raw(), Address(v), t.nbytes());
    outputs[graph_.value(v).name] = std::move(t);
  }
  return outputs;
}

Status KernelProgram::ServeKvCacheInPlace() {
  std::vector<const fusion_space::KernelInstance*> instances;
  for (const Step& step : steps_) instances.push_back(step.transform ? nullptr : &step.instance);
  FT_ASSIGN_OR_RETURN(KvCachePlan plan, PlanKvCacheInPlace(graph_, instances));
  kv_ = std::move(plan);
  kv_length_ = 0;
  AllocateOutputs();  // the caches' buffers, kept from now on (never returned)
  return Status::Ok();
}

const KvCacheLink* KernelProgram::FindKvLink(const std::string& past_name) const {
  if (!kv_) return nullptr;
  for (const KvCacheLink& link : kv_->links)
    if (graph_.value(link.past).name == past_name) return &link;
  return nullptr;
}

Status KernelProgram::LoadKvCache(const graph::TensorMap& rows) {
  if (!kv_) return Error(ErrorCode::kInvalidArgument, "the program does not serve a KV cache");
  std::optional<int64_t> length;
  for (const auto& [name, tensor] : rows) {
    const KvCacheLink* link = FindKvLink(name);
    if (!link)
      return Error(ErrorCode::kNotFound, fmt::format("'{}' is not a KV cache input of the model "
                                                     "(the caches are named by their past inputs)",
                                                     name));
    graph::Dims want = graph_.type(link->past).dims;
    const int64_t n =
        tensor.rank() == static_cast<int64_t>(want.size()) ? tensor.dims()[link->axis] : -1;
    want[link->axis] = n;
    if (n < 0 || tensor.dims() != want || tensor.dtype() != graph::DataType::kFloat32)
      return Error(
          ErrorCode::kShapeMismatch,
          fmt::format("KV cache '{}': expects f32 rows shaped like {} along axis {}, "
                      "given {}{}",
                      name, graph::DimsToString(graph_.type(link->past).dims), link->axis,
                      graph::DataTypeName(tensor.dtype()), graph::DimsToString(tensor.dims())));
    if (length && *length != n)
      return Error(
          ErrorCode::kShapeMismatch,
          fmt::format("KV cache '{}': {} rows where the others have {}", name, n, *length));
    if (n > kv_->capacity)
      return Error(
          ErrorCode::kInvalidArgument,
          fmt::format("KV cache '{}': {} rows exceed its capacity of {}", name, n, kv_->capacity));
    length = n;
  }
  for (const KvCacheLink& link : kv_->links)
    if (!rows.empty() && !rows.count(graph_.value(link.past).name))
      return Error(ErrorCode::kNotFound,
                   fmt::format("KV cache '{}' not given: load every cache at once",
                               graph_.value(link.past).name));
  for (const KvCacheLink& link : kv_->links)
    if (!rows.empty())
      CopyRowsIntoCache(rows.at(graph_.value(link.past).name), link.axis, FindOutput(link.present));
  kv_length_ = length.value_or(0);
  return Status::Ok();
}

Result<graph::Tensor> KernelProgram::KvCacheRows(const std::string& past_name) const {
  const KvCacheLink* link = FindKvLink(past_name);
  if (!link)
    return Error(ErrorCode::kNotFound,
                 fmt::format("'{}' is not a KV cache the program serves", past_name));
  const graph::Tensor* cache = FindOutput(link->present);
  if (!cache) return Error(ErrorCode::kInternal, "the KV cache has no buffer");
  return CacheRows(*cache, link->axis, kv_length_);
}

Status KernelProgram::RunReferenceStep(const Step& step, StepReport* report) {
  const int32_t index = step.instance.nodes[0];
  const graph::Node& node = graph_.nodes[index];
  const graph::OpSchema* schema = graph::FindOpSchema(node.domain, node.op_type);
  if (!schema)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("{}: op type is not supported", graph_.Describe(index)));
  std::vector<graph::Tensor> inputs;
  inputs.reserve(node.inputs.size());
  graph::KernelContext ctx{node, graph_.opset, {}, {}};
  for (graph::ValueId v : node.inputs) {
    if (v == graph::kNoValue) {
      inputs.emplace_back();
      continue;
    }
    if (graph_.value(v).is_constant() || graph_.value(v).is_input) {
      inputs.push_back(feeds_[v]);
    } else {
      graph::ValueId held = v;  // a copy in NCHW when v's writer wrote another layout
      for (auto [value, copy] : step.renamed)
        if (value == v) held = copy;
      graph::Tensor t(graph_.type(v).dtype, graph_.type(v).dims);
      std::memcpy(t.raw(), Address(held), t.nbytes());
      inputs.push_back(std::move(t));
    }
    report->stats.bytes_global_to_local += static_cast<int64_t>(graph_.type(v).nbytes());
  }
  for (size_t i = 0; i < node.inputs.size(); ++i)
    ctx.inputs.push_back(node.inputs[i] == graph::kNoValue ? nullptr : &inputs[i]);
  for (graph::ValueId v : node.outputs)
    ctx.output_types.push_back(v == graph::kNoValue ? graph::TensorType{} : graph_.type(v));
  auto results = schema->run(ctx);
  if (!results.ok()) return results.error().WithContext(graph_.Describe(index));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const graph::ValueId v = node.outputs[i];
    if (v == graph::kNoValue) continue;
    const graph::Tensor& r = (*results)[i];
    if (r.dims() != graph_.type(v).dims || r.dtype() != graph_.type(v).dtype)
      return Error(ErrorCode::kInternal,
                   fmt::format("{}: reference kernel produced {}{} for '{}'",
                               graph_.Describe(index), graph::DataTypeName(r.dtype()),
                               graph::DimsToString(r.dims()), graph_.value(v).name));
    std::memcpy(Address(v), r.raw(), r.nbytes());
    report->stats.bytes_local_to_global += static_cast<int64_t>(r.nbytes());
  }
  return Status::Ok();
}

void KernelProgram::PrePackWeights(const graph::Graph& graph,
                                   const fusion_space::KernelInstance& bound, Step& step) {
  step.prepared = true;
  const kernels::GemmDesc& d = step.instance.gemm;  // slot pointers: which value is B
  const auto& tiling = std::get<kernels::GemmTiling>(step.tiling);
  for (size_t o = 0; o < d.outputs.size(); ++o) {
    const int slot = fusion_space::SlotIndex(d.outputs[o].b);
    if (slot < 0 || (d.batch > 1 && d.outputs[o].b_batch_stride != 0)) continue;
    const graph::ValueId v = step.instance.slots[slot].value;
    if (v != graph::kNoValue && !IsConstant(graph, v)) continue;  // an activation
    const int output = static_cast<int>(o);
    PackedWeight w = NewPackedWeight(output, kernels::PrePackedBFloats(bound.gemm, output, tiling));
    if (!w.data) continue;  // no memory to spare: the kernel packs from B as before
    kernels::PrePackB(bound.gemm, output, tiling, w.data.get());
    step.packed_b.push_back(std::move(w));
  }
}

KernelProgram::PackedWeight KernelProgram::NewPackedWeight(int output, int64_t floats) {
  PackedWeight w{output};
  w.floats = static_cast<size_t>(floats);
  w.data = {static_cast<float*>(std::aligned_alloc(64, (w.floats * sizeof(float) + 63) / 64 * 64)),
            FreeFloats};
  return w;
}

void KernelProgram::PrePackConvWeights(const graph::Graph& graph,
                                       const fusion_space::KernelInstance& bound, Step& step) {
  step.prepared = true;
  const auto& tiling = std::get<kernels::ConvTiling>(step.tiling);
  const int slot = fusion_space::SlotIndex(step.instance.conv.w);
  if (slot < 0) return;
  const graph::ValueId v = step.instance.slots[slot].value;
  if (v != graph::kNoValue && !IsConstant(graph, v)) return;  // weights computed at run time
  const int64_t floats = kernels::PrePackedConvWeightFloats(bound.conv, tiling);
  if (floats == 0) return;  // the algorithm reads W as it is
  PackedWeight w = NewPackedWeight(0, floats);
  if (!w.data) return;  // no memory to spare: the kernel reads W as it is
  kernels::PrePackConvWeights(bound.conv, tiling, w.data.get());
  step.packed_b.push_back(std::move(w));
}

void KernelProgram::PrePackConvChainWeights(const graph::Graph& graph,
                                            const fusion_space::KernelInstance& bound, Step& step) {
  step.prepared = true;
  const kernels::ConvChainDesc& d = step.instance.conv_chain;  // slot pointers: which values
  for (const float* w : {d.expand_w, d.project_w}) {
    const int slot = fusion_space::SlotIndex(w);
    if (w == nullptr || slot < 0) continue;
    const graph::ValueId v = step.instance.slots[slot].value;
    if (v != graph::kNoValue && !IsConstant(graph, v))
      return;  // weights computed at run time: the kernel packs them on every run
  }
  const auto& tiling = std::get<kernels::ConvChainTiling>(step.tiling);
  PackedWeight w =
      NewPackedWeight(0, kernels::PrePackedConvChainWeightFloats(bound.conv_chain, tiling));
  if (!w.data) return;  // no memory to spare: the kernel packs them on every run
  kernels::PrePackConvChainWeights(bound.conv_chain, tiling, w.data.get());
  step.packed_b.push_back(std::move(w));
}

Result<kernels::KernelStats> KernelProgram::RunTransformStep(const Step& step,
                                                             kernels::RunMode mode) {
  const LayoutTransformStep& t = *step.transform;
  kernels::LayoutTransformDesc d{t.dims, t.from, t.to,
                                 reinterpret_cast<const float*>(Address(t.from_value)),
                                 reinterpret_cast<float*>(Address(t.to_value))};
  return kernels::RunLayoutTransform(d, config_, mode);
}

Result<StepReport> KernelProgram::RunStep(Step& step, const KvCacheStep* kv,
                                          kernels::RunMode mode) {
  StepReport report;
  if (step.transform) {
    const LayoutTransformStep& t = *step.transform;
    report.kernel = fmt::format("layout {} -> {}", kernels::ActivationLayoutName(t.from),
                                kernels::ActivationLayoutName(t.to));
    report.layout_transform = true;
    const auto start = std::chrono::steady_clock::now();
    Result<kernels::KernelStats> stats = RunTransformStep(step, mode);
    if (!stats.ok()) return stats.error().WithContext(report.kernel);
    report.stats = *stats;
    report.seconds = Since(start);
    return report;
  }
  report.kernel = step.instance.summary;
  report.tiling = fusion_space::TilingToString(step.tiling);
  const auto start = std::chrono::steady_clock::now();
  if (step.instance.kind == fusion_space::KernelTemplate::kReference) {
    FT_RETURN_IF_ERROR(RunReferenceStep(step, &report));
    report.seconds = Since(start);
    report.stats.busy_seconds = report.seconds;  // runs inline: no launch
    return report;
  }
  fusion_space::KernelInstance k = step.instance;  // bind the slots to this run's buffers
  fusion_space::VisitDescriptorPointers(k, [&](float*& p) {
    const int slot = fusion_space::SlotIndex(p);
    if (slot < 0) return;
    const fusion_space::OperandSlot& s = k.slots[slot];
    std::byte* base = s.value != graph::kNoValue ? Address(s.value)
                                                 : const_cast<std::byte*>(k.owned[s.owned]->raw());
    p = reinterpret_cast<float*>(base) + s.offset;
  });
  if (kv && kv->role == KvCacheStep::Role::kAppend)
    AppendAtLength(*kv_, *kv, kv_length_, &k.elementwise);
  if (kv && kv->role == KvCacheStep::Role::kAttend) k.attention.seq_kv = kv_length_ + kv_->new_rows;
  Result<kernels::KernelStats> stats = Error(ErrorCode::kInternal, "no kernel ran");
  switch (k.kind) {
    case fusion_space::KernelTemplate::kElementwise:
      stats = kernels::RunElementwise(
          k.elementwise, std::get<kernels::ElementwiseTiling>(step.tiling), config_, mode);
      break;
    case fusion_space::KernelTemplate::kRowwise:
      stats = kernels::RunRowwise(k.rowwise, std::get<kernels::RowwiseTiling>(step.tiling), config_,
                                  mode);
      break;
    case fusion_space::KernelTemplate::kGemm:
      if (!step.prepared &&
          kernels::ValidateGemm(k.gemm, std::get<kernels::GemmTiling>(step.tiling), config_).ok())
        PrePackWeights(graph_, k, step);  // else RunGemm reports what is wrong
      for (const PackedWeight& w : step.packed_b) k.gemm.outputs[w.output].b_packed = w.data.get();
      stats = kernels::RunGemm(k.gemm, std::get<kernels::GemmTiling>(step.tiling), config_, mode);
      break;
    case fusion_space::KernelTemplate::kConv: {
      const auto& tiling = std::get<kernels::ConvTiling>(step.tiling);
      if (!step.prepared && kernels::ValidateConv(k.conv, tiling, config_).ok())
        PrePackConvWeights(graph_, k, step);  // else RunConv reports what is wrong
      for (const PackedWeight& w : step.packed_b) k.conv.w_packed = w.data.get();
      stats = kernels::RunConv(k.conv, tiling, config_, mode);
      break;
    }
    case fusion_space::KernelTemplate::kConvChain: {
      const auto& tiling = std::get<kernels::ConvChainTiling>(step.tiling);
      if (!step.prepared && kernels::ValidateConvChain(k.conv_chain, tiling, config_).ok())
        PrePackConvChainWeights(graph_, k, step);  // else RunConvChain reports what is wrong
      for (const PackedWeight& w : step.packed_b) k.conv_chain.w_packed = w.data.get();
      stats = kernels::RunConvChain(k.conv_chain, tiling, config_, mode);
      break;
    }
    case fusion_space::KernelTemplate::kPool:
      stats = kernels::RunPool(k.pool, std::get<kernels::PoolTiling>(step.tiling), config_, mode);
      break;
    case fusion_space::KernelTemplate::kAttention:
      stats = kernels::RunAttention(k.attention, std::get<kernels::AttentionTiling>(step.tiling),
                                    config_, mode);
      break;
    case fusion_space::KernelTemplate::kReference:
      break;
  }
  if (!stats.ok()) return stats.error().WithContext(report.kernel);
  report.stats = *stats;
  report.seconds = Since(start);
  return report;
}

}  // namespace fusetune::runtime
