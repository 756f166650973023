// Deterministic randomness: one root seed for a job, forked per task by index,
// so that the same inputs give the same plan whatever order tasks run in.
#pragma once

#include <cstdint>
#include <limits>

#include "common/hash.h"

namespace fusetune {

// The seed of child `index` of `parent`: independent streams per task.
constexpr uint64_t ForkSeed(uint64_t parent, uint64_t index) {
  return Mix64(HashCombine(parent, Mix64(index + 0x5851f42d4c957f2dULL)));
}

// xoshiro256** seeded through SplitMix64; satisfies UniformRandomBitGenerator.
class Rng {
 public:
  using result_type = uint64_t;
  explicit Rng(uint64_t seed);
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return std::numeric_limits<uint64_t>::max(); }
  uint64_t operator()() { return Next(); }
  uint64_t Next();
  // Uniform integer in [0, bound) without modulo bias; bound > 0.
  uint64_t Below(uint64_t bound);
  // Uniform in [lo, hi].
  int64_t Between(int64_t lo, int64_t hi);
  // Uniform double in [0, 1).
  double Uniform();
  // Standard normal (Box-Muller).
  double Normal();
  Rng Fork(uint64_t index) const { return Rng(ForkSeed(seed_, index)); }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  uint64_t s_[4];
};

}  // namespace fusetune
