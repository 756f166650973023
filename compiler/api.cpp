// include/fusetune/fusetune.h on top of compiler/model.h (compiling) and
// search/tuning_job.h (tuning). Internal errors
// become Expected failures here; nothing internal leaks into the header.
#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "compiler/explain.h"
#include "compiler/model.h"
#include "compiler/shape_instances.h"
#include "fusetune/fusetune.h"
#include "graph/model_file.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "search/tuning_job.h"

namespace fusetune {

namespace {

target::CacheProtocol ProtocolOf(Caches caches) {
  switch (caches) {
    case Caches::kFlushed:
      return target::CacheProtocol::kFlushed;
    case Caches::kWarm:
      return target::CacheProtocol::kWarm;
    case Caches::kColdWeights:
      return target::CacheProtocol::kColdWeights;
  }
  return target::CacheProtocol::kFlushed;
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The ONNX import and the standard graph passes, as `fusetune` runs them.
Result<graph::Graph> ImportModel(const std::string& onnx_path,
                                 const std::map<std::string, int64_t>& dims,
                                 const std::map<std::string, std::vector<int64_t>>& values) {
  graph::ImportOptions import;
  import.dim_bindings = dims;
  for (const auto& [name, v] : values)
    import.input_values.emplace(
        name, graph::Tensor::FromVector<int64_t>(graph::DataType::kInt64,
                                                 {static_cast<int64_t>(v.size())}, v));
  FT_ASSIGN_OR_RETURN(graph::Graph graph, graph::ImportOnnxFile(onnx_path, import));
  if (auto passes = graph::RunStandardPasses(graph); !passes.ok())
    return passes.error().WithContext(onnx_path);
  return graph;
}

CompileReport MakeReport(compiler::CompiledModel& model, const std::string& target) {
  const compiler::CompiledPlan& plan = model.compiled();
  CompileReport r;
  for (const compiler::GroupDecision& d : plan.groups) {
    KernelReport k;
    k.nodes.assign(d.nodes.begin(), d.nodes.end());
    k.kernel = d.kernel;
    k.tiling = fusion_space::TilingToString(d.choice.tiling);
    k.source = compiler::PlanSourceName(d.choice.source);
    k.measured_ms = d.choice.measured_seconds
                        ? std::optional<double>(*d.choice.measured_seconds * 1e3)
                        : std::nullopt;
    k.predicted_ms = d.choice.predicted_seconds * 1e3;
    k.predicted_loss = d.choice.predicted_loss;
    ++r.sources[k.source];
    r.kernels.push_back(std::move(k));
  }
  r.predicted_ms = plan.predicted_seconds * 1e3;
  if (plan.measured_seconds) r.measured_ms = *plan.measured_seconds * 1e3;
  r.peak_intermediate_bytes = plan.peak_bytes;
  r.lookup_ms = plan.lookup_seconds * 1e3;
  r.lowering_ms = model.lowering_seconds() * 1e3;
  r.partition = plan.partition;
  r.plan_json = compiler::CompiledPlanFile(model.space(), plan, target).dump();
  return r;
}

// What compiling needs after the Compiler is gone: executables with dynamic
// dimensions compile an instance per new size at run time.
// Compiling runs under `mutex`: the index fills its caches as it is read,
// and executables compile new sizes during their runs.
struct CompileContext {
  std::mutex mutex;
  CompileOptions options;
  std::unique_ptr<db::Database> database;  // outlives the index, which reads it
  std::unique_ptr<compiler::TuningIndex> index;
};

class ExecutableImpl final : public Executable {
 public:
  ExecutableImpl(std::unique_ptr<compiler::ShapeInstances> instances, CompileReport report,
                 std::string target)
      : instances_(std::move(instances)), target_(std::move(target)) {
    reports_[instances_->dims()] = std::move(report);
  }

  Expected<ArrayMap> Run(const ArrayMap& inputs) override {
    auto feeds = ToTensors(inputs);  // checked before a size's program is picked, or made
    if (!feeds.ok()) return Expected<ArrayMap>::Failure(feeds.error().ToString());
    return RunFeeds(*feeds, inputs);
  }
  Expected<ArrayMap> RunViews(const ArrayViewMap& inputs) override {
    graph::TensorMap feeds;
    for (const auto& [name, view] : inputs) {
      auto t = ToTensor(name, view.shape, view.data, graph::NumElements(view.shape), true);
      if (!t.ok()) return Expected<ArrayMap>::Failure(t.error().ToString());
      feeds.emplace(name, std::move(*t));
    }
    return RunFeeds(feeds, inputs);
  }
  int64_t cache_length() const override { return model().program().kv_cache_length(); }
  int64_t cache_capacity() const override { return model().program().kv_cache_capacity(); }
  Expected<int64_t> LoadCache(const ArrayMap& rows) override {
    auto tensors = ToTensors(rows);
    if (!tensors.ok()) return Expected<int64_t>::Failure(tensors.error().ToString());
    if (Status loaded = model().program().LoadKvCache(*tensors); !loaded.ok())
      return Expected<int64_t>::Failure(loaded.error().ToString());
    return model().program().kv_cache_length();
  }
  Expected<Array> CacheRows(const std::string& past_name) const override {
    auto rows = model().program().KvCacheRows(past_name);
    if (!rows.ok()) return Expected<Array>::Failure(rows.error().ToString());
    auto array = ToArray(past_name, *rows);
    if (!array.ok()) return Expected<Array>::Failure(array.error().ToString());
    return std::move(*array);
  }
  std::vector<std::string> input_names() const override { return Names(model().graph().inputs); }
  std::vector<int64_t> input_shape(const std::string& name) const override {
    const auto id = model().graph().FindValue(name);
    return id ? model().graph().type(*id).dims : std::vector<int64_t>{};
  }
  std::vector<std::string> output_names() const override { return Names(model().graph().outputs); }
  // The report of the instance the last run picked (compiled at run time:
  // no import time, no remembering). Reports of sizes no longer held go
  // once there are more than the programs held.
  const CompileReport& report() const override {
    auto it = reports_.find(instances_->dims());
    if (it == reports_.end()) {
      if (reports_.size() > instances_->capacity()) reports_.clear();
      it = reports_.emplace(instances_->dims(), MakeReport(model(), target_)).first;
    }
    return it->second;
  }
  std::map<std::string, int64_t> dims() const override { return instances_->dims(); }
  int64_t instances() const override { return static_cast<int64_t>(instances_->size()); }

 private:
  // Graph inputs or outputs by name, less the caches a program keeps in place.
  std::vector<std::string> Names(const std::vector<graph::ValueId>& ids) const {
    const auto& kv = model().program().kv_cache_plan();
    std::vector<std::string> names;
    for (graph::ValueId v : ids)
      if (!kv || std::none_of(kv->links.begin(), kv->links.end(), [&](const auto& link) {
            return link.past == v || link.present == v;
          }))
        names.push_back(model().graph().value(v).name);
    return names;
  }
  // The feeds run at their size's program; `inputs` (an ArrayMap or an
  // ArrayViewMap) give the shapes that pick it.
  template <typename Inputs>
  Expected<ArrayMap> RunFeeds(const graph::TensorMap& feeds, const Inputs& inputs) {
    auto picked = instances_->Pick([&](const std::string& input) -> const std::vector<int64_t>* {
      auto it = inputs.find(input);
      return it == inputs.end() ? nullptr : &it->second.shape;
    });
    if (!picked.ok()) return Expected<ArrayMap>::Failure(picked.error().ToString());
    auto result = model().program().Run(feeds);
    if (!result.ok()) return Expected<ArrayMap>::Failure(result.error().ToString());
    ArrayMap outputs;
    for (auto& [name, tensor] : *result) {
      auto array = ToArray(name, tensor);
      if (!array.ok()) return Expected<ArrayMap>::Failure(array.error().ToString());
      outputs[name] = std::move(*array);
    }
    return outputs;
  }
  // An input's `size` floats as a tensor of the input's type: f32 (with
  // `borrow`, read in place when 64-byte aligned, as tensors are, and whole
  // 64-byte vectors long: a tensor of its own has zeroed padding past its
  // data that vector tails may read, the caller's memory has none; else
  // copied), or whole numbers for an integer input (exact in f32 up to 2^24:
  // token ids, positions).
  Result<graph::Tensor> ToTensor(const std::string& name, const std::vector<int64_t>& shape,
                                 const float* data, size_t size, bool borrow) const {
    if (graph::NumElements(shape) != static_cast<int64_t>(size))
      return Error(ErrorCode::kShapeMismatch,
                   fmt::format("input '{}': shape holds {} elements but {} were given", name,
                               graph::NumElements(shape), size));
    const auto id = model().graph().FindValue(name);
    const bool is_float = !id || graph::IsFloat(model().graph().type(*id).dtype);
    if (is_float && borrow && size > 0 && size % 16 == 0 &&
        reinterpret_cast<uintptr_t>(data) % 64 == 0)
      return graph::Tensor::Borrowed(graph::DataType::kFloat32, shape,
                                     reinterpret_cast<std::byte*>(const_cast<float*>(data)));
    graph::Tensor t = graph::Tensor::Uninitialized(graph::DataType::kFloat32, shape);
    if (size > 0) std::memcpy(t.raw(), data, size * sizeof(float));
    if (is_float) return t;
    for (size_t i = 0; i < size; ++i)
      if (!std::isfinite(data[i]) || data[i] != std::trunc(data[i]) ||
          std::fabs(data[i]) > 9.007199254740992e15)
        return Error(ErrorCode::kInvalidArgument,
                     fmt::format("input '{}' is {}: element {} ({}) is not a whole number", name,
                                 graph::DataTypeName(model().graph().type(*id).dtype), i, data[i]));
    return t.CastTo(model().graph().type(*id).dtype);
  }
  Result<graph::TensorMap> ToTensors(const ArrayMap& arrays) const {
    graph::TensorMap tensors;
    for (const auto& [name, array] : arrays) {
      FT_ASSIGN_OR_RETURN(graph::Tensor t,
                          ToTensor(name, array.shape, array.data.data(), array.data.size(), false));
      tensors.emplace(name, std::move(t));
    }
    return tensors;
  }
  static Result<Array> ToArray(const std::string& name, const graph::Tensor& tensor) {
    if (tensor.dtype() != graph::DataType::kFloat32)
      return Error(ErrorCode::kUnsupported,
                   fmt::format("output '{}' is {}: the embedding API returns f32 arrays", name,
                               graph::DataTypeName(tensor.dtype())));
    const float* p = tensor.data<float>();
    return Array{tensor.dims(), std::vector<float>(p, p + tensor.numel())};
  }

  compiler::CompiledModel& model() const { return instances_->current(); }

  std::unique_ptr<compiler::ShapeInstances> instances_;
  std::string target_;
  mutable std::map<std::map<std::string, int64_t>, CompileReport> reports_;
};

class CompilerImpl final : public Compiler {
 public:
  explicit CompilerImpl(CompileOptions options) : context_(std::make_shared<CompileContext>()) {
    context_->options = std::move(options);
  }

  Status Init() {
    CompileContext& c = *context_;
    if (!c.options.dynamic_dims.empty() && c.options.kv_cache_in_place)
      return Error(ErrorCode::kInvalidArgument,
                   "CompileOptions: a KV cache kept in place serves one size: no dynamic_dims "
                   "with kv_cache_in_place");
    if (c.options.database.empty()) {
      c.index = compiler::TuningIndex::Empty({});
      return Status::Ok();
    }
    FT_ASSIGN_OR_RETURN(c.database, compiler::OpenTuningDatabase(c.options.database));
    FT_ASSIGN_OR_RETURN(
        c.index, compiler::LoadIndexForThisMachine(*c.database, ProtocolOf(c.options.caches)));
    c.index->PreloadInBackground(c.options.database);  // while the first model imports
    return Status::Ok();
  }

  Expected<std::unique_ptr<Executable>> Compile(const std::string& onnx_path) override {
    auto result = CompileModel(onnx_path);
    if (!result.ok())
      return Expected<std::unique_ptr<Executable>>::Failure(result.error().ToString());
    return std::move(*result);
  }

 private:
  // The model imported at `dims` and compiled from the context's index.
  static Result<std::unique_ptr<compiler::CompiledModel>> CompileAt(
      const CompileContext& c, const std::string& onnx_path,
      const std::map<std::string, int64_t>& dims, bool remember, double* import_ms) {
    const auto start = std::chrono::steady_clock::now();
    FT_ASSIGN_OR_RETURN(graph::Graph graph, ImportModel(onnx_path, dims, c.options.values));
    if (import_ms) *import_ms = MsSince(start);
    compiler::CompileOptions options;
    options.max_memory_bytes = c.options.max_memory_bytes;
    options.whole_model_plans = c.options.use_whole_model_plans;
    options.remembered_plans = remember && c.options.remember_plans;
    kernels::KernelConfig config;
    config.threads = c.options.threads;
    return compiler::CompiledModel::Compile(std::move(graph), config, *c.index, options);
  }

  Result<std::unique_ptr<Executable>> CompileModel(const std::string& onnx_path) {
    CompileContext& c = *context_;
    std::lock_guard<std::mutex> lock(c.mutex);
    double import_ms = 0;
    FT_ASSIGN_OR_RETURN(auto model, CompileAt(c, onnx_path, c.options.dims, true, &import_ms));
    if (c.options.kv_cache_in_place)
      if (Status served = ServeKvCacheInPlace(c, onnx_path, *model); !served.ok())
        return served.error().WithContext(
            fmt::format("{}: cannot serve the KV cache in place", onnx_path));
    CompileReport report = MakeReport(*model, c.index->target());
    report.import_ms = import_ms;
    if (!c.options.database.empty())
      report.remembered =
          compiler::RememberCompiledPlan(c.options.database, *model, c.index->target()).text;
    // Instances at other sizes: compiled on a run's first use of them, from
    // the same index, without remembering (no database write on a run). An
    // executable of one size holds nothing of the compiler's.
    compiler::ShapeInstances::Instantiate instantiate;
    if (!c.options.dynamic_dims.empty())
      instantiate = [context = context_, onnx_path](const std::map<std::string, int64_t>& dims) {
        std::lock_guard<std::mutex> lock(context->mutex);
        return CompileAt(*context, onnx_path, dims, false, nullptr);
      };
    FT_ASSIGN_OR_RETURN(auto instances,
                        compiler::ShapeInstances::Make(std::move(model), c.options.dims,
                                                       c.options.dynamic_dims, instantiate));
    return std::unique_ptr<Executable>(
        new ExecutableImpl(std::move(instances), std::move(report), c.index->target()));
  }

  // In place, the program runs as compiled, for the capacity: checked that
  // nothing it computes depends on the cache's length, against the model
  // imported one row longer.
  static Status ServeKvCacheInPlace(const CompileContext& c, const std::string& onnx_path,
                                    compiler::CompiledModel& model) {
    FT_RETURN_IF_ERROR(model.program().ServeKvCacheInPlace());
    const runtime::KvCachePlan& plan = *model.program().kv_cache_plan();
    FT_ASSIGN_OR_RETURN(std::string symbol, runtime::CacheLengthSymbol(model.graph(), plan));
    std::map<std::string, int64_t> longer = c.options.dims;
    longer[symbol] = plan.compiled_past + 1;
    FT_ASSIGN_OR_RETURN(graph::Graph other, ImportModel(onnx_path, longer, c.options.values));
    return runtime::CheckLengthFree(model.graph(), other);
  }

  std::shared_ptr<CompileContext> context_;
};

}  // namespace

Expected<std::unique_ptr<Compiler>> Compiler::Open(const CompileOptions& options) {
  if (options.threads < 1 || options.threads > 256)
    return Expected<std::unique_ptr<Compiler>>::Failure(
        "CompileOptions::threads must be between 1 and 256, not " +
        std::to_string(options.threads));
  auto compiler = std::make_unique<CompilerImpl>(options);
  if (auto status = compiler->Init(); !status.ok())
    return Expected<std::unique_ptr<Compiler>>::Failure(status.error().ToString());
  return std::unique_ptr<Compiler>(std::move(compiler));
}

namespace {

// fusetune-worker as `fusetune` finds it ($FUSETUNE_WORKER, next to the
// program), else where it is installed beside this library.
std::string WorkerPath() {
  const std::string beside_program = search::TuningJob::DefaultWorkerPath();
  if (std::getenv("FUSETUNE_WORKER") || access(beside_program.c_str(), X_OK) == 0)
    return beside_program;
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&Version), &self) == 0 || !self.dli_fname)
    return beside_program;
  const std::filesystem::path installed = std::filesystem::path(self.dli_fname).parent_path() /
                                          FUSETUNE_BINDIR_FROM_LIBDIR / "fusetune-worker";
  return access(installed.c_str(), X_OK) == 0 ? installed.string() : beside_program;
}

