// JSON forms of measurement options and results: what crosses the worker
// pipe, and the metrics text a database record stores.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "measure/measurement.h"

namespace fusetune::measure {

namespace {

// Seven significant digits, beyond what any timing here resolves: the JSON
// writer then prints "0.0001234567" rather than 17 digits, which shrinks a
// stored record by a third.
double Short(double x) {
  if (!std::isfinite(x) || x == 0) return x;
  return std::stod(fmt::format("{:.7g}", x));
}

nlohmann::json StatsToJson(const TimeStats& s) {
  return {{"median", Short(s.median)},
          {"min", Short(s.min)},
          {"max", Short(s.max)},
          {"spread", Short(s.spread)},
          {"count", s.count}};
}

TimeStats StatsFromJson(const nlohmann::json& j) {
  TimeStats s;
  if (!j.is_object()) return s;
  s.median = j.value("median", 0.0);
  s.min = j.value("min", 0.0);
  s.max = j.value("max", 0.0);
  s.spread = j.value("spread", 0.0);
  s.count = j.value("count", int64_t{0});
  return s;
}

void AddAnchor(const SearchNote& n, nlohmann::json* j) {
  if (n.anchor_seconds > 0)
    (*j)["anchor"] = {{"seconds", n.anchor_seconds},
                      {"reference_seconds", n.anchor_reference_seconds}};
}

// Only the keys a note of its kind had when the search wrote it inline
// (and an anchor's, when it had one), so that stored text is what it was
// before the note was a struct.
nlohmann::json NoteToJson(const SearchNote& n) {
  if (n.plan_kind) {
    nlohmann::json j{{"plan_kind", PlanKindName(*n.plan_kind)}};
    if (n.remeasure) j["remeasure"] = true;
    if (n.confirm_runs > 0) j["confirm_runs"] = n.confirm_runs;
    if (n.showdown)
      j["showdown"] = {{"runs", n.showdown->runs},
                       {"against", n.showdown->against},
                       {"ratio", n.showdown->ratio}};
    AddAnchor(n, &j);
    return j;
  }
  nlohmann::json j{{"predicted_seconds", n.predicted_seconds},
                   {"model", n.model},
                   {"random", n.random},
                   {"suggested", n.suggested}};
  if (n.out_of_range) j["out_of_range"] = true;
  AddAnchor(n, &j);
  return j;
}

SearchNote NoteFromJson(const nlohmann::json& j) {
  SearchNote n;
  // A whole plan's note whose kind this version does not know (a newer
  // one's) is a plan the search built; none (or "") is a tiling's note.
  if (const std::string kind = j.value("plan_kind", ""); !kind.empty())
    n.plan_kind = PlanKindFromName(kind).value_or(PlanKind::kTuned);
  n.remeasure = j.value("remeasure", false);
  n.confirm_runs = j.value("confirm_runs", 0);
  if (const auto showdown = j.find("showdown"); showdown != j.end() && showdown->is_object())
    n.showdown =
        SearchNote::Showdown{showdown->value("runs", 0), showdown->value("against", int64_t{0}),
                             showdown->value("ratio", 0.0)};
  if (const auto anchor = j.find("anchor"); anchor != j.end() && anchor->is_object()) {
    n.anchor_seconds = anchor->value("seconds", 0.0);
    n.anchor_reference_seconds = anchor->value("reference_seconds", 0.0);
  }
  n.predicted_seconds = j.value("predicted_seconds", 0.0);
  n.model = j.value("model", "");
  n.random = j.value("random", false);
  n.suggested = j.value("suggested", false);
  n.out_of_range = j.value("out_of_range", false);
  return n;
}

}  // namespace

nlohmann::json OptionsToJson(const MeasureOptions& o) {
  return {{"threads", o.threads},
          {"local_buffer_bytes", o.local_buffer_bytes},
          {"input_seed", o.input_seed},
          {"warmup_runs", o.warmup_runs},
          {"min_repeats", o.min_repeats},
          {"min_seconds", o.min_seconds},
          {"max_repeats", o.max_repeats},
          {"caches", target::CacheProtocolName(o.caches)},
          {"measure_overlap", o.measure_overlap},
          {"verify", o.verify},
          {"time_layout_transforms", o.time_layout_transforms},
          {"tolerance", o.tolerance},
          {"timeout_seconds", o.timeout_seconds},
          {"peak_gflops", o.peak_gflops},
          {"dram_gbps", o.dram_gbps}};
}

Result<MeasureOptions> OptionsFromJson(const nlohmann::json& j) {
  MeasureOptions o;
  try {
    o.threads = j.at("threads").get<int>();
    o.local_buffer_bytes = j.at("local_buffer_bytes").get<int64_t>();
    o.input_seed = j.at("input_seed").get<uint64_t>();
    o.warmup_runs = j.at("warmup_runs").get<int>();
    o.min_repeats = j.at("min_repeats").get<int>();
    o.min_seconds = j.at("min_seconds").get<double>();
    o.max_repeats = j.at("max_repeats").get<int>();
    const auto caches = target::CacheProtocolFromName(j.at("caches").get<std::string>());
    if (!caches)
      return Error(ErrorCode::kParse, fmt::format("measure options: unknown caches protocol {}",
                                                  j.at("caches").dump()));
    o.caches = *caches;
    o.measure_overlap = j.at("measure_overlap").get<bool>();
    o.verify = j.at("verify").get<bool>();
    o.time_layout_transforms = j.value("time_layout_transforms", true);  // absent before layouts
    o.tolerance = j.at("tolerance").get<double>();
    o.timeout_seconds = j.at("timeout_seconds").get<double>();
    o.peak_gflops = j.at("peak_gflops").get<double>();
    o.dram_gbps = j.at("dram_gbps").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kParse, fmt::format("measure options: {}", e.what()));
  }
  if (o.threads < 1 || o.min_repeats < 1 || o.max_repeats < o.min_repeats || o.warmup_runs < 0 ||
      o.timeout_seconds <= 0)
    return Error(ErrorCode::kInvalidArgument,
                 "measure options: threads and repeats must be positive, max_repeats at least "
                 "min_repeats, the timeout positive");
  return o;
}

