// A record's metrics against their stored text (MetricsToText and
// MetricsFromText, the one codec of the database's metrics column): every
// status and a full metrics struct with each kind of search note survive
// encode -> decode, the note's text is what the search wrote before it was a
// struct, and malformed text is an explained Error.
#include <gtest/gtest.h>

#include <cmath>

#include "measure/result.h"

namespace fusetune::measure {
namespace {

TimeStats Stats(double median) { return {median, 0.9 * median, 1.2 * median, 0.05, 17}; }

// Every field set to a value other than its default.
RecordMetrics FullMetrics() {
  RecordMetrics m;
  MeasureResult& r = m.measured;
  r.status = MeasureStatus::kWrong;
  r.error = "output 'y' differs";
  r.time = Stats(1.5e-3);
  r.busy = Stats(1.25e-3);
  r.copy_busy = Stats(0.5e-3);
  r.compute_busy = Stats(0.75e-3);
  r.threads = 4;
  r.caches_flushed = true;
  r.launches = 3;
  r.bytes_in = 1 << 20;
  r.bytes_out = 1 << 18;
  r.bandwidth_gbps = 12.5;
  r.overhead_seconds = 2.5e-5;
  r.overhead_per_launch_seconds = 8.25e-6;
  r.overlap = 0.625;
  r.flops = 2.5e9;
  r.compulsory_bytes = 3.5e6;
  r.roofline_fraction = 0.375;
  r.max_error = 0.125;
  r.worst = WorstElement{"y", {1, 2, 3}, 1.5, 2.5, 0.125};
  r.run_seconds = 0.25;
  r.measure_seconds = 0.5;
  SearchNote note;
  note.predicted_seconds = 1.25e-3;
  note.model = "xgboost/pairwise";
  note.random = true;
  note.suggested = true;
  m.search = note;
  return m;
}

void ExpectStatsEq(const TimeStats& a, const TimeStats& b) {
  EXPECT_DOUBLE_EQ(a.median, b.median);
  EXPECT_DOUBLE_EQ(a.min, b.min);
  EXPECT_DOUBLE_EQ(a.max, b.max);
  EXPECT_DOUBLE_EQ(a.spread, b.spread);
  EXPECT_EQ(a.count, b.count);
}

TEST(RecordMetrics, FullMetricsRoundTrip) {
  const RecordMetrics m = FullMetrics();
  auto back = MetricsFromText(MetricsToText(m));
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  const MeasureResult &a = m.measured, &b = back->measured;
  EXPECT_EQ(b.status, a.status);
  EXPECT_EQ(b.error, a.error);
  ExpectStatsEq(b.time, a.time);
  ExpectStatsEq(b.busy, a.busy);
  ExpectStatsEq(b.copy_busy, a.copy_busy);
  ExpectStatsEq(b.compute_busy, a.compute_busy);
  EXPECT_EQ(b.threads, a.threads);
  EXPECT_EQ(b.caches_flushed, a.caches_flushed);
  EXPECT_EQ(b.launches, a.launches);
  EXPECT_EQ(b.bytes_in, a.bytes_in);
  EXPECT_EQ(b.bytes_out, a.bytes_out);
  EXPECT_DOUBLE_EQ(b.bandwidth_gbps, a.bandwidth_gbps);
  EXPECT_DOUBLE_EQ(b.overhead_seconds, a.overhead_seconds);
  EXPECT_DOUBLE_EQ(b.overhead_per_launch_seconds, a.overhead_per_launch_seconds);
  EXPECT_DOUBLE_EQ(b.overlap, a.overlap);
  EXPECT_DOUBLE_EQ(b.flops, a.flops);
  EXPECT_DOUBLE_EQ(b.compulsory_bytes, a.compulsory_bytes);
  EXPECT_DOUBLE_EQ(b.roofline_fraction, a.roofline_fraction);
  EXPECT_DOUBLE_EQ(b.max_error, a.max_error);
  ASSERT_TRUE(b.worst.has_value());
  EXPECT_EQ(b.worst->output, a.worst->output);
  EXPECT_EQ(b.worst->position, a.worst->position);
  EXPECT_DOUBLE_EQ(b.worst->got, a.worst->got);
  EXPECT_DOUBLE_EQ(b.worst->want, a.worst->want);
  EXPECT_DOUBLE_EQ(b.worst->error, a.worst->error);
  EXPECT_DOUBLE_EQ(b.run_seconds, a.run_seconds);
  EXPECT_DOUBLE_EQ(b.measure_seconds, a.measure_seconds);
  EXPECT_EQ(back->search, m.search);
  // Encoding what was decoded gives the same text.
  EXPECT_EQ(MetricsToText(*back), MetricsToText(m));
}

TEST(RecordMetrics, EveryStatusAndNoteKindRoundTripsInMetrics) {
  for (MeasureStatus s : kAllMeasureStatuses) {
    RecordMetrics m = FullMetrics();
    m.measured.status = s;
    auto back = MetricsFromText(MetricsToText(m));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->measured.status, s);
  }
  RecordMetrics plan = FullMetrics();
  for (PlanKind kind : kAllPlanKinds) {
    plan.search = SearchNote{};
    plan.search->plan_kind = kind;
    plan.search->remeasure = true;
    plan.search->confirm_runs = 3;
    plan.search->showdown = SearchNote::Showdown{5, 699, 0.96};
    auto back = MetricsFromText(MetricsToText(plan));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->search, plan.search);
  }
  plan.search.reset();
  auto back = MetricsFromText(MetricsToText(plan));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->search.has_value());
}