Result<search::TuningJobOptions> JobOptions(const TuneOptions& options) {
  if (options.threads < 1 || options.threads > 256)
    return Error(
        ErrorCode::kInvalidArgument,
        fmt::format("TuneOptions::threads must be between 1 and 256, not {}", options.threads));
  if (options.max_trials < 0 || options.max_seconds < 0)
    return Error(ErrorCode::kInvalidArgument,
                 "TuneOptions::max_trials and max_seconds must not be negative");
  search::TuningJobOptions job;
  job.tuner.max_trials = options.max_trials;
  job.tuner.max_seconds = options.max_seconds;
  job.tuner.seed = options.seed;
  job.tuner.measure.threads = options.threads;
  job.until_converged = options.until_converged;
  job.resume = options.resume;
  job.caches = ProtocolOf(options.caches);
  job.worker_path = options.worker.empty() ? WorkerPath() : options.worker;
  return job;
}

std::optional<double> Ms(const std::optional<double>& seconds) {
  return seconds ? std::optional<double>(*seconds * 1e3) : std::nullopt;
}
std::optional<double> Ms(const std::optional<search::PlanReport>& plan) {
  return plan ? std::optional<double>(plan->seconds * 1e3) : std::nullopt;
}

TuneProgress MakeProgress(const search::TunerProgress& p) {
  return TuneProgress{p.trials,
                      p.max_trials,
                      p.seconds,
                      p.max_seconds,
                      p.tasks,
                      p.tasks_converged,
                      Ms(p.best_model_seconds),
                      Ms(p.unfused_seconds),
                      p.current};
}

