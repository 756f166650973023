// fusetune.Database and fusetune.report(): the tuning database's statistics,
// best plans, records, jobs, merge, export and import, and a job's report,
// through the code the `fusetune db` and `fusetune report` commands run
// (cli/db_json.h, cli/job_report.h, db/jsonl.h). Each call opens the file
// as that command does (read-only to read) and closes it; the GIL is
// released while the database works.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <fstream>

#include "cli/db_json.h"
#include "cli/job_report.h"
#include "db/jsonl.h"
#include "db/record_text.h"
#include "python/bindings.h"
#include "python/convert.h"
#include "target/target.h"

namespace fusetune::python {

namespace {

std::unique_ptr<db::Database> OpenExisting(const std::string& path, bool read_only) {
  db::OpenOptions options;
  options.create = false;
  options.read_only = read_only;
  return Take(db::MakeSqliteDatabase(path, options));
}

std::string TargetOrThisMachine(const std::optional<std::string>& target) {
  return target ? *target : target::ThisMachineKey(target::CacheProtocol::kFlushed);
}

py::dict RecordDict(const db::Record& r) {
  py::dict d;
  d["id"] = r.id;
  d["workload"] = r.workload_key;
  d["target"] = r.target;
  d["plan"] = ParsedJson(r.plan);
  d["status"] = db::StatusToText(r.status);
  d["seconds"] = r.seconds;
  d["metrics"] = ParsedJson(r.metrics);
  d["error"] = r.error;
  d["job"] = r.job_id;
  d["created_at"] = r.created_at;
  d["fusetune_version"] = r.fusetune_version;
  d["kernel_versions"] = r.kernel_versions;
  return d;
}

py::dict TransferDict(const db::TransferSummary& s) {
  py::dict d;
  d["targets"] = s.targets;
  d["workloads"] = s.workloads;
  d["records_read"] = s.records_read;
  d["records_added"] = s.records_added;
  return d;
}

// Records read in one pass over the database, each made a dict when asked for.
class RecordIterator {
 public:
  explicit RecordIterator(std::vector<db::Record> records) : records_(std::move(records)) {}
  py::dict Next() {
    if (next_ >= records_.size()) throw py::stop_iteration();
    return RecordDict(records_[next_++]);
  }
  size_t Length() const { return records_.size() - next_; }

 private:
  std::vector<db::Record> records_;
  size_t next_ = 0;
};

class PyDatabase {
 public:
  // Opened once to check it is a tuning database; `create` makes the file.
  PyDatabase(std::string path, bool create) : path_(std::move(path)) {
    py::gil_scoped_release release;
    if (create)
      Take(db::MakeSqliteDatabase(path_));
    else
      OpenExisting(path_, true);
  }
  const std::string& path() const { return path_; }

  py::object Stats(const std::optional<std::string>& target) {
    nlohmann::json j;
    {
      py::gil_scoped_release release;
      const std::string key = TargetOrThisMachine(target);
      j = cli::DbStatsJson(path_, key, Take(OpenExisting(path_, true)->Stats(key)));
    }
    return ToPython(j);
  }
  py::object BestPlans(const std::optional<std::string>& target, const std::string& workload) {
    nlohmann::json j;
    {
      py::gil_scoped_release release;
      j = Take(
          cli::BestPlansJson(*OpenExisting(path_, true), TargetOrThisMachine(target), workload));
    }
    return ToPython(j);
  }
  RecordIterator Records(const std::optional<std::string>& workload,
                         const std::optional<std::string>& target,
                         const std::optional<std::string>& status, std::optional<int64_t> job,
                         bool fresh_only) {
    db::RecordFilter filter;
    filter.workload_key = workload;
    filter.target = target;
    if (status) filter.status = Take(db::StatusFromText(*status));
    filter.job_id = job;
    filter.fresh_only = fresh_only;
    std::vector<db::Record> records;
    py::gil_scoped_release release;
    Check(OpenExisting(path_, true)->ForEachRecord(filter, [&](const db::Record& r) {
      records.push_back(r);
      return true;
    }));
    return RecordIterator(std::move(records));
  }
  py::list Jobs() {
    std::vector<db::JobEntry> jobs;
    {
      py::gil_scoped_release release;
      jobs = Take(OpenExisting(path_, true)->ListJobs());
    }
    py::list out;
    for (const db::JobEntry& job : jobs) {
      py::dict d;
      d["id"] = job.id;
      d["state"] = job.state;
      d["spec"] = ParsedJson(job.spec);
      d["created_at"] = job.created_at;
      d["updated_at"] = job.updated_at;
      d["has_summary"] = nlohmann::json::parse(job.progress, nullptr, false).contains("summary");
      out.append(d);
    }
    return out;
  }
  // `fusetune db merge`: each database's records added here, best plans recomputed.
  py::list Merge(const std::vector<std::string>& others) {
    std::vector<db::TransferSummary> done;
    {
      py::gil_scoped_release release;
      auto into = Take(db::MakeSqliteDatabase(path_));
      for (const std::string& other : others) {
        auto from = OpenExisting(other, true);
        auto merged = db::MergeDatabase(*into, *from);
        if (!merged.ok()) Raise(merged.error().WithContext("merging " + other));
        done.push_back(*merged);
      }
    }
    py::list out;
    for (size_t i = 0; i < done.size(); ++i) {
      py::dict d = TransferDict(done[i]);
      d["database"] = others[i];
      out.append(d);
    }
    return out;
  }
  // `fusetune db export -o FILE`: JSON Lines.
  py::dict Export(const std::string& file) {
    db::TransferSummary s;
    {
      py::gil_scoped_release release;
      auto database = OpenExisting(path_, true);
      std::ofstream out(file);
      if (!out) Raise(Error(ErrorCode::kIo, fmt::format("cannot write '{}'", file)));
      s = Take(db::ExportJsonl(*database, out));
    }
    return TransferDict(s);
  }
  // `fusetune db import FILE`.
  py::dict Import(const std::string& file) {
    db::TransferSummary s;
    {
      py::gil_scoped_release release;
      std::ifstream in(file);
      if (!in) Raise(Error(ErrorCode::kNotFound, fmt::format("cannot open '{}'", file)));
      auto database = Take(db::MakeSqliteDatabase(path_));
      s = Take(db::ImportJsonl(*database, in, file));
    }
    return TransferDict(s);
  }
  // `fusetune db check`: SQLite's integrity and foreign-key checks.
  void CheckIntegrity() {
    py::gil_scoped_release release;
    Check(OpenExisting(path_, true)->CheckIntegrity());
  }

