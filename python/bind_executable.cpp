// fusetune.compile() and its Executable: the embedding API's Compiler and
// Executable (include/fusetune/fusetune.h) for numpy. run() passes float32
// C-contiguous arrays to Executable::RunViews, which reads 64-byte aligned
// ones in place (torch tensors' .numpy() are); others are copied once.
// Outputs come back as numpy arrays owning the API's vectors (no copy).
// Runs release the GIL; one run at a time per executable, as a program's
// buffers serve one run. Also run_reference(): the reference executor.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "cli/compile_args.h"
#include "graph/reference_executor.h"
#include "python/bindings.h"
#include "python/convert.h"

namespace fusetune::python {

namespace {

// Integers fed as f32 (the API's contract for integer inputs) are exact up to 2^24.
constexpr double kExactInFloat = 16777216.0;

// A run's inputs as the API's views, with the arrays they point into.
struct Feeds {
  std::vector<py::array> arrays;
  ArrayViewMap views;
};

// An f32 C-contiguous array of `value`: itself when it is one, else a
// converted copy. Integers must fit f32 exactly.
py::array_t<float> FloatArray(const std::string& name, const py::handle& value) {
  py::array raw = py::array::ensure(value);
  if (!raw)
    RaiseInvalid(fmt::format("input '{}': {} is not an array", name,
                             py::str(py::type::of(value)).cast<std::string>()));
  const char kind = raw.dtype().kind();
  if (kind == 'i' || kind == 'u') {
    // C order: the check below walks the elements linearly.
    auto ints = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(raw);
    const int64_t* p = ints.data();
    for (py::ssize_t i = 0; i < ints.size(); ++i)
      if (std::fabs(static_cast<double>(p[i])) > kExactInFloat)
        RaiseInvalid(
            fmt::format("input '{}': element {} ({}) is beyond 2^24, the largest "
                        "integer a float32 holds exactly",
                        name, i, p[i]));
  } else if (kind != 'f' && kind != 'b') {
    RaiseInvalid(fmt::format("input '{}': numpy dtype {} cannot be fed (float, integer or bool)",
                             name, py::str(raw.dtype()).cast<std::string>()));
  }
  return py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(raw);
}

class PyExecutable {
 public:
  explicit PyExecutable(std::unique_ptr<Executable> exe) : exe_(std::move(exe)) {}

  py::dict Run(const py::object& inputs) {
    Feeds feeds = ReadInputs(inputs);
    ArrayMap outputs;
    std::vector<std::string> names;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      outputs = Take(exe_->RunViews(feeds.views));
      names = exe_->output_names();
    }
    py::dict out;
    for (const std::string& name : names)
      if (auto it = outputs.find(name); it != outputs.end())
        out[py::str(name)] = ToNumpy(std::move(it->second));
    return out;
  }

