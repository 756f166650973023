// fusetune's embedding API: tune an ONNX model into a tuning database,
// compile it with the database's plans and run it. Everything else in fusetune is internal; this
// header needs only the standard library.
//
//   #include <fusetune/fusetune.h>
//
//   fusetune::CompileOptions options;
//   options.database = "tune.db";          // written by `fusetune tune`
//   auto compiler = fusetune::Compiler::Open(options);
//   if (!compiler.ok()) { /* compiler.error() says what and where */ }
//   auto exe = compiler.value()->Compile("model.onnx");
//   auto outputs = exe.value()->Run({{"x", fusetune::Array{{1, 128, 768}, data}}});
//
// Compiling looks every fused group up in the database for this machine
// (whole-model plan, exact workload key, nearest tuned shape, cost model,
// default, in that order) and reports where each group's plan came from.
// Failures are values: no exception leaves the library.
// CMake: find_package(fusetune CONFIG REQUIRED) and link fusetune::fusetune.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fusetune {

// A value or the message of what went wrong (file, node, tensor named).
template <typename T>
class Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  static Expected Failure(std::string message) {
    return Expected(std::in_place_index<1>, std::move(message));
  }
  bool ok() const { return state_.index() == 0; }
  T& value() { return std::get<0>(state_); }
  const T& value() const { return std::get<0>(state_); }
  const std::string& error() const { return std::get<1>(state_); }

 private:
  template <size_t I, typename... A>
  explicit Expected(std::in_place_index_t<I> i, A&&... a) : state_(i, std::forward<A>(a)...) {}
  std::variant<T, std::string> state_;
};

// A dense f32 tensor, row-major.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using ArrayMap = std::map<std::string, Array>;

// A dense f32 tensor the caller owns, row-major, for Executable::RunViews:
// `data` holds the shape's element count.
struct ArrayView {
  std::vector<int64_t> shape;
  const float* data = nullptr;
};
using ArrayViewMap = std::map<std::string, ArrayView>;

// How a tuning run finds the caches, and so which records a compile reads:
// flushed (every tensor evicted before each run: weights and activations
// from DRAM), warm (as the previous run left them: a loop over one model
// whose weights fit the last-level cache) or cold weights (weights evicted,
// activations warm: a group inside a model whose weights do not fit it).
enum class Caches { kFlushed, kWarm, kColdWeights };

struct CompileOptions {
  std::string database;                 // tuning database path; empty: no database (greedy plan)
  std::map<std::string, int64_t> dims;  // values of symbolic input dimensions
  // Values of graph inputs that shapes depend on (Reshape's shape, Slice's
  // starts... fed as inputs): bound at compile time, converted to the
  // input's declared type. A model that needs one and lacks it fails to
  // compile, naming the input.
  std::map<std::string, std::vector<int64_t>> values;
  int threads = 2;                          // threads per kernel, 1 to 256
  std::optional<int64_t> max_memory_bytes;  // limit on live intermediates
  bool use_whole_model_plans = true;
  // Take the plan an earlier compile of the same model chose from group
  // records while the database is unchanged, and remember a plan chosen
  // from group records for later compiles (stored in the database, which
  // must be writable for that; a compile that cannot store it says why in
  // CompileReport::remembered and does not fail).
  bool remember_plans = true;
  // Use the plans tuned under this cache protocol (`fusetune tune --caches`).
  Caches caches = Caches::kFlushed;
  // Serve the model's KV cache in place: a decoder exported with its cache
  // as inputs and outputs (present = Concat(past, new rows), as PyTorch
  // exports it) is compiled at the cache's capacity (bind the past
  // dimension to capacity - new rows: dims {"past", 2047} for 2,048 rows of
  // one-token steps), the executable keeps the caches, and each Run writes
  // only its new rows (see Executable::LoadCache). Positions and masks must
  // be inputs of the model: one computed from the past's shape would be the
  // capacity's at every step, so a model whose constants depend on the
  // past's length fails to compile (checked against an import one row
  // longer), and so does a plan that cannot serve the cache in place (the
  // cache read by other kernels than attention), saying why.
  bool kv_cache_in_place = false;
  // Symbolic dimensions that may change from run to run (a prompt's length,
  // a batch). The executable is compiled at their values in `dims`; a run
  // whose inputs have other sizes gets a program of its own for them, made
  // on the first run at those sizes (the model imported again, its weights
  // read again and pre-packed for that program: each program held keeps its
  // own) and kept (the 16 most recently used): its plan is the one tuned for
  // that size (`fusetune tune --dim seq=1,16,64,256` tunes such buckets),
  // else the nearest tuned size's measured plan moved to this size (its
  // partition kept, its tilings made legal here). Runs at a size already
  // met pick its program by a lookup.
  std::vector<std::string> dynamic_dims;
};

// Where one kernel's plan came from.
struct KernelReport {
  std::vector<int> nodes;  // node positions in the imported graph
  std::string kernel;      // "gemm 128x768x3072 +bias_add +gelu_erf"
  std::string tiling;
  std::string source;  // whole-model, exact, shape-bucket, cost-model, default
  std::optional<double> measured_ms;
  double predicted_ms = 0;
  std::optional<double> predicted_loss;  // fraction slower than a tuned plan
};

