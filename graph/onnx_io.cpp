#include "graph/onnx_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "graph/input_values.h"
#include "graph/shape_inference.h"

namespace fusetune::graph {

namespace {

namespace fs = std::filesystem;
constexpr int64_t kMinOpset = 7;
constexpr int64_t kMaxOpset = 21;

Result<std::string> ReadFile(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kIo, fmt::format("cannot open {} '{}'", what, path.string()));
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A decimal integer, or -2 (never a valid offset or length) when malformed.
int64_t ParseInt64(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  return (text.empty() || *end != '\0' || errno != 0) ? -2 : v;
}

Result<std::string> ReadExternalData(const onnx::TensorProto& proto, const std::string& base_dir,
                                     size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = ParseInt64(entry.value());
    else if (entry.key() == "length")
      length = ParseInt64(entry.value());
  }
  if (location.empty())
    return Error(
        ErrorCode::kCorrupt,
        fmt::format("initializer '{}' has external data without a location", proto.name()));
  if (offset == -2 || length == -2)
    return Error(ErrorCode::kCorrupt,
                 fmt::format("initializer '{}': external data offset or length is not a number",
                             proto.name()));
  const fs::path path = fs::path(base_dir) / location;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Error(ErrorCode::kIo,
                 fmt::format("initializer '{}': cannot open external data file '{}'", proto.name(),
                             path.string()));
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  if (offset == -2 || length == -2)
    return Error(ErrorCode::kCorrupt,
                 fmt::format("initializer '{}': external data offset or length is not a number",
                             proto.name()));
  if (length < 0) length = static_cast<int64_t>(expected);
  if (offset < 0 || offset + length > file_size || static_cast<size_t>(length) != expected)
    return Error(
        ErrorCode::kCorrupt,
        fmt::format(
            "initializer '{}': external data '{}' offset {} length {} does not fit a file of {} "
            "bytes holding {} bytes",
            proto.name(), location, offset, length, file_size, expected));
  std::string data(length, '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  return data;
}

template <typename Field>
void CopyNarrow(const Field& field, Tensor& t) {
  const DataType d = t.dtype();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto v = field.Get(static_cast<int>(i));
    switch (d) {
      case DataType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case DataType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(v);
        break;
      case DataType::kUInt8:
      case DataType::kBool:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case DataType::kFloat16:
      case DataType::kBFloat16:
        t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
        break;
      default:
        break;
    }
  }
}

// The number of values in the typed field that holds a tensor of `dtype`.
int TypedValueCount(const onnx::TensorProto& proto, DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return proto.float_data_size();
    case DataType::kInt64:
      return proto.int64_data_size();
    case DataType::kFloat64:
      return proto.double_data_size();
    default:
      return proto.int32_data_size();
  }
}

Result<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir) {
  auto dtype = DataTypeFromOnnx(proto.data_type());
  if (!dtype)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("tensor '{}' has ONNX data type {}, which is not supported",
                             proto.name(), proto.data_type()));
  Dims dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims)
    if (d < 0)
      return Error(ErrorCode::kCorrupt,
                   fmt::format("tensor '{}' has a negative dimension", proto.name()));
  // The data is checked against the shape before a tensor of the shape is
  // allocated: a huge shape must not reach the allocation.
  const std::optional<size_t> checked_bytes = CheckedByteCount(*dtype, dims);
  if (!checked_bytes)
    return Error(ErrorCode::kCorrupt, fmt::format("tensor '{}' has a shape too large: {}",
                                                  proto.name(), DimsToString(dims)));
  const size_t bytes = *checked_bytes;
  const int64_t numel = NumElements(dims);
  std::string external;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    FT_ASSIGN_OR_RETURN(external, ReadExternalData(proto, base_dir, bytes));
  } else if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes)
      return Error(
          ErrorCode::kCorrupt,
          fmt::format("tensor '{}' of type {} and shape {} has {} bytes of data, expects {}",
                      proto.name(), DataTypeName(*dtype), DimsToString(dims),
                      proto.raw_data().size(), bytes));
  } else if (const int count = TypedValueCount(proto, *dtype); count != numel) {
    return Error(ErrorCode::kCorrupt,
                 fmt::format("tensor '{}' of shape {} holds {} values, expects {}", proto.name(),
                             DimsToString(dims), count, numel));
  }
  Tensor t(*dtype, dims);
  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    std::memcpy(t.raw(), external.data(), bytes);
  else if (proto.has_raw_data())
    std::memcpy(t.raw(), proto.raw_data().data(), bytes);
  else if (*dtype == DataType::kFloat32)
    std::copy(proto.float_data().begin(), proto.float_data().end(), t.data<float>());
  else if (*dtype == DataType::kInt64)
    std::copy(proto.int64_data().begin(), proto.int64_data().end(), t.data<int64_t>());
  else if (*dtype == DataType::kFloat64)
    std::copy(proto.double_data().begin(), proto.double_data().end(), t.data<double>());
  else
    CopyNarrow(proto.int32_data(), t);
  return t;
}

