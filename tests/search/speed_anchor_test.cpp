// search/speed_anchor.h: the anchor's first read runs it until three times
// are known and reads their median; a young run is read again, a stale one
// is taken anew, a slow one taken twice; a failed run reads nothing; an
// earlier run counts once; a reading scales times to the reference speed.
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
  EXPECT_EQ(read->now, 5.1);        // now: the last run
  EXPECT_EQ(read->reference, 5.1);  // the median of 4.9, 5.1, 12.8
  read = anchor.Read({}, std::ref(device));
  EXPECT_EQ(device.runs, 3u) << "a young run is read again";
  EXPECT_EQ(read->now, 5.1);
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
  EXPECT_EQ(read->now, 2.0);
  EXPECT_EQ(read->reference, 3.0);  // lower median of 2, 3, 4
  read = anchor.Read({}, std::ref(device));
  EXPECT_EQ(device.runs, 3u) << "8 is over 1.25x the reference of 3: confirmed by a second run";
  EXPECT_EQ(read->now, 9.0) << "a slowdown that lasts is taken";
}

TEST(SpeedAnchor, ASlowRunIsTakenAgainAndTheSecondRunRead) {
  ScriptedAnchor device{{4.9, 5.0, 5.1, 10.0, 5.0, 5.2}};
  SpeedAnchor anchor(/*max_age_seconds=*/0);
  auto read = anchor.Read({}, std::ref(device));  // the seed: 4.9, 5.0, 5.1
  ASSERT_TRUE(read);
  EXPECT_EQ(read->now, 5.1);
  read = anchor.Read({}, std::ref(device));
  ASSERT_TRUE(read);
  EXPECT_EQ(device.runs, 5u);
  EXPECT_EQ(read->now, 5.0) << "a stall of the anchor's run alone is not the host's speed";
  read = anchor.Read({}, std::ref(device));
  EXPECT_EQ(device.runs, 6u) << "5.2 is within 1.25x: read once";
  EXPECT_EQ(read->now, 5.2);
}

TEST(SpeedAnchor, AReadingScalesTimesToTheReferenceSpeed) {
  const AnchorReading slow_moment{/*now=*/10.0, /*reference=*/5.0};
  EXPECT_DOUBLE_EQ(slow_moment.Scale(4.0), 2.0);
  const AnchorReading fast_moment{/*now=*/2.5, /*reference=*/5.0};
  EXPECT_DOUBLE_EQ(fast_moment.Scale(4.0), 8.0);
}

TEST(SpeedAnchor, AFailedRunReadsNothing) {
  ScriptedAnchor device{{5.0, -1}};
  SpeedAnchor anchor;
  EXPECT_FALSE(anchor.Read({}, std::ref(device)));
  EXPECT_EQ(device.runs, 2u);
}

}  // namespace
}  // namespace fusetune::search
