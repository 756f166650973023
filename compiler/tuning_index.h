// What a tuning database knows for one target, read as a compile asks for
// it and kept for the compiler's life: the best plan of each workload asked
// (one indexed query each), the active cost model with its validation
// figures (loaded on the first group that needs it), and, built on the first
// miss, the shape buckets: tuned group workloads by structure key
// (graph/workload_key.h), so a group at a sequence length never tuned finds
// the nearest tuned one. A compile whose groups are all tuned thus reads a
// few rows, not the whole database (issue 9's 1 ms budget); it does not even
// read the target's calibration, which only predictions need. A compiler
// opened before its model's import may instead read every best plan on a
// second thread while the model imports (PreloadInBackground): after the
// import the compile then runs no query, with SQLite's code cold.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "cost_model/cost_model.h"
#include "db/database.h"
#include "fusion_space/tiling_space.h"
#include "target/target.h"

namespace fusetune::compiler {

struct BucketMatch {
  std::string key;  // the tuned workload
  const db::BestPlan* best = nullptr;
  std::vector<int64_t> signature;  // its ShapeSignature
  double distance = 0;             // sum of |log2| dimension ratios to the asked shape
  // A whole model's: each plan position's place in the structure order
  // (search::GraphWorkload); empty when its tuning job did not store it.
  std::vector<int32_t> structure_positions;
};

class TuningIndex {
 public:
  // An index of `target`'s plans in `database`, which must outlive it; the
  // target features come from the calibration stored under `target`, read
  // on the first call to features(), measured under `caches`.
  static Result<std::unique_ptr<TuningIndex>> Load(db::Database& database,
                                                   const std::string& target,
                                                   target::CacheProtocol caches);
  // No database: every group falls back to its default.
  static std::unique_ptr<TuningIndex> Empty(cost_model::TargetFeatures features);

  // The best fresh plan of `workload_key`, or null when none is stored.
  Result<const db::BestPlan*> Exact(const std::string& workload_key);
  // A stale record's time when one beat Exact()'s plan (kernels changed since
  // the workload was tuned); one query per key.
  Result<std::optional<double>> FasterStale(const std::string& workload_key);
  // The k fastest fresh records of `workload_key` (none without a database):
  // what `--explain` compares a choice with.
  Result<std::vector<db::Record>> TopRecords(const std::string& workload_key, int k);
  // For a key whose Exact() found a plan: its tiling when it is a one-group
  // plan, read once per key; nullopt for any other key.
  const std::optional<fusion_space::Tiling>& BestTiling(const std::string& workload_key);
  // The tuned group workload of `structure_key` whose signature is nearest
  // to `signature` (same length), other than `exclude`.
  Result<std::optional<BucketMatch>> Nearest(const std::string& structure_key,
                                             const std::vector<int64_t>& signature,
                                             const std::string& exclude);
  // The same for whole models: the tuned graph of `structure_key` (the
  // model at other sizes of its symbolic dimensions) nearest `signature`,
  // other than `exclude`, among those whose tuning job stored its structure
  // and signature (search/tuning_job.cpp, since shape buckets move whole plans).
  Result<std::optional<BucketMatch>> NearestModel(const std::string& structure_key,
                                                  const std::vector<int64_t>& signature,
                                                  const std::string& exclude);

  // The database's generation when the index was loaded (db::Database::
  // Generation), read before any lookup; nullopt for a file without one or
  // no database. A plan chosen from this index is remembered under it.
  const std::optional<int64_t>& generation() const { return generation_; }
  // The compile remembered for `graph_key` under `context` at the
  // database's current generation, or nullopt: from the preload when it read
  // one at generation(), else asked of the database.
  Result<std::optional<db::CompiledPlanEntry>> Remembered(const std::string& graph_key,
                                                          const std::string& context);