Result<AttrValue> AttributeFromProto(const onnx::AttributeProto& a, const std::string& base_dir) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::FLOAT:
      return AttrValue(a.f());
    case A::INT:
      return AttrValue(static_cast<int64_t>(a.i()));
    case A::STRING:
      return AttrValue(a.s());
    case A::FLOATS:
      return AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case A::INTS:
      return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::STRINGS:
      return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TENSOR: {
      FT_ASSIGN_OR_RETURN(Tensor t, TensorFromProto(a.t(), base_dir));
      return AttrValue(std::move(t));
    }
    default:
      return Error(
          ErrorCode::kUnsupported,
          fmt::format(
              "attribute '{}' has type {}, which is not supported (subgraphs, sparse tensors)",
              a.name(), A::AttributeType_Name(a.type())));
  }
}

Result<TensorType> TypeFromValueInfo(const onnx::ValueInfoProto& info,
                                     const ImportOptions& options) {
  if (!info.type().has_tensor_type())
    return Error(ErrorCode::kUnsupported, fmt::format("input '{}' is not a tensor", info.name()));
  const auto& tt = info.type().tensor_type();
  auto dtype = DataTypeFromOnnx(tt.elem_type());
  if (!dtype)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("input '{}' has ONNX element type {}, which is not supported",
                             info.name(), tt.elem_type()));
  TensorType type;
  type.dtype = *dtype;
  bool symbolic = false;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& dim = tt.shape().dim(i);
    if (dim.has_dim_value()) {
      type.dims.push_back(dim.dim_value());
      type.symbols.push_back("");
      continue;
    }
    const std::string sym = dim.has_dim_param() ? dim.dim_param() : "";
    auto it = sym.empty() ? options.dim_bindings.end() : options.dim_bindings.find(sym);
    if (it == options.dim_bindings.end())
      return Error(
          ErrorCode::kInvalidArgument,
          fmt::format("input '{}' dimension {} is symbolic ('{}'); bind it with --dim {}=N",
                      info.name(), i, sym.empty() ? "?" : sym, sym.empty() ? "NAME" : sym));
    if (it->second < 0)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("input '{}' dimension {} ('{}') is bound to {}: a size is never "
                               "negative",
                               info.name(), i, sym, it->second));
    type.dims.push_back(it->second);
    type.symbols.push_back(sym);
    symbolic = true;
  }
  if (!symbolic) type.symbols.clear();
  return type;
}

Status ConvertGraph(const onnx::GraphProto& gp, const std::string& base_dir,
                    const ImportOptions& options, Graph& g) {
  g.name = gp.name();
  for (const auto& init : gp.initializer()) {
    auto tensor = TensorFromProto(init, base_dir);
    if (!tensor.ok()) return tensor.error();
    g.AddConstant(init.name(), std::move(*tensor));
  }
  for (const auto& input : gp.input()) {
    if (g.FindValue(input.name())) continue;  // older exports list initializers as inputs too
    FT_ASSIGN_OR_RETURN(TensorType type, TypeFromValueInfo(input, options));
    g.AddInput(input.name(), std::move(type));
  }
  for (int n = 0; n < gp.node_size(); ++n) {
    const auto& np = gp.node(n);
    Node node;
    node.op_type = np.op_type();
    node.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    node.name = np.name();
    const std::string desc = np.name().empty()
                                 ? fmt::format("node #{} ({})", n, np.op_type())
                                 : fmt::format("node '{}' ({})", np.name(), np.op_type());
    for (const auto& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      auto id = g.FindValue(in);
      if (!id)
        return Error(
            ErrorCode::kInvalidArgument,
            fmt::format(
                "{} reads '{}', which is not a graph input, an initializer, or the output of an "
                "earlier node",
                desc, in));
      node.inputs.push_back(*id);
    }
    for (const auto& out : np.output()) {
      if (out.empty()) {
        node.outputs.push_back(kNoValue);
        continue;
      }
      if (g.FindValue(out))
        return Error(ErrorCode::kInvalidArgument,
                     fmt::format("{} writes '{}', which is already defined", desc, out));
      node.outputs.push_back(g.AddValue(out));
    }
    for (const auto& attr : np.attribute()) {
      auto value = AttributeFromProto(attr, base_dir);
      if (!value.ok()) return value.error().WithContext(desc);
      node.attrs.Set(attr.name(), std::move(*value));
    }
    g.AddNode(std::move(node));
  }
  for (const auto& out : gp.output()) {
    auto id = g.FindValue(out.name());
    if (!id)
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("graph output '{}' is never produced", out.name()));
    g.outputs.push_back(*id);
  }
  if (g.outputs.empty()) return Error(ErrorCode::kInvalidArgument, "the graph has no outputs");
  return Status::Ok();
}

