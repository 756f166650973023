#include "cluster/submit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <filesystem>

#include "db/database.h"

namespace fusetune::cluster {

namespace {

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The flags that shape the shard plan must match for a job to continue.
Status SamePlan(const ClusterSpec& had, const ClusterSpec& asked) {
  const auto differs = [](const char* what, const std::string& a, const std::string& b) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("the database's cluster job has {} {}, not {}: give the same flags "
                             "to continue it, or use another --db for a new job",
                             what, a, b));
  };
  if (had.models != asked.models)
    return differs("models", fmt::format("{}", fmt::join(had.models, " ")),
                   fmt::format("{}", fmt::join(asked.models, " ")));
  if (had.nodes != asked.nodes)
    return differs("--nodes", std::to_string(had.nodes), std::to_string(asked.nodes));
  if (had.waves != asked.waves)
    return differs("--waves", std::to_string(had.waves), std::to_string(asked.waves));
  if (had.trials != asked.trials && !asked.trials_from_time)
    return differs("a budget of trials", std::to_string(had.trials), std::to_string(asked.trials));
  if (had.threads != asked.threads)
    return differs("--threads", std::to_string(had.threads), std::to_string(asked.threads));
  if (had.seed != asked.seed)
    return differs("--seed", std::to_string(had.seed), std::to_string(asked.seed));
  if (had.caches != asked.caches || had.precision != asked.precision)
    return differs("caches/precision",
                   fmt::format("{}/{}", target::CacheProtocolName(had.caches),
                               had.precision.ToString()),
                   fmt::format("{}/{}", target::CacheProtocolName(asked.caches),
                               asked.precision.ToString()));
  return Status::Ok();
}

Status RefuseWhileRunning(const ClusterJob& job, Scheduler* scheduler) {
  if (scheduler == nullptr || job.submissions.empty()) return Status::Ok();
  const Submission& last = job.submissions.back();
  std::vector<std::string> ids = last.wave_jobs;
  ids.insert(ids.end(), last.merge_jobs.begin(), last.merge_jobs.end());
  ids.push_back(last.finish_job);
  FT_ASSIGN_OR_RETURN(auto states, scheduler->Query(ids));
  std::vector<std::string> live, never;
  for (const SlurmJobState& s : states) {
    if (s.ended()) continue;
    // A step left pending after one before it failed (a Slurm that keeps
    // such jobs) never runs: cancelled, not waited for.
    if (s.never_runs())
      never.push_back(s.id);
    else
      live.push_back(fmt::format("{} {}", s.id, s.state_text));
  }
  if (live.empty()) {
    Status cancelled = scheduler->Cancel(never);
    return cancelled.ok() ? cancelled
                          : cancelled.error().WithContext(
                                "cancelling the last submission's steps that can never run");
  }
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("the job is still queued or running ({}): `fusetune cluster status` "
                           "shows its progress; scancel its jobs to stop it",
                           fmt::join(live, ", ")));
}

// The first wave whose merge has not finished (waves + 1 when all have).
Result<int> FirstUnmergedWave(const ClusterJob& job) {
  const JobPaths paths(job.spec.db);
  for (int w = 1; w <= job.spec.waves; ++w) {
    FT_ASSIGN_OR_RETURN(auto merge, ReadStep(paths.merge_status(w)));
    if (!merge || merge->state != StepState::kDone) return w;
  }
  return job.spec.waves + 1;
}

std::string Step(const ClusterSpec& spec, const std::string& args) {
  return fmt::format("exec {} cluster {} --db {}", Quote(spec.fusetune), args, Quote(spec.db));
}

// A shard killed by a signal (kill -9, the OOM killer) asks Slurm to run it
// again, up to kMaxShardRestarts times; it continues from its database.
// Slurm's own --requeue covers a node that fails. A shard scancelled has
// ended before its script could do anything: the wave's merge runs it again
// (wave_gate.h).
std::vector<std::string> ShardCommands(const ClusterSpec& spec, int wave) {
  return {
      fmt::format("{} cluster shard --db {} --wave {} --shard \"$SLURM_ARRAY_TASK_ID\"",
                  Quote(spec.fusetune), Quote(spec.db), wave),
      "rc=$?",
      fmt::format("if [ \"$rc\" -gt 128 ] && [ \"${{SLURM_RESTART_COUNT:-0}}\" -lt {} ]; then",
                  kMaxShardRestarts),
      "  echo \"fusetune: shard killed by signal $((rc - 128)); requeueing it "
      "(restart $((${SLURM_RESTART_COUNT:-0} + 1)))\"",
      "  scontrol requeue \"$SLURM_JOB_ID\" && exit 0",
      "fi",
      "exit \"$rc\""};
}

Status WriteScript(const std::string& path, const BatchScript& script, const SlurmOptions& slurm) {
  FT_RETURN_IF_ERROR(WriteFileAtomically(path, ScriptText(script, slurm)));
  if (chmod(path.c_str(), 0755) != 0)
    return Error(ErrorCode::kIo, fmt::format("cannot make {} executable", path));
  return Status::Ok();
}

