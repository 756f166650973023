#include "cli/compile_buckets.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "compiler/compile.h"

namespace fusetune::cli {

namespace {

using Sizes = std::map<std::string, int64_t>;

// What a compile at one size came to: the partition (groups as the names
// of their nodes, comparable across sizes whatever the passes renumbered)
// and each group's tiling, and the summary line.
using Group = std::vector<std::string>;
struct BucketPlan {
  std::set<Group> partition;
  std::map<Group, std::string> tilings;
  std::string summary;
};

Group GroupNames(const graph::Graph& g, const std::vector<int32_t>& nodes) {
  Group names;
  for (int32_t n : nodes)
    names.push_back(g.nodes[n].name.empty() ? g.Describe(n) : g.nodes[n].name);
  return names;
}

std::string SizesText(const Sizes& sizes) {
  std::string text;
  for (const auto& [name, value] : sizes)
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", name, value);
  return text;
}

Result<BucketPlan> CompileAt(const std::string& model, const ModelOptions& options,
                             const Sizes& sizes, int threads, const CompileArgs& args,
                             TuningSource& source) {
  ModelOptions at = options;
  at.dims.clear();
  for (const auto& [name, value] : sizes) at.dims.push_back(fmt::format("{}={}", name, value));
  CompileArgs quiet = args;
  quiet.no_remember = true;  // bisection compiles neither take nor store remembered plans
  auto graph = LoadModel(model, at);
  if (!graph.ok()) return graph.error().WithContext(SizesText(sizes));
  auto compiled = CompileWithDatabase(std::move(*graph), threads, quiet, source);
  if (!compiled.ok()) return compiled.error().WithContext(SizesText(sizes));
  const compiler::CompiledPlan& plan = (*compiled)->compiled();
  BucketPlan b;
  std::map<std::string, int> sources;
  for (const compiler::GroupDecision& d : plan.groups) {
    const Group group = GroupNames((*compiled)->graph(), d.nodes);
    b.partition.insert(group);
    b.tilings[group] = fusion_space::TilingToString(d.choice.tiling);
    ++sources[compiler::PlanSourceName(d.choice.source)];
  }
  std::string from;
  for (const auto& [name, n] : sources)
    from += fmt::format("{}{} {}", from.empty() ? "" : ", ", name, n);
  b.summary = fmt::format(
      "{} kernels, predicted {:.3f} ms{} ({})", plan.groups.size(), plan.predicted_seconds * 1e3,
      plan.measured_seconds ? fmt::format(", measured {:.3f} ms", *plan.measured_seconds * 1e3)
                            : "",
      from);
  return b;
}

// Groups whose tiling differs between two plans of the same partition.
int TilingChanges(const BucketPlan& a, const BucketPlan& b) {
  int n = 0;
  for (const auto& [nodes, tiling] : a.tilings) {
    auto it = b.tilings.find(nodes);
    if (it != b.tilings.end() && it->second != tiling) ++n;
  }
  return n;
}

// A size in (lo, hi] of `dim` from which the plan differs from lo's in what
// `differs` compares, by bisection (one switch assumed between them).
Result<int64_t> FindSwitch(const std::string& model, const ModelOptions& options, Sizes at,
                           const std::string& dim, int64_t lo, int64_t hi, const BucketPlan& low,
                           const std::function<bool(const BucketPlan&, const BucketPlan&)>& differs,
                           int threads, const CompileArgs& args, TuningSource& source) {
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    at[dim] = mid;
    FT_ASSIGN_OR_RETURN(BucketPlan plan, CompileAt(model, options, at, threads, args, source));
    (differs(low, plan) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

Result<std::string> ExplainBuckets(const std::string& model, const ModelOptions& options,
                                   int threads, const CompileArgs& args, TuningSource& source) {
  FT_ASSIGN_OR_RETURN(std::vector<ModelOptions> buckets, ExpandDimBuckets(options));
  FT_ASSIGN_OR_RETURN(auto lists, ParseAssignments(options.dims, "--dim"));
  std::map<Sizes, BucketPlan> plans;
  std::string text = "buckets\n";
  for (const ModelOptions& b : buckets) {
    FT_ASSIGN_OR_RETURN(const Sizes sizes, BoundDims(b));
    FT_ASSIGN_OR_RETURN(BucketPlan plan, CompileAt(model, options, sizes, threads, args, source));
    text += fmt::format("  {:<24} {}\n", SizesText(sizes), plan.summary);
    plans.emplace(sizes, std::move(plan));
  }
  // Neighbours: buckets that differ in one dimension's value, consecutive in its list.
  text +=
      "switches between neighbouring buckets (a size from which the plan is another, by "
      "bisection)\n";
  const auto partition_differs = [](const BucketPlan& a, const BucketPlan& b) {
    return a.partition != b.partition;
  };
  const auto tilings_differ = [](const BucketPlan& a, const BucketPlan& b) {
    return a.partition != b.partition || TilingChanges(a, b) > 0;
  };
  for (const auto& [sizes, low] : plans) {
    for (const auto& [dim, list] : lists) {
      FT_ASSIGN_OR_RETURN(std::vector<int64_t> values, DimValues(dim, list));
      std::sort(values.begin(), values.end());
      auto at = std::upper_bound(values.begin(), values.end(), sizes.at(dim));
      if (at == values.end()) continue;  // the last bucket along `dim`
      Sizes neighbour = sizes;
      neighbour[dim] = *at;
      const BucketPlan& high = plans.at(neighbour);
      const int64_t lo = sizes.at(dim), hi = *at;
      std::string line = fmt::format("  {} -> {}={}: ", SizesText(sizes), dim, hi);
      if (partition_differs(low, high)) {
        FT_ASSIGN_OR_RETURN(int64_t from, FindSwitch(model, options, sizes, dim, lo, hi, low,
                                                     partition_differs, threads, args, source));
        line += fmt::format("partition from {}={} ({} -> {} kernels)", dim, from,
                            low.partition.size(), high.partition.size());
      } else if (TilingChanges(low, high) > 0) {
        FT_ASSIGN_OR_RETURN(int64_t from, FindSwitch(model, options, sizes, dim, lo, hi, low,
                                                     tilings_differ, threads, args, source));
        line += fmt::format("same partition; tilings of {} kernels from {}={}",
                            TilingChanges(low, high), dim, from);
      } else {
        line += "the same plan";
      }
      text += line + "\n";
    }
  }
  return text;
}

}  // namespace fusetune::cli