nlohmann::json ResultToJson(const MeasureResult& r) {
  nlohmann::json j{{"status", StatusName(r.status)},
                   {"time", StatsToJson(r.time)},
                   {"busy", StatsToJson(r.busy)},
                   {"copy_busy", StatsToJson(r.copy_busy)},
                   {"compute_busy", StatsToJson(r.compute_busy)},
                   {"threads", r.threads},
                   {"caches_flushed", r.caches_flushed},
                   {"launches", r.launches},
                   {"bytes_in", r.bytes_in},
                   {"bytes_out", r.bytes_out},
                   {"bandwidth_gbps", Short(r.bandwidth_gbps)},
                   {"overhead_seconds", Short(r.overhead_seconds)},
                   {"overhead_per_launch_seconds", Short(r.overhead_per_launch_seconds)},
                   {"overlap", Short(r.overlap)},
                   {"flops", Short(r.flops)},
                   {"compulsory_bytes", Short(r.compulsory_bytes)},
                   {"roofline_fraction", Short(r.roofline_fraction)},
                   {"max_error", Short(r.max_error)},
                   {"run_seconds", Short(r.run_seconds)},
                   {"measure_seconds", Short(r.measure_seconds)}};
  if (!r.error.empty()) j["error"] = r.error;
  if (r.worst)
    j["worst"] = {{"output", r.worst->output},
                  {"position", r.worst->position},
                  {"got", r.worst->got},
                  {"want", r.worst->want},
                  {"error", r.worst->error}};
  // JSON has no infinity: a non-finite error is written as null.
  if (!std::isfinite(r.max_error)) j["max_error"] = nullptr;
  if (r.worst && !std::isfinite(r.worst->error)) j["worst"]["error"] = nullptr;
  return j;
}

