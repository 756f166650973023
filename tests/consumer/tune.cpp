// consumer_tune MODEL.onnx DB: tunes the model into DB with the installed
// fusetune library (a few trials), compiles it from that database and runs
// it; then a job stopped by its predicate and resumed to its budget, and
// options that are errors. Exits 0 when every check holds.
#include <fusetune/fusetune.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

// Compiles from the database and runs on 0.5 sin(i) inputs: finite outputs.
void CompileAndRun(const std::string& model, const std::string& database) {
  fusetune::CompileOptions options;
  options.database = database;
  auto compiler = fusetune::Compiler::Open(options);
  Check(compiler.ok(), "open the tuned database");
  if (!compiler.ok()) return;
  auto exe = compiler.value()->Compile(model);
  Check(exe.ok(), "compile from the tuned database");
  if (!exe.ok()) return;
  const auto& sources = exe.value()->report().sources;
  Check(sources.count("whole-model") || sources.count("exact"), "the compile uses tuned plans");
  fusetune::ArrayMap inputs;
  for (const std::string& name : exe.value()->input_names()) {
    fusetune::Array a{exe.value()->input_shape(name), {}};
    int64_t n = 1;
    for (int64_t d : a.shape) n *= d;
    for (int64_t i = 0; i < n; ++i) a.data.push_back(0.5f * std::sin(static_cast<float>(i)));
    inputs[name] = std::move(a);
  }
  auto outputs = exe.value()->Run(inputs);
  Check(outputs.ok(), "run");
  if (!outputs.ok()) return;
  for (const auto& [name, y] : outputs.value())
    for (float v : y.data) Check(std::isfinite(v), "finite outputs");
  std::printf("compiled from the tuned database: %zu kernels, whole-model %d, exact %d\n",
              exe.value()->report().kernels.size(),
              sources.count("whole-model") ? sources.at("whole-model") : 0,
              sources.count("exact") ? sources.at("exact") : 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer_tune MODEL.onnx DB\n");
    return 2;
  }
  const std::string model = argv[1], database = argv[2];
  fusetune::TuneOptions options;
  options.database = database;
  options.max_trials = 12;
  options.seed = 7;
  int64_t reports = 0, last_trials = 0;
  options.progress = [&](const fusetune::TuneProgress& p) {
    Check(p.trials >= last_trials && p.max_trials == 12 && p.groups > 0, "progress");
    last_trials = p.trials;
    ++reports;
  };
  auto tuned = fusetune::Tune(model, options);
  if (!tuned.ok()) {
    std::fprintf(stderr, "tune: %s\n", tuned.error().c_str());
    return 1;
  }
  const fusetune::TuneSummary& s = tuned.value();
  std::printf(
      "tuned: job %lld, %lld trials, %lld whole plans, best %.3f ms (%s), stopped: %s, "
      "%lld progress reports\n",
      static_cast<long long>(s.job), static_cast<long long>(s.trials),
      static_cast<long long>(s.plans_measured), s.best_ms.value_or(-1), s.best_kind.c_str(),
      s.stop_reason.c_str(), static_cast<long long>(reports));
  Check(s.job > 0 && s.trials == 12 && s.stop_reason == "trials" && !s.interrupted, "summary");
  Check(s.best_ms && s.unfused_ms && *s.best_ms <= *s.unfused_ms, "best no slower than unfused");
  Check(!s.best_plan_json.empty() && !s.groups.empty() && reports > 0, "plan, groups, progress");
  CompileAndRun(model, database);

  // Stopped at once, then resumed to its own budget.
  fusetune::TuneOptions stopped = options;
  stopped.progress = nullptr;
  stopped.max_trials = 6;
  stopped.should_stop = [] { return true; };
  auto first = fusetune::Tune(model, stopped);
  Check(first.ok() && first.value().interrupted && first.value().stop_reason == "interrupted",
        "a stopped job says so");
  fusetune::TuneOptions resumed = options;
  resumed.progress = nullptr;
  resumed.max_trials = 0;
  resumed.resume = true;
  auto second = fusetune::Tune(model, resumed);
  Check(second.ok() && first.ok() && second.value().job == first.value().job &&
            second.value().trials == 6 && !second.value().interrupted,
        "resuming finishes the stopped job");

  // Errors are values.
  Check(!fusetune::Tune("/nonexistent/model.onnx", options).ok(), "a missing model fails");
  fusetune::TuneOptions bad = options;
  bad.threads = 0;
  Check(!fusetune::Tune(model, bad).ok(), "threads out of range fail");
  if (failures == 0) std::printf("consumer_tune: OK\n");
  return failures == 0 ? 0 : 1;
}
