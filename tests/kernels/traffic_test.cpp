// kernels/traffic.h's output stores: WriteOut copies exactly, streamed or
// not, whatever the alignment; StreamsOutput streams only what cannot stay
// in the last-level cache.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/traffic.h"

namespace fusetune::kernels {
namespace {

TEST(WriteOut, CopiesEveryFloatStreamedOrNot) {
  std::vector<float> src(300);
  for (size_t i = 0; i < src.size(); ++i) src[i] = 0.25f * static_cast<float>(i) - 7.0f;
  for (const bool stream : {false, true}) {
    // Offsets 0..16 put the head before the first 64-byte line anywhere;
    // lengths leave tails of every size.
    for (int64_t offset = 0; offset <= 16; offset += 3) {
      for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{250}}) {
        std::vector<float> dst(src.size() + 32, -1.0f);
        WriteOut(dst.data() + offset, src.data(), n, stream);
        StreamFence();
        for (int64_t i = 0; i < static_cast<int64_t>(dst.size()); ++i) {
          const bool written = i >= offset && i < offset + n;
          ASSERT_EQ(dst[i], written ? src[i - offset] : -1.0f)
              << "stream " << stream << " offset " << offset << " n " << n << " at " << i;
        }
      }
    }
  }
}

TEST(StreamsOutput, OnlyOutputsTooLargeToStayCached) {
  EXPECT_FALSE(StreamsOutput(0));
  EXPECT_FALSE(StreamsOutput(int64_t{64} << 10));  // any last-level cache holds 64 KiB
  EXPECT_TRUE(StreamsOutput(int64_t{1} << 40));    // none holds half a TiB
  // Monotone: once an output is streamed, every larger one is.
  bool streamed = false;
  for (int64_t bytes = 1; bytes <= (int64_t{1} << 40); bytes *= 2) {
    const bool now = StreamsOutput(bytes);
    EXPECT_TRUE(now || !streamed) << bytes;
    streamed = now;
  }
}

}  // namespace
}  // namespace fusetune::kernels
