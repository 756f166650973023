// Before a wave's merge: what became of each of its shards, and what the
// merge does about it.
//
// The merge waits for its wave's array job to end however it ended
// (--dependency=afterany), so it is the step that sees a shard Slurm ended
// from outside: `scancel`, a lost node, preemption. (A shard killed by a
// signal requeues itself from its script, and Slurm requeues one whose node
// fails while it runs; neither ends, so the merge simply waits for them.)
//   - a shard killed from outside runs again, up to kMaxShardRestarts
//     times, under its own array task id, continuing from its database:
//     nothing is measured twice. The merge hands over to a new merge job
//     that waits for it, and points the step after it at the new one, so
//     the chain of afterok dependencies holds;
//   - a shard that failed by itself (a model it cannot load, a full disk)
//     fails the wave: the merge fails, naming it. Slurm cancels the steps
//     that wait for it with afterok (--kill-on-invalid-dep); a later merge,
//     which waits with afterany, still starts once its wave's shards are
//     cancelled, finds them never run and ends cancelled in turn;
//   - the merge reads Slurm's word on ended shards from `scontrol`, which
//     forgets a job MinJobAge after it ended (300 s by default): a shard
//     scancelled earlier than that before its wave ends fails the wave
//     instead (`cluster submit` again continues it). Clusters whose waves
//     run long want MinJobAge above a wave's length;
//   - a wave never run (its shards cancelled because a step before failed)
//     is not merged either: the merge ends cancelled, and so does the rest;
//   - when every shard is done, the merge merges.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/cluster_job.h"
#include "cluster/slurm.h"
#include "cluster/steps.h"

namespace fusetune::cluster {

struct WaveCheck {
  std::vector<int> done;
  std::vector<int> rerun;              // killed from outside: to run again
  std::vector<int> under_way;          // pending or running (Slurm runs them again already)
  std::vector<std::string> failures;   // "shard 2 on node1: why"
  std::vector<int> not_run;            // cancelled: a step before the wave failed
  bool ready() const {
    return rerun.empty() && under_way.empty() && failures.empty() && not_run.empty();
  }
};

// What became of wave `wave`'s shards: their status files, and Slurm's word
// on those not done. Without a scheduler (a merge run by hand, outside
// Slurm) a shard not done is a failure.
Result<WaveCheck> CheckWave(const ClusterJob& job, int wave, Scheduler* scheduler);

// Runs `check.rerun` again, submits the wave's merge anew after them and
// `check.under_way`, points the step after the wave's merge at the new
// merge, and records it in job.json and the merge's status file. Returns
// the new merge's job id.
Result<std::string> HandOverMerge(ClusterJob* job, int wave, const WaveCheck& check,
                                  Scheduler& scheduler);

// kNotRun: the wave's shards were cancelled because a step before them
// failed; the merge's status says cancelled, and it exits non-zero so that
// Slurm cancels the steps after it too.
enum class MergeOutcome { kMerged, kHandedOver, kWaveFailed, kNotRun };
struct MergeRun {
  MergeOutcome outcome = MergeOutcome::kMerged;
  nlohmann::json figures;  // kMerged: RunMergeStep's
  std::string message;     // kHandedOver: what it waits for; otherwise why it did not merge
};

// The merge step as its batch script runs it: checks the wave, then merges,
// hands over or fails the wave (writing the merge's status file each way).
Result<MergeRun> MergeWhenReady(ClusterJob* job, int wave, Scheduler* scheduler,
                                const StepCallbacks& callbacks);

}  // namespace fusetune::cluster
