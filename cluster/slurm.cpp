#include "cluster/slurm.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

extern char** environ;

namespace fusetune::cluster {

namespace {

struct CommandOutput {
  int exit_code = 0;
  std::string output;  // stdout and stderr together
};

// Runs argv[0] from PATH and collects what it prints.
Result<CommandOutput> RunCommand(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  // Close-on-exec: no other child spawned meanwhile inherits the pipe.
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Error(ErrorCode::kIo, "pipe2() failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return Error(ErrorCode::kNotFound,
                 fmt::format("cannot run {}: {} (is Slurm installed on this machine?)", argv[0],
                             strerror(spawned)));
  }
  CommandOutput out;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.output.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

std::string Joined(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string LastLine(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Slurm's --time: whole minutes, with a minute's grace over the step's own
// stop so that the step ends itself before Slurm kills it.
std::string SlurmTime(double seconds) {
  const int64_t minutes = static_cast<int64_t>(std::ceil(seconds / 60.0)) + 1;
  return fmt::format("{}:{:02}:00", minutes / 60, minutes % 60);
}

class SlurmScheduler : public Scheduler {
 public:
  Result<std::string> Submit(const std::string& script, const Dependency& after) override {
    std::vector<std::string> argv{"sbatch", "--parsable"};
    if (!after.jobs.empty()) {
      argv.push_back("--dependency=" + DependencyText(after));
      argv.push_back("--kill-on-invalid-dep=yes");
    }
    argv.push_back(script);
    FT_ASSIGN_OR_RETURN(CommandOutput out, RunCommand(argv));
    const std::string last = LastLine(out.output);
    std::smatch m;
    if (out.exit_code != 0 || !std::regex_match(last, m, std::regex(R"((\d+)(;.*)?)")))
      return Error(ErrorCode::kIo, fmt::format("sbatch {} failed (exit {}): {}", script,
                                               out.exit_code, out.output));
    return m[1].str();
  }

  Result<std::vector<SlurmJobState>> Query(const std::vector<std::string>& job_ids) override {
    std::vector<SlurmJobState> all;
    for (const std::string& id : job_ids) {
      if (id.empty()) continue;
      FT_ASSIGN_OR_RETURN(CommandOutput out, RunCommand({"scontrol", "show", "job", "-o", id}));
      if (out.exit_code != 0) {
        if (out.output.find("Invalid job id") != std::string::npos) continue;  // forgotten
        return Error(ErrorCode::kIo, fmt::format("scontrol show job {} failed (exit {}): {}", id,
                                                 out.exit_code, out.output));
      }
      for (SlurmJobState& s : ParseScontrolJobs(out.output)) all.push_back(std::move(s));
    }
    return all;
  }

  Status Cancel(const std::vector<std::string>& job_ids) override {
    std::vector<std::string> argv{"scancel"};
    for (const std::string& id : job_ids)
      if (!id.empty()) argv.push_back(id);
    if (argv.size() == 1) return Status::Ok();
    return Run(argv);
  }

  Status Requeue(const std::vector<std::string>& job_ids) override {
    if (job_ids.empty()) return Status::Ok();
    return Run({"scontrol", "requeue", Joined(job_ids, ",")});
  }

  Status SetDependency(const std::string& job_id, const Dependency& after) override {
    return Run({"scontrol", "update", "JobId=" + job_id,
                "Dependency=" + (after.jobs.empty() ? std::string() : DependencyText(after))});
  }

 private:
  static Status Run(const std::vector<std::string>& argv) {
    FT_ASSIGN_OR_RETURN(CommandOutput out, RunCommand(argv));
    if (out.exit_code != 0)
      return Error(ErrorCode::kIo, fmt::format("{} failed (exit {}): {}", Joined(argv, " "),
                                               out.exit_code, out.output));
    return Status::Ok();
  }
};

}  // namespace

std::string ScriptText(const BatchScript& s, const SlurmOptions& slurm) {
  std::string text = "#!/bin/bash\n";
  const auto line = [&](const std::string& option) { text += "#SBATCH " + option + "\n"; };
  line("--job-name=" + s.name);
  if (s.array_size > 0) line(fmt::format("--array=1-{}", s.array_size));
  line("--nodes=1");
  line("--ntasks=1");
  if (s.exclusive) line("--exclusive");
  if (s.seconds > 0) line("--time=" + SlurmTime(s.seconds));
  if (s.requeue) line("--requeue");
  line("--open-mode=append");  // a requeued step appends to its log
  if (!s.output.empty()) line("--output=" + s.output);
  if (!slurm.partition.empty()) line("--partition=" + slurm.partition);
  if (!slurm.constraint.empty()) line("--constraint=" + slurm.constraint);
  if (!slurm.account.empty()) line("--account=" + slurm.account);
  for (const std::string& extra : slurm.extra) line(extra);
  text += "set -u\n";
  for (const std::string& c : s.commands) text += c + "\n";
  return text;
}

namespace {

// "2-4%2" or "1,3,5-6": the task ids a pending array line stands for.
std::vector<std::string> ExpandTaskIds(std::string spec) {
  spec = spec.substr(0, spec.find('%'));  // a throttle
  std::vector<std::string> ids;
  std::istringstream parts(spec);
  std::string part;
  while (std::getline(parts, part, ',')) {
    part = part.substr(0, part.find(':'));  // a step
    const auto dash = part.find('-');
    const int lo = std::atoi(part.substr(0, dash).c_str());
    const int hi = dash == std::string::npos ? lo : std::atoi(part.substr(dash + 1).c_str());
    for (int i = lo; i <= hi && hi - lo < 100000; ++i) ids.push_back(std::to_string(i));
  }
  return ids;
}

}  // namespace

std::vector<SlurmJobState> ParseScontrolJobs(const std::string& text) {
  std::vector<SlurmJobState> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> fields;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq != std::string::npos) fields[word.substr(0, eq)] = word.substr(eq + 1);
    }
    if (fields.count("JobId") == 0) continue;
    SlurmJobState s;
    s.id = fields["JobId"];
    s.state_text = fields["JobState"];
    s.state = ParseSlurmState(s.state_text);
    s.reason = fields["Reason"];
    s.restarts = std::atoi(fields["Restarts"].c_str());
    s.exit_code = fields["ExitCode"];
    s.nodes = fields["NodeList"];
    if (fields.count("ArrayTaskId") == 0 || fields.count("ArrayJobId") == 0) {
      jobs.push_back(std::move(s));
      continue;
    }
    for (const std::string& task : ExpandTaskIds(fields["ArrayTaskId"])) {
      s.id = fields["ArrayJobId"] + "_" + task;
      jobs.push_back(s);
    }
  }
  return jobs;
}

