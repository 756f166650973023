// Shape buckets as `--dim` lists and ranges name them (cli/cli_common.h).
#include <gtest/gtest.h>

#include "cli/cli_common.h"

namespace fusetune::cli {
namespace {

std::vector<int64_t> Values(const std::string& list) {
  auto values = DimValues("seq", list);
  EXPECT_TRUE(values.ok()) << values.error().ToString();
  return values.ok() ? *values : std::vector<int64_t>{};
}

TEST(DimValues, ListsKeepTheirOrder) {
  EXPECT_EQ(Values("64"), (std::vector<int64_t>{64}));
  EXPECT_EQ(Values("64,1,16"), (std::vector<int64_t>{64, 1, 16}));
}

TEST(DimValues, RangesTakeBothEndsAndThePowersOfTwoBetween) {
  EXPECT_EQ(Values("16..256"), (std::vector<int64_t>{16, 32, 64, 128, 256}));
  EXPECT_EQ(Values("1..8"), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(Values("10..100"), (std::vector<int64_t>{10, 16, 32, 64, 100}));
  EXPECT_EQ(Values("3..4"), (std::vector<int64_t>{3, 4}));
  // 0: a KV cache of no rows (a prompt's step), then powers of two from 1.
  EXPECT_EQ(Values("0..4"), (std::vector<int64_t>{0, 1, 2, 4}));
  // The largest sizes: no overflow past 2^62.
  const std::vector<int64_t> huge = Values("4611686018427387905..9223372036854775807");
  EXPECT_EQ(huge, (std::vector<int64_t>{4611686018427387905, 9223372036854775807}));
  EXPECT_EQ(Values("1..9223372036854775807").size(), 64u);
}

TEST(DimValues, ItemsMixAndRepeatOnlyOnce) {
  EXPECT_EQ(Values("1,4..16,16,300"), (std::vector<int64_t>{1, 4, 8, 16, 300}));
}

TEST(DimValues, BadItemsAreErrorsThatNameThem) {
  for (const char* bad : {"", "-4", "4..", "..8", "8..4", "8..8", "4...8", "a..b", "4,,8"}) {
    auto values = DimValues("seq", bad);
    ASSERT_FALSE(values.ok()) << bad;
    EXPECT_NE(values.error().ToString().find(std::string("--dim seq=") + bad), std::string::npos)
        << values.error().ToString();
  }
}

TEST(ExpandDimBuckets, EveryCombinationTheLastDimensionFastest) {
  ModelOptions options;
  options.dims = {"past=-1..1", "seq=1..4"};
  EXPECT_FALSE(ExpandDimBuckets(options).ok());  // no size is negative
  options.dims = {"past=1..2", "seq=1..4"};
  auto buckets = ExpandDimBuckets(options);
  ASSERT_TRUE(buckets.ok()) << buckets.error().ToString();
  std::vector<std::vector<std::string>> dims;
  for (const ModelOptions& b : *buckets) dims.push_back(b.dims);
  EXPECT_EQ(dims, (std::vector<std::vector<std::string>>{{"past=1", "seq=1"},
                                                         {"past=1", "seq=2"},
                                                         {"past=1", "seq=4"},
                                                         {"past=2", "seq=1"},
                                                         {"past=2", "seq=2"},
                                                         {"past=2", "seq=4"}}));
}

}  // namespace
}  // namespace fusetune::cli
