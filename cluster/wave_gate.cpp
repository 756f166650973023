#include "cluster/wave_gate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <map>
#include <thread>

namespace fusetune::cluster {

namespace {

std::string TaskId(const std::string& array, int shard) {
  return fmt::format("{}_{}", array, shard);
}

// Why a shard that is not done cannot run again.
std::string FailureOf(int shard, const std::optional<StepStatus>& file, const std::string& why) {
  const std::string node = file && !file->node.empty() ? " on " + file->node : "";
  const std::string own = file && !file->error.empty() ? ": " + file->error : "";
  return fmt::format("shard {}{}{}{}", shard, node, own, why.empty() ? "" : " (" + why + ")");
}

// Sorts one shard that is not done into `check`.
void Classify(int shard, const std::optional<StepStatus>& file, const SlurmJobState* slurm,
              WaveCheck* check) {
  if (slurm == nullptr) {
    check->failures.push_back(FailureOf(shard, file, "Slurm no longer knows its job"));
  } else if (slurm->never_runs()) {
    check->not_run.push_back(shard);
  } else if (!slurm->ended()) {
    check->under_way.push_back(shard);
  } else if (slurm->runs_again_by_its_merge()) {
    check->rerun.push_back(shard);
  } else if (slurm->killed_from_outside()) {
    check->failures.push_back(FailureOf(shard, file,
                                        fmt::format("Slurm ended it {} times: {}",
                                                    slurm->restarts + 1, slurm->state_text)));
  } else {
    check->failures.push_back(
        FailureOf(shard, file, fmt::format("Slurm: {} {}", slurm->state_text, slurm->reason)));
  }
}

Status WriteMergeStatus(const ClusterJob& job, int wave, StepState state, const std::string& error,
                        nlohmann::json progress) {
  StepStatus status = StartedStep();
  status.state = state;
  status.error = error;
  status.progress = std::move(progress);
  if (state != StepState::kPending) status.ended_at = UnixNow();
  return WriteStep(JobPaths(job.spec.db).merge_status(wave), status);
}

std::string Shards(const std::vector<int>& shards) {
  return fmt::format("{}", fmt::join(shards, ", "));
}

// A slurmctld busy for a moment must not fail the whole chain: asked again
// after 2 and 4 s.
Result<std::vector<SlurmJobState>> QueryWithRetries(Scheduler& scheduler, const std::string& id) {
  auto states = scheduler.Query({id});
  for (int wait_s = 2; !states.ok() && wait_s <= 4; wait_s *= 2) {
    std::this_thread::sleep_for(std::chrono::seconds(wait_s));
    states = scheduler.Query({id});
  }
  return states;
}

// What a merge that hands over says it waits for.
std::string HandOverMessage(int wave, const WaveCheck& check, const std::string& merge) {
  std::vector<std::string> parts;
  if (!check.rerun.empty())
    parts.push_back(fmt::format("running again shard(s) {}, which Slurm ended from outside",
                                Shards(check.rerun)));
  if (!check.under_way.empty())
    parts.push_back(fmt::format("shard(s) {} still under way", Shards(check.under_way)));
  return fmt::format("wave {}: {}; its merge runs as job {} once they end", wave,
                     fmt::join(parts, "; "), merge);
}

}  // namespace

Result<WaveCheck> CheckWave(const ClusterJob& job, int wave, Scheduler* scheduler) {
  const JobPaths paths(job.spec.db);
  const std::string array = LatestStepIds(job).array_of(wave);
  std::map<std::string, SlurmJobState> slurm;
  if (scheduler != nullptr && !array.empty()) {
    FT_ASSIGN_OR_RETURN(auto states, QueryWithRetries(*scheduler, array));
    for (SlurmJobState& s : states) slurm[s.id] = std::move(s);
  }
  WaveCheck check;
  for (int i = 1; i <= job.spec.nodes; ++i) {
    FT_ASSIGN_OR_RETURN(auto file, ReadStep(paths.shard_status(wave, i)));
    if (file && file->state == StepState::kDone) {
      check.done.push_back(i);
      continue;
    }
    if (scheduler == nullptr || array.empty()) {
      std::string why = file ? "it has not finished" : "it has not started";
      if (scheduler != nullptr)  // submitted by hand (submit.sh): its ids are not recorded
        why += "; job.json has no Slurm ids for the wave, so the merge cannot run it again";
      check.failures.push_back(FailureOf(i, file, why));
      continue;
    }
    auto it = slurm.find(TaskId(array, i));
    Classify(i, file, it == slurm.end() ? nullptr : &it->second, &check);
  }
  return check;
}

Result<std::string> HandOverMerge(ClusterJob* job, int wave, const WaveCheck& check,
                                  Scheduler& scheduler) {
  const StepIds ids = LatestStepIds(*job);
  const std::string array = ids.array_of(wave);
  const std::string next = wave < job->spec.waves ? ids.array_of(wave + 1) : ids.finish;
  if (array.empty() || next.empty())
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("job.json has no Slurm ids for wave {} and the step after it", wave));
  std::vector<std::string> rerun, wait_for;
  for (int i : check.rerun) rerun.push_back(TaskId(array, i));
  for (int i : check.under_way) wait_for.push_back(TaskId(array, i));
  wait_for.insert(wait_for.end(), rerun.begin(), rerun.end());
  // In this order, so that a failure before the last call leaves the chain
  // as it was (this merge fails, Slurm cancels the rest, `cluster submit`
  // continues the job) with nothing of the hand-over left running; once
  // the next step waits for the new merge, the hand-over has happened.
  FT_RETURN_IF_ERROR(scheduler.Requeue(rerun));
  const ClusterJob before = *job;
  const auto undo = [&](const Error& error, const std::string& what) -> Error {
    (void)scheduler.Cancel(rerun);
    *job = before;
    (void)SaveJob(before);
    return error.WithContext(fmt::format("{} (wave {}'s merge handing over)", what, wave));
  };
  auto merge = scheduler.Submit(JobPaths(job->spec.db).merge_script(wave),
                                Dependency{After::kAny, wait_for});
  if (!merge.ok()) return undo(merge.error(), "submitting the new merge");
  Status recorded = SetMergeJob(job, wave, *merge);
  if (recorded.ok()) recorded = SaveJob(*job);
  if (!recorded.ok()) {
    (void)scheduler.Cancel({*merge});
    return undo(recorded.error(), "recording the new merge in job.json");
  }
  if (Status pointed = scheduler.SetDependency(next, Dependency{After::kOk, {*merge}});
      !pointed.ok()) {
    (void)scheduler.Cancel({*merge});
    return undo(pointed.error(), fmt::format("pointing step {} at the new merge", next));
  }
  nlohmann::json waiting{{"rerun", check.rerun}, {"under_way", check.under_way},
                         {"merge_job", *merge}};
  // Only what `status` shows: the hand-over stands without it.
  (void)WriteMergeStatus(*job, wave, StepState::kPending, "", {{"waiting", waiting}});
  return *merge;
}

