#include "graph/npy.h"

#include <fmt/format.h>

#include <fstream>
#include <optional>
#include <sstream>

namespace fusetune::graph {

namespace {

const char kMagic[] = "\x93NUMPY";

std::string DescrOf(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "<f4";
    case DataType::kFloat64:
      return "<f8";
    case DataType::kFloat16:
      return "<f2";
    case DataType::kInt64:
      return "<i8";
    case DataType::kInt32:
      return "<i4";
    case DataType::kInt8:
      return "|i1";
    case DataType::kUInt8:
      return "|u1";
    case DataType::kBool:
      return "|b1";
    case DataType::kBFloat16:
      return "";
  }
  return "";
}

std::optional<DataType> DtypeOfDescr(const std::string& d) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt64,
                     DataType::kInt32, DataType::kInt8, DataType::kUInt8, DataType::kBool}) {
    // The byte-order mark may be '<', '=' or '|' (this machine is little-endian).
    const std::string mine = DescrOf(t);
    if (d.size() == 3 && std::string_view("<=|").find(d[0]) != std::string_view::npos &&
        d.compare(1, 2, mine, 1, 2) == 0)
      return t;
  }
  return std::nullopt;
}

// The text after "'key':" in the header dict, with leading spaces skipped.
std::optional<std::string_view> HeaderField(std::string_view header, std::string_view key) {
  const std::string quoted = fmt::format("'{}'", key);
  size_t pos = header.find(quoted);
  if (pos == std::string_view::npos) return std::nullopt;
  pos = header.find(':', pos + quoted.size());
  if (pos == std::string_view::npos) return std::nullopt;
  pos = header.find_first_not_of(" \t", pos + 1);
  if (pos == std::string_view::npos) return std::nullopt;
  return header.substr(pos);
}

}  // namespace

Result<Tensor> ParseNpy(const std::string& bytes, const std::string& origin) {
  auto fail = [&](const std::string& why) {
    return Error(ErrorCode::kParse, fmt::format("'{}': {}", origin, why));
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    return fail("not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    return fail(fmt::format("unsupported .npy version {}", major));
  }
  if (header_start + header_len > bytes.size()) return fail("truncated header");
  const std::string_view header(bytes.data() + header_start, header_len);
  auto descr_field = HeaderField(header, "descr");
  if (!descr_field || descr_field->empty() || descr_field->front() != '\'')
    return fail("header has no descr");
  const std::string descr(descr_field->substr(1, descr_field->find('\'', 1) - 1));
  auto dtype = DtypeOfDescr(descr);
  if (!dtype) return fail(fmt::format("dtype '{}' is not supported", descr));
  auto fortran = HeaderField(header, "fortran_order");
  if (fortran && fortran->substr(0, 4) == "True")
    return fail("Fortran-order arrays are not supported; save with np.ascontiguousarray");
  auto shape_field = HeaderField(header, "shape");
  if (!shape_field || shape_field->front() != '(' ||
      shape_field->find(')') == std::string_view::npos)
    return fail("header has no shape");
  Dims dims;
  std::stringstream ss(std::string(shape_field->substr(1, shape_field->find(')') - 1)));
  for (std::string item; std::getline(ss, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \tL") + 1);
    if (item.empty()) continue;
    try {
      dims.push_back(std::stoll(item));
    } catch (...) {
      return fail(fmt::format("bad shape entry '{}'", item));
    }
  }
  // Checked before a tensor of the shape is made: a negative or huge
  // dimension must not reach the allocation.
  const auto needed = CheckedByteCount(*dtype, dims);
  if (!needed) return fail(fmt::format("shape {} is negative or too large", DimsToString(dims)));
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start < *needed)
    return fail(fmt::format("holds {} bytes of data, shape {} needs {}", bytes.size() - data_start,
                            DimsToString(dims), *needed));
  Tensor t(*dtype, dims);
  if (t.nbytes() > 0) std::memcpy(t.raw(), bytes.data() + data_start, t.nbytes());
  return t;
}

Result<Tensor> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::kIo, fmt::format("cannot open '{}'", path));
  std::ostringstream buf;
  buf << in.rdbuf();
  return ParseNpy(buf.str(), path);
}

std::string SerializeNpy(const Tensor& tensor) {
  Tensor t = tensor.dtype() == DataType::kBFloat16 ? tensor.CastTo(DataType::kFloat32) : tensor;
  std::string shape;  // "" for a scalar, "3," for rank 1, "2, 3" otherwise
  for (size_t i = 0; i < t.dims().size(); ++i)
    shape += (i ? ", " : "") + std::to_string(t.dims()[i]);
  if (t.rank() == 1) shape += ",";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   DescrOf(t.dtype()), shape);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

Status WriteNpy(const std::string& path, const Tensor& tensor) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Error(ErrorCode::kIo, fmt::format("cannot write '{}'", path));
  const std::string bytes = SerializeNpy(tensor);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return Error(ErrorCode::kIo, fmt::format("write to '{}' failed", path));
  return Status::Ok();
}

}  // namespace fusetune::graph
