#include "python/convert.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace fusetune::python {

void RegisterErrors(py::module_& m) {
  (void)m;
  // The class is picked in Python (fusetune/_errors.py), where the
  // exceptions are defined, by the code that starts the message.
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const FusetuneError& e) {
      py::object cls = py::module_::import("fusetune._errors").attr("error_class")(e.what());
      PyErr_SetString(cls.ptr(), e.what());
    }
  });
}

py::object ToPython(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list list;
      for (const auto& item : j) list.append(ToPython(item));
      return list;
    }
    case nlohmann::json::value_t::object: {
      py::dict dict;
      for (const auto& [key, item] : j.items()) dict[py::str(key)] = ToPython(item);
      return dict;
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return py::none();
}

py::object ParsedJson(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  return j.is_discarded() ? py::object(py::str(text)) : ToPython(j);
}

py::array ToNumpy(Array&& array) {
  auto* data = new std::vector<float>(std::move(array.data));
  py::capsule owner(data, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  return py::array_t<float>(array.shape, data->data(), owner);
}

namespace {

// numpy's name of a dtype fusetune stores as is (f16 and bf16 become f32).
const char* NumpyName(graph::DataType dtype) {
  switch (dtype) {
    case graph::DataType::kFloat32:
    case graph::DataType::kFloat16:
    case graph::DataType::kBFloat16:
      return "float32";
    case graph::DataType::kFloat64:
      return "float64";
    case graph::DataType::kInt64:
      return "int64";
    case graph::DataType::kInt32:
      return "int32";
    case graph::DataType::kInt8:
      return "int8";
    case graph::DataType::kUInt8:
      return "uint8";
    case graph::DataType::kBool:
      return "bool";
  }
  return "float32";
}

// The tensor dtype of a numpy dtype: kind ('f', 'i', 'u', 'b') and item size.
std::optional<graph::DataType> TensorType(char kind, size_t size) {
  if (kind == 'f' && size == 4) return graph::DataType::kFloat32;
  if (kind == 'f' && size == 8) return graph::DataType::kFloat64;
  if (kind == 'f' && size == 2) return graph::DataType::kFloat16;
  if (kind == 'i' && size == 8) return graph::DataType::kInt64;
  if (kind == 'i' && size == 4) return graph::DataType::kInt32;
  if (kind == 'i' && size == 1) return graph::DataType::kInt8;
  if (kind == 'u' && size == 1) return graph::DataType::kUInt8;
  if (kind == 'b' && size == 1) return graph::DataType::kBool;
  return std::nullopt;
}

}  // namespace

py::array ToNumpy(const graph::Tensor& tensor) {
  const bool half =
      tensor.dtype() == graph::DataType::kFloat16 || tensor.dtype() == graph::DataType::kBFloat16;
  const graph::Tensor& source = half ? tensor.CastTo(graph::DataType::kFloat32) : tensor;
  py::array out(py::dtype(NumpyName(tensor.dtype())), tensor.dims());
  if (source.nbytes() > 0) std::memcpy(out.mutable_data(), source.raw(), source.nbytes());
  return out;
}

graph::Tensor ToTensor(const std::string& name, const py::handle& value) {
  py::array a = py::array::ensure(value, py::array::c_style);
  if (!a)
    RaiseInvalid(fmt::format("input '{}': {} is not an array", name,
                             py::str(py::type::of(value)).cast<std::string>()));
  const auto dtype = TensorType(a.dtype().kind(), static_cast<size_t>(a.itemsize()));
  if (!dtype)
    RaiseInvalid(
        fmt::format("input '{}': numpy dtype {} has no tensor type here (float32, "
                    "float64, float16, int64, int32, int8, uint8, bool)",
                    name, py::str(a.dtype()).cast<std::string>()));
  graph::Tensor t =
      graph::Tensor::Uninitialized(*dtype, graph::Dims(a.shape(), a.shape() + a.ndim()));
  if (t.nbytes() > 0) std::memcpy(t.raw(), a.data(), t.nbytes());
  return t;
}

cli::ModelOptions ModelOptionsOf(const std::map<std::string, int64_t>& dims,
                                 const std::map<std::string, std::vector<int64_t>>& values) {
  cli::ModelOptions o;
  for (const auto& [name, value] : dims) o.dims.push_back(fmt::format("{}={}", name, value));
  for (const auto& [name, v] : values)
    o.values.push_back(fmt::format("{}={}", name, fmt::join(v, ",")));
  return o;
}

}  // namespace fusetune::python