SlurmState ParseSlurmState(const std::string& text) {
  static const std::map<std::string, SlurmState> kStates{
      {"PENDING", SlurmState::kPending},        {"RUNNING", SlurmState::kRunning},
      {"COMPLETING", SlurmState::kCompleting},  {"COMPLETED", SlurmState::kCompleted},
      {"FAILED", SlurmState::kFailed},          {"CANCELLED", SlurmState::kCancelled},
      {"TIMEOUT", SlurmState::kTimeout},        {"NODE_FAIL", SlurmState::kNodeFail},
      {"OUT_OF_MEMORY", SlurmState::kOutOfMemory}, {"PREEMPTED", SlurmState::kPreempted},
      {"DEADLINE", SlurmState::kDeadline},      {"BOOT_FAIL", SlurmState::kBootFail},
      {"REQUEUED", SlurmState::kRequeued},      {"REQUEUE_HOLD", SlurmState::kRequeueHold}};
  auto it = kStates.find(text);
  return it == kStates.end() ? SlurmState::kOther : it->second;
}

std::string DependencyText(const Dependency& d) {
  return (d.kind == After::kOk ? "afterok:" : "afterany:") + Joined(d.jobs, ":");
}

bool SlurmJobState::ended() const {
  switch (state) {
    case SlurmState::kCompleted: case SlurmState::kFailed: case SlurmState::kCancelled:
    case SlurmState::kTimeout: case SlurmState::kNodeFail: case SlurmState::kOutOfMemory:
    case SlurmState::kPreempted: case SlurmState::kDeadline: case SlurmState::kBootFail:
      return true;
    default:
      return false;
  }
}

bool SlurmJobState::waiting() const {
  return state == SlurmState::kPending || state == SlurmState::kRequeued ||
         state == SlurmState::kRequeueHold;
}

bool SlurmJobState::runs_again_by_its_merge() const {
  return killed_from_outside() && restarts < kMaxShardRestarts;
}

bool SlurmJobState::killed_from_outside() const {
  if (state == SlurmState::kCancelled) return !never_runs();
  return state == SlurmState::kNodeFail || state == SlurmState::kPreempted ||
         state == SlurmState::kBootFail;
}

Result<std::unique_ptr<Scheduler>> MakeSlurmScheduler() {
  auto probe = RunCommand({"sbatch", "--version"});
  if (!probe.ok() || probe->exit_code != 0)
    return Error(ErrorCode::kNotFound,
                 "sbatch is not on PATH: submit from a machine with Slurm's client commands, or "
                 "use --dry-run to write the scripts");
  return std::unique_ptr<Scheduler>(new SlurmScheduler());
}

}  // namespace fusetune::cluster