  // `runs` timed runs after `warmup` ones, on `inputs` or zeros of the
  // input shapes, as `fusetune run --bench` reports them.
  py::dict Benchmark(int runs, const py::object& inputs, int warmup) {
    if (runs < 1 || warmup < 0)
      RaiseInvalid("benchmark: runs must be at least 1, warmup at least 0");
    std::vector<std::unique_ptr<float, decltype(&std::free)>> zeros;
    Feeds feeds = inputs.is_none() ? Zeros(zeros) : ReadInputs(inputs);
    std::vector<double> ms;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      for (int i = 0; i < warmup + runs; ++i) {
        const auto start = std::chrono::steady_clock::now();
        Take(exe_->RunViews(feeds.views));
        if (i >= warmup)
          ms.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count());
      }
    }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) {
      return ms[static_cast<size_t>(q * static_cast<double>(ms.size() - 1))];
    };
    double sum = 0;
    for (double v : ms) sum += v;
    py::dict d;
    d["runs"] = runs;
    d["median_ms"] = at(0.5);
    d["p10_ms"] = at(0.1);
    d["p90_ms"] = at(0.9);
    d["min_ms"] = ms.front();
    d["mean_ms"] = sum / static_cast<double>(ms.size());
    d["inferences_per_second"] = 1e3 / at(0.5);
    return d;
  }

  // The KV cache kept in place (compile(kv_cache_in_place=True)): every
  // cache set to rows of one length, by its past input's name.
  int64_t LoadCache(const py::dict& rows) {
    ArrayMap caches;
    for (auto [key, value] : rows) {
      if (!py::isinstance<py::str>(key)) RaiseInvalid("load_cache(): cache names must be str");
      const std::string name = key.cast<std::string>();
      py::array_t<float> a = FloatArray(name, value);
      caches[name] = Array{std::vector<int64_t>(a.shape(), a.shape() + a.ndim()),
                           std::vector<float>(a.data(), a.data() + a.size())};
    }
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return Take(exe_->LoadCache(caches));
  }
  py::dict Explain() {
    CompileReport r;  // of the last run's size
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      r = exe_->report();
    }
    const auto plan = nlohmann::json::parse(r.plan_json, nullptr, false);
    py::list groups;
    for (size_t i = 0; i < r.kernels.size(); ++i) {
      const KernelReport& k = r.kernels[i];
      py::dict g;
      g["nodes"] = k.nodes;
      g["kernel"] = k.kernel;
      g["tiling"] = k.tiling;
      g["source"] = k.source;
      g["measured_ms"] = py::cast(k.measured_ms);
      g["predicted_ms"] = k.predicted_ms;
      g["predicted_loss"] = py::cast(k.predicted_loss);
      // The plan file's provenance of the same group: why, key and record.
      if (plan.contains("groups") && i < plan["groups"].size())
        for (const char* field : {"why", "workload_key", "record"})
          g[field] = ToPython(plan["groups"][i].value(field, nlohmann::json()));
      groups.append(g);
    }
    py::dict d;
    d["groups"] = groups;
    d["sources"] = r.sources;
    d["predicted_ms"] = r.predicted_ms;
    d["measured_ms"] = py::cast(r.measured_ms);
    d["peak_intermediate_bytes"] = r.peak_intermediate_bytes;
    d["import_ms"] = r.import_ms;
    d["lookup_ms"] = r.lookup_ms;
    d["lowering_ms"] = r.lowering_ms;
    d["partition"] = r.partition;
    d["remembered"] = r.remembered;
    d["plan"] = ToPython(plan);
    return d;
  }

  // Under the run's lock: a run on another thread (the GIL released) may be
  // making or evicting the program of a size (dynamic_dims) these read.
  template <typename F>
  auto Locked(F&& read) const {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return read();
  }
  std::vector<std::string> input_names() const {
    return Locked([&] { return exe_->input_names(); });
  }
  std::vector<std::string> output_names() const {
    return Locked([&] { return exe_->output_names(); });
  }
  std::vector<int64_t> input_shape(const std::string& name) const {
    return Locked([&] { return exe_->input_shape(name); });
  }
  std::map<std::string, int64_t> dims() const {
    return Locked([&] { return exe_->dims(); });
  }
  int64_t instances() const {
    return Locked([&] { return exe_->instances(); });
  }
  py::array CacheRows(const std::string& past_name) const {
    return ToNumpy(Locked([&] { return Take(exe_->CacheRows(past_name)); }));
  }
  int64_t cache_length() const {
    return Locked([&] { return exe_->cache_length(); });
  }
  int64_t cache_capacity() const {
    return Locked([&] { return exe_->cache_capacity(); });
  }


 private:
  // A dict by name, a list or tuple in input order, or one array for a
  // model of one input.
  Feeds ReadInputs(const py::object& inputs) const {
    std::vector<std::pair<std::string, py::handle>> named;
    const std::vector<std::string> names = input_names();
    if (py::isinstance<py::dict>(inputs)) {
      for (auto [key, value] : inputs.cast<py::dict>()) {
        if (!py::isinstance<py::str>(key)) RaiseInvalid("run(): input names must be str");
        named.emplace_back(key.cast<std::string>(), value);
      }
    } else if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
      const py::sequence list = inputs.cast<py::sequence>();
      if (list.size() != names.size())
        RaiseInvalid(fmt::format("run(): the model takes {} inputs ({}), {} were given",
                                 names.size(), fmt::join(names, ", "), list.size()));
      for (size_t i = 0; i < names.size(); ++i) named.emplace_back(names[i], list[i]);
    } else {
      if (names.size() != 1)
        RaiseInvalid(fmt::format("run(): the model takes {} inputs ({}): pass a dict by name",
                                 names.size(), fmt::join(names, ", ")));
      named.emplace_back(names[0], inputs);
    }
    Feeds feeds;
    for (const auto& [name, value] : named) {
      py::array_t<float> a = FloatArray(name, value);
      feeds.views[name] =
          ArrayView{std::vector<int64_t>(a.shape(), a.shape() + a.ndim()), a.data()};
      feeds.arrays.push_back(std::move(a));
    }
    return feeds;
  }

  // Zero-filled inputs of the input shapes, 64-byte aligned so that runs
  // read them in place, held by `buffers`.
  Feeds Zeros(std::vector<std::unique_ptr<float, decltype(&std::free)>>& buffers) const {
    Feeds feeds;
    for (const std::string& name : input_names()) {
      std::vector<int64_t> shape = input_shape(name);
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64 + 64;
      buffers.emplace_back(static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free);
      if (!buffers.back()) throw std::bad_alloc();
      std::fill_n(buffers.back().get(), n, 0.0f);
      feeds.views[name] = ArrayView{std::move(shape), buffers.back().get()};
    }
    return feeds;
  }

  std::unique_ptr<Executable> exe_;
  mutable std::mutex mutex_;
};

