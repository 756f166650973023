// The parts of the _fusetune extension, each registering its functions and
// classes on the module (module.cpp calls them).
#pragma once

#include <pybind11/pybind11.h>

namespace fusetune::python {

void BindTune(pybind11::module_& m);        // calibrate, tune
void BindExecutable(pybind11::module_& m);  // compile, Executable, run_reference
void BindDatabase(pybind11::module_& m);    // Database, report

}  // namespace fusetune::python
