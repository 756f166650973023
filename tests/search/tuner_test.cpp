// search/: the scheduler's order, the evolutionary search's invariants
// (legal, never measured twice, default first, converges on a small space),
// and the tuner driven by a measurement double: budgets, commits, resuming
// without measuring anything twice (a prior hit measures nothing), the best
// whole plan never slower than unfused or greedy, determinism, and stopping.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "common/check.h"
#include "common/hash.h"
#include "common/rng.h"
#include "fusion_space/plan_json.h"
#include "graph/text_format.h"
#include "measure/result.h"
#include "search/tuner.h"
#include "tests/fusion_space/model_util.h"
#include "tests/search/hash_timed_device.h"

namespace fusetune::search {
namespace {

TEST(Scheduler, NewTasksFirstThenExpectedSaving) {
  std::vector<TaskStanding> t(3);
  t[0] = {1, 1e-3, 0.5, 2, false, true};
  t[1] = {4, 1e-4, 1, 0, false, true};   // no round yet
  t[2] = {1, 1e-3, 0.0, 5, true, true};  // converged
  EXPECT_EQ(PickTask(t), 1);
  t[1].rounds = 1;
  t[1].recent_gain = 0.01;  // 4 x 0.1 ms x 5% floor = 0.02 ms < 1 ms x 50%
  EXPECT_EQ(PickTask(t), 0);
  t[0].in_plan = false;    // discounted to 0.1 ms, still more
  t[1].recent_gain = 0.5;  // 0.2 ms
  EXPECT_EQ(PickTask(t), 1);
  t[0].converged = t[1].converged = true;
  EXPECT_EQ(PickTask(t), -1);
}

struct Model {
  std::shared_ptr<const graph::Graph> graph;
  std::unique_ptr<fusion_space::FusionSpace> space;
};

Model Load(const std::string& name, bool offer_bf16 = false) {
  Model m;
  m.graph = std::make_shared<const graph::Graph>(testing::LoadTestModel(name));
  kernels::KernelConfig config;
  config.offer_bf16 = offer_bf16;
  m.space = std::make_unique<fusion_space::FusionSpace>(*m.graph, config);
  return m;
}

// The bf16 groups of a whole plan's text.
int Bf16Groups(const std::string& plan_text) {
  int n = 0;
  for (size_t at = plan_text.find("\"bf16\""); at != std::string::npos;
       at = plan_text.find("\"bf16\"", at + 1))
    ++n;
  return n;
}

TEST(TaskSearch, ProposalsAreLegalFreshAndStartWithTheDefault) {
  Model m = Load("mlp");
  std::vector<Task> tasks = ExtractTasks(*m.graph, *m.space);
  ASSERT_FALSE(tasks.empty());
  auto model = cost_model::MakeAnalyticalModel();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& task = tasks[i];
    TaskSearch search(task, {}, i);
    std::set<std::string> seen;
    for (int round = 0; round < 4 && !search.converged(); ++round) {
      const auto proposals = search.Propose(8, *model, {});
      if (round == 0) {
        ASSERT_FALSE(proposals.empty());
        EXPECT_EQ(fusion_space::TilingToString(proposals[0].tiling),
                  fusion_space::TilingToString(task.tilings().Default()));
      }
      for (const Proposal& p : proposals) {
        EXPECT_TRUE(task.tilings().Check(p.tiling).allowed()) << task.summary;
        EXPECT_TRUE(seen.insert(fusion_space::TilingToString(p.tiling)).second) << "proposed twice";
        search.AddMeasured(p.tiling, 1.0 + static_cast<double>(seen.size()));
      }
      search.EndRound();
    }
  }
}

TEST(TaskSearch, ConvergesWhenItsSpaceIsExhausted) {
  Model m = Load("mlp");
  std::vector<Task> tasks = ExtractTasks(*m.graph, *m.space);
  auto small = std::find_if(tasks.begin(), tasks.end(),
                            [](const Task& t) { return t.tilings().size() <= 16; });
  ASSERT_NE(small, tasks.end());
  auto model = cost_model::MakeAnalyticalModel();
  TaskSearch search(*small, {}, 1);
  int rounds = 0;
  while (!search.converged() && rounds < 100) {
    for (const Proposal& p : search.Propose(4, *model, {})) search.AddMeasured(p.tiling, 1.0);
    search.EndRound();
    ++rounds;
  }
  EXPECT_TRUE(search.exhausted());
  EXPECT_EQ(search.measured(), small->tilings().size());
}

TEST(TaskSearch, SuggestionsComeFirstOnceAndOnlyWhenLegal) {
  Model m = Load("mlp");
  std::vector<Task> tasks = ExtractTasks(*m.graph, *m.space);
  auto gemm = std::find_if(tasks.begin(), tasks.end(), [](const Task& t) {
    return t.kind == fusion_space::KernelTemplate::kGemm && t.tilings().size() > 16;
  });
  ASSERT_NE(gemm, tasks.end());
  auto model = cost_model::MakeAnalyticalModel();
  const std::vector<fusion_space::Tiling>& all = gemm->tilings().Enumerate();
  const fusion_space::Tiling suggested = all[all.size() / 2];
  kernels::GemmTiling illegal = std::get<kernels::GemmTiling>(suggested);
  illegal.mr = 5;  // not a micro-tile shape
  TaskSearch search(*gemm, {}, 1);
  auto first = search.Propose(4, *model, {}, {suggested, fusion_space::Tiling(illegal)});
  ASSERT_EQ(first.size(), 5u) << "the suggestion comes on top of the count";
  EXPECT_EQ(fusion_space::TilingToString(first[0].tiling),
            fusion_space::TilingToString(gemm->tilings().Default()));
  EXPECT_EQ(fusion_space::TilingToString(first[1].tiling), fusion_space::TilingToString(suggested));
  EXPECT_TRUE(first[1].suggested);
  for (size_t i = 2; i < first.size(); ++i) EXPECT_FALSE(first[i].suggested);
  for (const Proposal& p : first) search.AddMeasured(p.tiling, 1.0);
  search.EndRound();
  for (const Proposal& p : search.Propose(4, *model, {}, {suggested}))
    EXPECT_NE(fusion_space::TilingToString(p.tiling), fusion_space::TilingToString(suggested))
        << "measured already";
}

// A GEMM task of the MLP with a tiling space large enough to search.
const Task& GemmTask(const std::vector<Task>& tasks) {
  auto gemm = std::find_if(tasks.begin(), tasks.end(), [](const Task& t) {
    return t.kind == fusion_space::KernelTemplate::kGemm && t.tilings().size() > 200;
  });
  FT_CHECK(gemm != tasks.end(), "the MLP has a GEMM task");
  return *gemm;
}

// The "device" of the residual tests: the analytical time, twice as long for
// tilings of one parameter value the model cannot see.
struct HiddenPenalty {
  const fusion_space::TilingSpace* space;
  size_t param;
  int slow_value;
  double operator()(const fusion_space::Tiling& t, const cost_model::CostModel& model,
                    const cost_model::GroupInfo& group) const {
    cost_model::FeatureMatrix x;
    x.Add(group, t, {});
    const double predicted = model.Predict(x)[0].seconds;
    return (*space->ChoiceOf(t))[param] == slow_value ? 2 * predicted : predicted;
  }
};

TEST(ResidualCorrection, LearnsAParameterValueTheModelDoesNotSeeAndNothingFromNoise) {
  Model m = Load("mlp");
  std::vector<Task> tasks = ExtractTasks(*m.graph, *m.space);
  const Task& task = GemmTask(tasks);
  const fusion_space::TilingSpace& space = task.tilings();
  size_t param = 0;
  while (param < space.params().size() && space.params()[param].values.size() < 2) ++param;
  ASSERT_LT(param, space.params().size());
  Rng rng(5);
  std::vector<std::vector<int>> choices;
  std::vector<double> slow_residuals, equal_residuals;
  for (int i = 0; i < 40; ++i) {
    choices.push_back(*space.ChoiceOf(space.Sample(rng)));
    slow_residuals.push_back(choices.back()[param] == 0 ? 1.0 : 0.0);  // value 0: 2x slower
    equal_residuals.push_back(0.25);  // the model 19% off everywhere
  }
  ResidualCorrection correction;
  correction.Fit(space, {choices.begin(), choices.begin() + 3}, {0.0, 1.0, 0.0});
  EXPECT_FALSE(correction.active()) << "three samples are too few";
  correction.Fit(space, choices, equal_residuals);
  ASSERT_TRUE(correction.active());
  for (const auto& c : choices) EXPECT_NEAR(correction.Log2Factor(c), 0.0, 1e-12);
  correction.Fit(space, choices, slow_residuals);
  for (const auto& c : choices) {
    std::vector<int> other = c;
    other[param] = c[param] == 0 ? 1 : 0;
    const double slow_minus_fast = c[param] == 0
                                       ? correction.Log2Factor(c) - correction.Log2Factor(other)
                                       : correction.Log2Factor(other) - correction.Log2Factor(c);
    EXPECT_GT(slow_minus_fast, 0.5) << "value 0 of parameter " << param << " ranks slower";
  }
}

// A search of the mlp's GEMM ranked by the analytical model on a device
// that doubles the time of the value the model's best predicted tilings
// share for one parameter. Returns the share of the proposals after the
// first two rounds (8-10 measurements) that take that value. With
// `only_in_median`, the penalty shows in the measured seconds (the
// repeats' median) but not in the fastest repeat, the model's label.
double PenalisedShare(bool correct, bool only_in_median) {
  Model m = Load("mlp");
  std::vector<Task> tasks = ExtractTasks(*m.graph, *m.space);
  const Task& task = GemmTask(tasks);
  auto model = cost_model::MakeAnalyticalModel();
  const cost_model::GroupInfo group = cost_model::MakeGroupInfo(*task.graph, task.instance());
  // The parameter whose first value the model's best predicted tilings share.
  TaskSearch probe(task, {}, 1);
  probe.Propose(8, *model, {});
  const std::vector<int> predicted_best = *task.tilings().ChoiceOf(probe.predicted_best());
  size_t param = 0;
  while (param < predicted_best.size() && task.tilings().params()[param].values.size() < 2) ++param;
  const HiddenPenalty device{&task.tilings(), param, predicted_best[param]};
  const HiddenPenalty no_penalty{&task.tilings(), param, -1};
  EvolutionOptions options;
  options.correct_residuals = correct;
  options.epsilon = 0;
  TaskSearch search(task, options, 1);
  int slow = 0, proposed = 0;
  for (int round = 0; round < 6; ++round) {
    for (const Proposal& p : search.Propose(8, *model, {})) {
      const double seconds = device(p.tiling, *model, group);
      if (round >= 2) {
        ++proposed;
        slow += (*task.tilings().ChoiceOf(p.tiling))[param] == device.slow_value;
      }
      measure::TimeStats time;
      if (only_in_median) {
        time.median = seconds;
        time.min = no_penalty(p.tiling, *model, group);
      }
      search.AddMeasured(p.tiling, seconds, time);
    }
    search.EndRound();
  }
  return static_cast<double>(slow) / proposed;
}

TEST(TaskSearch, MeasuredResidualsSteerTheRankingAwayFromWhatTheModelMisses) {
  EXPECT_GT(PenalisedShare(false, false), 0.5)
      << "the model alone keeps proposing the penalised value";
  EXPECT_LT(PenalisedShare(true, false), 0.25) << "the correction moves the search off it";
}

// The residuals are the label's (cost_model::DefaultLabelSeconds, the
// fastest repeat), as the model learns it, not the median the search
// compares: a penalty only the median shows is nothing to correct.
TEST(TaskSearch, ResidualsAreFittedToTheModelsLabel) { EXPECT_GT(PenalisedShare(true, true), 0.5); }

// A deterministic stand-in for the device: a time from the plan's text.
// `calls` and `measured` leave out the anchors' runs (the greedy plan timed
// before each whole plan, a task's best tiling before each round), which
// make no record.
struct FakeDevice {
  int64_t calls = 0, anchor_runs = 0;
  std::multiset<std::string> measured, showdown;  // the showdown's runs apart
  bool busy_on_first_tuned = false;  // a whole tuned plan's first measurement takes 1 s
  bool lucky_first_tuned = false;    // ... runs in a third of its time
  // Mixed precision: a group in bf16 runs in half the time, and a whole
  // plan of more than this many bf16 groups misses the error budget.
  int bf16_groups_within_budget = -1;  // -1: no precision effects
  // A host whose speed swings: everything runs kSwing[anchor_runs % 3]
  // times its time, so an anchor's run and the runs after it share one.
  bool swings = false;
  static constexpr double kSwing[] = {1.0, 0.5, 2.0};
  // The anchor's runs alone stall (twice their time) two at a time, the
  // 4th and 5th of every 6: a reading and its confirmation, while the
  // candidates measured beside them run at their usual speed.
  bool anchor_stalls = false;
  // A conv group in Winograd runs in a tenth of its time alone (its weights
  // in the caches), and a whole plan with any Winograd group three times
  // slower (the weights stream from DRAM).
  bool winograd_pays_alone_only = false;
  // Repeats that differ: the fastest at 0.6 of the median.
  bool spread_repeats = false;
  // This plan's showdown runs after the first this many give a wrong output.
  std::pair<std::string, size_t> fail_in_showdown_after;
  measure::MeasureResult operator()(const measure::Candidate& c) {
    const std::string text = c.plan.dump();
    if (c.label == kShowdownLabel && text == fail_in_showdown_after.first &&
        showdown.count(text) >= fail_in_showdown_after.second) {
      showdown.insert(text);
      return measure::MeasureResult::Failure(measure::MeasureStatus::kWrong, "wrong now");
    }
    measure::MeasureResult r = Steady(c);
    if (swings && r.ok()) r.time.median *= kSwing[anchor_runs % 3];
    if (anchor_stalls && c.anchor && r.ok() && anchor_runs % 6 >= 4) r.time.median *= 2;
    return r;
  }
  measure::MeasureResult Steady(const measure::Candidate& c) {
    const std::string text = c.plan.dump();
    if (c.anchor) {
      ++anchor_runs;
    } else if (c.label == kShowdownLabel) {
      showdown.insert(text);
    } else {
      ++calls;
      measured.insert(text);
    }
    const bool whole = !c.group;
    if (bf16_groups_within_budget >= 0 && whole && Bf16Groups(text) > bf16_groups_within_budget)
      return measure::MeasureResult::Failure(measure::MeasureStatus::kWrong, "over the budget");
    const bool first_tuned = c.label == "tuned" && measured.count(text) == 1;
    if (busy_on_first_tuned && first_tuned) {
      measure::MeasureResult r;
      r.status = measure::MeasureStatus::kOk;
      r.time.median = 1.0;
      return r;
    }
    measure::MeasureResult r;
    r.status = measure::MeasureStatus::kOk;
    const uint64_t h = HashBytes(text.data(), text.size(), 7);
    r.time.median = 1e-5 * (1.0 + static_cast<double>(h % 1000) / 1000.0);
    if (bf16_groups_within_budget >= 0 && Bf16Groups(text) > 0)  // bf16 groups pay
      r.time.median /= whole ? 1 + 0.1 * Bf16Groups(text) : 2;
    if (lucky_first_tuned && first_tuned) r.time.median /= 3;
    if (winograd_pays_alone_only && text.find("winograd") != std::string::npos)
      r.time.median = whole ? r.time.median * 3 : r.time.median / 10;
    r.bytes_in = static_cast<int64_t>(h % 4096);
    r.overlap = 0.5;
    if (spread_repeats) r.time.min = 0.6 * r.time.median;
    return r;
  }
};

struct Job {
  Model model;
  FakeDevice device;
  std::vector<db::Record> committed;
  std::unique_ptr<Tuner> tuner;

