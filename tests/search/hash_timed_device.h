// A measurement double for the search tests: a deterministic device whose
// time is a function of the candidate's plan, and which keeps every plan it
// was asked for, to check that nothing is measured twice (the anchor's runs
// aside: the runs that time the host make no record).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/hash.h"
#include "db/database.h"
#include "measure/measurer.h"
#include "measure/result.h"
#include "search/tuner.h"

namespace fusetune::testing {

// Whether a record is a showdown's (search/tuner.h: Tuner::Showdown): a
// plan recorded again, on purpose, from runs the device doubles keep apart.
inline bool IsShowdownRecord(const db::Record& r) {
  const auto metrics = measure::MetricsFromText(r.metrics);
  return metrics.ok() && metrics->search && metrics->search->showdown;
}

// The device runs the records stand for, as the plan texts a device saw:
// one per record, a confirmed whole plan's record its confirm_runs
// (search/tuner.h: ConfirmContender runs it beside fresh anchor runs and
// records its median run). The showdown's runs are not among them: most
// make no record.
inline std::multiset<std::string> RunsOfRecords(const std::vector<db::Record>& records) {
  std::multiset<std::string> runs;
  for (const db::Record& r : records) {
    if (IsShowdownRecord(r)) continue;
    const auto metrics = measure::MetricsFromText(r.metrics);
    const int n = metrics.ok() && metrics->search && metrics->search->confirm_runs > 0
                      ? metrics->search->confirm_runs
                      : 1;
    const std::string text = nlohmann::json::parse(r.plan).dump();
    for (int i = 0; i < n; ++i) runs.insert(text);
  }
  return runs;
}

// Every device run (the anchors' and the showdown's aside) is in a record,
// and no candidate is recorded twice but by the showdown.
inline void ExpectEachCandidateRecordedOnce(const std::vector<db::Record>& records,
                                            const std::multiset<std::string>& measured) {
  EXPECT_EQ(RunsOfRecords(records), measured);
  std::set<std::string> recorded;
  for (const db::Record& r : records) {
    if (IsShowdownRecord(r)) continue;
    EXPECT_TRUE(recorded.insert(r.workload_key + r.plan).second) << "measured twice: " << r.plan;
  }
}

struct HashTimedDevice {
  std::multiset<std::string> measured, showdown;
  measure::MeasureResult operator()(const measure::Candidate& c) {
    const std::string text = c.plan.dump();
    if (c.label == search::kShowdownLabel)
      showdown.insert(text);
    else if (!c.anchor)
      measured.insert(text);
    measure::MeasureResult r;
    r.status = measure::MeasureStatus::kOk;
    const uint64_t h = HashBytes(text.data(), text.size(), 11);
    r.time.median = 1e-5 * (1.0 + static_cast<double>(h % 1000) / 1000.0);
    return r;
  }
};

}  // namespace fusetune::testing
