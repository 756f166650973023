// bench_compile MODEL.onnx DB [--runs N] [--only whole_model|per_group|remembered|evicted|first]
// [--warm] [--json FILE] (--warm: the plans of `tune --warm`, as `compile --warm` reads them): what
// compiling a tuned model costs beyond import, per stage: fusion space (dataflow), lookup and
// partition (CompileGraph), lowering (KernelProgram::Compile). Each path is timed twice: repeated
// compiles with one compiler (its index warm), and one-shot compiles, each with a freshly loaded
// index and no memoised activation fits (what `fusetune compile` pays). Measured for the
// whole-model path (the model's measured plan is in the database) and the per-group path
// (--no-whole-model --no-remember: candidate groups enumerated and looked up one by one), and the
// per-group plan remembered (--no-whole-model: the plan a per-group compile chose, which this
// benchmark stores in DB first, as `fusetune compile` would). Issue 9's goal: at most
// 1 ms for a 12-layer model (scripts/gen_models.py --size e2e writes bert_base_12layer.onnx;
// `fusetune tune` fills the database).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include <sys/resource.h>

#include "compiler/model.h"
#include "fusion_space/match_gemm.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"

namespace fusetune {
namespace {

using Clock = std::chrono::steady_clock;
// Pages the process touched for the first time (each a trip to the kernel).
long MinorPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Stages {
  std::vector<double> open, index, space, candidates, lookup, lowering, total;
  std::map<std::string, int> sources;
};

// Writes 256 MB, more than every cache here holds: what the import of a
// large model does to the caches just before `fusetune compile` compiles.
void EvictCaches() {
  static std::vector<char> junk(256 << 20);
  static char value = 0;
  std::memset(junk.data(), ++value, junk.size());
}

// What a compile takes: the measured whole-model plan, the plan chosen from
// group records, or that plan remembered by an earlier compile.
enum class Path { kWholeModel, kPerGroup, kRemembered };
const char* PathName(Path path) {
  return path == Path::kWholeModel ? "whole_model"
         : path == Path::kPerGroup ? "per_group"
                                   : "remembered";
}

compiler::CompileOptions OptionsFor(Path path) {
  compiler::CompileOptions options;
  options.whole_model_plans = path == Path::kWholeModel;
  options.remembered_plans = path == Path::kRemembered;
  return options;
}

// One compile with `index`, its stages added to `s`: the fusion space,
// lookup and partition (CompileGraph), lowering.
Status CompileOnce(const graph::Graph& graph, compiler::TuningIndex& index, Path path, Stages* s) {
  const compiler::CompileOptions options = OptionsFor(path);
  const auto t0 = Clock::now();
  fusion_space::FusionSpace space(graph, kernels::KernelConfig{});
  const auto t1 = Clock::now();
  if (path == Path::kPerGroup) {  // enumerating candidate groups, a part of the lookup timed alone
    space.candidates();
    s->candidates.push_back(Ms(t1, Clock::now()));
  }
  FT_ASSIGN_OR_RETURN(auto plan, compiler::CompileGraph(space, index, options));
  const auto t2 = Clock::now();
  if (path == Path::kRemembered && !plan.remembered_generation)
    return Error(ErrorCode::kInternal, "the remembered plan was not taken: " + plan.partition);
  FT_ASSIGN_OR_RETURN(auto program, runtime::KernelProgram::Compile(space, plan.plan));
  const auto t3 = Clock::now();
  s->space.push_back(Ms(t0, t1));
  s->lookup.push_back(Ms(t1, t2));
  s->lowering.push_back(Ms(t2, t3));
  s->total.push_back(Ms(t0, t3));
  if (s->sources.empty())
    for (const auto& [source, n] : plan.count) s->sources[compiler::PlanSourceName(source)] = n;
  return Status::Ok();
}

// An index of `database` for this machine, its load timed into `s`.
Result<std::unique_ptr<compiler::TuningIndex>> LoadIndex(db::Database& database,
                                                         target::CacheProtocol caches, Stages* s) {
  fusion_space::ClearActivationFitCache();
  const auto t_index = Clock::now();
  auto index = compiler::LoadIndexForThisMachine(database, caches);
  s->index.push_back(Ms(t_index, Clock::now()));
  return index;
}

// How each compile of Time() gets its database.
enum class Setting {
  kWarm,      // one compiler for all: `shared`
  kOneShot,   // the database opened anew (its connection caches best
              // records), an index loaded, the activation-fit memo cleared
  kEvicted,   // as `fusetune compile` runs: opened, index loaded, best plans
              // preloaded, then every cache evicted (the import's doing)
  kKeyByKey,  // kOneShot after every cache was evicted: no preload
};

// `runs` compiles in `setting`. The open is timed apart: the command opens
// the database before it imports the model.
Result<Stages> Time(const graph::Graph& graph, const std::string& db_path,
                    compiler::TuningIndex* shared, Path path, int runs,
                    target::CacheProtocol caches, Setting setting) {
  Stages s;
  for (int i = 0; i < runs; ++i) {
    if (setting == Setting::kWarm) {
      FT_RETURN_IF_ERROR(CompileOnce(graph, *shared, path, &s));
      continue;
    }
    if (setting == Setting::kKeyByKey) EvictCaches();
    const auto t_open = Clock::now();
    FT_ASSIGN_OR_RETURN(auto database, compiler::OpenTuningDatabase(db_path));
    s.open.push_back(Ms(t_open, Clock::now()));
    FT_ASSIGN_OR_RETURN(auto index, LoadIndex(*database, caches, &s));
    if (setting == Setting::kEvicted) {
      index->PreloadInBackground(db_path);
      index->WaitForPreload();  // an import of this model takes seconds
      EvictCaches();
    }
    FT_RETURN_IF_ERROR(CompileOnce(graph, *index, path, &s));
  }
  return s;
}

// Compiles from group records and remembers the plan in the database at
// `db_path`, as `fusetune compile` does on its first compile of a model.
Status RememberPerGroupPlan(const graph::Graph& graph, const std::string& db_path,
                            target::CacheProtocol caches) {
  FT_ASSIGN_OR_RETURN(auto database, compiler::OpenTuningDatabase(db_path));
  FT_ASSIGN_OR_RETURN(auto index, compiler::LoadIndexForThisMachine(*database, caches));
  FT_ASSIGN_OR_RETURN(auto model,
                      compiler::CompiledModel::Compile(graph, kernels::KernelConfig{}, *index,
                                                       OptionsFor(Path::kRemembered)));
  if (model->compiled().remembered_generation) return Status::Ok();  // remembered already
  const compiler::RememberNote note =
      compiler::RememberCompiledPlan(db_path, *model, index->target());
  if (!note.stored) return Error(ErrorCode::kInternal, "the per-group plan: " + note.text);
  return Status::Ok();
}

// One row: the medians of each stage, printed, and as JSON. The open and
// index load are there when the row's compiles opened the database, the
// candidate groups when they enumerated them.
nlohmann::json Report(const char* path, const char* setting, const Stages& s,
                      const std::string& note) {
  const bool opened = !s.open.empty(), enumerated = !s.candidates.empty();
  std::string sources;
  for (const auto& [k, n] : s.sources) sources += fmt::format(" {} {}", n, k);
  fmt::print(
      "{:<12} {:<18} median of {}: {}space {:.3f} ms, lookup+partition {:.3f} ms{}, lowering "
      "{:.3f} ms, total {:.3f} ms beyond import (sources:{}{}{})\n",
      path, setting, s.total.size(),
      opened ? fmt::format("database open {:.3f} ms; index load {:.3f} ms, ", Median(s.open),
                           Median(s.index))
             : "",
      Median(s.space), Median(s.lookup),
      enumerated ? fmt::format(" (candidate groups {:.3f} ms)", Median(s.candidates)) : "",
      Median(s.lowering), Median(s.total), sources, note.empty() ? "" : "; ", note);
  nlohmann::json j = {
      {"space_ms", Median(s.space)},   {"candidates_ms", enumerated ? Median(s.candidates) : 0.0},
      {"lookup_ms", Median(s.lookup)}, {"lowering_ms", Median(s.lowering)},
      {"total_ms", Median(s.total)},   {"sources", s.sources}};
  if (opened) {
    j["open_ms"] = Median(s.open);
    j["index_load_ms"] = Median(s.index);
  }
  return j;
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr,
               "usage: bench_compile MODEL.onnx DB [--runs N] [--only "
               "whole_model|per_group|remembered|evicted|first] [--warm] [--json FILE]\n");
    return 2;
  }
  int runs = 20;
  std::string json_path, only;
  target::CacheProtocol caches = target::CacheProtocol::kFlushed;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    if (a == "--only" && i + 1 < argc) only = argv[++i];  // a path, or "first" alone
    if (a == "--warm") caches = target::CacheProtocol::kWarm;
  }
  // `fusetune compile` opens the database and loads its index for this
  // machine (OpenTuningSource), then imports, then compiles: the first
  // compile of this process does the same.
  Stages first;
  const auto t_open = Clock::now();
  auto first_database = compiler::OpenTuningDatabase(argv[2]);
  const double first_open_ms = Ms(t_open, Clock::now());
  if (!first_database.ok()) {
    fmt::print(stderr, "{}\n", first_database.error().ToString());
    return 1;
  }
  auto first_index = LoadIndex(**first_database, caches, &first);
  if (!first_index.ok()) {
    fmt::print(stderr, "{}\n", first_index.error().ToString());
    return 1;
  }
  (*first_index)->PreloadInBackground(argv[2]);
  const auto t0 = Clock::now();
  auto graph = graph::ImportOnnxFile(argv[1]);
  if (!graph.ok() || !graph::RunStandardPasses(*graph).ok()) {
    fmt::print(stderr, "cannot import {}\n", argv[1]);
    return 1;
  }
  const double import_ms = Ms(t0, Clock::now());
  fmt::print("model {} ({} nodes): import {:.1f} ms\n", argv[1], graph->nodes.size(), import_ms);
  // The first compile of the process, as `fusetune compile` runs it: nothing
  // in SQLite's page cache, the allocator and the code not yet warm. Its
  // total counts what the other rows count; the teardown (closing the
  // database, freeing the plan) is apart, as `fusetune compile` exits then.
  double first_total = 0;
  {
    const long faults_before = MinorPageFaults();
    const auto c0 = Clock::now();
    if (const Status compiled = CompileOnce(*graph, **first_index, Path::kWholeModel, &first);
        !compiled.ok()) {
      fmt::print(stderr, "{}\n", compiled.error().ToString());
      return 1;
    }
    first_total = first.total[0];
    first_index->reset();  // closed, as `fusetune compile` exits
    first_database->reset();
    const double first_ms = Ms(c0, Clock::now());
    const long faults = MinorPageFaults() - faults_before;
    fmt::print(
        "first compile of the process: database open {:.3f} ms and index load {:.3f} ms (before "
        "the import, as in `fusetune compile`); space {:.3f} ms, lookup+partition {:.3f} ms, "
        "lowering {:.3f} ms, total {:.3f} ms beyond import ({:.3f} ms of teardown after it, {} "
        "page faults)\n",
        first_open_ms, first.index[0], first.space[0], first.lookup[0], first.lowering[0],
        first_total, first_ms - first_total, faults);
  }
  if (only == "first") {  // bench/first_compile.sh runs this in several processes
    if (!json_path.empty())
      std::ofstream(json_path) << nlohmann::json{{"first_total_ms", first_total}}.dump() << "\n";
    return 0;
  }
  // The warm rows' compiler: one database and index for all their compiles.
  auto database = compiler::OpenTuningDatabase(argv[2]);
  if (!database.ok()) {
    fmt::print(stderr, "{}\n", database.error().ToString());
    return 1;
  }
  auto index = compiler::LoadIndexForThisMachine(**database, caches);
  if (!index.ok()) {
    fmt::print(stderr, "{}\n", index.error().ToString());
    return 1;
  }
  nlohmann::json out{{"model", argv[1]},
                     {"nodes", graph->nodes.size()},
                     {"import_ms", import_ms},
                     {"first_total_ms", first_total},
                     {"runs", runs}};
  // A first compile can be timed only once per process; compiles after
  // evicting every cache repeat its conditions: as `fusetune compile` runs
  // (best plans preloaded while the model imports), and key by key (a
  // compile that starts before the preload is in, or without one).
  // Times and reports one row; false (the error printed) when a compile failed.
  auto row = [&](Path path, const char* setting, Setting how, int n, const std::string& json_key,
                 const char* note) {
    auto s = Time(*graph, argv[2], index->get(), path, n, caches, how);
    if (!s.ok()) {
      fmt::print(stderr, "{}\n", s.error().ToString());
      return false;
    }
    out[json_key] = Report(PathName(path), setting, *s, note);
    return true;
  };
  const int evicted_runs = std::min(runs, 200);
  if (only.empty() || only == "whole_model" || only == "evicted") {
    if (!row(Path::kWholeModel, "evicted", Setting::kEvicted, evicted_runs, "whole_model_evicted",
             "each after writing 256 MB, best plans preloaded before") ||
        !row(Path::kWholeModel, "evicted_key_by_key", Setting::kKeyByKey, evicted_runs,
             "whole_model_evicted_key_by_key", "each after writing 256 MB, no preload"))
      return 1;
  }
  for (Path path : {Path::kWholeModel, Path::kPerGroup, Path::kRemembered}) {
    if (!only.empty() && only != PathName(path)) continue;  // or "evicted"
    const std::string name = PathName(path);
    if (path == Path::kRemembered) {
      if (const Status remembered = RememberPerGroupPlan(*graph, argv[2], caches);
          !remembered.ok()) {
        fmt::print(stderr, "{}\n", remembered.error().ToString());
        return 1;
      }
      if (!row(path, "evicted", Setting::kEvicted, evicted_runs, name + "_evicted",
               "each after writing 256 MB, best plans preloaded before"))
        return 1;
    }
    if (!row(path, "warm", Setting::kWarm, runs, name, "") ||
        !row(path, "one-shot", Setting::kOneShot, runs, name + "_one_shot", ""))
      return 1;
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
  return 0;
}

}  // namespace
}  // namespace fusetune

int main(int argc, char** argv) { return fusetune::Main(argc, argv); }
