#include "cluster/cluster_job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fusetune::cluster {

namespace {

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

Result<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(ErrorCode::kNotFound, fmt::format("cannot open {}", path));
  std::stringstream text;
  text << in.rdbuf();
  auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Error(ErrorCode::kCorrupt, fmt::format("{}: not a JSON object", path));
  return j;
}

std::vector<std::string> Strings(const nlohmann::json& j) {
  std::vector<std::string> out;
  for (const auto& s : j) out.push_back(s.get<std::string>());
  return out;
}

}  // namespace

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Error(ErrorCode::kIo, fmt::format("cannot write {}", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Error(ErrorCode::kIo, fmt::format("cannot rename {} to {}: {}", tmp, path,
                                                   ec.message()));
  return Status::Ok();
}

nlohmann::json SpecToJson(const ClusterSpec& s) {
  return {{"models", s.models},
          {"db", s.db},
          {"nodes", s.nodes},
          {"waves", s.waves},
          {"trials", s.trials},
          {"trials_from_time", s.trials_from_time},
          {"seconds", s.seconds},
          {"seed", s.seed},
          {"threads", s.threads},
          {"caches", target::CacheProtocolName(s.caches)},
          {"precision", {{"mixed", s.precision.mixed}, {"error_budget", s.precision.error_budget}}},
          {"slurm",
           {{"partition", s.slurm.partition},
            {"constraint", s.slurm.constraint},
            {"account", s.slurm.account},
            {"extra", s.slurm.extra}}},
          {"fusetune", s.fusetune},
          {"shard_seconds", s.shard_seconds},
          {"merge_seconds", s.merge_seconds},
          {"finish_seconds", s.finish_seconds}};
}

Result<ClusterSpec> SpecFromJson(const nlohmann::json& j, const std::string& where) {
  try {
    ClusterSpec s;
    s.models = Strings(j.at("models"));
    s.db = j.at("db").get<std::string>();
    s.nodes = j.at("nodes").get<int>();
    s.waves = j.at("waves").get<int>();
    s.trials = j.at("trials").get<int64_t>();
    s.trials_from_time = j.value("trials_from_time", false);
    s.seconds = j.at("seconds").get<double>();
    s.seed = j.at("seed").get<uint64_t>();
    s.threads = j.value("threads", 0);
    const auto caches = target::CacheProtocolFromName(j.at("caches").get<std::string>());
    if (!caches) return Error(ErrorCode::kCorrupt, where + ": unknown cache protocol");
    s.caches = *caches;
    s.precision.mixed = j.at("precision").at("mixed").get<bool>();
    s.precision.error_budget = j.at("precision").at("error_budget").get<double>();
    const auto& slurm = j.at("slurm");
    s.slurm.partition = slurm.value("partition", "");
    s.slurm.constraint = slurm.value("constraint", "");
    s.slurm.account = slurm.value("account", "");
    s.slurm.extra = Strings(slurm.value("extra", nlohmann::json::array()));
    s.fusetune = j.at("fusetune").get<std::string>();
    s.shard_seconds = j.value("shard_seconds", 0.0);
    s.merge_seconds = j.value("merge_seconds", 0.0);
    s.finish_seconds = j.value("finish_seconds", 0.0);
    if (s.nodes < 1 || s.waves < 1 || s.models.empty())
      return Error(ErrorCode::kCorrupt, where + ": a job needs models, nodes and waves");
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kCorrupt, fmt::format("{}: {}", where, e.what()));
  }
}

void PlanTimes(ClusterSpec* spec) {
  if (spec->seconds <= 0) return;
  const double s = spec->seconds;
  spec->finish_seconds = std::clamp(0.12 * s, 20.0, 1800.0);
  spec->merge_seconds = std::clamp(0.04 * s, 10.0, 900.0);
  spec->shard_seconds =
      std::max(10.0, (s - spec->finish_seconds - spec->waves * spec->merge_seconds) / spec->waves);
}

nlohmann::json JobToJson(const ClusterJob& job) {
  nlohmann::json subs = nlohmann::json::array();
  for (const Submission& s : job.submissions)
    subs.push_back({{"first_wave", s.first_wave},
                    {"wave_jobs", s.wave_jobs},
                    {"merge_jobs", s.merge_jobs},
                    {"finish_job", s.finish_job},
                    {"submitted_at", s.submitted_at},
                    {"cancelled_at", s.cancelled_at}});
  return {{"version", 1}, {"spec", SpecToJson(job.spec)}, {"submissions", subs}};
}

Result<ClusterJob> JobFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1)
    return Error(ErrorCode::kCorrupt,
                 fmt::format("{}: cluster job version {} (this build reads version 1)", where,
                             j.contains("version") ? j["version"].dump() : "none"));
  ClusterJob job;
  if (!j.contains("spec") || !j.contains("submissions"))
    return Error(ErrorCode::kCorrupt, where + ": no spec or submissions");
  FT_ASSIGN_OR_RETURN(job.spec, SpecFromJson(j.at("spec"), where));
  try {
    for (const auto& s : j.at("submissions"))
      job.submissions.push_back({s.at("first_wave").get<int>(), Strings(s.at("wave_jobs")),
                                 Strings(s.at("merge_jobs")), s.at("finish_job").get<std::string>(),
                                 s.value("submitted_at", 0.0), s.value("cancelled_at", 0.0)});
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kCorrupt, fmt::format("{}: {}", where, e.what()));
  }
  return job;
}

