// Buffer planning: every value a kernel writes for a later kernel gets an
// offset in one arena (graph outputs are written into the tensors a run
// returns, outside it). A value is live from the step that writes it to the
// last step that reads it; values whose lifetimes do not overlap share
// memory. Placement is greedy by size, first fit among the blocks of
// overlapping lifetimes (as TFLite's arena planner does), with 64-byte
// alignment.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "graph/graph.h"

namespace fusetune::runtime {

struct BufferLifetime {
  graph::ValueId value = graph::kNoValue;
  int64_t bytes = 0;
  int64_t first_step = 0, last_step = 0;
};

struct BufferPlan {
  std::map<graph::ValueId, int64_t> offset;  // bytes into the arena
  int64_t arena_bytes = 0;                   // what the plan allocates
  int64_t peak_live_bytes = 0;  // most bytes live at one step: a lower bound for any plan
  int64_t no_reuse_bytes = 0;   // every value in its own buffer
  int64_t values = 0;
};

BufferPlan PlanBuffers(const std::vector<BufferLifetime>& lifetimes, int64_t steps);

}  // namespace fusetune::runtime
