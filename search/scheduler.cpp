#include "search/scheduler.h"

#include <algorithm>

namespace fusetune::search {

double ExpectedSaving(const TaskStanding& task) {
  const double floor_gain = 0.05 / std::max(1, task.rounds);
  const double gain = std::max(task.recent_gain, floor_gain);
  return static_cast<double>(task.occurrences) * task.seconds * gain *
         (task.in_plan ? 1.0 : kOutsidePlanWeight);
}

int PickTask(const std::vector<TaskStanding>& tasks) {
  int best = -1;
  bool best_new = false;
  double best_value = -1;
  for (int i = 0; i < static_cast<int>(tasks.size()); ++i) {
    const TaskStanding& t = tasks[i];
    if (t.converged) continue;
    const bool is_new = t.rounds == 0;
    const double value =
        is_new ? static_cast<double>(t.occurrences) * t.seconds : ExpectedSaving(t);
    if (best < 0 || (is_new && !best_new) || (is_new == best_new && value > best_value)) {
      best = i;
      best_new = is_new;
      best_value = value;
    }
  }
  return best;
}

}  // namespace fusetune::search