// A dimension bound to 0 (a KV cache of no rows before a prompt) is legal
// where the graph makes the tensor non-empty again at once (the cache
// concatenated with the new rows): no node may compute an empty tensor, nor
// read one except to concatenate it or take its shape, since no kernel runs
// on an empty operand. Constants (an empty Resize roi) are not computed.
bool IsEmpty(const Value& v) {
  return v.has_type && !v.is_constant() && !v.type.dims.empty() &&
         std::find(v.type.dims.begin(), v.type.dims.end(), 0) != v.type.dims.end();
}

bool ReadsEmptyInputs(const Node& node) {
  return node.op_type == "Concat" || node.op_type == "Shape" || node.op_type == "Size";
}

Status CheckZeroDims(const Graph& g, const ImportOptions& options) {
  std::vector<std::string> zero;
  for (const auto& [name, value] : options.dim_bindings)
    if (value == 0) zero.push_back(name + "=0");
  if (zero.empty()) return Status::Ok();
  auto empty_error = [&](const Node& node, const char* what, const Value& v) {
    return Error(ErrorCode::kUnsupported,
                 fmt::format("with {}, node '{}' ({}) {} an empty tensor ('{}' of shape [{}]): a "
                             "dimension may be 0 only where the graph makes its tensors non-empty "
                             "again, as a KV cache of no rows concatenated with the new ones",
                             fmt::join(zero, ", "), node.name, node.op_type, what, v.name,
                             fmt::join(v.type.dims, ", ")));
  };
  for (const Node& node : g.nodes) {
    for (ValueId in : node.inputs)
      if (in != kNoValue && IsEmpty(g.value(in)) && !ReadsEmptyInputs(node))
        return empty_error(node, "reads", g.value(in));
    for (ValueId out : node.outputs)
      if (out != kNoValue && IsEmpty(g.value(out)))
        return empty_error(node, "computes", g.value(out));
  }
  return Status::Ok();
}

}  // namespace

Result<Graph> ImportOnnxBytes(const std::string& bytes, const std::string& base_dir,
                              const std::string& origin, const ImportOptions& options) {
  onnx::ModelProto model;
  if (bytes.empty())
    return Error(ErrorCode::kParse, fmt::format("'{}' is empty, not an ONNX model", origin));
  if (!model.ParseFromString(bytes))
    return Error(
        ErrorCode::kParse,
        fmt::format(
            "'{}' is not a valid ONNX model (the protobuf message does not parse: truncated or not "
            "ONNX)",
            origin));
  if (!model.has_graph() || model.ir_version() <= 0)
    return Error(ErrorCode::kParse,
                 fmt::format("'{}' is not an ONNX model (no graph or IR version)", origin));
  Graph g;
  g.opset = -1;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") g.opset = op.version();
  if (g.opset < 0)
    return Error(ErrorCode::kParse, fmt::format("'{}' declares no default-domain opset", origin));
  if (g.opset < kMinOpset || g.opset > kMaxOpset)
    return Error(ErrorCode::kUnsupported,
                 fmt::format("'{}' uses opset {}; fusetune supports opsets {} to {}", origin,
                             g.opset, kMinOpset, kMaxOpset));
  auto status = ConvertGraph(model.graph(), base_dir, options, g);
  if (!status.ok()) return status.error().WithContext(origin);
  status = CheckSupportedOps(g);
  if (!status.ok()) return status.error().WithContext(origin);
  InferOptions infer;
  infer.fold_constants = options.fold_constants;
  status = InferShapesBindingInputs(g, options.input_values, infer);
  if (!status.ok()) return status.error().WithContext(origin);
  status = CheckZeroDims(g, options);
  if (!status.ok()) return status.error().WithContext(origin);
  return g;
}

