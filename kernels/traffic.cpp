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

// Launch records in a fixed ring. An enqueued task may start after its
// launch returned (its share taken by the caller); it then finds its epoch
// gone and does nothing. Nothing it touches is freed, so nothing is leaked
// or used after free, whenever it runs.
struct LaunchSlot {
  std::atomic<bool> busy{false};
  uint64_t epoch = 0;              // written by the owning caller only
  std::atomic<uint64_t> state{0};  // epoch << 32 | next unclaimed share
  std::atomic<int> threads{0}, done{0};
  std::atomic<const std::function<void(int)>*> share{nullptr};
};
LaunchSlot launch_slots[256];
std::atomic<uint64_t> next_launch_slot{0};

LaunchSlot& AcquireSlot() {
  for (;;) {
    LaunchSlot& slot = launch_slots[next_launch_slot.fetch_add(1) % 256];
    if (!slot.busy.exchange(true, std::memory_order_acquire)) return slot;
  }
}

// Runs unclaimed shares of launch `epoch` until none is left.
void RunUnclaimedShares(LaunchSlot& slot, uint64_t epoch) {
  uint64_t s = slot.state.load(std::memory_order_acquire);
  for (;;) {
    if ((s >> 32) != epoch) return;
    const uint64_t next = s & 0xffffffffu;
    if (next >= static_cast<uint64_t>(slot.threads.load(std::memory_order_relaxed))) return;
    if (!slot.state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    (*slot.share.load(std::memory_order_relaxed))(static_cast<int>(next));
    slot.done.fetch_add(1, std::memory_order_release);
    s = slot.state.load(std::memory_order_acquire);
  }
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
  const std::function<void(int)> share = [&](int t) {
    const auto start = std::chrono::steady_clock::now();
    fn(t);
    busy[t] = SecondsBetween(start, std::chrono::steady_clock::now());
  };
  if (threads == 1) {
    share(0);
    return busy[0];
  }
  LaunchSlot& slot = AcquireSlot();
  const uint64_t epoch = ++slot.epoch & 0xffffffffu;
  slot.threads.store(threads, std::memory_order_relaxed);
  slot.share.store(&share, std::memory_order_relaxed);
  slot.done.store(0, std::memory_order_relaxed);
  slot.state.store(epoch << 32 | 1, std::memory_order_release);  // share 0 is the caller's
  tbb::task_arena& arena = WorkerArena(threads - 1);
  for (int t = 1; t < threads; ++t)
    arena.enqueue([&slot, epoch] { RunUnclaimedShares(slot, epoch); });
  share(0);
  const auto grace_end = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (slot.done.load(std::memory_order_acquire) < threads - 1) {
    if (std::chrono::steady_clock::now() < grace_end) {
      _mm_pause();
      continue;
    }
    RunUnclaimedShares(slot, epoch);
    std::this_thread::yield();
  }
  slot.busy.store(false, std::memory_order_release);
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

KernelStats RunThreadShares(int threads, const std::function<KernelStats(int)>& fn) {
  std::vector<KernelStats> per_thread(static_cast<size_t>(threads));
  const double busy = ForEachThread(threads, [&](int t) { per_thread[t] = fn(t); });
  KernelStats total;
  for (const KernelStats& s : per_thread) total += s;
  total.busy_seconds = busy;
  return total;
}

}  // namespace fusetune::kernels
