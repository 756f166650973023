#include "graph/tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace fusetune::graph {

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::optional<size_t> CheckedByteCount(DataType dtype, const Dims& dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(count, d, &count)) return std::nullopt;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(count, static_cast<int64_t>(DataTypeSize(dtype)), &bytes))
    return std::nullopt;
  return static_cast<size_t>(bytes);
}

std::string DimsToString(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::vector<int64_t> RowMajorStrides(const Dims& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

namespace {
std::shared_ptr<std::byte[]> AllocateAligned(size_t bytes, bool zero = true) {
  const size_t rounded = ((bytes + 63) / 64) * 64 + 64;  // never zero, padded for vector tails
  void* p = std::aligned_alloc(64, rounded);
  FT_CHECK(p != nullptr, "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, zero ? rounded : 0);
  // The padding past the data is zeroed either way: vector tails read it.
  if (!zero) std::memset(static_cast<std::byte*>(p) + bytes, 0, rounded - bytes);
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p),
                                      [](std::byte* q) { std::free(q); });
}

template <typename T>
double LoadAsDouble(const std::byte* base, int64_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}
}  // namespace

Tensor::Tensor(DataType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)) {
  for (int64_t d : dims_) FT_CHECK(d >= 0, "negative dimension in " + DimsToString(dims_));
  numel_ = NumElements(dims_);
  buffer_ = AllocateAligned(nbytes());
}

Tensor Tensor::Uninitialized(DataType dtype, Dims dims) {
  Tensor t = ShapeOnly(dtype, std::move(dims));
  for (int64_t d : t.dims_) FT_CHECK(d >= 0, "negative dimension in " + DimsToString(t.dims_));
  t.buffer_ = AllocateAligned(t.nbytes(), /*zero=*/false);
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t = Uninitialized(dtype_, dims_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::Reshaped(Dims dims) const {
  FT_CHECK(NumElements(dims) == numel_, "Reshaped: element count changes");
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  FT_CHECK(i >= 0 && i < numel_, "GetAsDouble: index out of range");
  const std::byte* b = raw();
  switch (dtype_) {
    case DataType::kFloat32:
      return LoadAsDouble<float>(b, i);
    case DataType::kFloat64:
      return LoadAsDouble<double>(b, i);
    case DataType::kInt64:
      return LoadAsDouble<int64_t>(b, i);
    case DataType::kInt32:
      return LoadAsDouble<int32_t>(b, i);
    case DataType::kInt8:
      return LoadAsDouble<int8_t>(b, i);
    case DataType::kUInt8:
      return LoadAsDouble<uint8_t>(b, i);
    case DataType::kBool:
      return LoadAsDouble<uint8_t>(b, i) != 0 ? 1.0 : 0.0;
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      return HalfToFloat(h);
    }
    case DataType::kBFloat16: {
      uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      return BFloat16ToFloat(h);
    }
  }
  return 0;
}

int64_t Tensor::GetAsInt(int64_t i) const {
  if (dtype_ == DataType::kInt64) return data<int64_t>()[i];
  // A float outside int64's range saturates and NaN reads 0 (converting them
  // is undefined): a shape read from one is then rejected by the shape
  // checks (onnx_import_fuzz: a Reshape shape of -inf).
  const double v = GetAsDouble(i);
  if (std::isnan(v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v < -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

std::vector<int64_t> Tensor::ToInt64Vector() const {
  std::vector<int64_t> v(numel_);
  for (int64_t i = 0; i < numel_; ++i) v[i] = GetAsInt(i);
  return v;
}

namespace {
void StoreFromDouble(std::byte* base, DataType t, int64_t i, double v) {
  switch (t) {
    case DataType::kFloat32:
      reinterpret_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      reinterpret_cast<double*>(base)[i] = v;
      break;
    case DataType::kInt64:
      reinterpret_cast<int64_t*>(base)[i] = std::isfinite(v) ? static_cast<int64_t>(v) : 0;
      break;
    case DataType::kInt32:
      reinterpret_cast<int32_t*>(base)[i] = std::isfinite(v) ? static_cast<int32_t>(v) : 0;
      break;
    case DataType::kInt8:
      reinterpret_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case DataType::kUInt8:
      reinterpret_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case DataType::kBool:
      reinterpret_cast<uint8_t*>(base)[i] = v != 0 ? 1 : 0;
      break;
    case DataType::kFloat16:
      reinterpret_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      reinterpret_cast<uint16_t*>(base)[i] = FloatToBFloat16(static_cast<float>(v));
      break;
  }
}
}  // namespace

Tensor Tensor::CastTo(DataType dtype) const {
  if (dtype == dtype_) return Clone();
  Tensor out(dtype, dims_);
  if (dtype_ == DataType::kInt64 && dtype == DataType::kInt32) {
    for (int64_t i = 0; i < numel_; ++i)
      out.data<int32_t>()[i] = static_cast<int32_t>(data<int64_t>()[i]);
    return out;
  }
  if (dtype_ != DataType::kInt64 || dtype == DataType::kFloat32 || dtype == DataType::kFloat64) {
    for (int64_t i = 0; i < numel_; ++i) StoreFromDouble(out.raw(), dtype, i, GetAsDouble(i));
    return out;
  }
  for (int64_t i = 0; i < numel_; ++i)  // int64 to small ints/bool: avoid double rounding
    StoreFromDouble(out.raw(), dtype, i, static_cast<double>(data<int64_t>()[i]));
  return out;
}

bool Tensor::BitwiseEquals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  return nbytes() == 0 || std::memcmp(raw(), other.raw(), nbytes()) == 0;
}

}  // namespace fusetune::graph
