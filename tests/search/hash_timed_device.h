// A measurement double for the search tests: a deterministic device whose
// time is a function of the candidate's plan, and which keeps every plan it
// was asked for, to check that nothing is measured twice (the anchor's runs
// aside: the runs that time the host make no record).
#pragma once

#include <set>
#include <string>

#include "common/hash.h"
#include "measure/measurer.h"

namespace fusetune::testing {

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
