#include "cli/compile_args.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

namespace fusetune::cli {

namespace {

// The flags that select the records of `target_key` ("--caches warm
// --precision mixed --error-budget 0.01"; "the defaults" for neither).
std::string FlagsOf(const std::string& target_key) {
  std::string flags;
  const target::CacheProtocol caches = target::CacheProtocolOfTargetKey(target_key);
  if (caches != target::CacheProtocol::kFlushed)
    flags = fmt::format("--caches {}", target::CacheProtocolName(caches));
  const target::PrecisionPolicy precision = target::PrecisionPolicyOfTargetKey(target_key);
  if (precision.mixed)
    flags += fmt::format("{}--precision mixed --error-budget {:g}", flags.empty() ? "" : " ",
                         precision.error_budget);
  return flags.empty() ? "the defaults (--caches flushed --precision f32)" : flags;
}

// Nothing was found for this model's kernels under the lookup's target key
// (cache protocol and precision policy), but some are tuned on this machine
// under another: one stderr note naming the flags that read them. Without
// it, a database tuned with --caches cold-weights and looked up with the
// default compiled to untuned plans (ResNet-50: the greedy plan, 1.4x
// slower) with nothing said but "55 default". One record lookup per kernel
// and key of this machine, and only when nothing was found.
void NoteOtherTargetKeys(compiler::CompiledModel& model, const CompileArgs& args,
                         db::Database& database, const std::string& looked_up) {
  const compiler::CompiledPlan& plan = model.compiled();
  for (const compiler::GroupDecision& d : plan.groups)
    if (d.choice.source != compiler::PlanSource::kDefault &&
        d.choice.source != compiler::PlanSource::kCostModel)
      return;
  auto targets = database.ListTargets();
  if (!targets.ok()) return;
  const std::string machine = target::FlushedKeyOf(looked_up);
  std::string found;
  for (const db::TargetEntry& other : *targets) {
    if (other.fingerprint == looked_up || target::FlushedKeyOf(other.fingerprint) != machine)
      continue;
    int64_t tuned = 0;
    for (const fusion_space::PlanGroup& g : plan.plan.groups) {
      auto best = database.Best(model.space().Key(g.nodes).ToString(), other.fingerprint);
      tuned += best.ok() && best->has_value();
    }
    if (tuned == 0) continue;
    found += fmt::format("{}{} of its {} kernels tuned with {}", found.empty() ? "" : "; ", tuned,
                         plan.plan.groups.size(), FlagsOf(other.fingerprint));
  }
  if (found.empty()) return;
  fmt::print(stderr,
             "fusetune: note: {} has nothing tuned for this model on this machine with {}, but "
             "{}: pass those flags to use them\n",
             args.db, FlagsOf(looked_up), found);
}

}  // namespace

void AddCompileOptions(CLI::App* cmd, CompileArgs* args) {
  cmd->add_option("--max-memory", args->max_memory,
                  "Limit on the peak bytes of live intermediate values (e.g. 64MiB)");
  cmd->add_flag("--no-whole-model", args->no_whole_model,
                "Ignore measured whole-model plans: select the partition from group records");
  cmd->add_flag("--no-remember", args->no_remember,
                "Choose the plan from the records again, even if a compile of this model "
                "remembered one, and do not remember this one");
  AddCachesOptions(cmd, &args->caches_args, /*measures=*/false);
  AddPrecisionOptions(cmd, &args->precision_args, /*tunes=*/false);
}

Result<int64_t> ParseBytes(const std::string& text, const char* flag) {
  const Error bad(
      ErrorCode::kInvalidArgument,
      fmt::format("{} '{}': expected bytes such as 512, 64K, 64MiB or 1.5G", flag, text));
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return bad;
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit == "" || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB")
    scale = 1024;
  else if (unit == "M" || unit == "MB" || unit == "MIB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB")
    scale = 1024.0 * 1024 * 1024;
  else
    return bad;
  if (!(value > 0) || !std::isfinite(value)) return bad;
  return static_cast<int64_t>(value * scale);
}

Result<TuningSource> OpenTuningSource(const CompileArgs& args) {
  TuningSource source;
  auto database = compiler::OpenTuningDatabase(args.db);
  if (!database.ok()) return database.error().WithContext("--db");
  source.database = std::move(*database);
  FT_ASSIGN_OR_RETURN(const target::PrecisionPolicy precision, args.precision_args.Policy());
  FT_ASSIGN_OR_RETURN(source.index, compiler::LoadIndexForThisMachine(*source.database,
                                                                      args.caches(), precision));
  source.index->PreloadInBackground(args.db);  // while the model imports
  return source;
}

Result<std::unique_ptr<compiler::CompiledModel>> CompileWithDatabase(
    graph::Graph graph, int threads, const CompileArgs& args, TuningSource& source, bool explain,
    compiler::RememberNote* note) {
  compiler::CompileOptions options;
  if (!args.max_memory.empty()) {
    FT_ASSIGN_OR_RETURN(options.max_memory_bytes, ParseBytes(args.max_memory, "--max-memory"));
  }
  options.whole_model_plans = !args.no_whole_model;
  options.target_features = explain;
  options.explain_alternatives = explain;
  options.remembered_plans = !explain && !args.no_remember;
  kernels::KernelConfig config;
  config.threads = threads;
  const target::PrecisionPolicy precision =
      target::PrecisionPolicyOfTargetKey(source.index->target());
  options.error_budget = precision.mixed ? precision.error_budget : 0;
  config.offer_bf16 = precision.mixed && target::DetectTarget().Has("avx512_bf16");
  FT_ASSIGN_OR_RETURN(auto model, compiler::CompiledModel::Compile(std::move(graph), config,
                                                                   *source.index, options));
  NoteOtherTargetKeys(*model, args, *source.database, source.index->target());
  const compiler::RememberNote said =
      compiler::RememberCompiledPlan(args.db, *model, source.index->target());
  if (note != nullptr) *note = said;
  return model;
}

// One stderr line when some groups are not exact hits: never a silent fallback.
void WarnAboutFallbacks(const compiler::CompiledPlan& plan) {
  int untuned = 0;
  double worst = 0;
  bool unknown = false;
  for (const auto& d : plan.groups) {
    if (d.choice.source == compiler::PlanSource::kExact ||
        d.choice.source == compiler::PlanSource::kWholeModel)
      continue;
    ++untuned;
    if (d.choice.predicted_loss)
      worst = std::max(worst, *d.choice.predicted_loss);
    else
      unknown = true;
  }
  if (untuned == 0) return;
  fmt::print(stderr,
             "fusetune: note: {} of {} kernels are not tuned for this machine (largest predicted "
             "loss {:.0f}%{}); --explain lists them\n",
             untuned, plan.groups.size(), worst * 100, unknown ? ", some unknown" : "");
}

}  // namespace fusetune::cli
