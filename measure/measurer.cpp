#include "measure/measurer.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "fusion_space/plan_json.h"
#include "graph/onnx_io.h"
#include "graph/subgraph.h"
#include "measure/worker.h"

extern char** environ;

namespace fusetune::measure {

namespace {

constexpr int kWorkerFd = 3;  // the worker's end of the socket

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  return "ended";
}

}  // namespace

std::shared_ptr<const graph::Graph> GroupGraph(const graph::Graph& graph,
                                               std::span<const int32_t> nodes) {
  return std::make_shared<const graph::Graph>(graph::ExtractSubgraph(graph, nodes));
}

namespace {

bool ReducedPrecision(const fusion_space::Plan& plan) {
  for (const fusion_space::PlanGroup& g : plan.groups)
    if (fusion_space::TilingPrecision(g.tiling) != kernels::Precision::kF32) return true;
  return false;
}

}  // namespace

Result<Candidate> GroupCandidate(std::shared_ptr<const graph::Graph> group_graph,
                                 fusion_space::FusionSpace& group_space,
                                 const fusion_space::Tiling& tiling, std::string label) {
  fusion_space::PlanGroup group;
  for (int32_t n = 0; n < static_cast<int32_t>(group_graph->nodes.size()); ++n)
    group.nodes.push_back(n);
  group.tiling = tiling;
  fusion_space::Plan plan{{group}};
  const fusion_space::FusionDecision valid = group_space.Validate(plan);
  if (!valid)
    return Error(ErrorCode::kInvalidArgument, "not a measurable group: " + valid.reason());
  return Candidate{std::move(group_graph), fusion_space::PlanToJson(group_space, plan),
                   std::move(label), /*group=*/true, ReducedPrecision(plan)};
}

Candidate PlanCandidate(std::shared_ptr<const graph::Graph> graph, fusion_space::FusionSpace& space,
                        const fusion_space::Plan& plan, std::string label) {
  return Candidate{std::move(graph), fusion_space::PlanToJson(space, plan), std::move(label),
                   false, ReducedPrecision(plan)};
}

std::string DefaultWorkerPath() {
  if (const char* env = std::getenv("FUSETUNE_WORKER"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "fusetune-worker";
  return (self.parent_path() / "fusetune-worker").string();
}

Result<std::unique_ptr<Measurer>> Measurer::Create(std::string worker_path) {
  if (access(worker_path.c_str(), X_OK) != 0)
    return Error(ErrorCode::kNotFound,
                 fmt::format("measurement worker '{}' is not an executable file (build the "
                             "fusetune-worker target, or set FUSETUNE_WORKER)",
                             worker_path));
  return std::unique_ptr<Measurer>(new Measurer(std::move(worker_path)));
}

Measurer::~Measurer() {
  if (pid_ > 0) {
    (void)WriteFrame(fd_, FrameKind::kShutdown, "");
    StopWorker(/*kill_first=*/false);
  }
}

Status Measurer::StartWorker() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    return Error(ErrorCode::kIo, std::string("socketpair: ") + std::strerror(errno));
  // dup2 onto the same number would keep close-on-exec: move it off 3 first.
  if (fds[1] == kWorkerFd) {
    const int moved = fcntl(fds[1], F_DUPFD_CLOEXEC, kWorkerFd + 1);
    close(fds[1]);
    fds[1] = moved;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], kWorkerFd);
  char* argv[] = {const_cast<char*>(worker_path_.c_str()), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, worker_path_.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Error(ErrorCode::kIo,
                 fmt::format("cannot start worker '{}': {}", worker_path_, std::strerror(rc)));
  }
  pid_ = pid;
  fd_ = fds[0];
  ++worker_starts_;
  for (auto& [ptr, known] : graphs_) known.in_worker = false;
  worker_order_.clear();
  return Status::Ok();
}

std::string Measurer::StopWorker(bool kill_first) {
  if (pid_ <= 0) return "not running";
  if (kill_first) kill(pid_, SIGKILL);
  close(fd_);  // a worker still reading sees the parent leave and exits
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  fd_ = -1;
  return DescribeExit(status);
}