TuneSummary MakeSummary(const search::TuningJobResult& result) {
  const search::TuneSummary& s = result.summary;
  TuneSummary out;
  out.job = result.job_id;
  for (const search::TaskReport& t : s.tasks)
    out.groups.push_back(TuneGroup{t.summary, t.occurrences, t.space_size, t.measured, t.converged,
                                   Ms(t.baseline_seconds), Ms(t.best_seconds), t.best_tiling});
  out.unfused_ms = Ms(s.unfused);
  out.greedy_ms = Ms(s.greedy);
  out.best_ms = Ms(s.best);
  if (s.best) out.best_kind = measure::PlanKindName(s.best->kind);
  if (!s.best_plan.is_null()) out.best_plan_json = s.best_plan.dump();
  out.trials = s.trials;
  out.failed_trials = s.failed_trials;
  out.plans_measured = static_cast<int64_t>(s.plans.size());
  out.model_updates = s.model_updates;
  out.seconds = s.seconds;
  out.stop_reason = s.stop_reason;
  out.interrupted = result.interrupted;
  return out;
}

Result<TuneSummary> TuneModel(const std::string& onnx_path, const TuneOptions& options) {
  FT_ASSIGN_OR_RETURN(search::TuningJobOptions job_options, JobOptions(options));
  job_options.model = onnx_path;
  if (!options.dims.empty()) {  // the sizes go into the job's spec (search/tuned_sizes.h)
    FT_ASSIGN_OR_RETURN(job_options.model_key, graph::ModelFileKey(onnx_path));
    job_options.dims = options.dims;
  }
  FT_ASSIGN_OR_RETURN(graph::Graph graph, ImportModel(onnx_path, options.dims, options.values));
  FT_ASSIGN_OR_RETURN(auto database, db::MakeSqliteDatabase(options.database));
  search::TuningJobCallbacks callbacks;
  if (options.progress)
    callbacks.progress = [&](const search::TunerProgress& p) { options.progress(MakeProgress(p)); };
  callbacks.should_stop = options.should_stop;
  FT_ASSIGN_OR_RETURN(
      auto job,
      search::TuningJob::Open(*database, std::make_shared<const graph::Graph>(std::move(graph)),
                              std::move(job_options), std::move(callbacks)));
  FT_ASSIGN_OR_RETURN(search::TuningJobResult result, job->Run());
  return MakeSummary(result);
}

}  // namespace

Expected<TuneSummary> Tune(const std::string& onnx_path, const TuneOptions& options) {
  auto summary = TuneModel(onnx_path, options);
  if (!summary.ok()) return Expected<TuneSummary>::Failure(summary.error().ToString());
  return std::move(*summary);
}

const char* Version() { return FUSETUNE_VERSION; }

}  // namespace fusetune
