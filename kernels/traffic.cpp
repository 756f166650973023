#include "kernels/traffic.h"

#include <unistd.h>

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "target/target.h"

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

bool StreamsOutput(int64_t tensor_bytes) {
  static const int64_t half_llc = [] {
    const int64_t l3 = target::DetectTarget().l3_bytes;
    return l3 > 0 ? l3 / 2 : int64_t{16} << 20;  // no L3 reported: as a 32 MiB one
  }();
  return tensor_bytes > half_llc;
}

void WriteOut(float* dst, const float* src, int64_t n, bool stream) {
  if (stream) return StreamOut(dst, src, n);
  std::memcpy(dst, src, sizeof(float) * n);
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
