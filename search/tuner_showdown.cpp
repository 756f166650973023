// The tuner's showdown (search/tuner.h: Showdown): the whole plans recorded
// near the best, and the last min-cost partition, run head to head at the
// end of the job; those that beat the best record's plan are recorded again
// on its scale.
#include <fmt/format.h>

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
// Fewer finished rounds (Ctrl-C) are no verdict.
constexpr int kShowdownMinRounds = 3;
// A plan is recorded only when its median ratio to the best record's plan
// is below this: the lowest of a few ratios of equally fast plans is below
// 1 by chance, and each job on the same database runs a showdown again, so
// recording every ratio under 1 would walk the best record down job by job.
constexpr double kShowdownBeatBelow = 0.99;

}  // namespace

std::vector<size_t> Tuner::ShowdownPlans() const {
  const PlanState& plans = *plans_;
  std::vector<size_t> order(plans.measured.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plans.measured[a].seconds < plans.measured[b].seconds;
  });
  std::vector<size_t> chosen;
  std::set<std::string> seen;
  for (size_t i : order) {
    if (plans.measured[i].seconds > kShowdownWithin * plans.measured[order[0]].seconds) break;
    const std::string text = plans.plan_json[i].dump();
    if (!seen.insert(text).second) continue;
    if (chosen.size() < kShowdownPlans || text == plans.last_tuned) chosen.push_back(i);
  }
  return chosen;
}

// A plan in the showdown: its candidate, its kernels (for its record), its
// runs, one a round, and whether it is still in.
struct Tuner::ShowdownEntry {
  size_t report;
  measure::Candidate candidate;
  std::vector<fusion_space::KernelTemplate> templates;
  std::vector<measure::MeasureResult> runs;
  bool out = false;
};

Status Tuner::Showdown() {
  std::vector<ShowdownEntry> entries;
  for (size_t i : ShowdownPlans()) {
    // A plan of an earlier job that this build no longer reads stays out.
    Result<fusion_space::Plan> plan = fusion_space::PlanFromJson(space_, plans_->plan_json[i]);
    if (!plan.ok()) continue;
    entries.push_back({i,
                       measure::PlanCandidate(graph_, space_, *plan, kShowdownLabel),
                       PlanTemplates(space_, *plan),
                       {}});
  }
  if (entries.size() < 2 || entries[0].report != *plans_->best) return Status::Ok();
  int rounds = 0;  // finished
  for (; rounds < kShowdownRounds; ++rounds) {
    ReportProgress(fmt::format("whole model, showdown of {} plans, round {} of {}", entries.size(),
                               rounds + 1, kShowdownRounds));
    FT_ASSIGN_OR_RETURN(const bool finished, RunShowdownRound(entries, rounds));
    if (!finished) break;
  }
  // Ctrl-C during the showdown ends it without a verdict; the job keeps the
  // stop reason its search ended with, as after its last min-cost partition.
  if (rounds < kShowdownMinRounds || entries[0].out) return Status::Ok();
  ShowdownReport report;
  report.plans = static_cast<int>(entries.size());
  report.rounds = rounds;
  report.against = plans_->measured[entries[0].report].record_id;
  for (ShowdownEntry& e : entries) {
    if (e.out || &e == &entries[0]) continue;
    e.runs.resize(static_cast<size_t>(rounds));
    std::vector<double> ratios;
    for (int r = 0; r < rounds; ++r)
      ratios.push_back(e.runs[r].time.median / entries[0].runs[r].time.median);
    const double ratio = MedianBy(ratios, [](double x) { return x; });
    FT_RETURN_IF_ERROR(CommitShowdownWin(e, entries[0], ratio, &report));
  }
  plans_->showdown = report;
  return Status::Ok();
}

// Every plan still in runs once, starting from the round's index (rotated,
// so that no plan always runs first). A plan that fails now (a wrong
// output, a crash) is recorded as such and leaves; when the best record's
// plan fails, the showdown ends there. Returns whether the round finished.
Result<bool> Tuner::RunShowdownRound(std::vector<ShowdownEntry>& entries, int round) {
  const size_t n = entries.size();
  for (size_t k = 0; k < n; ++k) {
    ShowdownEntry& e = entries[(k + static_cast<size_t>(round)) % n];
    if (e.out) continue;
    if (Interrupted()) return false;
    e.runs.push_back(measure_(e.candidate));
    if (e.runs.back().ok()) continue;
    e.out = true;
    measure::SearchNote note;
    note.plan_kind = plans_->measured[e.report].kind;
    note.showdown = measure::SearchNote::Showdown{static_cast<int>(e.runs.size()),
                                                  plans_->measured[entries[0].report].record_id, 0};
    FT_RETURN_IF_ERROR(CommitPlanRecord(e.candidate, e.templates, e.runs.back(), note, 0));
    if (&e == &entries[0]) return false;
  }
  return true;
}

Status Tuner::CommitShowdownWin(const ShowdownEntry& entry, const ShowdownEntry& yardstick,
                                double ratio, ShowdownReport* report) {
  const PlanReport own = plans_->measured[entry.report];
  const PlanReport best = plans_->measured[yardstick.report];
  const bool fastest = report->fastest_other == 0 || ratio < report->ratio;
  if (fastest) {
    report->fastest_other = own.record_id;
    report->ratio = ratio;
  }
  if (ratio >= kShowdownBeatBelow) return Status::Ok();
  measure::SearchNote note;
  note.plan_kind = own.kind;
  note.showdown =
      measure::SearchNote::Showdown{static_cast<int>(entry.runs.size()), best.record_id, ratio};
  const measure::MeasureResult median_run =
      MedianBy(entry.runs, [](const measure::MeasureResult& r) { return r.time.median; });
  FT_ASSIGN_OR_RETURN(
      const db::Record record,
      CommitPlanRecord(entry.candidate, entry.templates, median_run, note, best.seconds * ratio));
  if (fastest) report->winner = record.id;
  return Status::Ok();
}

}  // namespace fusetune::search
