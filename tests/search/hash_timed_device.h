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

namespace fusetune::testing {

// The device runs the records stand for, as the plan texts a device saw:
// one per record, a confirmed whole plan's record its confirm_runs
// (search/tuner.h: ConfirmContender runs it beside fresh anchor runs and
// records its median run), a showdown's record its showdown runs.
inline std::multiset<std::string> RunsOfRecords(const std::vector<db::Record>& records) {
  std::multiset<std::string> runs;
  for (const db::Record& r : records) {
    const auto metrics = measure::MetricsFromText(r.metrics);
    int n = 1;
    if (metrics.ok() && metrics->search && metrics->search->showdown)
      n = metrics->search->showdown->runs;
    else if (metrics.ok() && metrics->search && metrics->search->confirm_runs > 0)
      n = metrics->search->confirm_runs;
    const std::string text = nlohmann::json::parse(r.plan).dump();
    for (int i = 0; i < n; ++i) runs.insert(text);
  }
  return runs;
}

// Every device run (the anchors' aside) is in a record, and no candidate is
// recorded twice but by the job's showdown (search/tuner.h: Showdown), which
// records the plans it runs again on purpose, once each.
inline void ExpectEachCandidateRecordedOnce(const std::vector<db::Record>& records,
                                            const std::multiset<std::string>& measured) {
  EXPECT_EQ(RunsOfRecords(records), measured);
  std::set<std::string> recorded, showdown;
  for (const db::Record& r : records) {
    const auto metrics = measure::MetricsFromText(r.metrics);
    const bool again = metrics.ok() && metrics->search && metrics->search->showdown;
    EXPECT_TRUE((again ? showdown : recorded).insert(r.workload_key + r.plan).second)
        << "measured twice: " << r.plan;
  }
}

struct HashTimedDevice {
  std::multiset<std::string> measured;
  measure::MeasureResult operator()(const measure::Candidate& c) {
    const std::string text = c.plan.dump();
    if (!c.anchor) measured.insert(text);
    measure::MeasureResult r;
    r.status = measure::MeasureStatus::kOk;
    const uint64_t h = HashBytes(text.data(), text.size(), 11);
    r.time.median = 1e-5 * (1.0 + static_cast<double>(h % 1000) / 1000.0);
    return r;
  }
};

}  // namespace fusetune::testing