Result<MeasureResult> ResultFromJson(const nlohmann::json& j) {
  MeasureResult r;
  try {
    auto status = StatusFromName(j.at("status").get<std::string>());
    if (!status)
      return Error(ErrorCode::kParse, fmt::format("measure result: unknown status '{}'",
                                                  j.at("status").get<std::string>()));
    r.status = *status;
    r.error = j.value("error", "");
    r.time = StatsFromJson(j.value("time", nlohmann::json{}));
    r.busy = StatsFromJson(j.value("busy", nlohmann::json{}));
    r.copy_busy = StatsFromJson(j.value("copy_busy", nlohmann::json{}));
    r.compute_busy = StatsFromJson(j.value("compute_busy", nlohmann::json{}));
    r.threads = j.value("threads", 0);
    r.caches_flushed = j.value("caches_flushed", false);
    r.launches = j.value("launches", int64_t{0});
    r.bytes_in = j.value("bytes_in", int64_t{0});
    r.bytes_out = j.value("bytes_out", int64_t{0});
    r.bandwidth_gbps = j.value("bandwidth_gbps", 0.0);
    r.overhead_seconds = j.value("overhead_seconds", 0.0);
    r.overhead_per_launch_seconds = j.value("overhead_per_launch_seconds", 0.0);
    r.overlap = j.value("overlap", -1.0);
    r.flops = j.value("flops", 0.0);
    r.compulsory_bytes = j.value("compulsory_bytes", 0.0);
    r.roofline_fraction = j.value("roofline_fraction", 0.0);
    r.max_error =
        j.contains("max_error") && j["max_error"].is_null() ? INFINITY : j.value("max_error", 0.0);
    r.run_seconds = j.value("run_seconds", 0.0);
    r.measure_seconds = j.value("measure_seconds", 0.0);
    if (j.contains("worst")) {
      const nlohmann::json& w = j["worst"];
      // Non-finite numbers were written as null.
      auto number = [&](const char* key, double if_null) {
        return w.at(key).is_null() ? if_null : w.at(key).get<double>();
      };
      r.worst = WorstElement{w.at("output").get<std::string>(),
                             w.at("position").get<std::vector<int64_t>>(), number("got", NAN),
                             number("want", NAN), number("error", INFINITY)};
    }
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kParse, fmt::format("measure result: {}", e.what()));
  }
  return r;
}

std::string ResultSummary(const MeasureResult& r) {
  if (r.status != MeasureStatus::kOk) return fmt::format("{}: {}", StatusName(r.status), r.error);
  return fmt::format(
      "ok: {:.3f} ms (spread {:.1f}%, {} runs), {:.1f} MB moved, overhead {:.1f} us/launch{}",
      r.time.median * 1e3, r.time.spread * 100, r.time.count, (r.bytes_in + r.bytes_out) * 1e-6,
      r.overhead_per_launch_seconds * 1e6,
      r.overlap >= 0 ? fmt::format(", overlap {:.2f}", r.overlap) : "");
}

std::string MetricsToText(const RecordMetrics& metrics) {
  nlohmann::json j = ResultToJson(metrics.measured);
  if (metrics.search) j["search"] = NoteToJson(*metrics.search);
  return j.dump();
}

Result<RecordMetrics> MetricsFromText(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return Error(ErrorCode::kParse, "record metrics: not a JSON object");
  RecordMetrics m;
  // Metrics imported or written without a measurement ("{}", a record's
  // default) carry no status of their own; the record's status column says
  // what happened, so they decode as an empty measurement rather than drop
  // the record from training sets and priors.
  nlohmann::json with_status = j;
  if (!j.contains("status")) with_status["status"] = StatusName(MeasureStatus::kOk);
  auto measured = ResultFromJson(with_status);
  if (!measured.ok()) return measured.error().WithContext("record metrics");
  m.measured = std::move(*measured);
  try {
    if (j.contains("search")) m.search = NoteFromJson(j.at("search"));
  } catch (const nlohmann::json::exception& e) {
    return Error(ErrorCode::kParse, fmt::format("record metrics: search note: {}", e.what()));
  }
  return m;
}

}  // namespace fusetune::measure
