#include "kernels/traffic.h"

#include <unistd.h>

#include <immintrin.h>

#include <cstdlib>
#include <cstring>
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
}  // namespace

LocalBuffer::LocalBuffer(size_t capacity_bytes)
    : capacity_(capacity_bytes),
      data_(AllocateFloats(capacity_bytes), [](float* p) { std::free(p); }) {}

float* LocalBuffer::Take(size_t floats) {
  const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;  // keep every region aligned
  FT_CHECK(used_ + bytes <= capacity_ + 64, "local buffer overflow: the tiling was not validated");
  float* p = data_.get() + used_ / sizeof(float);
  used_ += bytes;
  return p;
}

void ForEachThread(int threads, const std::function<void(int)>& fn) {
  if (threads == 1) {
    fn(0);
    return;
  }
  tbb::task_arena arena(threads);
  arena.execute([&] { tbb::parallel_for(0, threads, 1, [&](int t) { fn(t); }); });
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
