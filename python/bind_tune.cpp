// fusetune.calibrate() and fusetune.tune(): the machine's calibration, and
// the tuning job `fusetune tune` runs (search::TuningJob), with the GIL
// released while it works. Between measurements the job polls for Ctrl-C
// (Python's pending KeyboardInterrupt) and ends as the CLI's does on SIGINT:
// what was measured is committed and the summary returns, marked interrupted.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "cli/cli_common.h"
#include "cli/tune_summary.h"
#include "measure/calibrate.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "search/tuning_job.h"
#include "target/calibration.h"

namespace fusetune::python {

namespace {

// `fusetune calibrate --json` with the roofline it implies, measured with the
// GIL released; with `db`, stored there as `calibrate --db` does.
py::object Calibrate(int threads, const std::optional<std::string>& db) {
  if (threads < 1 || threads > 256)
    RaiseInvalid(fmt::format("threads must be between 1 and 256, not {}", threads));
  nlohmann::json c;
  {
    py::gil_scoped_release release;
    c = target::CalibrationToJson(measure::Calibrate(threads));
    if (db) {
      auto database = Take(db::MakeSqliteDatabase(*db));
      Check(database->PutTarget(
          {c["target"]["hash"].get<std::string>(), c["target"].dump(), c.dump()}));
    }
  }
  const double peak = c["fma_gflops"].get<double>(), dram = c["dram_read_gbps"].get<double>();
  c["roofline"] = {{"threads", threads},
                   {"peak_gflops", peak},
                   {"dram_read_gbps", dram},
                   {"l2_read_gbps", c["l2_read_gbps"]},
                   {"ridge_flop_per_byte", dram > 0 ? peak / dram : 0.0}};
  return ToPython(c);
}

// The job's callbacks and what they leave for Python. The py::objects are
// touched with the GIL held only; `stop` is read without it.
struct PythonSide {
  py::object progress;  // a callable or None
  std::atomic<bool> stop{false};
  bool interrupted = false;                     // Ctrl-C: the summary returns
  std::optional<py::error_already_set> raised;  // the callback raised: re-raised after the job
  std::chrono::steady_clock::time_point polled{};

