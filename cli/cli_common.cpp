#include "cli/cli_common.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>

#include "fusion_space/plan_json.h"
#include "graph/npy.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "search/job_target.h"
#include "target/target.h"

namespace fusetune::cli {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    items.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return items;
}

int ReportError(const Error& error) {
  std::fprintf(stderr, "fusetune: error: %s\n", error.ToString().c_str());
  return error.code() == ErrorCode::kInternal ? kExitInternal : kExitBadInput;
}

Result<std::map<std::string, std::string>> ParseAssignments(const std::vector<std::string>& items,
                                                            const char* flag) {
  std::map<std::string, std::string> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("{} '{}' is not of the form NAME=VALUE", flag, item));
    if (!out.emplace(item.substr(0, eq), item.substr(eq + 1)).second)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("{} names '{}' twice", flag, item.substr(0, eq)));
  }
  return out;
}

namespace {

// Whether `text` reads as a list of numbers rather than a file name.
bool LooksLikeNumberList(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789+-.,eE") == std::string::npos;
}

// "V1,V2,...": integers as i64, else numbers as f64 (converted exactly to
// the input's type when bound, or refused).
Result<graph::Tensor> ParseNumberList(const std::string& name, const std::string& text) {
  std::vector<int64_t> ints;
  std::vector<double> reals;
  bool all_int = true;
  for (const std::string& item : SplitCommas(text)) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || errno == ERANGE)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("--value {}={}: '{}' is not a number", name, text, item));
    char* int_end = nullptr;
    const long long i = std::strtoll(item.c_str(), &int_end, 10);
    all_int = all_int && *int_end == '\0' && errno != ERANGE;
    ints.push_back(i);
    reals.push_back(v);
  }
  const graph::Dims dims{static_cast<int64_t>(ints.size())};
  if (all_int) return graph::Tensor::FromVector<int64_t>(graph::DataType::kInt64, dims, ints);
  return graph::Tensor::FromVector<double>(graph::DataType::kFloat64, dims, reals);
}

Result<std::map<std::string, graph::Tensor>> ParseValues(const std::vector<std::string>& items) {
  FT_ASSIGN_OR_RETURN(auto pairs, ParseAssignments(items, "--value/--input"));
  std::map<std::string, graph::Tensor> values;
  for (const auto& [name, text] : pairs) {
    if (LooksLikeNumberList(text)) {
      FT_ASSIGN_OR_RETURN(graph::Tensor list, ParseNumberList(name, text));
      values.emplace(name, std::move(list));
      continue;
    }
    auto t = graph::ReadNpy(text);
    if (!t.ok()) return t.error().WithContext(fmt::format("the value of input '{}'", name));
    values.emplace(name, std::move(*t));
  }
  return values;
}

}  // namespace

void AddValueOption(CLI::App* cmd, ModelOptions* options) {
  cmd->add_option("--value", options->values,
                  "The value of a graph input that shapes depend on (Reshape's shape, Slice's "
                  "starts... fed as an input): NAME=FILE.npy or NAME=V1,V2,... (repeatable)");
}

Result<int64_t> ParseDimValue(const std::string& name, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < 0)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--dim {}={}: the value must be a whole number, 0 or more (0: "
                             "a KV cache of no rows, before a prompt)",
                             name, value));
  return static_cast<int64_t>(v);
}

namespace {

// "LO..HI": LO, the powers of two strictly between, HI. Buckets a factor of
// two apart keep every size within 2x of a tuned one below and above it.
Result<std::vector<int64_t>> DimRange(const std::string& name, const std::string& item,
                                      size_t dots) {
  auto lo = ParseDimValue(name, item.substr(0, dots));
  auto hi_or = ParseDimValue(name, item.substr(dots + 2));
  if (!lo.ok() || !hi_or.ok())
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--dim {}={}: a range is LO..HI, two whole numbers", name, item));
  const int64_t hi = *hi_or;
  if (*lo >= hi)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--dim {}={}: a range LO..HI needs LO < HI", name, item));
  std::vector<int64_t> values{*lo};
  uint64_t p = 1;  // unsigned: doubling past 2^62 wraps instead of overflowing
  while (p != 0 && p <= static_cast<uint64_t>(*lo)) p <<= 1;
  for (; p != 0 && p < static_cast<uint64_t>(hi); p <<= 1)
    values.push_back(static_cast<int64_t>(p));
  values.push_back(hi);
  return values;
}

// One item of a --dim list: a value or a range.
Result<std::vector<int64_t>> DimItem(const std::string& name, const std::string& item) {
  const size_t dots = item.find("..");
  if (dots != std::string::npos) return DimRange(name, item, dots);
  FT_ASSIGN_OR_RETURN(int64_t value, ParseDimValue(name, item));
  return std::vector<int64_t>{value};
}

}  // namespace

