// _fusetune: the extension under the fusetune package (python/fusetune/),
// which gives it its documented signatures, defaults and model arguments.
#include "fusetune/fusetune.h"
#include "python/bindings.h"
#include "python/convert.h"

PYBIND11_MODULE(_fusetune, m) {
  m.doc() = "fusetune's C++ library; use it through the fusetune package";
  m.attr("__version__") = fusetune::Version();
  fusetune::python::RegisterErrors(m);
  fusetune::python::BindTune(m);
  fusetune::python::BindExecutable(m);
  fusetune::python::BindDatabase(m);
}
