// The task scheduler: which task gets the next round. A round goes to the
// task whose improvement would shorten the whole model most: its share of
// the model's time (best time, measured or predicted, times the number of
// times it occurs) times the gain it is expected to make (its last round's
// relative improvement, with a floor that shrinks as it gets more rounds,
// so a task that stalled once still gets another look), discounted for
// tasks outside the partition chosen last (they shorten the model only if
// they get fast enough to change it). Tasks that have had no round yet go
// first, the heaviest first; converged tasks get none.
#pragma once

#include <cstdint>
#include <vector>

namespace fusetune::search {

struct TaskStanding {
  int64_t occurrences = 1;
  double seconds = 0;  // best measured, else predicted
  double recent_gain = 1;
  int rounds = 0;
  bool converged = false;
  bool in_plan = true;  // in the last partition chosen
};

inline constexpr double kOutsidePlanWeight = 0.2;

// The expected saving of one more round of a task, in seconds of the model.
double ExpectedSaving(const TaskStanding& task);

// The index of the task for the next round, or -1 when every task has converged.
int PickTask(const std::vector<TaskStanding>& tasks);

}  // namespace fusetune::search