Result<MergeRun> MergeWhenReady(ClusterJob* job, int wave, Scheduler* scheduler,
                                const StepCallbacks& callbacks) {
  if (wave < 1 || wave > job->spec.waves)
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("wave {}: the job has {} waves", wave, job->spec.waves));
  FT_ASSIGN_OR_RETURN(WaveCheck check, CheckWave(*job, wave, scheduler));
  MergeRun run;
  if (!check.failures.empty()) {
    run.outcome = MergeOutcome::kWaveFailed;
    run.message = fmt::format("wave {} failed: {}", wave, fmt::join(check.failures, "; "));
    FT_RETURN_IF_ERROR(WriteMergeStatus(*job, wave, StepState::kFailed, run.message, {}));
    return run;
  }
  if (!check.not_run.empty()) {
    run.outcome = MergeOutcome::kNotRun;
    run.message = fmt::format("wave {} did not run: a step it depends on failed", wave);
    FT_RETURN_IF_ERROR(WriteMergeStatus(*job, wave, StepState::kCancelled,
                                        "not run: a step it depends on failed", {}));
    return run;
  }
  if (!check.ready()) {
    FT_ASSIGN_OR_RETURN(std::string merge, HandOverMerge(job, wave, check, *scheduler));
    run.outcome = MergeOutcome::kHandedOver;
    run.message = HandOverMessage(wave, check, merge);
    return run;
  }
  FT_ASSIGN_OR_RETURN(run.figures, RunMergeStep(*job, wave, callbacks));
  return run;
}

}  // namespace fusetune::cluster
