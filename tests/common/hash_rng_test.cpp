#include <gtest/gtest.h>

#include <set>

#include "common/hash.h"
#include "common/rng.h"

namespace fusetune {
namespace {

TEST(Hash, StableAcrossRuns) {
  // Keys in the tuning database depend on these values never changing.
  EXPECT_EQ(HashToHex(HashBytes("fusetune", 8)), HashToHex(HashBytes("fusetune", 8)));
  EXPECT_EQ(HashToHex(Mix64(0)), "e220a8397b1dcdaf");
}

TEST(Hash, TaggedFieldsDoNotCollide) {
  EXPECT_NE(Hasher().AddString("ab").AddString("c").digest(),
            Hasher().AddString("a").AddString("bc").digest());
  EXPECT_NE(Hasher().AddInt(1).AddInt(2).digest(), Hasher().AddInt(2).AddInt(1).digest());
}

TEST(Rng, SameSeedSameStream) {
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
}

TEST(Rng, ForksAreIndependentAndDeterministic) {
  EXPECT_EQ(ForkSeed(7, 3), ForkSeed(7, 3));
  std::set<uint64_t> seeds;
  for (uint64_t i = 0; i < 1000; ++i) seeds.insert(ForkSeed(7, i));
  EXPECT_EQ(seeds.size(), 1000u);
  Rng root(7);
  EXPECT_NE(root.Fork(0).Next(), root.Fork(1).Next());
}

TEST(Rng, BoundedDrawsStayInRange) {
  Rng r(1);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_LT(r.Below(7), 7u);
    const int64_t v = r.Between(-3, 3);
    EXPECT_GE(v, -3);
    EXPECT_LE(v, 3);
    const double u = r.Uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace fusetune
