// What a cluster job has done: its status (per wave, per shard, the merges
// and the finishing step) from the steps' status files and, when it can be
// asked, Slurm's word on the jobs still known to it; and the job's report,
// the status with the whole-model plans the finishing step measured.
//
// A step's state combines both: the file says what the step did (done,
// failed with its error, how far it got), Slurm what became of a step that
// could not say so itself (pending and why, requeued, killed, cancelled
// because an earlier step failed). Slurm forgets finished jobs after a few
// minutes; the files stay.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cluster_job.h"
#include "cluster/slurm.h"
#include "search/tuning_job.h"

namespace fusetune::cluster {

// One model's whole-model figures from the finishing step's job.
nlohmann::json ModelPlanJson(const std::string& model, const std::string& target,
                             const search::TuningJobResult& result);

// The job's state: {"state": done|failed|running|not submitted, "message",
// "waves": [...], "finish": {...}}. `scheduler` may be null (files only).
Result<nlohmann::json> CollectStatus(const ClusterJob& job, Scheduler* scheduler);
std::string FormatStatus(const nlohmann::json& status);

// The report: the status (files only), the plans, and the job's totals
// (trials, records, wall time, the seconds of each merge and retrain).
Result<nlohmann::json> BuildReport(const ClusterJob& job, const nlohmann::json& plans);
std::string FormatReport(const nlohmann::json& report);

}  // namespace fusetune::cluster
