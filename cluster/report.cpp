#include "cluster/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

namespace fusetune::cluster {

namespace {

using Json = nlohmann::json;

// A running step that has not written for this long, of which Slurm knows
// nothing, is lost (its node died and Slurm has forgotten the job).
constexpr double kLostAfterSeconds = 600;

// One step: its file's word, then Slurm's on what the file cannot say.
Json StepJson(const std::optional<StepStatus>& file, const std::string& slurm_id,
              const std::map<std::string, SlurmJobState>& slurm, bool asked_slurm) {
  Json j = file ? StepToJson(*file) : Json{{"state", "not started"}};
  j["slurm_job"] = slurm_id;
  auto it = slurm.find(slurm_id);
  if (it != slurm.end()) {
    j["slurm_state"] = it->second.state_text;
    j["slurm_reason"] = it->second.reason;
    j["restarts"] = std::max(j.value("restarts", 0), it->second.restarts);
  }
  const std::string state = j["state"].get<std::string>();
  if (state == "running" && it == slurm.end() && asked_slurm && !slurm_id.empty() &&
      UnixNow() - file->updated_at > kLostAfterSeconds) {
    j["state"] = "failed";
    j["error"] = fmt::format("lost: no word from it for {:.0f} min and Slurm no longer knows its job",
                             (UnixNow() - file->updated_at) / 60);
    return j;
  }
  if (state == "done" || state == "cancelled" || it == slurm.end()) return j;
  const SlurmJobState& s = it->second;
  // A step that failed (stopped by the signal of a node that went down, say)
  // and that Slurm runs again is under way, not failed.
  const bool waiting = !s.never_runs() && s.waiting();
  const bool running = s.state == SlurmState::kRunning || s.state == SlurmState::kCompleting;
  if (state == "failed" && !waiting && !running) return j;
  if (state == "failed") j["error"] = "its last run: " + j.value("error", std::string());
  if (waiting)
    j["state"] = state == "not started" || state == "pending" ? "pending" : "requeued";
  else if (running)
    j["state"] = "running";
  else if (s.never_runs())
    j["state"] = "cancelled", j["error"] = "not run: a step it depends on failed";
  else if (s.ended() && s.state != SlurmState::kCompleted)
    j["state"] = "failed",
    j["error"] = fmt::format("Slurm ended it: {} ({})", s.state_text, s.reason);
  return j;
}

// A shard Slurm ended from outside (scancel, a node lost) whose wave's
// merge is still to run: the merge runs it again (wave_gate.h).
void RerunByTheMerge(const std::map<std::string, SlurmJobState>& slurm, const std::string& task,
                     Json* shard) {
  auto it = slurm.find(task);
  if ((*shard)["state"] != "failed" || it == slurm.end() || !it->second.runs_again_by_its_merge())
    return;
  (*shard)["state"] = "requeued";
  (*shard)["error"] = fmt::format("Slurm ended it ({}); the wave's merge runs it again",
                                  it->second.state_text);
}

Result<std::map<std::string, SlurmJobState>> AskSlurm(const StepIds& ids, Scheduler* scheduler) {
  std::map<std::string, SlurmJobState> by_id;
  if (scheduler == nullptr) return by_id;
  std::vector<std::string> all;
  for (const auto& [w, id] : ids.wave_array) all.push_back(id);
  for (const auto& [w, id] : ids.merge) all.push_back(id);
  all.push_back(ids.finish);
  FT_ASSIGN_OR_RETURN(auto states, scheduler->Query(all));
  for (SlurmJobState& s : states) by_id[s.id] = s;
  return by_id;
}

// The first step in `state` (and where), or "".
std::string FirstInState(const Json& status, const std::string& state) {
  for (const Json& w : status["waves"]) {
    for (const Json& s : w["shards"])
      if (s["state"] == state)
        return fmt::format("wave {} shard {} {}{}: {}", w["wave"].get<int>(),
                           s["shard"].get<int>(), state,
                           s.value("node", "").empty() ? "" : " on " + s.value("node", ""),
                           s.value("error", ""));
    if (w["merge"]["state"] == state)
      return fmt::format("wave {}'s merge {}: {}", w["wave"].get<int>(), state,
                         w["merge"].value("error", ""));
  }
  if (status["finish"]["state"] == state)
    return fmt::format("the finishing step {}: {}", state, status["finish"].value("error", ""));
  return "";
}

// The first failed step (and where), or "": a step cancelled by Slurm (by
// `scancel`, or because a step before it failed) counts when no step says
// it failed.
std::string FirstFailure(const Json& status) {
  if (std::string failed = FirstInState(status, "failed"); !failed.empty()) return failed;
  return FirstInState(status, "cancelled");
}

void SetOverall(const ClusterJob& job, Json* status) {
  Json& s = *status;
  const std::string failure = FirstFailure(s);
  if (s["finish"]["state"] == "done") {
    s["state"] = "done";
    s["message"] = "done; the report is in " + JobPaths(job.spec.db).report_text();
  } else if (!job.submissions.empty() && job.submissions.back().cancelled_at > 0) {
    s["state"] = "cancelled";
    s["message"] =
        "stopped by `fusetune cluster cancel`; `fusetune cluster submit` with the same flags "
        "continues it from the first wave not merged";
  } else if (!failure.empty()) {
    s["state"] = "failed";
    s["message"] = failure +
                   ". Later steps do not run. Fix the cause and run `fusetune cluster submit` "
                   "again with the same flags: the job continues from the first wave not merged.";
  } else if (job.submissions.empty()) {
    s["state"] = "not submitted";
    s["message"] = "scripts written (--dry-run); submit.sh in " + JobPaths(job.spec.db).dir +
                   " submits them";
  } else {
    s["state"] = "running";
    int wave = 1;
    for (const Json& w : s["waves"])
      if (w["merge"]["state"] == "done") wave = w["wave"].get<int>() + 1;
    s["message"] = wave > job.spec.waves ? "finishing: whole-model plans"
                                         : fmt::format("wave {} of {}", wave, job.spec.waves);
  }
}

}  // namespace

Json ModelPlanJson(const std::string& model, const std::string& target,
                   const search::TuningJobResult& r) {
  const auto ms = [](const std::optional<search::PlanReport>& p) {
    return p ? Json(p->seconds * 1e3) : Json(nullptr);
  };
  Json j{{"model", model},       {"target", target},
         {"job", r.job_id},      {"unfused_ms", ms(r.summary.unfused)},
         {"greedy_ms", ms(r.summary.greedy)}, {"best_ms", ms(r.summary.best)},
         {"best_kind", r.summary.best ? measure::PlanKindName(r.summary.best->kind) : ""}};
  if (r.summary.best && r.summary.unfused)
    j["speedup_vs_unfused"] = r.summary.unfused->seconds / r.summary.best->seconds;
  return j;
}

Result<Json> CollectStatus(const ClusterJob& job, Scheduler* scheduler) {
  const JobPaths paths(job.spec.db);
  const StepIds ids = LatestStepIds(job);
  FT_ASSIGN_OR_RETURN(auto slurm, AskSlurm(ids, scheduler));
  Json status{{"db", job.spec.db}, {"nodes", job.spec.nodes}, {"waves_total", job.spec.waves},
              {"waves", Json::array()}};
  for (int w = 1; w <= job.spec.waves; ++w) {
    Json wave{{"wave", w}, {"shards", Json::array()}};
    const std::string array = ids.array_of(w);
    const auto merge_job = slurm.find(ids.merge_of(w));
    const bool merge_to_come = merge_job != slurm.end() && !merge_job->second.ended() &&
                               !merge_job->second.never_runs();
    for (int i = 1; i <= job.spec.nodes; ++i) {
      FT_ASSIGN_OR_RETURN(auto file, ReadStep(paths.shard_status(w, i)));
      const std::string task = array.empty() ? "" : fmt::format("{}_{}", array, i);
      Json shard = StepJson(file, task, slurm, scheduler != nullptr);
      shard["shard"] = i;
      if (merge_to_come) RerunByTheMerge(slurm, task, &shard);
      wave["shards"].push_back(std::move(shard));
    }
    FT_ASSIGN_OR_RETURN(auto merge, ReadStep(paths.merge_status(w)));
    wave["merge"] = StepJson(merge, ids.merge_of(w), slurm, scheduler != nullptr);
    status["waves"].push_back(std::move(wave));
  }
  FT_ASSIGN_OR_RETURN(auto finish, ReadStep(paths.finish_status()));
  status["finish"] = StepJson(finish, ids.finish, slurm, scheduler != nullptr);
  SetOverall(job, &status);
  return status;
}

namespace {

std::string ShardLine(const Json& s) {
  const Json& p = s.value("progress", Json::object());
  std::string line = fmt::format("    shard {:<3} {:<12}", s["shard"].get<int>(),
                                 s["state"].get<std::string>());
  if (p.contains("quota"))
    line += fmt::format(" {:>6}/{:<6} trials", p.value("trials_total", p.value("trials", 0L)),
                        p["quota"].get<int64_t>());
  if (p.contains("seconds")) line += fmt::format(" {:7.1f} s", p["seconds"].get<double>());
  if (!s.value("node", "").empty()) line += " on " + s.value("node", "");
  if (s.value("restarts", 0) > 0) line += fmt::format(", requeued {}x", s.value("restarts", 0));
  if (s.contains("slurm_state") && s["state"] != "done")
    line += fmt::format(" [Slurm {} {}]", s.value("slurm_state", ""), s.value("slurm_reason", ""));
  if (!s.value("error", "").empty()) line += "\n      " + s.value("error", "");
  return line + "\n";
}

std::string MergeLine(const Json& m) {
  std::string line = "    merge     " + m["state"].get<std::string>();
  const Json& p = m.value("progress", Json::object());
  if (p.contains("shards")) {
    int64_t added = 0;
    for (const Json& s : p["shards"]) added += s.value("records_added", 0L);
    line += fmt::format(": {} records added in {:.1f} s", added, p.value("merge_seconds", 0.0));
  }
  if (p.contains("model")) {
    const Json& model = p["model"];
    line += model.value("retrained", false)
                ? fmt::format("; cost model #{} ({}, Spearman {:.3f}) {}",
                              model.value("model_id", 0L), model.value("form", ""),
                              model.value("spearman", 0.0),
                              model.value("promoted", false) ? "active" : "kept inactive")
                : "; not retrained: " + model.value("why", "");
  }
  if (p.contains("waiting")) {
    const Json& w = p["waiting"];
    std::vector<int> shards = w.value("rerun", std::vector<int>{});
    for (int i : w.value("under_way", std::vector<int>{})) shards.push_back(i);
    line += fmt::format(": runs as job {} once shard(s) {} end", w.value("merge_job", ""),
                        fmt::join(shards, ", "));
  }
  if (!m.value("error", "").empty()) line += "\n      " + m.value("error", "");
  return line + "\n";
}

}  // namespace

std::string FormatStatus(const Json& status) {
  std::string out = fmt::format("cluster job of {}: {} ({})\n", status["db"].get<std::string>(),
                                status["state"].get<std::string>(),
                                status["message"].get<std::string>());
  for (const Json& w : status["waves"]) {
    int done = 0;
    for (const Json& s : w["shards"]) done += s["state"] == "done";
    out += fmt::format("  wave {}/{}: {}/{} shards done\n", w["wave"].get<int>(),
                       status["waves_total"].get<int>(), done, w["shards"].size());
    for (const Json& s : w["shards"]) out += ShardLine(s);
    out += MergeLine(w["merge"]);
  }
  const Json& f = status["finish"];
  out += "  finish      " + f["state"].get<std::string>();
  if (!f.value("error", "").empty()) out += ": " + f.value("error", "");
  out += "\n";
  return out;
}

Result<Json> BuildReport(const ClusterJob& job, const Json& plans) {
  FT_ASSIGN_OR_RETURN(Json status, CollectStatus(job, nullptr));
  int64_t trials = 0;  // the records the merges added: each measurement once
  double first_start = 0, merge_seconds = 0, retrain_seconds = 0;
  for (const Json& w : status["waves"]) {
    for (const Json& s : w["merge"].value("progress", Json::object()).value("shards", Json::array()))
      trials += s.value("records_added", 0L);
    for (const Json& s : w["shards"]) {
      const double started = s.value("started_at", 0.0);
      if (started > 0 && (first_start == 0 || started < first_start)) first_start = started;
    }
    const Json& p = w["merge"].value("progress", Json::object());
    merge_seconds += p.value("merge_seconds", 0.0);
    retrain_seconds += p.value("model", Json::object()).value("seconds", 0.0);
  }
  status["plans"] = plans;
  status["trials"] = trials;
  status["merge_seconds"] = merge_seconds;
  status["retrain_seconds"] = retrain_seconds;
  status["wall_seconds"] = first_start > 0 ? UnixNow() - first_start : 0.0;
  status["state"] = "done";
  status["message"] = "done";
  status["finish"]["state"] = "done";  // written as this report is
  return status;
}

std::string FormatReport(const Json& report) {
  std::string out = FormatStatus(report);
  out += fmt::format(
      "\n{} group trials over {} waves x {} shards in {:.0f} s of wall time; merges {:.1f} s, "
      "retraining {:.1f} s\n",
      report.value("trials", 0L), report["waves_total"].get<int>(), report["nodes"].get<int>(),
      report.value("wall_seconds", 0.0), report.value("merge_seconds", 0.0),
      report.value("retrain_seconds", 0.0));
  for (const Json& p : report["plans"]) {
    const auto ms = [&](const char* k) {
      return p[k].is_null() ? std::string("-") : fmt::format("{:.3f} ms", p[k].get<double>());
    };
    out += fmt::format("  {}: unfused {}, greedy {}, best {} ({}){}\n",
                       p["model"].get<std::string>(), ms("unfused_ms"), ms("greedy_ms"),
                       ms("best_ms"), p.value("best_kind", ""),
                       p.contains("speedup_vs_unfused")
                           ? fmt::format(", {:.2f}x unfused", p["speedup_vs_unfused"].get<double>())
                           : "");
  }
  return out;
}

}  // namespace fusetune::cluster
