// db/: the tuning database (issue 6).
//
// Map of the module: db/README.md (what it offers, one line per file).
//
// Besides measurements the database remembers compiles (issue 9): the plan a
// compile chose for a graph from its groups' records, valid while the
// database's generation (raised by every change that can change that
// choice) has not moved. Remembered plans are derived data: export leaves
// them out, vacuum drops those of older generations.
//
// Keys carry their environment: a record names its workload key, its target
// fingerprint, the fusetune version and the version of every kernel template
// its plan uses. A record whose template versions differ from this build's
// (kernel_instance.h) or that was measured on another target is never a best
// plan here; Stats() counts those as stale with the reason.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "db/record_text.h"

namespace fusetune::db {

inline constexpr int kSchemaVersion = 3;

struct TargetEntry {
  std::string fingerprint;  // TargetFingerprint::HashString()
  std::string description;  // JSON: FingerprintToJson
  std::string calibration;  // JSON: CalibrationToJson, or "{}"
};

enum class WorkloadKind { kGroup, kGraph };
const char* WorkloadKindName(WorkloadKind kind);  // "group", "graph"

struct WorkloadEntry {
  std::string key;  // WorkloadKey::ToString()
  WorkloadKind kind = WorkloadKind::kGroup;
  std::string description = "{}";  // JSON: what the workload is (template, shapes, ops)
};

// One measurement. Its status is typed; its JSON fields are kept as text so
// that bulk paths (commit, lookup, export) do not parse what they do not read.
struct Record {
  int64_t id = 0;  // set by CommitRecords
  std::string workload_key;
  std::string target;  // fingerprint hash
  std::string plan;    // plan file JSON (plan_json.h)
  RecordStatus status = RecordStatus::kOk;
  double seconds = 0;  // median time; only meaningful when ok
  // JSON as stored: encoded by measure::MetricsToText and decoded by
  // measure::MetricsFromText, nowhere else.
  std::string metrics = "{}";
  std::string error;
  int64_t job_id = 0;     // 0: not part of a job
  double created_at = 0;  // unix seconds; CommitRecords fills 0 with now
  std::string fusetune_version;
  std::map<std::string, int> kernel_versions;  // the templates the plan uses
};

struct BestPlan {
  int64_t record_id = 0;
  std::string plan;
  double seconds = 0;
};

struct JobEntry {
  int64_t id = 0;
  std::string spec = "{}";        // JSON: what was asked (model, budget, options)
  std::string state = "running";  // running, interrupted, done, failed
  std::string progress = "{}";    // JSON: what resuming needs
  double created_at = 0, updated_at = 0;
};

struct ModelEntry {
  int64_t id = 0;
  std::string name;    // e.g. "xgboost"
  std::string target;  // fingerprint hash it was trained for, or "" for any
  int feature_version = 0;
  std::string metrics = "{}";  // JSON: validation figures
  std::string blob;            // the serialized model
  bool active = false;
  double created_at = 0;
};

// A compile's result for one graph, remembered for later compiles.
struct CompiledPlanEntry {
  std::string graph_key;  // the graph's workload key
  std::string target;     // fingerprint hash
  // What else shaped the plan (compile options, build and kernel versions),
  // as text the compiler composes; entries differ by it.
  std::string context;
  int64_t generation = 0;  // Generation() when the compile began to read
  std::string plan;        // plan file JSON (plan_json.h)
  std::string decisions;   // each group's provenance, the compiler's format
  double created_at = 0;   // unix seconds; PutCompiledPlan fills 0 with now
};

struct RecordFilter {
  std::optional<std::string> workload_key, target;
  std::optional<RecordStatus> status;
  std::optional<int64_t> job_id;
  bool fresh_only = false;  // only records whose kernel versions are this build's
};

struct DbStats {
  int64_t targets = 0, group_workloads = 0, graph_workloads = 0, jobs = 0, models = 0;
  std::map<std::string, int64_t> records_by_status;  // by stored status text
  int64_t records = 0, best_entries = 0;
  std::map<std::string, int64_t> stale;                    // reason -> records
  int64_t compiled_plans = 0, compiled_plans_current = 0;  // current: of this generation
  int64_t generation = 0;
  int64_t file_bytes = 0;
  int schema_version = 0;
};

// The database's facets, one per concern. Code takes the narrowest facet it
// uses, and a test double or a new store implements only the facets it
// needs; Database combines them all (what MakeSqliteDatabase returns).

// Machines and workloads: what records name.
class TargetStore {
 public:
  virtual ~TargetStore() = default;
  virtual Status PutTarget(const TargetEntry& target) = 0;  // insert or update calibration
  virtual Result<std::optional<TargetEntry>> GetTarget(const std::string& fingerprint) = 0;
  virtual Result<std::vector<TargetEntry>> ListTargets() = 0;
};

// Measurements, and the workloads they are of.
class RecordStore {
 public:
  virtual ~RecordStore() = default;
  virtual Status PutWorkload(const WorkloadEntry& workload) = 0;  // insert if new
  virtual Result<std::optional<WorkloadEntry>> GetWorkload(const std::string& key) = 0;
  // Every workload's key, in the order they were added; of one kind only
  // when `kind` is given.
  virtual Result<std::vector<std::string>> WorkloadKeys(
      std::optional<WorkloadKind> kind = std::nullopt) = 0;

