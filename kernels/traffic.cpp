#include "kernels/traffic.h"

#include <unistd.h>

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <tbb/task_arena.h>

#include "common/check.h"

namespace fusetune::kernels {

namespace {
float* AllocateFloats(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64 + 64;
  auto* p = static_cast<float*>(std::aligned_alloc(64, rounded));
  FT_CHECK(p != nullptr, "local buffer allocation of " + std::to_string(bytes) + " bytes failed");
  return p;
}

// Each thread keeps its local buffer between kernels, as an NPU core keeps
// its scratchpad: allocating and first-touching a fresh megabyte per launch
// costs page faults on every kernel. A second buffer wanted while the
// thread's own is in use gets an allocation of its own.
struct ThreadBufferPool {
  float* data = nullptr;
  size_t capacity = 0;
  bool in_use = false;
  ~ThreadBufferPool() { std::free(data); }
};
thread_local ThreadBufferPool thread_pool;

void ReleasePooled(float* p) {
  FT_CHECK(p == thread_pool.data, "a local buffer was released on another thread");
  thread_pool.in_use = false;
}
void FreeOwned(float* p) { std::free(p); }

std::unique_ptr<float, void (*)(float*)> AcquireLocal(size_t bytes) {
  if (thread_pool.in_use) return {AllocateFloats(bytes), FreeOwned};
  if (bytes > thread_pool.capacity) {
    std::free(thread_pool.data);
    thread_pool.data = AllocateFloats(bytes);
    thread_pool.capacity = bytes;
  }
  thread_pool.in_use = true;
  return {thread_pool.data, ReleasePooled};
}
}  // namespace

LocalBuffer::LocalBuffer(size_t capacity_bytes)
    : capacity_(capacity_bytes), data_(AcquireLocal(capacity_bytes)) {}

float* LocalBuffer::Take(size_t floats) {
  const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;  // keep every region aligned
  FT_CHECK(used_ + bytes <= capacity_ + 64, "local buffer overflow: the tiling was not validated");
  float* p = data_.get() + used_ / sizeof(float);
  used_ += bytes;
  return p;
}

namespace {

// Worker arenas, one per thread count, for the life of the process. An arena
// made and dropped per call costs more with every call (12 us growing past
// 300 us after 20,000 calls with oneTBB 2021.8).
tbb::task_arena& WorkerArena(int workers) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard<std::mutex> lock(mutex);
  auto& arena = arenas[workers];
  if (!arena) {
    arena = std::make_unique<tbb::task_arena>(workers, /*reserved_for_masters=*/0);
    arena->initialize();
  }
  return *arena;
}

double SecondsBetween(std::chrono::steady_clock::time_point a,
                      std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

// The caller runs share 0 and the arena's workers the others. The caller does
// not take another share at once, as parallel_for's caller did whenever a
// worker was slow to wake (both halves of a 20 us kernel on one thread in 44%
// of calls, halving its speed at random). It takes an unstarted share only
// after its own share and a grace period: on a machine with more runnable
// threads than cores, waiting for a worker that cannot get a core would cost
// milliseconds per launch.
double ForEachThread(int threads, const std::function<void(int)>& fn) {
  std::vector<double> busy(static_cast<size_t>(threads), 0.0);
  auto share = [&](int t) {
    const auto start = std::chrono::steady_clock::now();
    fn(t);
    busy[t] = SecondsBetween(start, std::chrono::steady_clock::now());
  };
  if (threads == 1) {
    share(0);
    return busy[0];
  }
  // Shared with the enqueued tasks, which may start after this call returns
  // (their share taken by the caller): they then only see it claimed.
  struct Shares {
    explicit Shares(int n) : claimed(new std::atomic<bool>[n]) {
      for (int i = 0; i < n; ++i) claimed[i] = false;
    }
    std::unique_ptr<std::atomic<bool>[]> claimed;
    std::atomic<int> done{0};
  };
  auto shares = std::make_shared<Shares>(threads);
  const std::function<void(int)> run = share;  // touched only by whoever claims a share
  auto try_run = [shares, run = &run](int t) {
    if (shares->claimed[t].exchange(true, std::memory_order_acq_rel)) return;
    (*run)(t);
    shares->done.fetch_add(1, std::memory_order_release);  // last touch of the caller's frame
  };
  tbb::task_arena& arena = WorkerArena(threads - 1);
  for (int t = 1; t < threads; ++t) arena.enqueue([try_run, t] { try_run(t); });
  share(0);
  const auto grace_end = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (shares->done.load(std::memory_order_acquire) < threads - 1) {
    if (std::chrono::steady_clock::now() < grace_end) {
      _mm_pause();
      continue;
    }
    for (int t = 1; t < threads; ++t) try_run(t);
    std::this_thread::yield();
  }
  return *std::max_element(busy.begin(), busy.end());
}

void StreamOut(float* dst, const float* src, int64_t n) {
#if defined(__AVX512F__)
  int64_t i = 0;
  // Head up to the first 64-byte boundary, then whole lines, then the tail.
  while (i < n && (reinterpret_cast<uintptr_t>(dst + i) & 63) != 0) {
    dst[i] = src[i];
    ++i;
  }
  for (; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
#else
  std::memcpy(dst, src, n * sizeof(float));
#endif
}

void StreamFence() {
#if defined(__AVX512F__)
  _mm_sfence();
#endif
}

size_t DefaultLocalBufferBytes() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return l2 > 0 ? static_cast<size_t>(l2) : size_t{1} << 20;
}

}  // namespace fusetune::kernels
