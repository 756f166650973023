// The tuner's showdown (search/tuner.h: Showdown): the whole plans recorded
// near the best, and the last min-cost partition, run head to head at the
// end of the job and recorded again on the best record's scale.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "fusion_space/plan_json.h"
#include "search/tuner_plans.h"

namespace fusetune::search {

namespace {

// The plans recorded within this of the best run in the showdown. A whole
// plan's record is off by some 5% either way (a ResNet-50 job's last
// min-cost partition, recorded 8.6% above the best record, ran 4% faster
// than it), so the window is wider than ConfirmContender's.
constexpr double kShowdownWithin = 1.10;
// The fastest distinct plans taken (the last min-cost partition besides),
// and the rounds they run: with 5 plans of a 40 ms model, some 13 s.
constexpr size_t kShowdownPlans = 4;
constexpr int kShowdownRounds = 5;

// The middle value; of an even count, the upper one (ConfirmContender's).
double MedianOf(std::vector<double> v) {
  const auto middle = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), middle, v.end());
  return *middle;
}

}  // namespace

// The fastest record of each distinct plan within kShowdownWithin of the
// best, fastest first, kShowdownPlans of them, and the last min-cost
// partition's when it is in the window too.
std::vector<size_t> Tuner::ShowdownPlans() const {
  const PlanState& plans = *plans_;
  std::vector<size_t> order(plans.measured.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plans.measured[a].seconds < plans.measured[b].seconds;
  });
  std::vector<size_t> chosen;
  std::set<std::string> seen;
  bool last_tuned_in = false;
  for (size_t i : order) {
    if (plans.measured[i].seconds > kShowdownWithin * plans.measured[order[0]].seconds) break;
    const std::string text = plans.plan_json[i].dump();
    if (!seen.insert(text).second) continue;
    const bool last_tuned = text == plans.last_tuned;
    if (chosen.size() < kShowdownPlans || (last_tuned && !last_tuned_in)) chosen.push_back(i);
    last_tuned_in = last_tuned_in || last_tuned;
  }
  return chosen;
}

// A plan in the showdown: its candidate, its kernels (for its record) and
// its runs, one a round.
struct Tuner::ShowdownEntry {
  size_t report;
  measure::Candidate candidate;
  std::vector<fusion_space::KernelTemplate> templates;
  std::vector<measure::MeasureResult> runs;
};

Status Tuner::Showdown() {
  std::vector<ShowdownEntry> entries;
  for (size_t i : ShowdownPlans()) {
    // A plan of an earlier job that this build no longer reads stays out.
    Result<fusion_space::Plan> plan = fusion_space::PlanFromJson(space_, plans_->plan_json[i]);
    if (!plan.ok()) continue;
    entries.push_back({i,
                       measure::PlanCandidate(graph_, space_, *plan, "showdown"),
                       PlanTemplates(space_, *plan),
                       {}});
  }
  if (entries.size() < 2 || entries[0].report != *plans_->best) return Status::Ok();
  const size_t n = entries.size();
  int rounds = 0;  // finished
  while (rounds < kShowdownRounds) {
    ReportProgress(fmt::format("whole model, showdown of {} plans, round {} of {}", n, rounds + 1,
                               kShowdownRounds));
    for (size_t k = 0; k < n; ++k) {
      if (Interrupted()) break;  // a round not finished counts for none
      ShowdownEntry& e = entries[(k + static_cast<size_t>(rounds)) % n];  // rotated
      e.runs.push_back(measure_(e.candidate));
      // A plan that fails now (a wrong output, a crash) is recorded as
      // such, and the showdown ends without a verdict.
      if (!e.runs.back().ok()) return CommitShowdownRecord(e, entries[0], 0);
    }
    if (Interrupted()) break;
    ++rounds;
  }
  if (rounds == 0) return Status::Ok();
  for (ShowdownEntry& e : entries) {
    e.runs.resize(static_cast<size_t>(rounds));
    FT_RETURN_IF_ERROR(CommitShowdownRecord(e, entries[0], rounds));
  }
  return Status::Ok();
}

Status Tuner::CommitShowdownRecord(const ShowdownEntry& entry, const ShowdownEntry& yardstick,
                                   int rounds) {
  const PlanReport& best = plans_->measured[yardstick.report];
  const PlanReport& own = plans_->measured[entry.report];
  measure::SearchNote note;
  note.plan_kind = own.kind;
  note.showdown =
      measure::SearchNote::Showdown{static_cast<int>(entry.runs.size()), best.record_id, 0};
  measure::MeasureResult result = entry.runs.back();
  if (result.ok()) {
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r)
      ratios.push_back(entry.runs[r].time.median / yardstick.runs[r].time.median);
    note.showdown->ratio = MedianOf(ratios);
    std::vector<measure::MeasureResult> sorted = entry.runs;
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.time.median < b.time.median; });
    result = sorted[sorted.size() / 2];  // its median run, as ConfirmContender's
  }
  db::Record record = MakeRecord(graph_key_, entry.candidate, result, context_.target,
                                 context_.job_id, entry.templates, note);
  if (record.status == db::RecordStatus::kOk) record.seconds = best.seconds * note.showdown->ratio;
  FT_RETURN_IF_ERROR(callbacks_.commit(record));
  PlanReport report{own.kind, record.seconds, own.groups,
                    static_cast<double>(result.bytes_in + result.bytes_out), record.id};
  plans_->Add(report, entry.candidate.plan, record.status);
  return Status::Ok();
}

}  // namespace fusetune::search
