// The tuner: the search lifecycle of one tuning job over one model.
//
//   Tuner tuner(graph, tasks, options, context, measure, callbacks);
//   tuner.AddPrior(record)...   records already in the database (a resumed
//                               job, earlier jobs): never measured again
//   tuner.SetHistory(dataset)   training samples for online model updates
//   tuner.Run()                 until the budget is spent, every task has
//                               converged, or should_stop() says so
//   tuner.Summary()             per task and whole model, also mid-job
//
// Run():
//   1. measures the whole model's unfused and greedy plans (the baselines);
//   2. repeats: the scheduler (scheduler.h) picks a task, its evolutionary
//      search (evolution.h) proposes a round of tilings ranked by the cost
//      model, corrected by the task's own residuals (residuals.h), each is measured, and handed to
//      callbacks.commit when the round ends (AfterRound settles its anchor reading); every
//      `model_update_every` new results the XGBoost model is retrained within
//      `model_update_seconds` (online update); a task's round also tries the best tilings of tasks
//      with the same tiling space (the same GEMM with another epilogue), and such an untried
//      tiling reopens a converged task;
//   3. once every task has had a round, and every `partition_every` rounds
//      after that, the exact minimum-cost partition (fusion_space/partition.h)
//      over the best known group costs (measured, else predicted) is turned
//      into a whole plan and measured end to end, unless the same plan was
//      measured before; and once more at the end. A whole plan about as
//      fast as the best so far is run three times and recorded at its
//      median run (ConfirmContender), the greedy baseline too;
//   4. at the end, the plans recorded near the best (the last min-cost
//      partition among them when it is near) run head to head in rotated
//      rounds (Showdown); one that beats the best record's plan is recorded
//      again on that record's scale.
// The best whole plan is the fastest measured one, unfused and greedy
// included, so it is never slower than either.
//
// Search never writes the database: results, checkpoints and the model flow
// back through TunerCallbacks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cost_model/dataset.h"
#include "measure/result.h"
#include "search/evolution.h"
#include "search/scheduler.h"
#include "search/speed_anchor.h"