Result<std::vector<int64_t>> DimValues(const std::string& name, const std::string& list) {
  std::vector<int64_t> values;
  for (const std::string& item : SplitCommas(list)) {
    Result<std::vector<int64_t>> more = DimItem(name, item);
    if (!more.ok())  // one item of a list: the list too
      return item == list
                 ? more.error()
                 : Error(ErrorCode::kInvalidArgument,
                         fmt::format("{} (in --dim {}={})", more.error().message(), name, list));
    for (int64_t v : *more)
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  }
  return values;
}

Result<std::vector<ModelOptions>> ExpandDimBuckets(const ModelOptions& options) {
  FT_ASSIGN_OR_RETURN(auto dims, ParseAssignments(options.dims, "--dim"));
  std::vector<ModelOptions> buckets{options};
  for (ModelOptions& b : buckets) b.dims.clear();
  for (const auto& [name, list] : dims) {
    FT_ASSIGN_OR_RETURN(std::vector<int64_t> values, DimValues(name, list));
    std::vector<ModelOptions> next;
    for (const ModelOptions& b : buckets)
      for (int64_t value : values) {
        ModelOptions with = b;
        with.dims.push_back(fmt::format("{}={}", name, value));
        next.push_back(std::move(with));
      }
    buckets = std::move(next);
  }
  return buckets;
}

Result<std::map<std::string, int64_t>> BoundDims(const ModelOptions& options) {
  FT_ASSIGN_OR_RETURN(auto dims, ParseAssignments(options.dims, "--dim"));
  std::map<std::string, int64_t> bound;
  for (const auto& [name, value] : dims) {
    FT_ASSIGN_OR_RETURN(bound[name], ParseDimValue(name, value));
  }
  return bound;
}

Result<graph::Graph> LoadModel(const std::string& path, const ModelOptions& options,
                               const graph::TensorMap& run_inputs) {
  graph::ImportOptions import;
  FT_ASSIGN_OR_RETURN(import.dim_bindings, BoundDims(options));
  FT_ASSIGN_OR_RETURN(import.input_values, ParseValues(options.values));
  for (const auto& [name, tensor] : run_inputs)
    if (!import.input_values.emplace(name, tensor).second)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("input '{}' has both a --value and an --input", name));
  FT_ASSIGN_OR_RETURN(graph::Graph graph, graph::ImportOnnxFile(path, import));
  if (!options.no_passes) {
    auto status = graph::RunStandardPasses(graph);
    if (!status.ok()) return status.error().WithContext(path);
  }
  return graph;
}

namespace {
// n scaled by powers of `base` with the matching unit: (1536, 1024) -> "1.5" + units[1].
std::string Scaled(double n, double base, const char* const* units, int count,
                   const char* unit_format) {
  int u = 0;
  while (n >= base && u < count - 1) {
    n /= base;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}{}", n, units[0])
                : fmt::format(fmt::runtime(unit_format), n, units[u]);
}
}  // namespace

void AddCachesOptions(CLI::App* cmd, CachesArgs* args, bool measures) {
  const std::map<std::string, target::CacheProtocol> names = {
      {"flushed", target::CacheProtocol::kFlushed},
      {"warm", target::CacheProtocol::kWarm},
      {"cold-weights", target::CacheProtocol::kColdWeights}};
  CLI::Option* caches =
      cmd->add_option(
             "--caches", args->caches,
             measures ? "How each run finds the caches: flushed (every tensor evicted: weights and "
                        "activations from DRAM), warm (as the previous run left them: a loop over "
                        "one model whose weights fit the last-level cache) or cold-weights "
                        "(weights evicted, activations warm: a group inside a model whose weights "
                        "do not fit it). Each has its own target key in the database"
                      : "Use the plans tuned under this cache protocol (`tune --caches`): "
                        "flushed, warm or cold-weights")
          ->transform(CLI::CheckedTransformer(names, CLI::ignore_case))
          ->default_str("flushed");
  cmd->add_flag_callback(
         "--warm", [args] { args->caches = target::CacheProtocol::kWarm; },
         "Shorthand for --caches warm")
      ->excludes(caches);
}