  explicit Job(TunerOptions options, std::function<bool()> stop = {}, bool busy = false,
               int bf16_groups_within_budget = -1)
      : model(Load("encoder_postln_op13", bf16_groups_within_budget >= 0)) {
    device.busy_on_first_tuned = busy;
    device.bf16_groups_within_budget = bf16_groups_within_budget;
    Start(options, std::move(stop), TunerContext{"target", {}, 1});
  }
  // Another model, measured under `context` (its cache protocol's features).
  Job(const std::string& model_name, TunerOptions options, TunerContext context,
      std::function<void(FakeDevice&)> set_up)
      : model(Load(model_name)) {
    set_up(device);
    Start(options, {}, std::move(context));
  }

 private:
  void Start(TunerOptions options, std::function<bool()> stop, TunerContext context) {
    options.model_update_every = 0;
    TunerCallbacks callbacks;
    callbacks.commit = [this](db::Record& r) {
      r.id = static_cast<int64_t>(committed.size()) + 1;
      committed.push_back(r);
      return Status::Ok();
    };
    callbacks.should_stop = std::move(stop);
    tuner = std::make_unique<Tuner>(
        model.graph, *model.space, ExtractTasks(*model.graph, *model.space, true), options,
        std::move(context), [this](const measure::Candidate& c) { return device(c); }, callbacks);
  }
};

void ExpectEachCandidateRecordedOnce(const Job& job) {
  testing::ExpectEachCandidateRecordedOnce(job.committed, job.device.measured);
}

TunerOptions Budget(int64_t trials) {
  TunerOptions o;
  o.max_trials = trials;
  return o;
}

TEST(Tuner, SpendsTheBudgetCommitsEverythingAndBeatsBothBaselines) {
  Job job(Budget(300));
  ASSERT_TRUE(job.tuner->Run().ok());
  const TuneSummary s = job.tuner->Summary();
  EXPECT_EQ(s.trials, 300);
  EXPECT_EQ(s.stop_reason, "trials");
  ExpectEachCandidateRecordedOnce(job);
  ASSERT_TRUE(s.best && s.unfused && s.greedy);
  EXPECT_LE(s.best->seconds, s.unfused->seconds);
  EXPECT_LE(s.best->seconds, s.greedy->seconds);
  // The best plan is a valid plan of the graph.
  auto plan = fusion_space::PlanFromJson(*job.model.space, s.best_plan);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(job.model.space->Validate(*plan).allowed());
  // The summary survives its JSON form (the job's stored progress).
  auto back = SummaryFromJson(SummaryToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(SummaryToJson(*back), SummaryToJson(s));
}

// The job's own samples carry the label its records load with (the label
// cost_model::LoadDataset computes at kDefaultTimeLabel, the fastest repeat
// scaled as the record was): the online model, the loaded history and the
// residual correction then learn one quantity. One sample per ok group
// record of a task that is not the reference executor's.
TEST(Tuner, ItsOwnSamplesCarryTheLabelItsRecordsLoadWith) {
  Job job("encoder_postln_op13", Budget(150), TunerContext{"target", {}, 1},
          [](FakeDevice& d) { d.spread_repeats = true; });
  ASSERT_TRUE(job.tuner->Run().ok());
  std::set<std::string> sampled_keys, reference_keys;
  for (const Task& t : job.tuner->tasks())
    (t.kind == fusion_space::KernelTemplate::kReference ? reference_keys : sampled_keys)
        .insert(t.key.ToString());
  std::vector<double> want;
  int whole_plans = 0, reference_records = 0;
  for (const db::Record& r : job.committed) {
    whole_plans += r.workload_key == job.tuner->graph_key();
    reference_records += r.status == db::RecordStatus::kOk && reference_keys.count(r.workload_key);
    if (r.status != db::RecordStatus::kOk || !sampled_keys.count(r.workload_key) ||
        r.workload_key == job.tuner->graph_key())
      continue;
    const auto m = measure::MetricsFromText(r.metrics);
    ASSERT_TRUE(m.ok());
    want.push_back(
        cost_model::LabelSeconds(r.seconds, m->measured.time, cost_model::kDefaultTimeLabel));
    EXPECT_NEAR(want.back(), 0.6 * r.seconds, 1e-12 * r.seconds);
  }
  std::vector<double> got;
  for (const cost_model::Sample& s : job.tuner->samples().y) got.push_back(s.seconds);
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  ASSERT_FALSE(want.empty());
  // Records that are not samples were there to leave out.
  EXPECT_GT(whole_plans, 0);
  EXPECT_GT(reference_records, 0);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)  // the records' repeats pass through text
    EXPECT_NEAR(got[i], want[i], 1e-9 * want[i]) << i;
}

// Beside the min-cost partition, the greedy one (largest groups first) is
// measured with the tasks' best tilings: one slow group record cannot then
// split a group that pays fused without the whole model having a say.
TEST(Tuner, TheGreedyPartitionIsMeasuredWithTunedTilings) {
  Job job(Budget(200));
  ASSERT_TRUE(job.tuner->Run().ok());
  auto nodes_of = [](const fusion_space::Plan& plan) {
    std::vector<std::vector<int32_t>> nodes;
    for (const fusion_space::PlanGroup& g : plan.groups) nodes.push_back(g.nodes);
    return nodes;
  };
  const fusion_space::Plan greedy = job.model.space->Greedy();
  const std::string greedy_text = fusion_space::PlanToJson(*job.model.space, greedy).dump();
  int tuned_greedy = 0, other_partitions = 0;
  for (const db::Record& r : job.committed) {
    auto json = nlohmann::json::parse(r.plan, nullptr, false);
    if (json.is_discarded() || !json.contains("groups")) continue;
    auto plan = fusion_space::PlanFromJson(*job.model.space, json);
    if (!plan.ok()) continue;
    if (nodes_of(*plan) != nodes_of(greedy)) {
      ++other_partitions;
      continue;
    }
    tuned_greedy += fusion_space::PlanToJson(*job.model.space, *plan).dump() != greedy_text;
  }
  // The premise: here the min-cost partitions are not the greedy one (and
  // the unfused plan is not), so only TunedGreedyPlan measures it tuned.
  EXPECT_GE(other_partitions, 2);
  EXPECT_GE(tuned_greedy, 1) << "the greedy partition measured with tuned tilings";
}

// Under the warm protocol a conv measured alone finds its weights in the
// caches, and Winograd (whose transformed weights are up to 4x the direct
// kernel's) looks faster than it runs inside a model whose weights stream
// from DRAM. The partition ranked with each conv's weights read at the DRAM
// bandwidth is measured whole too: a tuned plan without Winograd. The other
// protocols' records already read the weights from DRAM, and no such plan
// is added: every tuned plan keeps the measured-fastest Winograd tilings.
TEST(Tuner, UnderWarmWeightsAPlanWithTheConvWeightsStreamedIsMeasuredWhole) {
  auto tuned_without_winograd = [](bool warm) {
    TunerContext context{"target", {}, 1};
    context.target_features.warm_weights = warm;
    context.target_features.dram_gbps = 1e-3;  // the weights' reads outweigh any group's time
    Job job("cnn_folded_op13", Budget(150), context,
            [](FakeDevice& d) { d.winograd_pays_alone_only = true; });
    EXPECT_TRUE(job.tuner->Run().ok());
    ExpectEachCandidateRecordedOnce(job);
    int tuned = 0, with_winograd = 0;
    for (const db::Record& r : job.committed) {
      const auto metrics = measure::MetricsFromText(r.metrics);
      if (r.workload_key != job.tuner->graph_key() || !metrics.ok() || !metrics->search ||
          metrics->search->plan_kind != measure::PlanKind::kTuned)
        continue;
      ++tuned;
      with_winograd += r.plan.find("winograd") != std::string::npos;
    }
    EXPECT_GT(with_winograd, 0) << "the premise: the fastest tilings alone are Winograd";
    if (warm) {  // and the whole model decides: without Winograd it runs 3x faster
      EXPECT_EQ(job.tuner->Summary().best_plan.dump().find("winograd"), std::string::npos);
    }
    return tuned - with_winograd;
  };
  EXPECT_GE(tuned_without_winograd(/*warm=*/true), 1);
  EXPECT_EQ(tuned_without_winograd(/*warm=*/false), 0);
}

TEST(Tuner, ResumingMeasuresNothingTwice) {
  Job first(Budget(150));
  ASSERT_TRUE(first.tuner->Run().ok());
  TunerOptions more = Budget(300);
  more.trials_before = 150;
  Job second(more);
  for (const db::Record& r : first.committed) EXPECT_TRUE(second.tuner->AddPrior(r));
  ASSERT_TRUE(second.tuner->Run().ok());
  EXPECT_EQ(second.tuner->Summary().trials, 300);
  std::set<std::string> before;
  for (const db::Record& r : first.committed) before.insert(r.workload_key + r.plan);
  // (but by the showdown at its end, which runs the plans near the best
  // again on purpose)
  for (const db::Record& r : second.committed)
    EXPECT_TRUE(!before.count(r.workload_key + r.plan) || testing::IsShowdownRecord(r))
        << "measured again: " << r.plan;
  // The baselines came from the priors: the second job measured neither.
  EXPECT_TRUE(second.tuner->Summary().unfused.has_value());
}

TEST(Tuner, SameSeedSamePlan) {
  Job a(Budget(200)), b(Budget(200));
  ASSERT_TRUE(a.tuner->Run().ok());
  ASSERT_TRUE(b.tuner->Run().ok());
  EXPECT_EQ(a.tuner->Summary().best_plan, b.tuner->Summary().best_plan);
  ASSERT_EQ(a.committed.size(), b.committed.size());
  for (size_t i = 0; i < a.committed.size(); ++i)
    EXPECT_EQ(a.committed[i].plan, b.committed[i].plan);
}

// Without the model (tune --no-model): every proposal is ranked by the
// unguided model, whatever model is set, the same seed gives the same
// trials, and they are not the guided search's.
TEST(Tuner, WithoutTheModelProposalsAreUnguidedAndRepeatable) {
  TunerOptions unguided = Budget(120);
  unguided.guided = false;
  Job a(unguided), b(unguided), guided(Budget(120));
  a.tuner->SetModel(cost_model::MakeAnalyticalModel());  // ignored
  ASSERT_TRUE(a.tuner->Run().ok());
  ASSERT_TRUE(b.tuner->Run().ok());
  ASSERT_TRUE(guided.tuner->Run().ok());
  EXPECT_EQ(a.tuner->Summary().trials, 120);
  ASSERT_EQ(a.committed.size(), b.committed.size());
  int notes = 0, same_as_guided = 0;
  for (size_t i = 0; i < a.committed.size(); ++i) {
    EXPECT_EQ(a.committed[i].plan, b.committed[i].plan);
    const auto metrics = measure::MetricsFromText(a.committed[i].metrics);
    if (metrics.ok() && metrics->search && !metrics->search->plan_kind) {
      ++notes;
      EXPECT_EQ(metrics->search->model, "none/random");
    }
    if (i < guided.committed.size())
      same_as_guided += a.committed[i].plan == guided.committed[i].plan;
  }
  EXPECT_GT(notes, 100);
  EXPECT_LT(same_as_guided, static_cast<int>(a.committed.size()) / 2);
}

TEST(Tuner, ConvergenceEndsTheJobOnlyWhenAskedOtherwiseTheBudgetIsSpent) {
  TunerOptions until = Budget(1000000);
  until.stop_when_converged = true;
  Job converging(until);
  ASSERT_TRUE(converging.tuner->Run().ok());
  const TuneSummary c = converging.tuner->Summary();
  ASSERT_EQ(c.stop_reason, "converged");
  int64_t space = 0;
  for (const Task& t : converging.tuner->tasks()) space += static_cast<int64_t>(t.tilings().size());
  ASSERT_GT(space, c.trials + 200) << "the test needs spaces larger than convergence takes";

  TunerOptions budget = Budget(c.trials + 200);
  budget.stop_when_converged = false;
  Job spending(budget);
  ASSERT_TRUE(spending.tuner->Run().ok());
  const TuneSummary s = spending.tuner->Summary();
  EXPECT_EQ(s.stop_reason, "trials");
  EXPECT_EQ(s.trials, c.trials + 200);
  ExpectEachCandidateRecordedOnce(spending);
}

TEST(Tuner, StopsWhenAskedWithoutMeasuringMore) {
  int polls = 0;
  Job job(Budget(1000), [&] { return ++polls > 40; });
  ASSERT_TRUE(job.tuner->Run().ok());
  const TuneSummary s = job.tuner->Summary();
  EXPECT_EQ(s.stop_reason, "interrupted");
  EXPECT_LT(s.trials, 40);
}

// y1 = x1 W1 and y2 = relu(x2 W2) of the same shape: two tasks with the
// same tiling space. A device that ranks tilings the same whatever the
// epilogue: each task's best is tried on the other, so they end equal.
TEST(Tuner, TasksWithTheSameTilingSpaceTryEachOthersBest) {
  auto g = graph::ParseGraphText(
      "graph siblings opset 17 {\n"
      "  input x1: f32[96, 256]\n"
      "  input w1: f32[256, 256]\n"
      "  input x2: f32[96, 256]\n"
      "  input w2: f32[256, 256]\n"
      "  y1 = MatMul(x1, w1)\n"
      "  h2 = MatMul(x2, w2)\n"
      "  y2 = Relu(h2)\n"
      "  output y1\n"
      "  output y2\n"
      "}");
  ASSERT_TRUE(g.ok()) << g.error().message();
  auto graph = std::make_shared<const graph::Graph>(std::move(*g));
  fusion_space::FusionSpace space(*graph, kernels::KernelConfig{});
  std::vector<Task> tasks = ExtractTasks(*graph, space);
  std::vector<int> gemms;
  for (size_t t = 0; t < tasks.size(); ++t)
    if (tasks[t].kind == fusion_space::KernelTemplate::kGemm) gemms.push_back(static_cast<int>(t));
  ASSERT_EQ(gemms.size(), 2u);
  auto tiling_time = [](const measure::Candidate& c) {
    const std::string tiling = c.plan["groups"][0]["tiling"].dump();
    return 1e-5 * (1.0 + static_cast<double>(HashBytes(tiling.data(), tiling.size(), 3) % 997));
  };
  TunerOptions options = Budget(160);
  options.model_update_every = 0;
  TunerCallbacks callbacks;
  callbacks.commit = [](db::Record&) { return Status::Ok(); };
  Tuner tuner(
      graph, space, tasks, options, TunerContext{"target", {}, 1},
      [&](const measure::Candidate& c) {
        measure::MeasureResult r;
        r.status = measure::MeasureStatus::kOk;
        r.time.median = c.plan["groups"].size() == 1 ? tiling_time(c) : 1e-3;
        return r;
      },
      callbacks);
  ASSERT_TRUE(tuner.Run().ok());
  const TuneSummary s = tuner.Summary();
  ASSERT_EQ(s.tasks.size(), tasks.size());
  EXPECT_EQ(s.tasks[gemms[0]].best_tiling, s.tasks[gemms[1]].best_tiling);
  EXPECT_EQ(s.tasks[gemms[0]].best_seconds, s.tasks[gemms[1]].best_seconds);
}

// A whole plan measured far slower than its groups add up to is measured
// again: a busy host, not the plan. Both records are committed; the faster
// counts.
TEST(Tuner, ASlowWholePlanMeasurementIsTakenAgain) {
  Job job(Budget(200), {}, /*busy=*/true);
  ASSERT_TRUE(job.tuner->Run().ok());
  const TuneSummary s = job.tuner->Summary();
  EXPECT_EQ(testing::RunsOfRecords(job.committed), job.device.measured);
  int tuned_plans = 0;
  for (const PlanReport& p : s.plans)
    if (p.kind == measure::PlanKind::kTuned) ++tuned_plans;
  ASSERT_GT(tuned_plans, 0);
  std::set<std::string> tuned;
  for (const db::Record& r : job.committed)
    if (r.plan.find("\"groups\"") != std::string::npos && r.seconds == 1.0) tuned.insert(r.plan);
  ASSERT_FALSE(tuned.empty());
  int remeasures = 0;
  for (const db::Record& r : job.committed)
    remeasures += r.metrics.find("\"remeasure\":true") != std::string::npos;
  EXPECT_EQ(remeasures, static_cast<int>(tuned.size())) << "the second record is marked";
  for (const std::string& text : tuned) {
    const auto records = std::count_if(job.committed.begin(), job.committed.end(),
                                       [&](const db::Record& r) { return r.plan == text; });
    EXPECT_EQ(records, 2) << "measured once more, no more";
  }
  ASSERT_TRUE(s.best.has_value());
  EXPECT_LT(s.best->seconds, 1.0);
}

// Each tuned whole plan's first run comes at a lucky moment, three times
// as fast as the plan is. A plan that would then be the best is run twice
// more, each time beside its own anchor run, and recorded at its median
// run: at its true time. Without that, the best plan would be the one
// measured at the luckiest moment. The greedy baseline is confirmed too.
TEST(Tuner, AWholePlanAboutAsFastAsTheBestIsRecordedAtItsMedianOfThreeRuns) {
  Job job(Budget(200));
  job.device.lucky_first_tuned = true;
  ASSERT_TRUE(job.tuner->Run().ok());
  EXPECT_EQ(testing::RunsOfRecords(job.committed), job.device.measured);
  FakeDevice steady;
  int confirmed_tuned = 0;
  for (const db::Record& r : job.committed) {
    if (r.workload_key != job.tuner->graph_key() || r.status != db::RecordStatus::kOk) continue;
    const auto metrics = measure::MetricsFromText(r.metrics);
    ASSERT_TRUE(metrics.ok() && metrics->search);
    measure::Candidate c{nullptr, nlohmann::json::parse(r.plan), "", false, false};
    const double want = steady.Steady(c).time.median;
    if (metrics->search->plan_kind == measure::PlanKind::kGreedy) {
      EXPECT_EQ(metrics->search->confirm_runs, 3);
    } else if (metrics->search->plan_kind == measure::PlanKind::kTuned) {
      EXPECT_EQ(metrics->search->confirm_runs, 3)
          << "a lucky run makes every tuned plan a contender";
      EXPECT_NEAR(r.seconds, want, 1e-9 * want) << "recorded at its true time, not the lucky one";
      ++confirmed_tuned;
    }
  }
  EXPECT_GT(confirmed_tuned, 0);
}

// Mixed precision: every group is faster in bf16, but a whole plan of more
// than two bf16 groups misses the error budget. The tuner fits its plans to
// the budget (the least-saving bf16 groups back to f32) rather than keep
// its f32 baselines: the best plan has exactly two bf16 groups and beats
// the greedy one.
TEST(Tuner, APlanOverTheErrorBudgetIsFittedByPuttingGroupsBackToF32) {
  Job job(Budget(300), {}, false, /*bf16_groups_within_budget=*/2);
  ASSERT_TRUE(job.tuner->Run().ok());
  const TuneSummary s = job.tuner->Summary();
  int wrong = 0;
  for (const db::Record& r : job.committed) wrong += r.status == db::RecordStatus::kWrong;
  EXPECT_GT(wrong, 0) << "the tasks' fastest tilings together miss the budget";
  ASSERT_TRUE(s.best && s.greedy);
  EXPECT_EQ(Bf16Groups(s.best_plan.dump()), 2);
  EXPECT_LT(s.best->seconds, s.greedy->seconds);
  ExpectEachCandidateRecordedOnce(job);
}

// A 200-trial job whose anchor is read anew before every round and whole
// plan, on a host `set_up` describes.
std::unique_ptr<Job> RunAnchoredJob(const std::function<void(FakeDevice&)>& set_up) {
  TunerOptions options = Budget(200);
  options.anchor_max_age_seconds = 0;
  auto job = std::make_unique<Job>(options);
  set_up(job->device);
  EXPECT_TRUE(job->tuner->Run().ok());
  return job;
}

// What a record's candidate takes on a steady host.
double SteadyTime(const Job& job, const db::Record& r) {
  const bool whole = r.workload_key == job.tuner->graph_key();
  measure::Candidate c{nullptr, nlohmann::json::parse(r.plan), "", !whole, false};
  return FakeDevice().Steady(c).time.median;
}

// A job that measures only whole plans, with three priors from an earlier
// job: plans of the greedy partition with one group's tiling varied, each
// recorded faster than any plan can run here (under 1e-5 s: flattered by
// its anchor), the truly slowest recorded fastest (`priors` slowest first).
// The plans this job measures are too far from them to join its showdown.
struct ShowdownJob {
  struct Prior {
    measure::Candidate candidate;
    double truth;  // its time on the device
  };
  static constexpr double kRecorded[] = {0.50e-5, 0.53e-5, 0.52e-5};
  std::vector<Prior> priors;
  std::unique_ptr<Job> job;