StepIds LatestStepIds(const ClusterJob& job) {
  StepIds ids;
  for (const Submission& s : job.submissions) {
    for (size_t i = 0; i < s.wave_jobs.size(); ++i)
      ids.wave_array[s.first_wave + static_cast<int>(i)] = s.wave_jobs[i];
    for (size_t i = 0; i < s.merge_jobs.size(); ++i)
      ids.merge[s.first_wave + static_cast<int>(i)] = s.merge_jobs[i];
    ids.finish = s.finish_job;
  }
  return ids;
}

Status SetMergeJob(ClusterJob* job, int wave, const std::string& job_id) {
  if (!job->submissions.empty()) {
    Submission& last = job->submissions.back();
    const int index = wave - last.first_wave;
    if (index >= 0 && index < static_cast<int>(last.merge_jobs.size())) {
      last.merge_jobs[static_cast<size_t>(index)] = job_id;
      return Status::Ok();
    }
  }
  return Error(ErrorCode::kInvalidArgument,
               fmt::format("the job's latest submission has no merge of wave {}", wave));
}

std::string JobPaths::wave_dir(int wave) const { return fmt::format("{}/wave-{}", dir, wave); }
std::string JobPaths::wave_script(int wave) const {
  return fmt::format("{}/wave-{}.sbatch", dir, wave);
}
std::string JobPaths::merge_script(int wave) const {
  return fmt::format("{}/merge-{}.sbatch", dir, wave);
}
std::string JobPaths::shard_db(int wave, int shard) const {
  return fmt::format("{}/shard-{}.db", wave_dir(wave), shard);
}
std::string JobPaths::shard_status(int wave, int shard) const {
  return fmt::format("{}/shard-{}.json", wave_dir(wave), shard);
}
std::string JobPaths::merge_status(int wave) const { return wave_dir(wave) + "/merge.json"; }

Result<std::optional<ClusterJob>> LoadJob(const std::string& db) {
  const JobPaths paths(db);
  if (!std::filesystem::exists(paths.job())) return std::optional<ClusterJob>();
  FT_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(paths.job()));
  FT_ASSIGN_OR_RETURN(ClusterJob job, JobFromJson(j, paths.job()));
  return std::optional<ClusterJob>(std::move(job));
}

Status SaveJob(const ClusterJob& job) {
  const JobPaths paths(job.spec.db);
  std::error_code ec;
  std::filesystem::create_directories(paths.logs(), ec);
  for (int w = 1; w <= job.spec.waves && !ec; ++w)
    std::filesystem::create_directories(paths.wave_dir(w), ec);
  if (ec) return Error(ErrorCode::kIo, fmt::format("cannot create {}: {}", paths.dir, ec.message()));
  return WriteFileAtomically(paths.job(), JobToJson(job).dump(2) + "\n");
}

const char* StepStateName(StepState state) {
  switch (state) {
    case StepState::kPending: return "pending";
    case StepState::kRunning: return "running";
    case StepState::kDone: return "done";
    case StepState::kFailed: return "failed";
    case StepState::kCancelled: return "cancelled";
  }
  return "pending";
}

nlohmann::json StepToJson(const StepStatus& s) {
  return {{"state", StepStateName(s.state)}, {"node", s.node},
          {"slurm_job", s.slurm_job},        {"restarts", s.restarts},
          {"started_at", s.started_at},      {"updated_at", s.updated_at},
          {"ended_at", s.ended_at},          {"error", s.error},
          {"progress", s.progress}};
}

Result<std::optional<StepStatus>> ReadStep(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::optional<StepStatus>();
  FT_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  StepStatus s;
  try {
    const std::string state = j.value("state", "pending");
    s.state = state == "running"  ? StepState::kRunning
              : state == "done"   ? StepState::kDone
              : state == "failed"    ? StepState::kFailed
              : state == "cancelled" ? StepState::kCancelled
                                     : StepState::kPending;
    s.node = j.value("node", "");
    s.slurm_job = j.value("slurm_job", "");
    s.restarts = j.value("restarts", 0);
    s.started_at = j.value("started_at", 0.0);
    s.updated_at = j.value("updated_at", 0.0);
    s.ended_at = j.value("ended_at", 0.0);
    s.error = j.value("error", "");
    if (j.contains("progress")) s.progress = j["progress"];
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kCorrupt, fmt::format("{}: {}", path, e.what()));
  }
  return std::optional<StepStatus>(std::move(s));
}

Status WriteStep(const std::string& path, const StepStatus& status) {
  StepStatus s = status;
  s.updated_at = UnixNow();
  return WriteFileAtomically(path, StepToJson(s).dump(2) + "\n");
}

StepStatus StartedStep() {
  StepStatus s;
  s.state = StepState::kRunning;
  s.node = Env("SLURMD_NODENAME", HostName());
  const std::string array_job = Env("SLURM_ARRAY_JOB_ID");
  s.slurm_job = array_job.empty() ? Env("SLURM_JOB_ID")
                                  : array_job + "_" + Env("SLURM_ARRAY_TASK_ID");
  s.restarts = std::atoi(Env("SLURM_RESTART_COUNT", "0").c_str());
  s.started_at = UnixNow();
  return s;
}

}  // namespace fusetune::cluster
