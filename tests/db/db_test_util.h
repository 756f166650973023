// Records and databases for the db/ tests and their helper process.
#pragma once

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "db/database.h"
#include "fusion_space/kernel_instance.h"

namespace fusetune::db::testing {

inline constexpr const char* kTarget = "00000000000000aa";

// The database file of test `name` in this process (its WAL and
// shared-memory files are that path with "-wal" and "-shm").
inline std::string DbPathOf(std::string name) {
  std::replace(name.begin(), name.end(), '/', '_');
  const auto dir = std::filesystem::temp_directory_path() / "fusetune_db_test";
  return (dir / (name + "_" + std::to_string(::getpid()) + ".db")).string();
}
inline void RemoveDbFiles(const std::string& path) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix, ignored);
}

// A database path in the temporary folder, unique to this process, with no
// file (nor WAL or shared-memory file) left from an earlier run. The files
// are removed when the process exits normally (by the process that asked:
// a forked child's exit leaves them to its parent).
inline std::string FreshDbPath(const std::string& name) {
  static const pid_t owner = ::getpid();
  static std::vector<std::string>* const handed_out = [] {
    std::atexit([] {
      if (::getpid() != owner) return;
      for (const std::string& p : *handed_out) RemoveDbFiles(p);
    });
    return new std::vector<std::string>;
  }();
  const std::string path = DbPathOf(name);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  RemoveDbFiles(path);
  handed_out->push_back(path);
  return path;
}

inline std::string WorkloadKeyFor(int i) { return fmt::format("{:016x}", 0x1000 + i); }

// Targets and `workloads` workloads.
inline Status Populate(Database& db, int workloads) {
  FT_RETURN_IF_ERROR(db.PutTarget({kTarget, R"({"cpu_model":"test"})", "{}"}));
  for (int i = 0; i < workloads; ++i)
    FT_RETURN_IF_ERROR(db.PutWorkload({WorkloadKeyFor(i), WorkloadKind::kGroup, "{}"}));
  return Status::Ok();
}

// A record of workload `w`, distinct for each `serial`.
inline Record MakeRecord(int w, int64_t serial, double seconds,
                         RecordStatus status = RecordStatus::kOk) {
  Record r;
  r.workload_key = WorkloadKeyFor(w);
  r.target = kTarget;
  r.plan = fmt::format(R"({{"groups":[{{"nodes":[0],"tiling":{{"tile":{}}}}}]}})", serial % 4096);
  r.status = status;
  r.seconds = seconds;
  r.metrics = fmt::format(R"({{"time":{{"median":{}}}}})", seconds);
  r.created_at = 1.7e9 + static_cast<double>(serial);
  r.fusetune_version = "0.1.0";
  // This build's versions: a database opened with the defaults holds them fresh.
  const auto versions = fusion_space::KernelTemplateVersions();
  r.kernel_versions = {{"gemm", versions.at("gemm")}, {"rowwise", versions.at("rowwise")}};
  return r;
}

}  // namespace fusetune::db::testing