void AddTimeLabelOption(CLI::App* cmd, cost_model::TimeLabel* label) {
  std::map<std::string, cost_model::TimeLabel> names;
  for (cost_model::TimeLabel l : cost_model::kTimeLabelNames.Values())
    names[cost_model::kTimeLabelNames.Name(l)] = l;
  cmd->add_option("--label", *label,
                  "A sample's time: median (the record's seconds, its repeats' median) or fastest "
                  "(its fastest repeat, scaled as the record was)")
      ->transform(CLI::CheckedTransformer(names, CLI::ignore_case))
      ->default_str(cost_model::kTimeLabelNames.Name(*label));
}

void AddPrecisionOptions(CLI::App* cmd, PrecisionArgs* args, bool tunes) {
  cmd->add_option("--precision", args->precision,
                  tunes ? "What fused groups may compute in: f32, or mixed (a GEMM group in bf16 "
                          "where the model's outputs stay within --error-budget of f32; needs "
                          "avx512_bf16). Each policy has its own target key in the database"
                        : "Use the plans tuned with this --precision (`tune --precision`)")
      ->check(CLI::IsMember({"f32", "mixed"}))
      ->capture_default_str();
  cmd->add_option("--error-budget", args->error_budget,
                  fmt::format("With --precision mixed: the largest error allowed on the model's "
                              "outputs, relative to each output's largest magnitude (default {:g})",
                              kDefaultErrorBudget))
      ->check(CLI::Range(1e-6, 0.5));
}

Result<target::PrecisionPolicy> PrecisionArgs::Policy() const {
  target::PrecisionPolicy policy;
  if (precision != "mixed") {
    if (error_budget > 0)
      return Error(ErrorCode::kInvalidArgument,
                   "--error-budget: needs --precision mixed (f32 has no budget to spend)");
    return policy;
  }
  policy.mixed = true;
  policy.error_budget = error_budget > 0 ? error_budget : kDefaultErrorBudget;
  if (!target::DetectTarget().Has("avx512_bf16"))
    fmt::print(stderr,
               "fusetune: note: this CPU has no avx512_bf16 (bf16 dot products): with --precision "
               "mixed every group computes in f32\n");
  return policy;
}

void PrintCalibrating() { fmt::print(stderr, "calibrating this machine (once per database)...\n"); }

Result<std::string> EnsureTarget(db::Database& database, int threads, target::CacheProtocol caches,
                                 nlohmann::json* calibration) {
  FT_ASSIGN_OR_RETURN(search::JobTarget target,
                      search::EnsureTarget(database, threads, caches, {}, PrintCalibrating));
  if (calibration) *calibration = std::move(target.calibration);
  return std::move(target.key);
}

namespace {
std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }
}  // namespace

// SIGTERM too: what `kill`, a batch system's cancel or time limit sends.
void CatchInterrupt() {
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
}
bool Interrupted() { return g_interrupted.load(); }

Result<double> ParseDuration(const std::string& text) {
  const Error bad(ErrorCode::kInvalidArgument,
                  "bad duration '" + text + "': expected e.g. 8h, 30m, 90s, 1h30m or seconds");
  if (text.empty()) return bad;
  double total = 0;
  size_t i = 0;
  bool any = false;
  while (i < text.size()) {
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(text.substr(i), &used);
    } catch (const std::exception&) {
      return bad;
    }
    if (value < 0) return bad;
    i += used;
    double unit = 1;
    if (i < text.size()) {
      const char u = text[i++];
      if (u == 'h')
        unit = 3600;
      else if (u == 'm')
        unit = 60;
      else if (u == 's')
        unit = 1;
      else
        return bad;
    } else if (any) {
      return bad;  // "1h30" is ambiguous
    }
    total += value * unit;
    any = true;
  }
  return total;
}

std::string HumanCount(double n) {
  static const char* const units[] = {"", " K", " M", " G", " T"};
  return Scaled(n, 1000, units, 5, "{:.2f}{}");
}