Result<uint64_t> Measurer::SendGraph(const std::shared_ptr<const graph::Graph>& graph) {
  for (auto it = graphs_.begin(); it != graphs_.end();)  // forget graphs nobody holds
    it = it->second.graph.expired() ? graphs_.erase(it) : std::next(it);
  auto it = graphs_.find(graph.get());
  if (it == graphs_.end()) {
    FT_ASSIGN_OR_RETURN(std::string onnx, graph::ExportOnnxBytes(*graph));
    it = graphs_.emplace(graph.get(), KnownGraph{graph, next_graph_id_++, std::move(onnx)}).first;
  }
  KnownGraph& known = it->second;
  if (!known.in_worker) {
    std::string payload(8, '\0');
    std::memcpy(payload.data(), &known.id, 8);
    payload += known.onnx;
    FT_RETURN_IF_ERROR(WriteFrame(fd_, FrameKind::kLoadGraph, payload));
    known.in_worker = true;
    // The worker drops its least recently loaded graph beyond its capacity.
    worker_order_.remove(graph.get());
    worker_order_.push_back(graph.get());
    while (worker_order_.size() > kWorkerMaxGraphs) {
      if (auto dropped = graphs_.find(worker_order_.front()); dropped != graphs_.end())
        dropped->second.in_worker = false;
      worker_order_.pop_front();
    }
  }
  return known.id;
}

MeasureResult Measurer::Measure(const Candidate& candidate, const MeasureOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  if (pid_ <= 0)
    if (Status started = StartWorker(); !started.ok())
      return MeasureResult::Failure(MeasureStatus::kFailed, started.error().ToString());
  auto id = SendGraph(candidate.graph);
  MeasureOptions run_options = options;
  if (candidate.group) run_options.time_layout_transforms = false;
  if (candidate.reduced_precision && options.reduced_precision_tolerance > 0)
    run_options.tolerance = options.reduced_precision_tolerance;
  nlohmann::json request{{"graph", id.ok() ? *id : 0},
                         {"plan", candidate.plan},
                         {"options", OptionsToJson(run_options)}};
  Result<Frame> reply = Error(ErrorCode::kIo, "not sent");
  if (id.ok() && WriteFrame(fd_, FrameKind::kMeasure, request.dump()).ok())
    reply = ReadFrame(fd_, static_cast<int64_t>(options.timeout_seconds * 1e3));
  else if (!id.ok() && id.error().code() != ErrorCode::kIo)
    return MeasureResult::Failure(MeasureStatus::kFailed, id.error().ToString());

  MeasureResult result;
  if (reply.ok()) {
    const auto j = nlohmann::json::parse(reply->payload, nullptr, /*allow_exceptions=*/false);
    auto parsed = j.is_discarded() ? Result<MeasureResult>(Error(ErrorCode::kCorrupt, "bad reply"))
                                   : ResultFromJson(j);
    result = parsed.ok() ? *parsed
                         : MeasureResult::Failure(MeasureStatus::kFailed,
                                                  "worker reply: " + parsed.error().ToString());
    if (!parsed.ok() || j.value("restart", false)) StopWorker(/*kill_first=*/true);
  } else if (reply.error().code() == ErrorCode::kNotFound) {
    StopWorker(/*kill_first=*/true);
    result = MeasureResult::Failure(
        MeasureStatus::kTimeout,
        fmt::format("no result within the {:.3g} s timeout; the worker was killed",
                    options.timeout_seconds));
  } else {
    const std::string how = StopWorker(/*kill_first=*/false);
    result = MeasureResult::Failure(MeasureStatus::kFailed, "the worker crashed: " + how);
  }
  // What the parent waited, transfers and restarts included.
  result.measure_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<MeasureResult> Measurer::MeasureBatch(std::span<const Candidate> candidates,
                                                  const MeasureOptions& options,
                                                  const ProgressFn& progress) {
  std::vector<MeasureResult> results;
  results.reserve(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    results.push_back(Measure(candidates[i], options));
    if (progress) progress(i, results.back());
  }
  return results;
}

}  // namespace fusetune::measure
