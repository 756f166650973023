#include "graph/model_file.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "common/hash.h"

namespace fusetune::graph {

namespace {

// The graph's inputs that are not initializers (older exports list both).
std::vector<const onnx::ValueInfoProto*> FedInputs(const onnx::GraphProto& graph) {
  std::set<std::string> initializers;
  for (const auto& init : graph.initializer()) initializers.insert(init.name());
  std::vector<const onnx::ValueInfoProto*> fed;
  for (const auto& input : graph.input())
    if (!initializers.count(input.name())) fed.push_back(&input);
  return fed;
}

Result<std::string> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kNotFound, fmt::format("model '{}' cannot be opened", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Error(ErrorCode::kIo, fmt::format("model '{}' cannot be read", path));
  return bytes;
}

std::string KeyOf(const std::string& bytes) {
  return HashToHex(HashBytes(bytes.data(), bytes.size()));
}

}  // namespace

Result<std::string> ModelFileKey(const std::string& path) {
  FT_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(path));
  return KeyOf(bytes);
}

Result<ModelFileFacts> ReadModelFileFacts(const std::string& path) {
  FT_ASSIGN_OR_RETURN(const std::string bytes, ReadBytes(path));
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes) || !model.has_graph())
    return Error(ErrorCode::kParse, fmt::format("'{}' is not a valid ONNX model", path));
  ModelFileFacts facts;
  facts.key = KeyOf(bytes);
  for (const onnx::ValueInfoProto* input : FedInputs(model.graph())) {
    if (!input->type().has_tensor_type()) continue;
    for (const auto& dim : input->type().tensor_type().shape().dim()) {
      const std::string& name = dim.dim_param();
      if (dim.has_dim_value() || name.empty()) continue;
      if (std::find(facts.symbolic_dims.begin(), facts.symbolic_dims.end(), name) ==
          facts.symbolic_dims.end())
        facts.symbolic_dims.push_back(name);
    }
  }
  return facts;
}

}  // namespace fusetune::graph
