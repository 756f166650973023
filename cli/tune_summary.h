// The tables `fusetune tune` prints at the end of a job and `fusetune
// report` prints later: per task (baseline tiling, best, speedup, traffic
// reduction, overlap) and for the whole model (unfused, greedy, best).
#pragma once

#include <string>

#include "search/tuner.h"

namespace fusetune::cli {

// `max_rows` tasks, the heaviest first (occurrences x best time).
std::string FormatTuneSummary(const search::TuneSummary& summary, int max_rows = 25);

}  // namespace fusetune::cli