std::string HumanBytes(double n) {
  static const char* const units[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  return Scaled(n, 1024, units, 5, "{:.1f}{}");
}

void PrintJson(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

}  // namespace fusetune::cli

namespace fusetune::cli {

namespace {

std::string FileNameFor(const std::string& output) {
  std::string s = output;
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':' || c == '\0') c = '_';
  return s + ".npy";
}

}  // namespace

Result<RunModel> LoadRunModel(const RunIoArgs& io) {
  if (io.random_seed >= 0 && !io.inputs.empty())
    return Error(ErrorCode::kInvalidArgument, "--input and --random-inputs cannot be combined");
  FT_ASSIGN_OR_RETURN(auto pairs, ParseAssignments(io.inputs, "--input"));
  graph::TensorMap files;
  for (const auto& [name, path] : pairs) {
    FT_ASSIGN_OR_RETURN(graph::Tensor t, graph::ReadNpy(path));
    files[name] = std::move(t);
  }
  FT_ASSIGN_OR_RETURN(graph::Graph graph, LoadModel(io.model, io.model_options, files));
  if (io.random_seed >= 0) {
    graph::TensorMap feeds = graph::RandomFeeds(graph, static_cast<uint64_t>(io.random_seed));
    return RunModel{std::move(graph), std::move(feeds)};
  }
  for (graph::ValueId v : graph.inputs)
    if (!files.count(graph.value(v).name))
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("input '{}' ({}) has no --input {}=FILE.npy", graph.value(v).name,
                               graph.type(v).ToString(), graph.value(v).name));
  return RunModel{std::move(graph), std::move(files)};
}

Result<nlohmann::json> WriteOutputs(const graph::Graph& graph, const graph::TensorMap& outputs,
                                    const std::string& dir) {
  std::error_code ec;
  if (!dir.empty()) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return Error(ErrorCode::kIo, fmt::format("cannot create '{}': {}", dir, ec.message()));
  }
  nlohmann::json list = nlohmann::json::array();
  for (graph::ValueId v : graph.outputs) {
    const std::string& name = graph.value(v).name;
    const graph::Tensor& t = outputs.at(name);
    nlohmann::json o{
        {"name", name}, {"dtype", graph::DataTypeName(t.dtype())}, {"shape", t.dims()}};
    if (!dir.empty()) {
      const std::string path = (std::filesystem::path(dir) / FileNameFor(name)).string();
      FT_RETURN_IF_ERROR(graph::WriteNpy(path, t));
      o["file"] = path;
    }
    double sum = 0, sum_abs = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      sum += t.GetAsDouble(i);
      sum_abs += std::abs(t.GetAsDouble(i));
    }
    o["mean"] = t.numel() ? sum / t.numel() : 0.0;
    o["mean_abs"] = t.numel() ? sum_abs / t.numel() : 0.0;
    list.push_back(o);
  }
  return list;
}

void AddRunIoOptions(CLI::App* cmd, RunIoArgs* io) {
  cmd->add_option("model", io->model, "ONNX model file")->required();
  cmd->add_option("--input", io->inputs, "Graph input from a .npy file: NAME=FILE (repeatable)");
  cmd->add_option("--random-inputs", io->random_seed,
                  "Generate every input from this seed instead of --input");
  cmd->add_option("--output-dir", io->output_dir, "Write one NAME.npy per graph output here");
  cmd->add_option("--dim", io->model_options.dims,
                  "Bind a symbolic dimension: NAME=VALUE (repeatable)");
  AddValueOption(cmd, &io->model_options);
}

void PrintOutputSummaries(const nlohmann::json& outputs) {
  for (const auto& o : outputs)
    std::cout << fmt::format("  {}: {}{}  mean {:.6g}  mean|x| {:.6g}{}\n",
                             o["name"].get<std::string>(), o["dtype"].get<std::string>(),
                             graph::DimsToString(o["shape"].get<graph::Dims>()),
                             o["mean"].get<double>(), o["mean_abs"].get<double>(),
                             o.contains("file") ? "  -> " + o["file"].get<std::string>() : "");
}

Result<fusion_space::Plan> LoadPlanArg(fusion_space::FusionSpace& space, const std::string& plan) {
  if (plan == "unfused") return space.Unfused();
  if (plan == "greedy") return space.Greedy();
  return fusion_space::ReadPlanFile(space, plan);
}

}  // namespace fusetune::cli