namespace fusetune::search {

struct TunerOptions {
  int64_t max_trials = 0;     // group measurements; 0: no limit
  double max_seconds = 0;     // wall time of the job; 0: no limit
  int64_t trials_before = 0;  // spent by the job before a resume
  double seconds_before = 0;
  int round_size = 8;
  int first_round_size = 2;  // a task's first round: its default tiling and the predicted best
  EvolutionOptions evolution;
  uint64_t seed = 1;
  int model_update_every = 64;  // new ok results between online updates; 0: never
  double model_update_seconds = 10;
  int partition_every = 16;  // rounds between whole-plan measurements
  // How old a run of the anchor may be and still be read (SpeedAnchor).
  double anchor_max_age_seconds = SpeedAnchor::kMaxAgeSeconds;
  // When every task has converged: stop, or (a trial or time budget left)
  // reopen the tasks whose spaces are not exhausted, with doubled patience.
  bool stop_when_converged = true;
  // False: the search without a cost model (cost_model::MakeUnguidedModel):
  // each round a random draw from the evolved candidates, no online model
  // updates, no residual corrections; SetModel is ignored. What the model
  // saves in ranking tilings is measured against it
  // (bench/ablation/run_model_ablation.sh). Choosing partitions is the same
  // in both: a group not measured yet is costed analytically
  // (PredictedSeconds), a measured one by its best time.
  bool guided = true;
  // No group trials: the baselines and the exact partition over the groups'
  // records (the priors), measured end to end. A cluster job's finishing
  // step, after its shards measured the groups (shard_job.h).
  bool whole_model_only = false;
  measure::MeasureOptions measure;
};

// Where the job runs: the target's fingerprint and calibration, the job id
// records carry, and the whole graph's workload key.
struct TunerContext {
  std::string target;
  cost_model::TargetFeatures target_features;
  int64_t job_id = 0;
};

struct TunerProgress {
  int64_t trials = 0;  // this job's, resumes included
  int64_t max_trials = 0;
  double seconds = 0, max_seconds = 0;
  int tasks = 0, tasks_converged = 0;
  std::optional<double> best_model_seconds, unfused_seconds;
  std::string current;  // what is being measured
};

struct TunerCallbacks {
  std::function<Status(db::Record& record)> commit;  // each result, at its round's end
  std::function<void(const TunerProgress&)> progress;
  std::function<bool()> should_stop;  // polled between measurements (Ctrl-C)
  // After every round: what resuming and reporting need (the job's progress).
  std::function<Status(const nlohmann::json& summary)> checkpoint;
};

struct TaskReport {
  std::string key, summary, kind;
  int64_t occurrences = 0, space_size = 0, measured = 0;
  int rounds = 0;
  bool converged = false;
  std::optional<double> baseline_seconds, best_seconds;  // default tiling, best tiling
  double baseline_bytes = 0, best_bytes = 0, best_overlap = -1;
  std::string best_tiling;
};

struct PlanReport {
  measure::PlanKind kind = measure::PlanKind::kTuned;
  double seconds = 0;
  int64_t groups = 0;
  double bytes = 0;
  int64_t record_id = 0;
};

// Why a run stopped. Its name (StopCauseName) is the summary's stop_reason:
// text only at the boundaries (the job's JSON, the CLI, the Python binding).
enum class StopCause { kInterrupted, kTrials, kTime, kConverged, kWholeModel };
const char* StopCauseName(StopCause cause);

// The showdown at a job's end (Tuner::Showdown): how many plans ran how many
// rounds against the best record's plan (`against`), and the fastest of the
// others head to head: its record's id and its median ratio to that plan.
// `winner` is set when it beat the best and was recorded.
struct ShowdownReport {
  int plans = 0, rounds = 0;
  int64_t against = 0;
  int64_t fastest_other = 0;  // the record it ran as
  double ratio = 1;
  std::optional<int64_t> winner;  // its new record
};

struct TuneSummary {
  std::vector<TaskReport> tasks;
  std::vector<PlanReport> plans;  // every whole plan measured, in order
  std::optional<PlanReport> unfused, greedy, best;
  std::optional<ShowdownReport> showdown;  // none when fewer than 2 plans were near the best
  nlohmann::json best_plan;  // plan file JSON of `best`
  int64_t trials = 0, failed_trials = 0, model_updates = 0;
  double seconds = 0;
  std::string stop_reason;  // a StopCauseName, or "error"
};
nlohmann::json SummaryToJson(const TuneSummary& summary);
Result<TuneSummary> SummaryFromJson(const nlohmann::json& json);

// The label of the showdown's candidates (Tuner::Showdown), whose runs make
// a record only when they beat the best.
inline constexpr char kShowdownLabel[] = "showdown";

class Tuner {
 public:
  Tuner(std::shared_ptr<const graph::Graph> graph, fusion_space::FusionSpace& space,
        std::vector<Task> tasks, TunerOptions options, TunerContext context, MeasureFn measure,
        TunerCallbacks callbacks);
  ~Tuner();

  // The model that ranks until the first online update (default: analytical;
  // ignored when the options are not `guided`).
  void SetModel(std::unique_ptr<cost_model::CostModel> model);
  void SetHistory(cost_model::Dataset history);
  // A record from the database: a task's tiling or a whole plan of this graph.
  // Returns false when it belongs to neither.
  bool AddPrior(const db::Record& record);

  Status Run();
  TuneSummary Summary() const;
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::string& graph_key() const { return graph_key_; }
  // What the online model trains on: the history set before the run and one
  // sample per ok trial since of a task not run by the reference executor,
  // labelled as the stored records load (cost_model::DefaultLabelSeconds).
  const cost_model::Dataset& samples() const { return history_; }