// A whole plan's note of a kind this version does not know (a newer
// version's) reads as a plan the search built, not as a tiling's note.
TEST(RecordMetrics, AnUnknownPlanKindReadsAsTuned) {
  RecordMetrics m;
  m.measured.status = MeasureStatus::kOk;
  m.search = SearchNote{};
  m.search->plan_kind = PlanKind::kGreedy;
  std::string text = MetricsToText(m);
  const size_t at = text.find("\"greedy\"");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 8, "\"sharded\"");
  auto back = MetricsFromText(text);
  ASSERT_TRUE(back.ok() && back->search);
  EXPECT_EQ(back->search->plan_kind, PlanKind::kTuned);
}

TEST(RecordMetrics, NonFiniteErrorsRoundTrip) {
  RecordMetrics m = FullMetrics();
  m.measured.max_error = INFINITY;
  m.measured.worst->error = INFINITY;
  auto back = MetricsFromText(MetricsToText(m));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(std::isinf(back->measured.max_error));
  EXPECT_TRUE(std::isinf(back->measured.worst->error));
}

// The text the search wrote inline before the note was a struct is the text
// written now (existing databases and exports stay as they are).
TEST(RecordMetrics, NoteTextIsTheSearchsFormerText) {
  RecordMetrics m;
  m.measured.status = MeasureStatus::kOk;
  m.search = SearchNote{};
  m.search->plan_kind = PlanKind::kUnfused;
  const std::string plan = MetricsToText(m);
  EXPECT_NE(plan.find(R"("search":{"plan_kind":"unfused"})"), std::string::npos) << plan;
  m.search = SearchNote{};
  m.search->predicted_seconds = 0.5;
  m.search->model = "xgboost/regression";
  const std::string tiling = MetricsToText(m);
  EXPECT_NE(tiling.find(R"("search":{"model":"xgboost/regression","predicted_seconds":0.5,)"
                        R"("random":false,"suggested":false})"),
            std::string::npos)
      << tiling;
}

// A record's default metrics ("{}", or JSONL imported without them) stay
// usable: the record's own status column says what happened.
TEST(RecordMetrics, MetricsWithoutAStatusDecodeAsAnEmptyMeasurement) {
  auto empty = MetricsFromText("{}");
  ASSERT_TRUE(empty.ok()) << empty.error().ToString();
  EXPECT_EQ(empty->measured.bytes_in, 0);
  EXPECT_FALSE(empty->search.has_value());
  auto bytes = MetricsFromText(R"({"bytes_in":64})");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->measured.bytes_in, 64);
}

TEST(RecordMetrics, MalformedMetricsAreExplainedErrors) {
  const char* bad[] = {
      "",                                         // empty
      "not json",                                 // not JSON
      "[1,2]",                                    // not an object
      R"({"status":"crashed"})",                  // unknown status
      R"({"status":"ok","threads":"four"})",      // wrong type
      R"({"status":"ok","worst":{"output":1}})",  // incomplete worst element
      R"({"status":"ok","search":[1]})",          // a note that is not an object
  };
  for (const char* text : bad) {
    auto m = MetricsFromText(text);
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_EQ(m.error().code(), ErrorCode::kParse) << text;
    EXPECT_NE(m.error().message().find("record metrics"), std::string::npos) << m.error().message();
  }
  auto unknown = MetricsFromText(R"({"status":"crashed"})");
  EXPECT_NE(unknown.error().message().find("'crashed'"), std::string::npos)
      << unknown.error().message();
}

}  // namespace
}  // namespace fusetune::measure