Result<Graph> ImportOnnxFile(const std::string& path, const ImportOptions& options) {
  FT_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, "model"));
  const std::string base = fs::path(path).parent_path().string();
  return ImportOnnxBytes(bytes, base.empty() ? "." : base, path, options);
}

// ---- export ---------------------------------------------------------------------

namespace {

void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* proto) {
  proto->set_name(name);
  proto->set_data_type(DataTypeToOnnx(t.dtype()));
  for (int64_t d : t.dims()) proto->add_dims(d);
  proto->set_raw_data(reinterpret_cast<const char*>(t.raw()), t.nbytes());
}

void TypeToValueInfo(const Value& v, onnx::ValueInfoProto* info) {
  info->set_name(v.name);
  auto* tt = info->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(DataTypeToOnnx(v.type.dtype));
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < v.type.dims.size(); ++i) {
    auto* dim = shape->add_dim();
    dim->set_dim_value(v.type.dims[i]);
    if (i < v.type.symbols.size() && !v.type.symbols[i].empty())
      dim->set_denotation(v.type.symbols[i]);
  }
}

void AttributeToProto(const std::string& name, const AttrValue& value, onnx::AttributeProto* a) {
  using A = onnx::AttributeProto;
  a->set_name(name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          a->set_type(A::INT);
          a->set_i(v);
        } else if constexpr (std::is_same_v<T, float>) {
          a->set_type(A::FLOAT);
          a->set_f(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          a->set_type(A::STRING);
          a->set_s(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          a->set_type(A::INTS);
          for (auto x : v) a->add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          a->set_type(A::FLOATS);
          for (auto x : v) a->add_floats(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          a->set_type(A::STRINGS);
          for (const auto& x : v) a->add_strings(x);
        } else {
          a->set_type(A::TENSOR);
          TensorToProto(v, "", a->mutable_t());
        }
      },
      value);
}

}  // namespace

Result<std::string> ExportOnnxBytes(const Graph& graph) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("fusetune");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(graph.opset);
  std::set<std::string> domains;
  auto* gp = model.mutable_graph();
  gp->set_name(graph.name.empty() ? "fusetune" : graph.name);
  for (ValueId v : graph.inputs) TypeToValueInfo(graph.value(v), gp->add_input());
  for (const Value& v : graph.values)
    if (v.is_constant()) TensorToProto(*v.constant, v.name, gp->add_initializer());
  for (const Node& node : graph.nodes) {
    auto* np = gp->add_node();
    np->set_op_type(node.op_type);
    np->set_name(node.name);
    if (!node.domain.empty()) {
      np->set_domain(node.domain);
      domains.insert(node.domain);
    }
    for (ValueId v : node.inputs) np->add_input(v == kNoValue ? "" : graph.value(v).name);
    for (ValueId v : node.outputs) np->add_output(v == kNoValue ? "" : graph.value(v).name);
    for (const auto& [name, value] : node.attrs.all())
      AttributeToProto(name, value, np->add_attribute());
  }
  for (ValueId v : graph.outputs) TypeToValueInfo(graph.value(v), gp->add_output());
  for (const std::string& d : domains) {
    auto* op = model.add_opset_import();
    op->set_domain(d);
    op->set_version(1);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return Error(ErrorCode::kInternal, "the model could not be serialised (over 2 GiB?)");
  return bytes;
}

Status ExportOnnxFile(const Graph& graph, const std::string& path) {
  FT_ASSIGN_OR_RETURN(std::string bytes, ExportOnnxBytes(graph));
  std::ofstream out(path, std::ios::binary);
  if (!out) return Error(ErrorCode::kIo, fmt::format("cannot write '{}'", path));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return Error(ErrorCode::kIo, fmt::format("write to '{}' failed", path));
  return Status::Ok();
}

}  // namespace fusetune::graph