  explicit ShowdownJob(std::function<bool(const FakeDevice&)> stop = {}) {
    TunerOptions options;
    options.whole_model_only = true;
    job = std::make_unique<Job>(options, [this, stop] { return stop && stop(job->device); });
    fusion_space::FusionSpace& space = *job->model.space;
    const fusion_space::Plan greedy = space.Greedy();
    size_t varied = 0;
    while (space.Tilings(greedy.groups[varied].nodes).size() < 4) ++varied;
    const auto& tilings = space.Tilings(greedy.groups[varied].nodes).Enumerate();
    for (size_t k = 1; k <= 3; ++k) {
      fusion_space::Plan plan = greedy;
      plan.groups[varied].tiling = tilings[k];
      FT_CHECK(space.Validate(plan), "a varied tiling that does not fit");
      measure::Candidate c = measure::PlanCandidate(job->model.graph, space, plan, "tuned");
      priors.push_back({c, FakeDevice().Steady(c).time.median});
    }
    std::sort(priors.begin(), priors.end(),
              [](const Prior& a, const Prior& b) { return a.truth > b.truth; });
    for (size_t k = 0; k < priors.size(); ++k) {
      measure::MeasureResult result;
      result.status = measure::MeasureStatus::kOk;
      result.time.median = kRecorded[k];
      measure::SearchNote note;
      note.plan_kind = measure::PlanKind::kTuned;
      db::Record r =
          MakeRecord(job->tuner->graph_key(), priors[k].candidate, result, "target", 0, {}, note);
      r.id = 1000 + static_cast<int64_t>(k);
      r.seconds = kRecorded[k];
      FT_CHECK(job->tuner->AddPrior(r), "a prior the tuner does not take");
    }
  }
  std::vector<db::Record> ShowdownRecords() const {
    std::vector<db::Record> out;
    for (const db::Record& r : job->committed)
      if (testing::IsShowdownRecord(r)) out.push_back(r);
    return out;
  }
};

// The three priors run head to head in five rounds; the two truly faster
// than the best record's plan are recorded again at that record's time
// times their true ratio to it (the best record's plan itself is not), and
// the truly fastest becomes the best plan.
TEST(Tuner, TheShowdownRecordsThePlansFasterHeadToHeadBelowAFlatteredBest) {
  ShowdownJob sj;
  const Job& job = *sj.job;
  ASSERT_TRUE(sj.job->tuner->Run().ok());
  ExpectEachCandidateRecordedOnce(job);
  for (const ShowdownJob::Prior& p : sj.priors)
    EXPECT_EQ(job.device.showdown.count(p.candidate.plan.dump()), 5u) << "five rounds each";
  const double slowest = sj.priors[0].truth;
  ASSERT_LT(sj.priors[1].truth, 0.99 * slowest) << "the premise: both beat it by over 1%";
  ASSERT_LT(sj.priors[2].truth, sj.priors[1].truth);
  const std::vector<db::Record> records = sj.ShowdownRecords();
  EXPECT_EQ(records.size(), 2u);
  for (const db::Record& r : records) {
    const auto metrics = measure::MetricsFromText(r.metrics);
    ASSERT_TRUE(metrics.ok() && metrics->search && metrics->search->showdown);
    EXPECT_EQ(metrics->search->showdown->runs, 5);
    EXPECT_EQ(metrics->search->showdown->against, 1000) << "the best record's plan";
    EXPECT_NE(r.plan, sj.priors[0].candidate.plan.dump());
    const double truth = SteadyTime(job, r);
    EXPECT_NEAR(r.seconds, ShowdownJob::kRecorded[0] * truth / slowest, 1e-9 * r.seconds);
  }
  const TuneSummary s = sj.job->tuner->Summary();
  ASSERT_TRUE(s.best.has_value());
  EXPECT_EQ(s.best_plan, sj.priors[2].candidate.plan) << "the truly fastest";
  EXPECT_LT(s.best->seconds, ShowdownJob::kRecorded[0]);
  ASSERT_TRUE(s.showdown.has_value());
  EXPECT_EQ(s.showdown->plans, 3);
  EXPECT_EQ(s.showdown->rounds, 5);
  EXPECT_EQ(s.showdown->against, 1000);
  EXPECT_EQ(s.showdown->fastest_other, 1002);
  EXPECT_NEAR(s.showdown->ratio, sj.priors[2].truth / slowest, 1e-9);
  EXPECT_EQ(s.showdown->winner, s.best->record_id);
  auto back = SummaryFromJson(SummaryToJson(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(SummaryToJson(*back), SummaryToJson(s));
}

// Ctrl-C after the showdown's second round: fewer than three rounds are no
// verdict, and nothing is recorded.
TEST(Tuner, AShowdownStoppedBeforeItsThirdRoundRecordsNothing) {
  ShowdownJob sj([](const FakeDevice& d) { return d.showdown.size() >= 2 * 3; });
  ASSERT_TRUE(sj.job->tuner->Run().ok());
  EXPECT_EQ(sj.job->device.showdown.size(), 6u);
  EXPECT_TRUE(sj.ShowdownRecords().empty());
  EXPECT_EQ(sj.job->tuner->Summary().best->record_id, 1000);
}

// A plan whose output turns wrong in the showdown (its second round) is
// recorded as wrong and leaves; the others finish their rounds and the
// fastest still wins.
TEST(Tuner, APlanThatFailsInTheShowdownIsRecordedAndLeavesTheOthersTheirVerdict) {
  ShowdownJob sj;
  const std::string failing = sj.priors[1].candidate.plan.dump();
  sj.job->device.fail_in_showdown_after = {failing, 1};
  ASSERT_TRUE(sj.job->tuner->Run().ok());
  const std::vector<db::Record> records = sj.ShowdownRecords();
  ASSERT_EQ(records.size(), 2u);
  int wrong = 0;
  for (const db::Record& r : records) {
    if (r.status != db::RecordStatus::kWrong) continue;
    ++wrong;
    EXPECT_EQ(r.plan, failing);
  }
  EXPECT_EQ(wrong, 1);
  EXPECT_EQ(sj.job->device.showdown.count(failing), 2u);
  EXPECT_EQ(sj.job->tuner->Summary().best_plan, sj.priors[2].candidate.plan);
}

// The host's speed swings between runs of the anchor (x1, x0.5, x2; read
// anew each time here): each record holds its time at the speed of the
// anchor's median run, so every plan and tiling is recorded as on a steady
// host, the best plan is the fastest one, not the one measured in the
// fastest moment, and each task's best tiling is its fastest.
TEST(Tuner, PlansAndTilingsAreTimedBesideTheAnchor) {
  const auto job_ptr = RunAnchoredJob([](FakeDevice& d) { d.swings = true; });
  const Job& job = *job_ptr;
  std::optional<double> fastest;
  std::map<std::string, double> task_fastest;
  int anchored = 0;
  for (const db::Record& r : job.committed) {
    if (r.status != db::RecordStatus::kOk) continue;
    const double want = SteadyTime(job, r);
    EXPECT_NEAR(r.seconds, want, 1e-9 * want) << r.metrics;
    anchored += r.metrics.find("\"anchor\"") != std::string::npos;
    if (r.workload_key == job.tuner->graph_key()) fastest = std::min(fastest.value_or(want), want);
    auto [it, added] = task_fastest.emplace(r.workload_key, want);
    it->second = std::min(it->second, want);
  }
  EXPECT_GT(job.device.anchor_runs, 10);
  EXPECT_EQ(anchored + 1, static_cast<int>(job.committed.size())) << "all but the greedy baseline";
  const TuneSummary s = job.tuner->Summary();
  ASSERT_TRUE(s.best && fastest);
  EXPECT_NEAR(s.best->seconds, *fastest, 1e-9 * *fastest);
  int tasks_checked = 0;
  for (const TaskReport& t : s.tasks) {
    if (!task_fastest.count(t.key) || !t.best_seconds) continue;
    ++tasks_checked;
    EXPECT_NEAR(*t.best_seconds, task_fastest[t.key], 1e-9 * *t.best_seconds) << t.key;
  }
  EXPECT_GT(tasks_checked, 1);
}

// A stall that hits the anchor's reading and its confirmation but not the
// round after them: the round's tilings are recorded at their own speed
// (the anchor read again after the round, the faster reading taken), not
// twice as fast as they ran.
TEST(Tuner, AStallOfTheAnchorAloneDoesNotFlatterTheRound) {
  const auto job = RunAnchoredJob([](FakeDevice& d) { d.anchor_stalls = true; });
  int groups = 0;
  for (const db::Record& r : job->committed) {
    if (r.status != db::RecordStatus::kOk || r.workload_key == job->tuner->graph_key()) continue;
    const double want = SteadyTime(*job, r);
    EXPECT_NEAR(r.seconds, want, 1e-9 * want) << r.metrics;
    ++groups;
  }
  EXPECT_GT(groups, 50);
  EXPECT_GT(job->device.anchor_runs, 20);
}

// db/ declares its own record status so that it needs nothing from
// measure/: each measurement status maps to the record status stored under
// the same text, so a record reads back as what was measured.
TEST(MakeRecord, EachMeasureStatusIsTheRecordStatusOfTheSameText) {
  for (measure::MeasureStatus s : measure::kAllMeasureStatuses) {
    EXPECT_STREQ(db::StatusToText(RecordStatusOf(s)), measure::StatusName(s));
    auto back = db::StatusFromText(measure::StatusName(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, RecordStatusOf(s));
  }
}

}  // namespace
}  // namespace fusetune::search
