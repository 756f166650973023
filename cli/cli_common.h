// Helpers shared by the fusetune subcommands: exit codes, error printing,
// model loading with --dim bindings, and number formatting.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "cost_model/time_label.h"
#include "db/database.h"
#include "fusion_space/space.h"
#include "graph/graph.h"
#include "graph/reference_executor.h"
#include "target/target.h"

namespace fusetune::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;

// Prints "fusetune: error: ..." to stderr and returns the exit code for it.
int ReportError(const Error& error);

struct ModelOptions {
  std::vector<std::string> dims;  // "name=value" bindings of symbolic dimensions
  // "NAME=FILE.npy" or "NAME=V1,V2,...": values of graph inputs that shapes
  // depend on (Reshape's shape, Slice's starts... fed as inputs), bound
  // when the model is loaded (graph/input_values.h)
  std::vector<std::string> values;
  bool no_passes = false;
};
// --value NAME=FILE.npy|V1,V2,... (repeatable) into options->values.
void AddValueOption(CLI::App* cmd, ModelOptions* options);
// Shape buckets: "seq=1,16,64" lists several values of a dimension, and
// "seq=16..1024" asks the tool to choose them over a range (LO, the powers
// of two between, HI); the model options of every combination of the
// values, in order (the last dimension's values vary fastest). Options
// without lists: themselves. A value not a whole number (0 or more), or a range
// not LO < HI, is an error naming it.
Result<std::vector<ModelOptions>> ExpandDimBuckets(const ModelOptions& options);

// The values one `--dim NAME=LIST` names: items "V" or "LO..HI" joined by
// commas, expanded as ExpandDimBuckets says, each value once, in order.
Result<std::vector<int64_t>> DimValues(const std::string& name, const std::string& list);

// The value of `--dim NAME=VALUE`: a whole number, 0 or more (0: a KV cache
// of no rows; the import refuses it where a node would compute an empty
// tensor), or an error saying so.
Result<int64_t> ParseDimValue(const std::string& name, const std::string& value);
// The values options.dims binds, one per dimension (a list is an error).
Result<std::map<std::string, int64_t>> BoundDims(const ModelOptions& options);

// Imports an ONNX model and runs the standard graph passes. `run_inputs`
// (a run's --input tensors) are values too, for the inputs that shapes
// depend on.
Result<graph::Graph> LoadModel(const std::string& path, const ModelOptions& options,
                               const graph::TensorMap& run_inputs = {});

// "a,b,,c" -> {"a", "b", "", "c"}.
std::vector<std::string> SplitCommas(const std::string& text);

// Parses "NAME=VALUE" pairs.
Result<std::map<std::string, std::string>> ParseAssignments(const std::vector<std::string>& items,
                                                            const char* flag);

// The model, inputs and output options that run-reference and run share.
struct RunIoArgs {
  std::string model;
  ModelOptions model_options;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  int64_t random_seed = -1;
  std::string output_dir;
};
void AddRunIoOptions(CLI::App* cmd, RunIoArgs* io);

// One line per output summary from WriteOutputs.
void PrintOutputSummaries(const nlohmann::json& outputs);

// A run's model and feeds: its --input files, read once, are the feeds and
// the values the inputs that shapes depend on are bound to; or random feeds
// from --random-inputs.
struct RunModel {
  graph::Graph graph;
  graph::TensorMap feeds;
};
Result<RunModel> LoadRunModel(const RunIoArgs& io);
// Writes one NAME.npy per graph output into `dir` (unless empty; '/', '\\'
// and ':' in names become '_') and returns a summary per output (name,
// dtype, shape, mean, mean_abs, file).
Result<nlohmann::json> WriteOutputs(const graph::Graph& graph, const graph::TensorMap& outputs,
                                    const std::string& dir);

// --plan: a plan file, or "unfused" or "greedy".
Result<fusion_space::Plan> LoadPlanArg(fusion_space::FusionSpace& space, const std::string& plan);

// This machine's target key for the cache protocol (search::EnsureTarget,
// saying so on stderr when it calibrates). `calibration` receives it.
Result<std::string> EnsureTarget(db::Database& database, int threads, target::CacheProtocol caches,
                                 nlohmann::json* calibration = nullptr);
// --caches flushed|warm|cold-weights and its shorthand --warm, on the
// commands that measure (tune, measure) or read what was measured under a
// protocol (compile, run): target::CacheProtocol.
struct CachesArgs {
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
};
// `measures`: the help says how the command measures, not which records it reads.
void AddCachesOptions(CLI::App* cmd, CachesArgs* args, bool measures);

// --precision f32|mixed and --error-budget, on tune (what groups may compute
// in) and compile and run (which records to read: those of the policy):
// target::PrecisionPolicy.
struct PrecisionArgs {
  std::string precision = "f32";
  double error_budget = 0;  // 0: not given
  // The policy, or an error for --error-budget without --precision mixed.
  // Mixed on a CPU without avx512_bf16 stays mixed (its records' key) with
  // a note on stderr that every group will compute in f32.
  Result<target::PrecisionPolicy> Policy() const;
};
inline constexpr double kDefaultErrorBudget = 1e-2;
void AddPrecisionOptions(CLI::App* cmd, PrecisionArgs* args, bool tunes);

// --label median|fastest: which statistic of a record's repeats the cost
// model trains and is scored on (cost_model/time_label.h).
void AddTimeLabelOption(CLI::App* cmd, cost_model::TimeLabel* label);

// "calibrating this machine (once per database)..." on stderr.
void PrintCalibrating();

// Ctrl-C sets a flag instead of killing the process: long commands poll
// Interrupted(), finish and commit what is under way, and exit 130.
void CatchInterrupt();
bool Interrupted();
inline constexpr int kExitInterrupted = 130;

// "8h", "30m", "90s", "1h30m" or plain seconds.
Result<double> ParseDuration(const std::string& text);

std::string HumanCount(double n);  // 1.23 M
std::string HumanBytes(double n);  // 1.2 MiB

void PrintJson(const nlohmann::json& j);

}  // namespace fusetune::cli
