// Calibration: measures what this machine reaches (the record type lives in
// target/calibration.h, so that readers of a stored calibration need not
// link measure/).
#pragma once

#include "target/calibration.h"

namespace fusetune::measure {

// Takes a few seconds: peak FMA on 1 and `threads` threads, DRAM read, copy
// and triad, L2 read, and the executor's per-launch cost.
target::Calibration Calibrate(int threads);

}  // namespace fusetune::measure
