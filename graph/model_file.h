// What an ONNX model file says before any dimension is bound.
//
// A model exported with dynamic axes is tuned at several sizes (`tune --dim
// seq=16..256`), each a graph of its own with its own key. The jobs record
// the file's key and the sizes they bound, so that a later `compile` of the
// same file without `--dim` finds the sizes the database was tuned at. The
// key is of the file's bytes: the same model anywhere (another directory,
// another node of a cluster) has the same key, and another export does not.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace fusetune::graph {

struct ModelFileFacts {
  std::string key;  // 16 hex digits of a hash of the file's bytes
  // The symbolic dimensions of the graph's inputs ("seq", "past"), in the
  // order they first appear, each once; empty for a model of fixed shapes.
  std::vector<std::string> symbolic_dims;
};

// Reads and parses the file (errors name it, as ImportOnnxFile's do).
Result<ModelFileFacts> ReadModelFileFacts(const std::string& path);
// The key alone, without parsing: for a tuning job, whose import parses
// the model anyway.
Result<std::string> ModelFileKey(const std::string& path);

}  // namespace fusetune::graph