Status WriteScripts(const ClusterJob& job, int first_wave) {
  const ClusterSpec& spec = job.spec;
  const JobPaths paths(spec.db);
  for (int w = first_wave; w <= spec.waves; ++w) {
    BatchScript shard;
    shard.name = fmt::format("fusetune-wave{}", w);
    shard.array_size = spec.nodes;
    shard.seconds = spec.shard_seconds;
    shard.requeue = true;
    shard.exclusive = true;
    shard.output = fmt::format("{}/wave-{}-shard-%a.log", paths.logs(), w);
    shard.commands = ShardCommands(spec, w);
    FT_RETURN_IF_ERROR(WriteScript(paths.wave_script(w), shard, spec.slurm));
    BatchScript merge;
    merge.name = fmt::format("fusetune-merge{}", w);
    merge.seconds = spec.merge_seconds;
    merge.output = fmt::format("{}/merge-{}.log", paths.logs(), w);
    merge.commands = {Step(spec, fmt::format("merge --wave {}", w))};
    FT_RETURN_IF_ERROR(WriteScript(paths.merge_script(w), merge, spec.slurm));
  }
  BatchScript finish;
  finish.name = "fusetune-finish";
  finish.seconds = spec.finish_seconds;
  finish.exclusive = true;
  finish.output = paths.logs() + "/finish.log";
  finish.commands = {Step(spec, "finish")};
  return WriteScript(paths.finish_script(), finish, spec.slurm);
}

// What each step waits for: a wave's merge for every shard of the wave to
// end, however (it runs again those killed from outside, and fails the wave
// for those that failed); every other step for the one before it to succeed.
After AfterOf(bool is_merge) { return is_merge ? After::kAny : After::kOk; }

// submit.sh: the chain, for people who submit by hand (--dry-run). Its ids
// are not recorded in job.json, so its merges cannot run killed shards again
// (wave_gate.h); `cluster submit` does.
std::string SubmitScript(const ClusterJob& job, int first_wave) {
  const JobPaths paths(job.spec.db);
  std::string s =
      "#!/bin/bash\n# Submits the cluster job's steps as a chain (what `fusetune cluster submit` "
      "does).\nset -euo pipefail\nlast=\n";
  const auto submit = [&](const std::string& var, const std::string& script, bool is_merge) {
    s += fmt::format("dep=(); [ -n \"$last\" ] && dep=(--dependency={} --kill-on-invalid-dep=yes)\n",
                     DependencyText({AfterOf(is_merge), {"$last"}}));
    // ${dep[@]+...}: an empty array under set -u on bash before 4.4 too.
    s += fmt::format("{}=$(sbatch --parsable ${{dep[@]+\"${{dep[@]}}\"}} {})\n", var, Quote(script));
    s += fmt::format("last=${{{}%%;*}}\n", var);
    s += fmt::format("echo {} \"$last\"\n", Quote(script));
  };
  for (int w = first_wave; w <= job.spec.waves; ++w) {
    submit(fmt::format("wave{}", w), paths.wave_script(w), false);
    submit(fmt::format("merge{}", w), paths.merge_script(w), true);
  }
  submit("finish", paths.finish_script(), false);
  return s;
}

// The status files of the steps a submission runs again, unless done: the
// status of a step that failed before must not stand for its rerun.
Status ClearUnfinishedSteps(const ClusterJob& job, int first_wave) {
  const JobPaths paths(job.spec.db);
  std::vector<std::string> files{paths.finish_status()};
  for (int w = first_wave; w <= job.spec.waves; ++w) {
    files.push_back(paths.merge_status(w));
    for (int i = 1; i <= job.spec.nodes; ++i) files.push_back(paths.shard_status(w, i));
  }
  for (const std::string& f : files) {
    FT_ASSIGN_OR_RETURN(auto step, ReadStep(f));
    std::error_code ec;
    if (step && step->state != StepState::kDone) std::filesystem::remove(f, ec);
  }
  return Status::Ok();
}

Result<Submission> SubmitChain(const ClusterJob& job, int first_wave, Scheduler& scheduler) {
  const JobPaths paths(job.spec.db);
  Submission sub;
  sub.first_wave = first_wave;
  sub.submitted_at = UnixNow();
  std::string last;
  std::vector<std::string> all;
  const auto submit = [&](const std::string& script, bool is_merge) -> Result<std::string> {
    Dependency after{AfterOf(is_merge), {}};
    if (!last.empty()) after.jobs = {last};
    auto id = scheduler.Submit(script, after);
    if (!id.ok()) {
      (void)scheduler.Cancel(all);  // no half chain left behind
      return id.error();
    }
    all.push_back(*id);
    last = *id;
    return *id;
  };
  for (int w = first_wave; w <= job.spec.waves; ++w) {
    FT_ASSIGN_OR_RETURN(std::string wave, submit(paths.wave_script(w), false));
    sub.wave_jobs.push_back(wave);
    FT_ASSIGN_OR_RETURN(std::string merge, submit(paths.merge_script(w), true));
    sub.merge_jobs.push_back(merge);
  }
  FT_ASSIGN_OR_RETURN(sub.finish_job, submit(paths.finish_script(), false));
  return sub;
}

}  // namespace