 private:
  struct Measured {
    double seconds = 0, bytes = 0, overlap = -1;
    double max_error = 0;  // of the group's outputs against the reference (bf16: rounding)
  };
  struct PlanState;

  Status MeasureBaselines();
  Status RunRound(int task);
  // A proposal measured in a round, recorded once the round's anchor
  // reading is settled (AfterRound).
  struct RoundTrial {
    Proposal proposal;
    Trial trial;
    measure::SearchNote note;
  };
  RoundTrial MeasureProposal(int task, const Proposal& proposal);
  // A reading of the anchor slower than kRecheckAbove x its reference,
  // taken before the round, may be the anchor's alone: a stall of the
  // anchor's runs that the round's did not share would make every tiling
  // of the round look faster than it is, and the tuner keeps
  // its fastest records (a MobileNetV2 job's conv chain was recorded at
  // 0.276 ms from a raw 0.409 beside an anchor reading 1.48x its reference,
  // and kept as its task's best). Such a reading is taken again after the
  // round, and the faster of the two scales the round: a slowdown that
  // lasted through the round reads slow both times; one that ended during
  // it leaves records slower than they are, which the search survives.
  // Over kConfirmAbove (1.25) alone, a MobileNetV2 job's best records were
  // still flattered by 15-20% in 26 of 108 workloads, each beside a reading
  // 1.18-1.25x the reference, hence the lower bound.
  static constexpr double kRecheckAbove = 1.1;
  std::optional<AnchorReading> AfterRound(std::optional<AnchorReading> before);
  // Commits the trial's record, its time scaled by `anchor`'s reference /
  // now, and hands it to the task's search and the cost model's samples.
  Status RecordTrial(int task, RoundTrial& round_trial, std::optional<AnchorReading> anchor);
  // Commits a whole plan's record at `seconds` (when ok) and adds it to the
  // job's plans.
  Result<db::Record> CommitPlanRecord(const measure::Candidate& candidate,
                                      const std::vector<fusion_space::KernelTemplate>& templates,
                                      const measure::MeasureResult& result,
                                      const measure::SearchNote& note, double seconds);
  // Measures a whole plan and commits its record. `predicted`, the sum of
  // its groups' measured times: a plan that runs far slower than that and
  // than the best plan so far is measured once more (a busy host slows one
  // measurement; both records are kept, and the faster counts).
  // `status`, when given: how its measurement ended (now, or when it was
  // measured before: then it is not measured again).
  Status MeasurePlan(const fusion_space::Plan& plan, measure::PlanKind kind,
                     std::optional<double> predicted = std::nullopt,
                     db::RecordStatus* status = nullptr);
  // Whole plans and each round of a task are timed beside an anchor, the
  // greedy plan, read just before them (search/speed_anchor.h: the host's
  // speed swings by up to 1.9x within seconds, and the fastest raw record
  // was the fastest moment's). Returns {now, reference}; nullopt when the
  // anchor's run fails (the times stay raw).
  std::optional<AnchorReading> ReadAnchor(bool fresh = false);
  // One run of a whole plan (tuner_plans.h), beside an anchor run unless it
  // is the greedy plan, the anchor itself. `fresh`: the anchor run now.
  struct PlanRun;
  PlanRun RunWholePlan(const measure::Candidate& candidate, measure::PlanKind kind, bool fresh);
  // A whole plan within kContenderWithin of the best so far (the greedy
  // plan always) is run kContenderRuns times, each beside its own anchor
  // run, and recorded at the median run. The best plan is the fastest of
  // some hundred records of one or two runs each, and the host swings by
  // 10% between an anchor run and the plan after it: a ResNet-18 job kept a
  // plan recorded at 11.3 ms that ran at 13.4 ms beside its greedy plan's
  // 12.5 (the greedy one, its first run recorded raw at 14.3 ms, lost).
  // `runs_taken`: how many runs it took, the first included.
  PlanRun ConfirmContender(const measure::Candidate& candidate, measure::PlanKind kind,
                           PlanRun first, int* runs_taken);
  // MeasurePlan, then (mixed precision) FitErrorBudget when the plan's
  // outputs missed the error budget.
  Status MeasurePlanWithinBudget(const fusion_space::Plan& plan, measure::PlanKind kind,
                                 std::optional<double> predicted);
  // Each group's tiling chosen by its task's fastest measurement, the
  // precision included: a plan of many bf16 groups can miss the error
  // budget end to end although each group met it alone (MobileNetV2's 52
  // convs in bf16 were 3-4% off where the budget was 1%: a 12-minute job
  // kept its greedy f32 plan). The plan is measured again with some bf16
  // groups put back to their tasks' best f32 tilings in the same layouts,
  // those that save least over f32 per unit of their measured error first:
  // a binary search for the fewest put back that meet the budget
  // (tuner_precision.cpp).
  Status FitErrorBudget(const fusion_space::Plan& plan, measure::PlanKind kind);
  // The f32 tiling a bf16 group of a plan goes back to, and what bf16 saves
  // over it per unit of the bf16 record's error (tuner_precision.cpp).
  std::pair<fusion_space::Tiling, double> F32TilingOf(const fusion_space::PlanGroup& g);
  Status MeasureTunedPlan();
  // The job's best whole plan is the fastest of a few hundred records, each
  // scaled by an anchor run beside it, so it is the one whose scaling
  // flattered it most as often as the fastest: a 12-minute ResNet-50 job
  // kept a plan recorded at 36.0 ms (raw 41.2 beside an anchor run 14% slow)
  // that ran 39.1-40.0 ms in alternated runs against its last min-cost
  // partition's 37.8-38.0 (recorded at 39.1). So at the end, the distinct
  // plans recorded within kShowdownWithin of the best (kShowdownPlans at
  // most, fastest first, and the last min-cost partition when it is in that
  // window) run in kShowdownRounds rounds, each round every plan once
  // (rotated), with no anchor: what the rounds compare is each plan's time
  // over the best record's plan's in the same round. A plan whose median
  // ratio is below kShowdownBeatBelow gets a record of the best record's
  // seconds times that ratio (SearchNote::showdown), so the plan that beat
  // the best head to head is the database's best; the others' runs make no
  // record. It runs after the budget, as the last min-cost partition does:
  // some 13 s for five plans of a 40 ms model (tuner_showdown.cpp).
  Status Showdown();
  struct ShowdownEntry;
  // The showdown's plans as indices into the measured plans, the best
  // record's first.
  std::vector<size_t> ShowdownPlans() const;
  Result<bool> RunShowdownRound(std::vector<ShowdownEntry>& entries, int round);
  // Records `entry` when its runs beat `yardstick`'s (the best record's plan).
  Status CommitShowdownWin(const ShowdownEntry& entry, const ShowdownEntry& yardstick, double ratio,
                           ShowdownReport* report);
  // The min-cost partition under Ranking::kWeightsStreamed, measured whole.
  Status MeasureWeightsStreamedPlan();
  bool ReopenConverged(std::vector<TaskStanding>* standing);
  // How TunedPlan ranks each task's measured tilings.
  enum class Ranking {
    kMeasured,  // the fastest measured
    // The fastest in NCHW (conv layouts), so that the plan places no layout
    // transform.
    kNchw,
    // Measured time plus the reads from DRAM of a conv's pre-packed weights
    // beyond the weights as given (ExtraWeightSeconds): under the warm
    // protocol a conv measured alone in a loop finds its weights in the
    // caches, but in a model whose weights exceed the last-level cache each
    // layer's come from DRAM every run, and Winograd's transformed weights
    // are 16/9 (F(2x2)) or 4x (F(4x4)) the direct kernel's: ResNet-18's
    // 512-channel 3x3 layers read 37.7 MB each in F(4x4) against 9.4
    // direct. Measured as a whole plan beside the others, so the model
    // decides (where the weights fit the cache, against this plan).
    kWeightsStreamed,
  };
  // `predicted`, when given, receives the partition's cost (sum of its groups').
  // Under kMeasured the plan's tasks become in_plan_.
  fusion_space::Plan TunedPlan(double* predicted = nullptr, Ranking ranking = Ranking::kMeasured);
  // The greedy partition (largest legal groups first) with each group's best
  // tiling. The min-cost partition adds up group times measured alone, once
  // each, on a host that may be busy: one slow record can split a group that
  // pays fused (a cluster job's finishing step chose a plan of 18 kernels
  // that ran 14% slower than a single machine's 14). Measured beside it, the
  // whole model decides. `predicted`: the sum of its groups' times, 0 when a group
  // has no task.
  fusion_space::Plan TunedGreedyPlan(double* predicted);
  // `plan` with each conv group's layouts chosen across its neighbours
  // (layout_choice.h) among its measured tilings.
  fusion_space::Plan HarmonizedPlan(const fusion_space::Plan& plan) const;
  double AnalyticalScale() const;
  double PredictedSeconds(int task, double scale) const;
  // A task's best measured tiling and its cost under `ranking` (TunedPlan's),
  // else its predicted best and PredictedSeconds.
  std::pair<fusion_space::Tiling, double> BestOrPredicted(int task, Ranking ranking,
                                                          double scale) const;
  // Seconds to read from DRAM what a conv group's pre-packed weights for
  // `tiling` (Winograd's transformed U) hold beyond the weights as given, at
  // the target's DRAM read bandwidth (calibrated; 40 GB/s without a
  // calibration); 0 for other groups and tilings. Every partition reads the
  // weights as given once, so only the excess ranks tilings, and groups of
  // other templates (conv chains) are not charged for weights all pay.
  double ExtraWeightSeconds(int task, const fusion_space::Tiling& tiling) const;
  void UpdateModel();
  // `seconds`: the measurement's time, anchored (ReadAnchor).
  void AddSample(int task, const fusion_space::Tiling& tiling, const measure::MeasureResult& result,
                 double seconds);
  // The stop that is due now (callbacks' should_stop, trial or time budget).
  std::optional<StopCause> DueStop();
  // Whether the callbacks ask to stop: the one stop that also cuts the
  // partition rounds and the baselines short.
  bool Interrupted() const;
  void ReportProgress(const std::string& current);
  double Elapsed() const;
  std::vector<fusion_space::Tiling> SiblingBests(int task) const;
  // When a sibling's best tiling is still to be tried on `task`: the gain its
  // time promises over the task's best (1 before any); else nullopt.
  std::optional<double> SuggestionGain(int task) const;

