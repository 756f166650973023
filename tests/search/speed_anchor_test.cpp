// search/speed_anchor.h: the anchor's first read runs it until three times
// are known and reads their median; a young run is read again, a stale one
// is taken anew; a failed run reads nothing; an earlier run counts once.
#include "search/speed_anchor.h"

#include <gtest/gtest.h>

#include <vector>

namespace fusetune::search {
namespace {

// Runs that take the next of `times` (a failure where it is negative).
struct ScriptedAnchor {
  std::vector<double> times;
  size_t runs = 0;
  measure::MeasureResult operator()(const measure::Candidate&) {
    const double t = times.at(runs++);
    if (t < 0) return measure::MeasureResult::Failure(measure::MeasureStatus::kFailed, "scripted");
    measure::MeasureResult r;
    r.status = measure::MeasureStatus::kOk;
    r.time.median = t;
    return r;
  }
};

TEST(SpeedAnchor, TheFirstReadSeedsThreeRunsAndReadsTheirMedian) {
  ScriptedAnchor device{{12.8, 4.9, 5.1}};
  SpeedAnchor anchor(/*max_age_seconds=*/60);
  auto read = anchor.Read({}, std::ref(device));
  ASSERT_TRUE(read);
  EXPECT_EQ(device.runs, 3u);
  EXPECT_EQ(read->first, 5.1);   // now: the last run
  EXPECT_EQ(read->second, 5.1);  // the median of 4.9, 5.1, 12.8
  read = anchor.Read({}, std::ref(device));
  EXPECT_EQ(device.runs, 3u) << "a young run is read again";
  EXPECT_EQ(read->first, 5.1);
}

TEST(SpeedAnchor, AStaleRunIsTakenAnewAndEarlierRunsCountOnce) {
  ScriptedAnchor device{{2.0, 8.0, 9.0}};
  SpeedAnchor anchor(/*max_age_seconds=*/0);
  anchor.AddRun(3.0);
  anchor.AddRun(3.0);  // the same earlier run, seen in two records
  anchor.AddRun(4.0);
  auto read = anchor.Read({}, std::ref(device));  // 3 known runs, none recent: one run
  ASSERT_TRUE(read);
  EXPECT_EQ(device.runs, 1u);
  EXPECT_EQ(anchor.runs(), 3u);
  EXPECT_EQ(read->first, 2.0);
  EXPECT_EQ(read->second, 3.0);  // lower median of 2, 3, 4
  read = anchor.Read({}, std::ref(device));
  EXPECT_EQ(device.runs, 2u);
  EXPECT_EQ(read->first, 8.0);
}

TEST(SpeedAnchor, AFailedRunReadsNothing) {
  ScriptedAnchor device{{5.0, -1}};
  SpeedAnchor anchor;
  EXPECT_FALSE(anchor.Read({}, std::ref(device)));
  EXPECT_EQ(device.runs, 2u);
}

}  // namespace
}  // namespace fusetune::search