struct CompileReport {
  std::vector<KernelReport> kernels;   // in execution order
  std::map<std::string, int> sources;  // kernels per source
  double predicted_ms = 0;
  std::optional<double> measured_ms;  // whole-model plans
  int64_t peak_intermediate_bytes = 0;
  double import_ms = 0, lookup_ms = 0, lowering_ms = 0;
  std::string partition;   // how the plan was chosen, one line
  std::string remembered;  // whether this plan was remembered for later compiles, and why not
  std::string plan_json;   // loadable by `fusetune run --plan`
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Inputs by graph input name; returns the graph outputs by name. An
  // integer input (token ids, positions) takes an Array of whole numbers.
  // With CompileOptions::kv_cache_in_place, every input but the past ones
  // and every output but the present ones: a run appends its new rows to
  // the caches the executable keeps.
  virtual Expected<ArrayMap> Run(const ArrayMap& inputs) = 0;
  // The inputs a run takes and the outputs it returns (without the caches
  // kept in place).
  virtual std::vector<std::string> input_names() const = 0;
  // Static shapes at the last run's size (at first, CompileOptions::dims').
  virtual std::vector<int64_t> input_shape(const std::string& name) const = 0;
  virtual std::vector<std::string> output_names() const = 0;
  // Where the plan of the last run's size came from.
  virtual const CompileReport& report() const = 0;
  // (Added in 0.1 after the above: the order keeps their vtable slots.)
  // The KV cache served in place: rows held now and rows it can hold (both
  // 0 otherwise).
  virtual int64_t cache_length() const = 0;
  virtual int64_t cache_capacity() const = 0;
  // Sets every cache, named by its past input, to these rows (a prefill's
  // present outputs), all of one length; an empty map empties the caches.
  // Returns the length.
  virtual Expected<int64_t> LoadCache(const ArrayMap& rows) = 0;
  // The rows one cache holds now.
  virtual Expected<Array> CacheRows(const std::string& past_name) const = 0;
  // The values of the symbolic dimensions at the last run's size, and the
  // programs held for the sizes met (CompileOptions::dynamic_dims).
  virtual std::map<std::string, int64_t> dims() const = 0;
  virtual int64_t instances() const = 0;
  // (Added in 0.1 after the above.) Run over the caller's memory: a float
  // input whose data is 64-byte aligned and a multiple of 16 floats long is
  // read where it lies, without a copy, and must stay unchanged until
  // RunViews returns; any other input is
  // copied once (Run copies twice: into the Array, then into a tensor). The
  // Python module's run() passes numpy arrays this way.
  virtual Expected<ArrayMap> RunViews(const ArrayViewMap& inputs) = 0;
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  // Opens the database read-only (when one is named) and loads what it
  // holds for this machine.
  static Expected<std::unique_ptr<Compiler>> Open(const CompileOptions& options);
  virtual Expected<std::unique_ptr<Executable>> Compile(const std::string& onnx_path) = 0;
};

// Tuning: the job `fusetune tune` runs, from a program. It measures fused
// groups and whole plans of the model on this machine through the
// fusetune-worker process and commits every result to the database as it
// arrives; Compiler::Open on the same database then compiles with them.
//
//   fusetune::TuneOptions tune;
//   tune.database = "tune.db";
//   tune.max_seconds = 600;
//   auto summary = fusetune::Tune("model.onnx", tune);
//
// A job stopped by `should_stop` (or by a crash) is continued by another
// Tune with `resume`. Tune prints nothing; `progress` sees the job advance.
struct TuneProgress {
  int64_t trials = 0, max_trials = 0;  // group measurements; max 0: no limit
  double seconds = 0, max_seconds = 0;
  int groups = 0, groups_converged = 0;
  std::optional<double> best_ms, unfused_ms;  // whole model, once measured
  std::string current;                        // what is being measured
};

struct TuneOptions {
  std::string database = "fusetune.db";                // created when missing
  std::map<std::string, int64_t> dims;                 // values of symbolic input dimensions
  std::map<std::string, std::vector<int64_t>> values;  // as CompileOptions::values
  // The budget (`fusetune tune --trials/--time`): spent in full. Neither:
  // until every group has converged, which `until_converged` also asks for
  // within a budget.
  int64_t max_trials = 0;
  double max_seconds = 0;
  bool until_converged = false;
  // Continue this model's latest unfinished job (its budget unless one is given).
  bool resume = false;
  uint64_t seed = 1;
  int threads = 2;  // threads per kernel, 1 to 256
  // How each measured run finds the caches (`fusetune tune --caches`), for
  // CompileOptions::caches.
  Caches caches = Caches::kFlushed;
  // The measurement worker; empty: $FUSETUNE_WORKER, else fusetune-worker
  // next to the program, else the one installed with this library.
  std::string worker;
  std::function<void(const TuneProgress&)> progress;
  // Polled between measurements: true ends the job early, what was measured
  // kept, and Tune returns the summary so far (TuneSummary::interrupted).
  std::function<bool()> should_stop;
};

// One fused group of the model (a tuning task).
struct TuneGroup {
  std::string group;  // "gemm 128x768x3072 +bias_add +gelu_erf"
  int64_t occurrences = 0, space_size = 0, measured = 0;
  bool converged = false;
  std::optional<double> default_ms, best_ms;  // default tiling, best tiling
  std::string best_tiling;
};

struct TuneSummary {
  int64_t job = 0;  // the job's id in the database
  std::vector<TuneGroup> groups;
  std::optional<double> unfused_ms, greedy_ms, best_ms;  // whole model, measured
  std::string best_kind;                                 // unfused, greedy, tuned
  std::string best_plan_json;                            // loadable by `fusetune run --plan`
  int64_t trials = 0, failed_trials = 0, plans_measured = 0, model_updates = 0;
  double seconds = 0;
  std::string stop_reason;   // trials, time, converged, interrupted
  bool interrupted = false;  // should_stop ended it: resumable
};

// Tunes the model into options.database; failures (bad model, unwritable
// database, no worker) come back as the message.
Expected<TuneSummary> Tune(const std::string& onnx_path, const TuneOptions& options);

// "0.1.0"
const char* Version();

}  // namespace fusetune