  std::shared_ptr<const graph::Graph> graph_;
  fusion_space::FusionSpace& space_;
  std::vector<Task> tasks_;
  std::vector<std::unique_ptr<TaskSearch>> searches_;
  std::vector<std::map<std::string, Measured>> task_results_;  // by TilingToString, ok only
  std::vector<bool> in_plan_;  // in the last partition chosen (all, before the first)
  // Per task, the other tasks with the same tiling space (same template and
  // parameter values: the same GEMM with another epilogue, say), whose best
  // tilings its rounds try (TaskSearch::Propose's suggestions).
  std::vector<std::vector<int>> siblings_;
  std::map<std::string, int> task_by_key_;
  TunerOptions options_;
  TunerContext context_;
  MeasureFn measure_;
  TunerCallbacks callbacks_;
  std::string graph_key_;
  std::unique_ptr<cost_model::CostModel> model_;
  cost_model::Dataset history_;
  std::map<std::string, int> history_workloads_;
  std::unique_ptr<PlanState> plans_;
  int64_t trials_ = 0, failed_ = 0, new_ok_ = 0, model_updates_ = 0;
  int rounds_ = 0, rounds_since_plan_ = 0;
  bool tasks_changed_ = false;
  std::optional<StopCause> stop_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fusetune::search
