#include "db/jsonl.h"

#include <fmt/format.h>

#include <istream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "db/record_text.h"

namespace fusetune::db {

namespace {

constexpr size_t kBatch = 10000;

nlohmann::json RecordToJson(const Record& r) {
  return {{"type", "record"},
          {"workload", r.workload_key},
          {"target", r.target},
          {"plan", r.plan},
          {"status", StatusToText(r.status)},
          {"seconds", r.seconds},
          {"metrics", r.metrics},
          {"error", r.error},
          {"created_at", r.created_at},
          {"fusetune_version", r.fusetune_version},
          {"kernel_versions", r.kernel_versions}};
}

Result<Record> RecordFromJson(const nlohmann::json& j) {
  Record r;
  FT_ASSIGN_OR_RETURN(r.status, StatusFromText(j.at("status").get<std::string>()));
  r.workload_key = j.at("workload").get<std::string>();
  r.target = j.at("target").get<std::string>();
  r.plan = j.at("plan").get<std::string>();
  r.seconds = j.at("seconds").get<double>();
  r.metrics = j.value("metrics", "{}");
  r.error = j.value("error", "");
  r.created_at = j.at("created_at").get<double>();
  r.fusetune_version = j.value("fusetune_version", "");
  r.kernel_versions = j.value("kernel_versions", std::map<std::string, int>{});
  return r;
}

Status Flush(Database& db, std::vector<Record>& batch) {
  if (batch.empty()) return Status::Ok();
  FT_RETURN_IF_ERROR(db.CommitRecords(batch));
  batch.clear();
  return Status::Ok();
}

Result<int64_t> RecordCount(Database& db) {
  FT_ASSIGN_OR_RETURN(DbStats stats, db.Stats(""));
  return stats.records;
}

}  // namespace

Result<TransferSummary> ExportJsonl(Database& db, std::ostream& out) {
  TransferSummary s;
  FT_ASSIGN_OR_RETURN(std::vector<TargetEntry> targets, db.ListTargets());
  for (const TargetEntry& t : targets) {
    out << nlohmann::json{{"type", "target"},
                          {"fingerprint", t.fingerprint},
                          {"description", t.description},
                          {"calibration", t.calibration}}
               .dump()
        << '\n';
    ++s.targets;
  }
  FT_ASSIGN_OR_RETURN(std::vector<std::string> keys, db.WorkloadKeys());
  for (const std::string& key : keys) {
    FT_ASSIGN_OR_RETURN(std::optional<WorkloadEntry> w, db.GetWorkload(key));
    out << nlohmann::json{{"type", "workload"},
                          {"key", w->key},
                          {"kind", WorkloadKindName(w->kind)},
                          {"description", w->description}}
               .dump()
        << '\n';
    ++s.workloads;
  }
  FT_RETURN_IF_ERROR(db.ForEachRecord({}, [&](const Record& r) {
    out << RecordToJson(r).dump() << '\n';
    ++s.records_read;
    return true;
  }));
  if (!out) return Error(ErrorCode::kIo, "export: the output could not be written");
  return s;
}

Result<TransferSummary> ImportJsonl(Database& db, std::istream& in, const std::string& origin) {
  TransferSummary s;
  FT_ASSIGN_OR_RETURN(const int64_t before, RecordCount(db));
  std::vector<Record> batch;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", origin, number);
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      const std::string type = j.at("type").get<std::string>();
      if (type == "record") {
        auto record = RecordFromJson(j);
        if (!record.ok()) return record.error().WithContext(where);
        batch.push_back(std::move(*record));
        ++s.records_read;
        if (batch.size() >= kBatch) FT_RETURN_IF_ERROR(Flush(db, batch));
        continue;
      }
      FT_RETURN_IF_ERROR(Flush(db, batch));  // keep the file's order
      if (type == "target") {
        FT_RETURN_IF_ERROR(
            db.PutTarget({j.at("fingerprint").get<std::string>(), j.value("description", "{}"),
                          j.value("calibration", "{}")}));
        ++s.targets;
      } else if (type == "workload") {
        const std::string kind = j.at("kind").get<std::string>();
        if (kind != "group" && kind != "graph")
          return Error(ErrorCode::kParse,
                       fmt::format("{}: unknown workload kind '{}'", where, kind));
        FT_RETURN_IF_ERROR(
            db.PutWorkload({j.at("key").get<std::string>(),
                            kind == "graph" ? WorkloadKind::kGraph : WorkloadKind::kGroup,
                            j.value("description", "{}")}));
        ++s.workloads;
      } else {
        return Error(ErrorCode::kParse, fmt::format("{}: unknown line type '{}'", where, type));
      }
    } catch (const nlohmann::json::exception& e) {
      return Error(ErrorCode::kParse, fmt::format("{}: {}", where, e.what()));
    }
  }
  FT_RETURN_IF_ERROR(Flush(db, batch));
  FT_ASSIGN_OR_RETURN(const int64_t after, RecordCount(db));
  s.records_added = after - before;
  return s;
}

Result<TransferSummary> MergeDatabase(Database& into, Database& from) {
  TransferSummary s;
  FT_ASSIGN_OR_RETURN(std::vector<TargetEntry> targets, from.ListTargets());
  for (const TargetEntry& t : targets) {
    FT_RETURN_IF_ERROR(into.PutTarget(t));
    ++s.targets;
  }
  FT_ASSIGN_OR_RETURN(std::vector<std::string> keys, from.WorkloadKeys());
  for (const std::string& key : keys) {
    FT_ASSIGN_OR_RETURN(std::optional<WorkloadEntry> w, from.GetWorkload(key));
    FT_RETURN_IF_ERROR(into.PutWorkload(*w));
    ++s.workloads;
  }
  FT_ASSIGN_OR_RETURN(const int64_t before, RecordCount(into));
  std::vector<Record> batch;
  Status status = Status::Ok();
  FT_RETURN_IF_ERROR(from.ForEachRecord({}, [&](const Record& r) {
    batch.push_back(r);
    batch.back().id = 0;
    batch.back().job_id = 0;  // jobs belong to the database that ran them
    ++s.records_read;
    if (batch.size() >= kBatch) status = Flush(into, batch);
    return status.ok();
  }));
  FT_RETURN_IF_ERROR(status);
  FT_RETURN_IF_ERROR(Flush(into, batch));
  FT_RETURN_IF_ERROR(into.RecomputeBest());
  FT_ASSIGN_OR_RETURN(const int64_t after, RecordCount(into));
  s.records_added = after - before;
  return s;
}

}  // namespace fusetune::db
