#include "measure/worker.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "fusion_space/plan_json.h"
#include "graph/onnx_io.h"
#include "runtime/executor.h"

namespace fusetune::measure {

namespace {

constexpr uint32_t kMagic = 0x31575446;  // "FTW1"
constexpr uint64_t kMaxFrameBytes = uint64_t{4} << 30;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status ReadExactly(int fd, char* data, size_t size, int64_t deadline_ms) {
  size_t done = 0;
  while (done < size) {
    if (deadline_ms >= 0) {
      const int64_t left = deadline_ms - NowMs();
      if (left <= 0) return Error(ErrorCode::kNotFound, "timed out");
      pollfd p{fd, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) return Error(ErrorCode::kNotFound, "timed out");
    }
    const ssize_t n = recv(fd, data + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Error(ErrorCode::kIo, n == 0 ? "peer closed the connection"
                                          : std::string("recv: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFrame(int fd, FrameKind kind, std::string_view payload) {
  char header[16];
  const uint32_t magic = kMagic, k = static_cast<uint32_t>(kind);
  const uint64_t size = payload.size();
  std::memcpy(header, &magic, 4);
  std::memcpy(header + 4, &k, 4);
  std::memcpy(header + 8, &size, 8);
  for (std::string_view part : {std::string_view(header, 16), payload}) {
    size_t done = 0;
    while (done < part.size()) {
      // MSG_NOSIGNAL: a dead peer is an error value, not a SIGPIPE.
      const ssize_t n = send(fd, part.data() + done, part.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error(ErrorCode::kIo, std::string("send: ") + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }
  return Status::Ok();
}

Result<Frame> ReadFrame(int fd, int64_t timeout_ms) {
  const int64_t deadline_ms = timeout_ms < 0 ? -1 : NowMs() + timeout_ms;
  char header[16];
  FT_RETURN_IF_ERROR(ReadExactly(fd, header, 16, deadline_ms));
  uint32_t magic, kind;
  uint64_t size;
  std::memcpy(&magic, header, 4);
  std::memcpy(&kind, header + 4, 4);
  std::memcpy(&size, header + 8, 8);
  if (magic != kMagic || kind < 1 || kind > 4 || size > kMaxFrameBytes)
    return Error(ErrorCode::kCorrupt, "not a fusetune worker frame");
  Frame frame{static_cast<FrameKind>(kind), std::string(size, '\0')};
  FT_RETURN_IF_ERROR(ReadExactly(fd, frame.payload.data(), size, deadline_ms));
  return frame;
}

namespace {

// A graph the parent sent, with what measuring it needs, built once.
struct LoadedGraph {
  Result<graph::Graph> graph = Error(ErrorCode::kInternal, "not loaded");
  std::map<std::pair<int, int64_t>, std::unique_ptr<fusion_space::FusionSpace>>
      spaces;                                    // by (threads, buffer)
  std::map<uint64_t, ReferenceData> references;  // by input seed
};

class Worker {
 public:
  explicit Worker(const MeasureHooks& hooks) : hooks_(hooks) {}

  void Load(const std::string& payload) {
    if (payload.size() < 8) return;
    uint64_t id;
    std::memcpy(&id, payload.data(), 8);
    auto loaded = std::make_unique<LoadedGraph>();
    loaded->graph = graph::ImportOnnxBytes(payload.substr(8), "", fmt::format("graph {}", id));
    graphs_[id] = std::move(loaded);
    order_.remove(id);
    order_.push_back(id);
    while (order_.size() > kWorkerMaxGraphs) {  // least recently loaded first
      graphs_.erase(order_.front());
      order_.pop_front();
    }
  }

  // The result as JSON, with "restart" when an exception escaped.
  nlohmann::json Measure(const std::string& payload) {
    try {
      return ResultToJson(MeasureRequest(nlohmann::json::parse(payload)));
    } catch (const std::exception& e) {
      nlohmann::json j = ResultToJson(
          MeasureResult::Failure(MeasureStatus::kFailed, fmt::format("exception: {}", e.what())));
      j["restart"] = true;
      return j;
    }
  }

 private:
  MeasureResult MeasureRequest(const nlohmann::json& request) {
    const uint64_t id = request.at("graph").get<uint64_t>();
    auto it = graphs_.find(id);
    if (it == graphs_.end())
      return MeasureResult::Failure(MeasureStatus::kFailed,
                                    fmt::format("graph {} was not loaded into the worker", id));
    LoadedGraph& loaded = *it->second;
    if (!loaded.graph.ok())
      return MeasureResult::Failure(MeasureStatus::kFailed, loaded.graph.error().ToString());
    auto options = OptionsFromJson(request.at("options"));
    if (!options.ok())
      return MeasureResult::Failure(MeasureStatus::kFailed, options.error().ToString());

    kernels::KernelConfig config;
    config.threads = options->threads;
    if (options->local_buffer_bytes > 0)
      config.local_buffer_bytes = static_cast<size_t>(options->local_buffer_bytes);
    auto& space = loaded.spaces[{config.threads, static_cast<int64_t>(config.local_buffer_bytes)}];
    if (!space) space = std::make_unique<fusion_space::FusionSpace>(*loaded.graph, config);
    auto plan = fusion_space::PlanFromJson(*space, request.at("plan"));
    if (!plan.ok())
      return MeasureResult::Failure(MeasureStatus::kFailed,
                                    "invalid plan: " + plan.error().ToString());
    auto exe = runtime::KernelProgram::Compile(*space, *plan);
    if (!exe.ok()) return MeasureResult::Failure(MeasureStatus::kFailed, exe.error().ToString());

    auto ref = loaded.references.find(options->input_seed);
    if (ref == loaded.references.end()) {
      auto computed = ComputeReference(*loaded.graph, options->input_seed);
      if (!computed.ok())
        return MeasureResult::Failure(MeasureStatus::kFailed,
                                      "reference executor: " + computed.error().ToString());
      ref = loaded.references.emplace(options->input_seed, std::move(*computed)).first;
    }
    return MeasureProgram(**exe, ref->second, *options, hooks_);
  }

  const MeasureHooks& hooks_;
  std::map<uint64_t, std::unique_ptr<LoadedGraph>> graphs_;
  std::list<uint64_t> order_;
};

}  // namespace

int RunWorker(int fd, const MeasureHooks& hooks) {
  Worker worker(hooks);
  for (;;) {
    auto frame = ReadFrame(fd);
    if (!frame.ok()) return frame.error().code() == ErrorCode::kIo ? 0 : 2;  // parent gone: done
    switch (frame->kind) {
      case FrameKind::kLoadGraph:
        worker.Load(frame->payload);
        break;
      case FrameKind::kMeasure:
        if (!WriteFrame(fd, FrameKind::kResult, worker.Measure(frame->payload).dump()).ok())
          return 0;
        break;
      case FrameKind::kShutdown:
        return 0;
      case FrameKind::kResult:
        return 2;
    }
  }
}

}  // namespace fusetune::measure