namespace {

// Until Slurm has ended every job of `ids` (a cancelled job is COMPLETING
// while its processes are killed): the job is stopped when `cancel` returns,
// and `submit` again is not refused.
Status WaitUntilEnded(const std::vector<std::string>& ids, Scheduler& scheduler) {
  constexpr int kWaitSeconds = 120;
  std::vector<std::string> live;
  for (int waited = 0; waited <= kWaitSeconds; ++waited) {
    FT_ASSIGN_OR_RETURN(auto states, scheduler.Query(ids));
    live.clear();
    for (const SlurmJobState& s : states)
      if (!s.ended() && !s.never_runs()) live.push_back(s.id + " " + s.state_text);
    if (live.empty()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return Error(ErrorCode::kIo, fmt::format("cancelled, but after {} s Slurm still has {}",
                                           kWaitSeconds, fmt::join(live, ", ")));
}

}  // namespace

Result<std::vector<std::string>> CancelJob(ClusterJob* job, Scheduler& scheduler) {
  if (job->submissions.empty())
    return Error(ErrorCode::kInvalidArgument,
                 "the job was never submitted (--dry-run): nothing to cancel");
  const StepIds ids = LatestStepIds(*job);
  std::vector<std::string> order;
  if (!ids.finish.empty()) order.push_back(ids.finish);
  for (auto it = ids.merge.rbegin(); it != ids.merge.rend(); ++it) order.push_back(it->second);
  for (auto it = ids.wave_array.rbegin(); it != ids.wave_array.rend(); ++it)
    order.push_back(it->second);
  // One scancel each, in order: one call would cancel them in Slurm's order.
  for (const std::string& id : order) {
    Status cancelled = scheduler.Cancel({id});
    if (!cancelled.ok()) return cancelled.error().WithContext("cancelling job " + id);
  }
  FT_RETURN_IF_ERROR(WaitUntilEnded(order, scheduler));
  job->submissions.back().cancelled_at = UnixNow();
  FT_RETURN_IF_ERROR(SaveJob(*job));
  return order;
}

int64_t TrialsForTime(const ClusterSpec& spec) {
  constexpr double kSecondsPerTrial = 0.25;  // a conservative rate: a shard stops at its time anyway
  return static_cast<int64_t>(spec.shard_seconds * spec.waves * spec.nodes / kSecondsPerTrial);
}

Result<SubmitOutcome> SubmitJob(const ClusterSpec& spec, Scheduler* scheduler) {
  SubmitOutcome out;
  FT_ASSIGN_OR_RETURN(auto existing, LoadJob(spec.db));
  out.job.spec = spec;
  if (existing) {
    FT_RETURN_IF_ERROR(SamePlan(existing->spec, spec));
    FT_RETURN_IF_ERROR(RefuseWhileRunning(*existing, scheduler));
    // A budget derived from --time stays the job's: another --time changes
    // the steps' times, not the plan.
    if (spec.trials_from_time) out.job.spec.trials = existing->spec.trials;
    out.job.submissions = existing->submissions;
    out.continued = true;
  }
  FT_ASSIGN_OR_RETURN(out.first_wave, FirstUnmergedWave(out.job));
  FT_ASSIGN_OR_RETURN(auto finish, ReadStep(JobPaths(spec.db).finish_status()));
  if (out.first_wave > spec.waves && finish && finish->state == StepState::kDone) {
    out.nothing_to_do = true;
    return out;
  }
  // The shards open the job's database read only: it must exist.
  FT_ASSIGN_OR_RETURN(auto created, db::MakeSqliteDatabase(spec.db));
  created.reset();
  FT_RETURN_IF_ERROR(SaveJob(out.job));
  FT_RETURN_IF_ERROR(WriteScripts(out.job, out.first_wave));
  out.submit_script = JobPaths(spec.db).dir + "/submit.sh";
  FT_RETURN_IF_ERROR(WriteFileAtomically(out.submit_script, SubmitScript(out.job, out.first_wave)));
  if (chmod(out.submit_script.c_str(), 0755) != 0)
    return Error(ErrorCode::kIo, fmt::format("cannot make {} executable", out.submit_script));
  if (scheduler == nullptr) return out;
  FT_RETURN_IF_ERROR(ClearUnfinishedSteps(out.job, out.first_wave));
  FT_ASSIGN_OR_RETURN(Submission sub, SubmitChain(out.job, out.first_wave, *scheduler));
  out.job.submissions.push_back(sub);
  out.submitted = sub;
  FT_RETURN_IF_ERROR(SaveJob(out.job));
  return out;
}

}  // namespace fusetune::cluster
