// ONNX import and export. Import reads a .onnx file (weights inline or in
// external data files next to it), checks that every op is supported (one
// error listing all unsupported op types), binds symbolic dimensions, infers
// static shapes and folds Shape/Constant chains.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "graph/graph.h"

namespace fusetune::graph {

struct ImportOptions {
  // Values for symbolic input dimensions ("batch" -> 1). Unbound symbolic
  // dimensions are an error that names the input and the dimension.
  std::map<std::string, int64_t> dim_bindings;
  // Values of graph inputs by name, for inputs that shapes depend on
  // (Reshape's shape, Slice's starts... fed as graph inputs): those that
  // inference needs become constants of the graph (input_values.h); the
  // others are ignored, so a run may pass all of its inputs here.
  std::map<std::string, Tensor> input_values;
  // Fold constants while inferring shapes (off only for tests of folding).
  bool fold_constants = true;
};

Result<Graph> ImportOnnxFile(const std::string& path, const ImportOptions& options = {});
// `base_dir` resolves external data locations; `origin` names the source in errors.
Result<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& base_dir,
                              const std::string& origin, const ImportOptions& options = {});

// Writes the graph as an ONNX model (initializers inline). Nodes of other
// domains get an opset import of version 1 for their domain.
Result<std::string> ExportOnnxBytes(const Graph& graph);
Status ExportOnnxFile(const Graph& graph, const std::string& path);

}  // namespace fusetune::graph
