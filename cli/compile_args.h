// What `fusetune compile` and `fusetune run --db` share: the options of the
// compile-time lookup and the compile itself.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/cli_common.h"
#include "common/status.h"
#include "compiler/model.h"

namespace fusetune::cli {

struct CompileArgs {
  std::string db = "fusetune.db";
  std::string max_memory;  // "64MiB"; empty: no limit
  bool no_whole_model = false;
  bool no_remember = false;  // neither take nor store a remembered compile
  CachesArgs caches_args;    // the plans tuned with `tune --caches`
  target::CacheProtocol caches() const { return caches_args.caches; }
  PrecisionArgs precision_args;  // the plans tuned with `tune --precision`
};

// --max-memory, --no-whole-model, --no-remember, --caches, --precision and
// --error-budget; --db is the caller's (required or not).
void AddCompileOptions(CLI::App* cmd, CompileArgs* args);

// "512", "64K", "64KiB", "1.5M", "2G": bytes (K, M, G are powers of 1024).
Result<int64_t> ParseBytes(const std::string& text, const char* flag);

// The tuning database, read-only (it must exist), and this machine's index
// in it. Commands open it before importing the model: a wrong --db fails at
// once rather than after seconds of import.
struct TuningSource {
  std::unique_ptr<db::Database> database;
  std::unique_ptr<compiler::TuningIndex> index;
};
Result<TuningSource> OpenTuningSource(const CompileArgs& args);

// Compiles `graph` against `source`; `explain`: keep what --explain shows
// (the target's figures for each kernel's analytical parts, every candidate
// group: a remembered compile is not taken then). A plan chosen from its
// groups is then remembered in the database for the next compile; `note`,
// when given, says so or why not (a failure to remember is a note, not an
// error), and is empty when there was nothing to remember.
Result<std::unique_ptr<compiler::CompiledModel>> CompileWithDatabase(
    graph::Graph graph, int threads, const CompileArgs& args, TuningSource& source,
    bool explain = false, compiler::RememberNote* note = nullptr);

// One stderr line when some groups are not exact hits (a size outside the
// tuned ones, a model not tuned): how many, and the largest predicted loss.
// Never a silent fallback.
void WarnAboutFallbacks(const compiler::CompiledPlan& plan);

}  // namespace fusetune::cli