  // The active trained model (loaded on the first call), or null when the
  // database holds none of this feature version.
  Result<const cost_model::CostModel*> model();
  // "xgboost/<form> (#id)", "none", or "not consulted" before model().
  const std::string& model_label() const { return model_label_; }
  // Its validation top-1 score (best measured over the measured time of its
  // predicted best): 1/top1 - 1 is the loss expected from trusting it.
  std::optional<double> model_top1() const { return model_top1_; }
  // What predictions need of the machine (cost_model/features.h): read from
  // the database once, on the first call; the defaults when the target has
  // no stored calibration, or it cannot be read (then read_status() fails).
  const cost_model::TargetFeatures& features();
  // The error of a read features() could not return (a damaged database):
  // CompileGraph fails with it rather than compile on default figures.
  Status read_status() const {
    if (read_error_) return *read_error_;
    return Status::Ok();
  }
  const std::string& target() const { return target_; }
  // Best plans read so far.
  size_t size() const { return bests_.size(); }

  // Reads every best plan of the target (and the compiles remembered for
  // it) on a second thread, over a
  // read-only connection of its own to the database file at `path`: opened
  // before a model is imported (`fusetune compile`, Compiler), the read
  // overlaps the import. Lookups take its result once it is ready and ask
  // the database key by key until then; a failed read is dropped (the
  // lookups stay key by key). Without a thread to run it, or for a file
  // over kPreloadMaxFileBytes, nothing happens.
  // Once taken, the index answers from what the preload read: records a
  // tuner commits later are seen by the next compiler, as before for keys
  // already asked.
  void PreloadInBackground(const std::string& path);
  // Waits for a preload started above and takes its result.
  void WaitForPreload();
  // Larger database files are not preloaded (see PreloadInBackground).
  static constexpr uintmax_t kPreloadMaxFileBytes = uintmax_t{512} << 20;

 private:
  struct TunedShape {
    std::string key;
    std::vector<int64_t> signature;
    std::vector<int32_t> structure_positions;  // see BucketMatch
  };
  using Buckets = std::map<std::string, std::vector<TunedShape>>;  // by structure key
  Status BuildBuckets();
  std::optional<BucketMatch> NearestIn(const Buckets& buckets, const std::string& structure_key,
                                       const std::vector<int64_t>& signature,
                                       const std::string& exclude) const;
  // Takes the preload's plans when it has finished (never waits unless
  // `wait`); the preload's error when it could not read the file.
  Status AdoptPreload(bool wait = false);
  // Every best plan of the target, `all` (keys without a plan absent), into
  // bests_: from then on a key not there has none.
  void TakeAllBests(std::map<std::string, std::optional<db::BestPlan>> all);
  static std::map<std::string, std::optional<db::BestPlan>> AllBests(
      std::map<std::string, db::BestPlan> bests);
  // (structure key, shape) of a workload from its stored description.
  static std::optional<std::pair<std::string, TunedShape>> ReadTunedShape(
      const std::string& key, const std::string& description);
  const db::BestPlan* Cached(const std::string& workload_key) const;

  db::Database* database_ = nullptr;
  std::string target_;
  std::optional<int64_t> generation_;
  target::CacheProtocol caches_ = target::CacheProtocol::kFlushed;
  std::optional<cost_model::TargetFeatures> features_;        // read on first use
  std::optional<Error> read_error_;                           // a read features() could not return
  std::map<std::string, std::optional<db::BestPlan>> bests_;  // nullopt: none stored
  std::map<std::string, std::optional<double>> faster_stale_;
  bool all_bests_ = false;  // every key is in bests_
  // What a preload read: every best plan of the target, and the faster
  // stale record of each whole model among them (FasterStale's answer).
  struct Preloaded {
    std::map<std::string, std::optional<db::BestPlan>> bests;
    std::map<std::string, std::optional<double>> faster_stale;
    std::vector<db::CompiledPlanEntry> remembered;  // the target's, at the generation then
  };
  static Result<Preloaded> Preload(const std::string& path, const std::string& target);
  std::future<Result<Preloaded>> preload_;
  std::optional<Error> preload_error_;             // the file could not be read
  std::vector<db::CompiledPlanEntry> remembered_;  // preloaded
  std::map<std::string, std::optional<fusion_space::Tiling>> best_tilings_;
  std::unique_ptr<cost_model::CostModel> model_;
  bool model_loaded_ = false;
  std::string model_label_ = "not consulted";
  std::optional<double> model_top1_;
  std::optional<Buckets> buckets_;  // tuned group workloads
  Buckets model_buckets_;           // tuned whole models, filled with buckets_
};

}  // namespace fusetune::compiler