  // All records in one transaction: either every record is stored or none.
  // Their workloads and targets must exist. Identical records (same content,
  // same timestamp) are stored once. Returns the record ids in order.
  virtual Result<std::vector<int64_t>> CommitRecords(std::span<Record> records) = 0;
  // The k fastest fresh ok records of a workload on a target.
  virtual Result<std::vector<Record>> TopK(const std::string& workload_key,
                                           const std::string& target, int k) = 0;
  // Streams records in id order; `visit` returns false to stop. A stored
  // status this build does not know is an error naming the record.
  virtual Status ForEachRecord(const RecordFilter& filter,
                               const std::function<bool(const Record&)>& visit) = 0;
};

// The fastest fresh record of each workload and target, kept as records are
// committed.
class BestPlanStore {
 public:
  virtual ~BestPlanStore() = default;
  // The fastest fresh ok record of a workload on a target, or nullopt.
  virtual Result<std::optional<BestPlan>> Best(const std::string& workload_key,
                                               const std::string& target) = 0;
  // The fastest ok record of other kernel versions than this build's, when
  // it is faster than Best(): what the workload reached before its kernels
  // changed (a compiler then knows the best fresh plan is not the tuned one).
  virtual Result<std::optional<double>> FasterStaleSeconds(const std::string& workload_key,
                                                           const std::string& target) = 0;
  // Every workload's best on a target, by workload key, in one query (the
  // compiler's shape buckets need them all; exact lookups use Best()).
  virtual Result<std::map<std::string, BestPlan>> BestPlans(const std::string& target) = 0;
  // Recomputes every best plan from the fresh ok records.
  virtual Status RecomputeBest() = 0;
};

// Tuning jobs: what was asked and how far it got.
class JobStore {
 public:
  virtual ~JobStore() = default;
  virtual Result<int64_t> CreateJob(const JobEntry& job) = 0;
  virtual Status UpdateJob(int64_t id, const std::string& state, const std::string& progress) = 0;
  virtual Result<std::optional<JobEntry>> GetJob(int64_t id) = 0;
  virtual Result<std::vector<JobEntry>> ListJobs() = 0;
};

// Trained cost models, one active per name.
class ModelStore {
 public:
  virtual ~ModelStore() = default;
  virtual Result<int64_t> SaveModel(const ModelEntry& model) = 0;
  // Makes `id` the one active model of its name.
  virtual Status ActivateModel(int64_t id) = 0;
  virtual Result<std::optional<ModelEntry>> ActiveModel(const std::string& name) = 0;
  virtual Result<std::vector<ModelEntry>> ListModels() = 0;  // blobs left empty
};

// Remembered compiles, valid while the generation has not moved.
class CompiledPlanStore {
 public:
  virtual ~CompiledPlanStore() = default;
  // A counter that every change that can change a compile's choice raises:
  // records, best plans, cost models, targets. Errors on a file of schema 2
  // opened read-only (it has no counter until it is opened writable).
  virtual Result<int64_t> Generation() = 0;
  // The plan remembered for (graph, target, context) at the current
  // generation, or nullopt (none, or one of an older generation).
  virtual Result<std::optional<CompiledPlanEntry>> FindCompiledPlan(const std::string& graph_key,
                                                                    const std::string& target,
                                                                    const std::string& context) = 0;
  // Every plan remembered for `target` at the current generation (what a
  // compiler preloads while its model imports).
  virtual Result<std::vector<CompiledPlanEntry>> CompiledPlans(const std::string& target) = 0;
  // Remembers `entry` when its generation is still the current one, in place
  // of any entry of the same graph, target and context, and drops entries of
  // older generations; returns false, storing nothing, when the database
  // changed since the compile read it.
  virtual Result<bool> PutCompiledPlan(const CompiledPlanEntry& entry) = 0;
};

// The file as a whole: counts, checks, compaction.
class DatabaseAdmin {
 public:
  virtual ~DatabaseAdmin() = default;
  // `this_target`: records of other targets count as stale ("" skips that).
  virtual Result<DbStats> Stats(const std::string& this_target) = 0;
  virtual Status CheckIntegrity() = 0;
  // Drops remembered plans of older generations, then compacts the file.
  virtual Status Vacuum() = 0;
};

// Every facet of one tuning database.
class Database : public TargetStore,
                 public RecordStore,
                 public BestPlanStore,
                 public JobStore,
                 public ModelStore,
                 public CompiledPlanStore,
                 public DatabaseAdmin {
 public:
  ~Database() override = default;
};

struct OpenOptions {
  bool create = true;  // create the file when missing
  bool read_only = false;
  bool integrity_check = false;  // full check at open (slow on large files)
  // Durability of each commit: true syncs to disk (survives power loss);
  // false survives a killed process but not a power cut.
  bool sync_full = true;
  // The kernel template versions records must have to be fresh; empty means
  // this build's (KernelTemplateVersions()).
  std::map<std::string, int> kernel_versions = {};
};

// Opens or creates a SQLite tuning database at `path` (":memory:" for one in
// memory). Errors: not a database, corrupt, written by a newer schema.
Result<std::unique_ptr<Database>> MakeSqliteDatabase(const std::string& path,
                                                     const OpenOptions& options = {});

}  // namespace fusetune::db
