// Stable 64-bit hashing: the same bytes give the same hash on every run and
// machine (keys in the tuning database depend on it). Not cryptographic.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace fusetune {

// Finalizer of SplitMix64: a strong 64-bit mixer.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return Mix64(seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

uint64_t HashBytes(const void* data, size_t size, uint64_t seed = 0);

// Incremental hasher. Each Add is length- and type-tagged so that
// ("ab","c") and ("a","bc") differ.
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0x6675736574756e65ULL) : state_(seed) {}
  Hasher& Add(uint64_t v) {
    state_ = HashCombine(state_, v);
    return *this;
  }
  Hasher& AddInt(int64_t v) { return Add(static_cast<uint64_t>(v)); }
  Hasher& AddDouble(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return Add(bits);
  }
  Hasher& AddString(std::string_view s) {
    Add(s.size());
    return Add(HashBytes(s.data(), s.size()));
  }
  Hasher& AddBytes(const void* data, size_t size) {
    Add(size);
    return Add(HashBytes(data, size));
  }
  uint64_t digest() const { return Mix64(state_); }

 private:
  uint64_t state_;
};

// 16 lowercase hex digits.
std::string HashToHex(uint64_t hash);

}  // namespace fusetune
