// Submitting a cluster job: the batch scripts of its steps, written into
// the job's folder, then submitted as a chain:
//
//   wave 1 (array of N shards) -> merge 1 -> wave 2 -> merge 2 -> ... -> finish
//
// A merge waits for its wave's array to end however it ended
// (`--dependency=afterany`): it runs again the shards Slurm ended from
// outside (scancel, a node lost) and fails the wave for those that failed
// (wave_gate.h). Every other link is `--dependency=afterok` with
// `--kill-on-invalid-dep=yes`, so a failed step cancels the rest instead of
// leaving it pending forever. Shards are `--requeue` (Slurm reruns them
// after a node failure) and a shard killed by a signal requeues itself; a
// rerun shard continues from its database (search/shard_job.h).
//
// Submitting again on the same database continues the job: the waves
// already merged are not run again, a wave cut short reruns with its shards
// continuing from their databases (measuring nothing twice), and a job whose
// steps are still queued or running is refused. The flags that shape the
// plan (models, nodes, waves, budget, seed, caches, precision) must be the
// same (a budget derived from --time stays the job's); the Slurm options
// and times may change.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_job.h"
#include "cluster/slurm.h"

namespace fusetune::cluster {

struct SubmitOutcome {
  ClusterJob job;
  int first_wave = 1;        // the first wave this submission runs
  bool continued = false;    // the database had this job already
  bool nothing_to_do = false;  // every step is done
  std::optional<Submission> submitted;  // none with --dry-run
  std::string submit_script;  // submit.sh: the same chain, for submitting by hand
};

// `scheduler` null: --dry-run (scripts only).
Result<SubmitOutcome> SubmitJob(const ClusterSpec& spec, Scheduler* scheduler);

// Stops the job: scancels its latest submission's steps, the finishing
// step and the merges before the shards' arrays, so that no merge starts
// (and runs cancelled shards again) while the rest is being cancelled, and
// waits until Slurm has ended them all.
// Returns the ids cancelled, and marks the submission cancelled in job.json
// (`status` says so). Status files and databases stay: `cluster submit`
// again continues the job.
Result<std::vector<std::string>> CancelJob(ClusterJob* job, Scheduler& scheduler);

// The group trials a job of `spec.seconds` can spend, when only a time is
// given: every shard of every wave measuring for its share at a
// conservative rate (a shard also stops itself at its time).
int64_t TrialsForTime(const ClusterSpec& spec);

}  // namespace fusetune::cluster
