// What every part of the Python module shares: fusetune's errors raised as
// Python exceptions, JSON and tensors turned into Python objects and numpy
// arrays, and numpy arrays into tensors.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "common/status.h"
#include "fusetune/fusetune.h"
#include "graph/tensor.h"

namespace fusetune::python {

namespace py = pybind11;

// A failure on its way to Python: ToString()'s "<code>: <message>", the text
// the CLI prints after "fusetune: error: ". The translator registered by
// RegisterErrors raises it as the fusetune._errors class of its code.
class FusetuneError : public std::runtime_error {
 public:
  explicit FusetuneError(const std::string& what) : std::runtime_error(what) {}
};
void RegisterErrors(py::module_& m);

[[noreturn]] inline void Raise(const Error& error) { throw FusetuneError(error.ToString()); }
[[noreturn]] inline void RaiseInvalid(const std::string& message) {
  Raise(Error(ErrorCode::kInvalidArgument, message));
}
inline void Check(const Status& status) {
  if (!status.ok()) Raise(status.error());
}
template <typename T>
T Take(Result<T> result) {
  if (!result.ok()) Raise(result.error());
  return std::move(*result);
}
// The public API's failures are ToString() text already.
template <typename T>
T Take(Expected<T> result) {
  if (!result.ok()) throw FusetuneError(result.error());
  return std::move(result.value());
}

// JSON as dicts, lists, str, int, float, bool and None.
py::object ToPython(const nlohmann::json& j);
// A JSON text stored in the database, parsed; text that is not JSON stays a str.
py::object ParsedJson(const std::string& text);

// An f32 result handed over without a copy: the array owns the vector.
py::array ToNumpy(Array&& array);
// A tensor of any dtype as a numpy array of that dtype (f16/bf16 as f32); copies.
py::array ToNumpy(const graph::Tensor& tensor);
// A numpy array (or anything numpy reads as one) as a tensor of its dtype;
// `name` is the input's, for errors. Copies.
graph::Tensor ToTensor(const std::string& name, const py::handle& value);

// `dims` and `values` as the CLI's --dim and --value strings, for LoadModel.
cli::ModelOptions ModelOptionsOf(const std::map<std::string, int64_t>& dims,
                                 const std::map<std::string, std::vector<int64_t>>& values);

}  // namespace fusetune::python
