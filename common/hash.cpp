#include "common/hash.h"

#include <cstdio>

namespace fusetune {

uint64_t HashBytes(const void* data, size_t size, uint64_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = Mix64(seed ^ size);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    h = HashCombine(h, word);
  }
  uint64_t tail = 0;
  for (size_t k = 0; i < size; ++i, ++k) tail |= static_cast<uint64_t>(bytes[i]) << (8 * k);
  return Mix64(HashCombine(h, tail));
}

std::string HashToHex(uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

}  // namespace fusetune