  // The Python error being handled ends the job.
  void Take(py::error_already_set error) {
    if (error.matches(PyExc_KeyboardInterrupt))
      interrupted = true;
    else if (!raised)
      raised = std::move(error);
    stop = true;
  }
  // Signals are looked at every 50 ms at most: the GIL is taken for it.
  bool ShouldStop() {
    const auto now = std::chrono::steady_clock::now();
    if (stop || now - polled < std::chrono::milliseconds(50)) return stop;
    polled = now;
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) Take(py::error_already_set());
    return stop;
  }
  void Report(const search::TunerProgress& p) {
    if (stop || progress.is_none()) return;  // is_none() compares pointers: no GIL needed
    py::gil_scoped_acquire gil;
    py::dict d;
    d["trials"] = p.trials;
    d["max_trials"] = p.max_trials;
    d["seconds"] = p.seconds;
    d["max_seconds"] = p.max_seconds;
    d["tasks"] = p.tasks;
    d["tasks_converged"] = p.tasks_converged;
    d["best_ms"] = p.best_model_seconds ? py::object(py::float_(*p.best_model_seconds * 1e3))
                                        : py::object(py::none());
    d["unfused_ms"] = p.unfused_seconds ? py::object(py::float_(*p.unfused_seconds * 1e3))
                                        : py::object(py::none());
    d["current"] = p.current;
    try {
      progress(d);
    } catch (py::error_already_set& e) {
      Take(std::move(e));
    }
  }
};

struct TuneRequest {
  std::string model, db;
  cli::ModelOptions model_options;
  search::TuningJobOptions options;
};

// The budget and the measurement, checked as `fusetune tune` checks its flags.
search::TuningJobOptions JobOptions(const std::string& model, const py::object& time,
                                    int64_t trials, bool until_converged, bool resume,
                                    const std::string& caches, int threads, uint64_t seed,
                                    const std::string& worker) {
  search::TuningJobOptions options;
  options.model = model;
  if (py::isinstance<py::str>(time))
    options.tuner.max_seconds = Take(cli::ParseDuration(time.cast<std::string>()));
  else if (!time.is_none())
    options.tuner.max_seconds = time.cast<double>();
  if (options.tuner.max_seconds < 0 || trials < 0)
    RaiseInvalid("time and trials must not be negative");
  if (trials == 0 && options.tuner.max_seconds == 0 && !until_converged && !resume)
    RaiseInvalid("give a budget: trials=N, time=DURATION or until_converged=True");
  if (threads < 1 || threads > 256)
    RaiseInvalid(fmt::format("threads must be between 1 and 256, not {}", threads));
  const auto protocol = target::CacheProtocolFromName(caches);
  if (!protocol)
    RaiseInvalid(fmt::format("caches '{}': expected flushed, warm or cold-weights", caches));
  options.tuner.max_trials = trials;
  options.tuner.seed = seed;
  options.tuner.measure.threads = threads;
  options.until_converged = until_converged;
  options.resume = resume;
  options.caches = *protocol;
  options.worker_path = worker;
  return options;
}

// The job from the model's import to its end; runs without the GIL.
Result<search::TuningJobResult> RunJob(const TuneRequest& request, PythonSide& side) {
  FT_ASSIGN_OR_RETURN(graph::Graph graph, cli::LoadModel(request.model, request.model_options));
  FT_ASSIGN_OR_RETURN(auto database, db::MakeSqliteDatabase(request.db));
  search::TuningJobCallbacks callbacks;
  callbacks.calibrating = [&side] {
    search::TunerProgress p;
    p.current = "calibrating this machine (once per database)";
    side.Report(p);
  };
  callbacks.progress = [&side](const search::TunerProgress& p) { side.Report(p); };
  callbacks.should_stop = [&side] { return side.ShouldStop(); };
  FT_ASSIGN_OR_RETURN(
      auto job,
      search::TuningJob::Open(*database, std::make_shared<const graph::Graph>(std::move(graph)),
                              request.options, callbacks));
  return job->Run();
}

// (the summary as `fusetune tune --json` prints it, with "interrupted";
// the tables `fusetune tune` prints)
py::tuple Tune(const std::string& model, const std::string& db, const py::object& time,
               int64_t trials, const std::map<std::string, int64_t>& dims,
               const std::map<std::string, std::vector<int64_t>>& values, bool until_converged,
               bool resume, const std::string& caches, int threads, uint64_t seed,
               const std::string& worker, const py::object& progress) {
  TuneRequest request{
      model, db, ModelOptionsOf(dims, values),
      JobOptions(model, time, trials, until_converged, resume, caches, threads, seed, worker)};
  PythonSide side;
  side.progress = progress;
  std::optional<Result<search::TuningJobResult>> result;
  {
    py::gil_scoped_release release;
    result.emplace(RunJob(request, side));
  }
  if (side.raised) throw std::move(*side.raised);
  search::TuningJobResult done = Take(std::move(*result));
  nlohmann::json j = search::SummaryToJson(done.summary);
  j["job"] = done.job_id;
  j["db"] = db;
  j["dims"] = dims;
  j["interrupted"] = done.interrupted;
  const std::string text =
      fmt::format("job {} in {}\n{}", done.job_id, db, cli::FormatTuneSummary(done.summary));
  return py::make_tuple(ToPython(j), text);
}

}  // namespace

void BindTune(py::module_& m) {
  m.def("calibrate", &Calibrate, py::arg("threads") = 2, py::arg("db") = py::none(),
        R"(Measures this machine as `fusetune calibrate --json` does (a few seconds): the
target (CPU, caches, ISA, fingerprint) and the roofline (FMA peak, DRAM and L2
bandwidth, launch cost), with a "roofline" summary and its ridge point. With db,
the calibration is stored there, as `calibrate --db` does.)");
  m.def("tune", &Tune, py::arg("model"), py::arg("db"), py::arg("time"), py::arg("trials"),
        py::arg("dims"), py::arg("values"), py::arg("until_converged"), py::arg("resume"),
        py::arg("caches"), py::arg("threads"), py::arg("seed"), py::arg("worker"),
        py::arg("progress"));
}

}  // namespace fusetune::python
