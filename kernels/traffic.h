// kernels/: the fused-kernel library (issue 3). Kernels follow the NPU model:
// tiles are copied explicitly from global tensors into a bounded per-thread
// local buffer, computed there and copied back; every copy is counted.
//
// Map of the module: kernels/README.md (what it offers, one line per file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace fusetune::kernels {

// Full runs copy and compute; copy-only and compute-only runs let measure/
// estimate how well transfers overlap computation.
enum class RunMode { kFull, kCopyOnly, kComputeOnly };

struct KernelStats {
  int64_t bytes_global_to_local = 0;  // every element copied in, counted once per copy
  int64_t bytes_local_to_global = 0;  // every element copied out
  int64_t tiles = 0;                  // output tiles computed
  // The longest thread's time on its share: time inside the kernel,
  // without its launch and join.
  double busy_seconds = 0;
  KernelStats& operator+=(const KernelStats& o) {
    bytes_global_to_local += o.bytes_global_to_local;
    bytes_local_to_global += o.bytes_local_to_global;
    tiles += o.tiles;
    busy_seconds += o.busy_seconds;
    return *this;
  }
};

// Copies n floats from local to global memory with streaming (non-temporal)
// stores where the destination allows: results written once and not read
// again soon then skip the read-for-ownership of their cache lines. Call
// StreamFence() before another thread may read what was written.
void StreamOut(float* dst, const float* src, int64_t n);
void StreamFence();

// Whether a kernel writes an output tensor of `tensor_bytes` with streaming
// stores. Only one larger than half the last-level cache (target/'s L3, read
// once): it would not stay cached for the kernel that reads it next, so
// skipping the read-for-ownership is all there is to win. A smaller output
// is written with plain stores and read back from the cache: streamed, it
// goes to DRAM and the next kernel waits for it there (MobileNetV2's tuned
// plan, every activation under 5 MB: 2-3% faster with plain stores).
bool StreamsOutput(int64_t tensor_bytes);
// n floats from local to global memory: StreamOut when `stream`, else plain
// stores.
void WriteOut(float* dst, const float* src, int64_t n, bool stream);

// Default local-buffer capacity: the per-core L2 size.
size_t DefaultLocalBufferBytes();

// What every kernel runs with: the target's local-buffer capacity per thread
// and the thread count.
struct KernelConfig {
  size_t local_buffer_bytes = DefaultLocalBufferBytes();
  int threads = 2;
  // Tiling spaces (fusion_space/) offer bf16 tilings of the templates that
  // have them, the GEMM's (`tune --precision mixed`); set only where the
  // target has avx512_bf16. Kernels run whatever precision a tiling names.
  bool offer_bf16 = false;
};

// A thread's local buffer: one 64-byte aligned allocation of fixed capacity,
// carved into regions with Take(). Exceeding the capacity is a programmer
// error: tilings are validated against the capacity before a run.
class LocalBuffer {
 public:
  explicit LocalBuffer(size_t capacity_bytes);
  float* Take(size_t floats);
  void Reset() { used_ = 0; }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  size_t used_ = 0;
  std::unique_ptr<float, void (*)(float*)> data_;
};

// Runs fn(thread) for thread = 0 .. threads-1, each on its own thread: 0 on
// the caller, the others on the workers of a oneTBB arena kept for the
// process, which stay for a millisecond after a launch to take the next one
// (thread_launch.cpp). Work is split statically by thread index so that runs are
// deterministic. Returns the longest fn's seconds (the kernel's busy time;
// the rest of the call, waking and joining workers, is launch overhead).
double ForEachThread(int threads, const std::function<void(int)>& fn);
// ForEachThread for a kernel whose threads each return their stats: the sum
// of them, with busy_seconds the longest thread's time.
KernelStats RunThreadShares(int threads, const std::function<KernelStats(int)>& fn);

}  // namespace fusetune::kernels
