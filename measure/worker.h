// The measurement worker: a separate process (fusetune-worker) that runs
// candidates for its parent, so that a crash or a hang costs one result
// rather than the tuning job.
//
// Protocol over one stream socket (fd 3 in the worker), frames of
// {u32 magic, u32 kind, u64 size, payload}:
//   parent -> worker  kLoadGraph  u64 graph id (little endian) + ONNX bytes
//                     kMeasure    JSON {"graph": id, "plan": plan JSON, "options": {...}}
//                     kShutdown   empty
//   worker -> parent  kResult     JSON: a MeasureResult, with "restart": true when
//                                 the worker's state can no longer be trusted
// The worker answers every kMeasure with exactly one kResult; kLoadGraph has
// no answer (a graph that fails to load fails the measurements that use it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "measure/measurement.h"

namespace fusetune::measure {

// Graphs a worker keeps at once; loading one more drops the least recently
// loaded, and the parent (Measurer) mirrors that to know what to resend.
inline constexpr size_t kWorkerMaxGraphs = 8;

enum class FrameKind : uint32_t { kLoadGraph = 1, kMeasure = 2, kResult = 3, kShutdown = 4 };

struct Frame {
  FrameKind kind;
  std::string payload;
};

// Blocking writes and reads of whole frames. A closed peer is kIo; a frame
// that is not one of ours is kCorrupt. `timeout_ms` < 0 waits forever;
// otherwise a frame that does not arrive whole in time is kNotFound.
Status WriteFrame(int fd, FrameKind kind, std::string_view payload);
Result<Frame> ReadFrame(int fd, int64_t timeout_ms = -1);

// The worker's loop: serves frames on `fd` until kShutdown or the parent
// closes the socket. Returns the process exit code.
int RunWorker(int fd, const MeasureHooks& hooks = {});

}  // namespace fusetune::measure