std::unique_ptr<PyExecutable> Compile(const std::string& model, const std::string& db,
                                      const std::map<std::string, int64_t>& dims,
                                      const std::map<std::string, std::vector<int64_t>>& values,
                                      int threads, const std::string& caches,
                                      const py::object& max_memory,
                                      const std::vector<std::string>& dynamic_dims,
                                      bool whole_model_plans, bool remember,
                                      bool kv_cache_in_place) {
  // Checked here so that Python gets an InvalidArgumentError: the API's own
  // message for it carries no error code.
  if (threads < 1 || threads > 256)
    RaiseInvalid(fmt::format("threads must be between 1 and 256, not {}", threads));
  CompileOptions options;
  options.database = db;
  options.dims = dims;
  options.values = values;
  options.threads = threads;
  options.dynamic_dims = dynamic_dims;
  options.use_whole_model_plans = whole_model_plans;
  options.remember_plans = remember;
  options.kv_cache_in_place = kv_cache_in_place;
  if (caches == "flushed")
    options.caches = Caches::kFlushed;
  else if (caches == "warm")
    options.caches = Caches::kWarm;
  else if (caches == "cold-weights")
    options.caches = Caches::kColdWeights;
  else
    RaiseInvalid(fmt::format("caches '{}': expected flushed, warm or cold-weights", caches));
  if (py::isinstance<py::str>(max_memory))
    options.max_memory_bytes = Take(cli::ParseBytes(max_memory.cast<std::string>(), "max_memory"));
  else if (!max_memory.is_none())
    options.max_memory_bytes = max_memory.cast<int64_t>();
  py::gil_scoped_release release;
  auto compiler = Take(Compiler::Open(options));
  return std::make_unique<PyExecutable>(Take(compiler->Compile(model)));
}

// The reference executor on the model as `fusetune run-reference` runs it:
// the outputs by name, in the graph's order, of their own dtypes.
py::dict RunReference(const std::string& model, const py::dict& inputs,
                      const std::map<std::string, int64_t>& dims,
                      const std::map<std::string, std::vector<int64_t>>& values) {
  graph::TensorMap feeds;
  for (auto [key, value] : inputs)
    feeds[key.cast<std::string>()] = ToTensor(key.cast<std::string>(), value);
  std::vector<std::string> names;
  graph::TensorMap outputs;
  {
    py::gil_scoped_release release;
    graph::Graph graph = Take(cli::LoadModel(model, ModelOptionsOf(dims, values), feeds));
    outputs = Take(graph::RunReference(graph, feeds)).outputs;
    for (graph::ValueId v : graph.outputs) names.push_back(graph.value(v).name);
  }
  py::dict out;
  for (const std::string& name : names) out[py::str(name)] = ToNumpy(outputs.at(name));
  return out;
}

}  // namespace

void BindExecutable(py::module_& m) {
  py::class_<PyExecutable>(m, "Executable", py::dynamic_attr(),
                           R"(A model compiled with its tuned plans.

Made by fusetune.compile() or fusetune.from_torch().)")
      .def("run", &PyExecutable::Run, py::arg("inputs"),
           "run({name: array}) -> {name: array}: inputs as a dict by name, a list in "
           "input_names order, or one array for a model of one input. float32 C-contiguous "
           "arrays aligned to 64 bytes are read in place; others are converted or copied once. "
           "Outputs are float32 arrays.")
      .def("benchmark", &PyExecutable::Benchmark, py::arg("runs") = 100,
           py::arg("inputs") = py::none(), py::arg("warmup") = 1,
           "Times `runs` runs after `warmup` ones, on `inputs` or zeros of the input shapes: "
           "runs, median_ms, p10_ms, p90_ms, min_ms, mean_ms, inferences_per_second")
      .def("explain", &PyExecutable::Explain,
           "Where each kernel's plan came from, as data: the compile's summary and per group "
           "its nodes, kernel, tiling, source, times, why, workload key and record")
      .def("input_shape", &PyExecutable::input_shape, py::arg("name"),
           "An input's shape at the last run's size")
      .def_property_readonly("input_names", &PyExecutable::input_names)
      .def_property_readonly("output_names", &PyExecutable::output_names)
      .def_property_readonly("dims", &PyExecutable::dims,
                             "Symbolic dimensions' values at the last run's size")
      .def_property_readonly("instances", &PyExecutable::instances,
                             "Programs held, one per size met (dynamic_dims)")
      .def("load_cache", &PyExecutable::LoadCache, py::arg("rows"),
           "load_cache({past input name: array}) -> rows: sets every KV cache kept in place "
           "(kv_cache_in_place) to these rows, all of one length (a prefill's present "
           "outputs); {} empties them")
      .def("cache_rows", &PyExecutable::CacheRows, py::arg("past_name"),
           "The rows one cache kept in place holds now, by its past input's name")
      .def_property_readonly("cache_length", &PyExecutable::cache_length,
                             "Rows the KV caches kept in place hold now (0 without them)")
      .def_property_readonly("cache_capacity", &PyExecutable::cache_capacity,
                             "Rows they can hold (0 without them)");
  m.def("compile", &Compile, py::arg("model"), py::arg("db"), py::arg("dims"), py::arg("values"),
        py::arg("threads"), py::arg("caches"), py::arg("max_memory"), py::arg("dynamic_dims"),
        py::arg("whole_model_plans"), py::arg("remember"), py::arg("kv_cache_in_place"));
  m.def("run_reference", &RunReference, py::arg("model"), py::arg("inputs"), py::arg("dims"),
        py::arg("values"));
}

}  // namespace fusetune::python