 private:
  std::string path_;
};

// (the summary as `report --json` gives it, the tables `report` prints,
// [(file, svg)] of the plots `report --out` writes)
py::tuple Report(const std::string& path, int64_t job) {
  nlohmann::json j;
  std::string text;
  std::vector<cli::ReportPlot> plots;
  {
    py::gil_scoped_release release;
    auto database = OpenExisting(path, true);
    const cli::JobReport report = Take(cli::ReadJobReport(*database, job));
    j = cli::JobReportJson(report);
    text = cli::FormatJobReport(report);
    plots = Take(cli::ReportPlots(*database, report));
  }
  py::list svgs;
  for (const cli::ReportPlot& plot : plots) svgs.append(py::make_tuple(plot.file, plot.svg));
  return py::make_tuple(ToPython(j), text, svgs);
}

}  // namespace

void BindDatabase(py::module_& m) {
  py::class_<RecordIterator>(m, "RecordIterator", "Records as dicts, read in one pass")
      .def("__iter__", [](RecordIterator& self) -> RecordIterator& { return self; })
      .def("__next__", &RecordIterator::Next)
      .def("__len__", &RecordIterator::Length);
  py::class_<PyDatabase>(m, "Database", R"(A tuning database (SQLite), as `fusetune db` sees it.

Database(path, create=False) opens an existing one (create=True makes the file).
Every method opens the file for its call, as each `fusetune db` command does.)")
      .def(py::init<std::string, bool>(), py::arg("path"), py::arg("create") = false)
      .def_property_readonly("path", &PyDatabase::path)
      .def("__repr__", [](const PyDatabase& d) { return "fusetune.Database('" + d.path() + "')"; })
      .def("stats", &PyDatabase::Stats, py::arg("target") = py::none(),
           "Counts of targets, workloads, records, stale records and why (`db stats --json`); "
           "target: a fingerprint, by default this machine's")
      .def(
          "best_plans",
          [](PyDatabase& d, const std::optional<std::string>& target) {
            return d.BestPlans(target, "");
          },
          py::arg("target") = py::none(),
          "Every workload's fresh best plan on the target (`db best --json`): a list of dicts")
      .def(
          "best",
          [](PyDatabase& d, const std::string& workload, const std::optional<std::string>& target) {
            return d.BestPlans(target, workload);
          },
          py::arg("workload"), py::arg("target") = py::none(),
          "One workload's fresh best plan; NotFoundError when it has none")
      .def("records", &PyDatabase::Records, py::arg("workload") = py::none(),
           py::arg("target") = py::none(), py::arg("status") = py::none(),
           py::arg("job") = py::none(), py::arg("fresh_only") = false,
           "Measured records, in id order, as dicts (plan and metrics parsed), filtered by "
           "workload key, target, status ('ok', 'wrong', 'failed', 'timeout'), job id")
      .def("jobs", &PyDatabase::Jobs, "The tuning jobs: id, state, spec, times, has_summary")
      .def(
          "merge",
          [](PyDatabase& d, const py::args& others) {
            return d.Merge(others.cast<std::vector<std::string>>());
          },
          "merge(*paths): adds the records of other databases and recomputes the best plans "
          "(`db merge`); one summary per database")
      .def("export", &PyDatabase::Export, py::arg("path"),
           "Writes every target, workload and record as JSON Lines (`db export -o`)")
      .def("import_", &PyDatabase::Import, py::arg("path"),
           "Adds the records of a JSON Lines file, duplicates skipped (`db import`)")
      .def("check", &PyDatabase::CheckIntegrity,
           "SQLite's integrity and foreign-key checks; CorruptError when they fail");
  m.def("report", &Report, py::arg("db"), py::arg("job"));
}

}  // namespace fusetune::python
