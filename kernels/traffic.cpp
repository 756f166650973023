#include "kernels/traffic.h"

#include <unistd.h>

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include <tbb/parallel_for.h>
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

// One arena per thread count for the life of the process. An arena made and
// dropped per call costs more with every call (12 us growing past 300 us
// after 20,000 calls with oneTBB 2021.8): workers keep leaving and joining.
tbb::task_arena& ArenaFor(int threads) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
  std::lock_guard<std::mutex> lock(mutex);
  auto& arena = arenas[threads];
  if (!arena) {
    arena = std::make_unique<tbb::task_arena>(threads);
    arena->initialize();
  }
  return *arena;
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

double ForEachThread(int threads, const std::function<void(int)>& fn) {
  std::atomic<int64_t> first_start{std::numeric_limits<int64_t>::max()}, last_end{0};
  auto timed = [&](int t) {
    const int64_t start = NowNanos();
    fn(t);
    const int64_t end = NowNanos();
    int64_t seen = first_start.load();
    while (start < seen && !first_start.compare_exchange_weak(seen, start)) {
    }
    seen = last_end.load();
    while (end > seen && !last_end.compare_exchange_weak(seen, end)) {
    }
  };
  if (threads == 1) {
    timed(0);
  } else {
    ArenaFor(threads).execute([&] { tbb::parallel_for(0, threads, 1, timed); });
  }
  return static_cast<double>(last_end.load() - first_start.load()) * 1e-9;
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
