#include "graph/op_registry.h"

#include <fmt/format.h>

#include <algorithm>

namespace fusetune::graph {

Error InferContext::Fail(ErrorCode code, const std::string& message) const {
  return Error(code, node_description + ": " + message);
}

Result<const Tensor*> InferContext::RequireConstant(size_t i, const char* what) const {
  if (!has_input(i))
    return Fail(ErrorCode::kInvalidArgument, fmt::format("input {} ({}) is missing", i, what));
  if (input_constants.size() <= i || input_constants[i] == nullptr) {
    missing_constant = static_cast<int64_t>(i);
    return Fail(ErrorCode::kUnsupported,
                fmt::format("input {} ({}) must be a constant after shape folding; "
                            "fusetune needs static shapes",
                            i, what));
  }
  return input_constants[i];
}

namespace {
const std::vector<OpSchema>& Table() {
  static const std::vector<OpSchema> table = [] {
    std::vector<OpSchema> t;
    AppendElementwiseOps(t);
    AppendReductionOps(t);
    AppendShapeOps(t);
    AppendConvOps(t);
    AppendResizeOps(t);
    std::sort(t.begin(), t.end(),
              [](const OpSchema& a, const OpSchema& b) { return a.op_type < b.op_type; });
    return t;
  }();
  return table;
}
}  // namespace

const OpSchema* FindOpSchema(std::string_view domain, std::string_view op_type) {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  const auto& table = Table();
  auto it =
      std::lower_bound(table.begin(), table.end(), op_type,
                       [](const OpSchema& s, std::string_view name) { return s.op_type < name; });
  if (it == table.end() || it->op_type != op_type) return nullptr;
  return &*it;
}

std::vector<std::string> SupportedOpTypes() {
  std::vector<std::string> names;
  for (const OpSchema& s : Table()) names.push_back(s.op_type);
  return names;
}

}  // namespace fusetune::graph
