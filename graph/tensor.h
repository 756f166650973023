// Tensor: a dense, row-major, 64-byte-aligned buffer with a dtype and static
// dims. Copies share the buffer (a tensor is a handle); Clone() copies data.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/check.h"
#include "graph/dtype.h"

namespace fusetune::graph {

using Dims = std::vector<int64_t>;

int64_t NumElements(const Dims& dims);
// The bytes a tensor of `dims` holds; nullopt for a negative dimension or a
// count that overflows, for sizes read from a file before allocating.
std::optional<size_t> CheckedByteCount(DataType dtype, const Dims& dims);
std::string DimsToString(const Dims& dims);  // "[2, 3]"
// Row-major strides in elements.
std::vector<int64_t> RowMajorStrides(const Dims& dims);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor.
  Tensor(DataType dtype, Dims dims);
  // Storage left as the allocator gives it: for results written in full
  // (a zero fill would be one more pass over them).
  static Tensor Uninitialized(DataType dtype, Dims dims);

  template <typename T>
  static Tensor FromVector(DataType dtype, Dims dims, const std::vector<T>& values) {
    Tensor t(dtype, std::move(dims));
    FT_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "FromVector: size mismatch");
    FT_CHECK(sizeof(T) == DataTypeSize(dtype), "FromVector: element size mismatch");
    if (t.nbytes() > 0)  // an empty vector's data() may be null, which memcpy may not take
      std::memcpy(t.raw(), values.data(), t.nbytes());
    return t;
  }
  // Dims and dtype without storage: for kernels that read only the shape
  // (Shape, Size) during constant folding. defined() is false.
  static Tensor ShapeOnly(DataType dtype, Dims dims) {
    Tensor t;
    t.dtype_ = dtype;
    t.numel_ = NumElements(dims);
    t.dims_ = std::move(dims);
    return t;
  }
  // A tensor over memory its caller owns: no copy, no ownership. The memory
  // must be 64-byte aligned (as every tensor's storage is) and outlive the
  // tensor and every copy of it (Executable::RunViews: the caller's arrays
  // during one run).
  static Tensor Borrowed(DataType dtype, Dims dims, std::byte* data) {
    Tensor t = ShapeOnly(dtype, std::move(dims));
    FT_CHECK(reinterpret_cast<uintptr_t>(data) % 64 == 0, "Borrowed: data not 64-byte aligned");
    t.buffer_ = std::shared_ptr<std::byte[]>(data, [](std::byte*) {});
    return t;
  }
  static Tensor ScalarF32(float v) { return FromVector<float>(DataType::kFloat32, {}, {v}); }
  static Tensor ScalarI64(int64_t v) { return FromVector<int64_t>(DataType::kInt64, {}, {v}); }

  bool defined() const { return buffer_ != nullptr; }
  DataType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * DataTypeSize(dtype_); }

  std::byte* raw() { return buffer_.get(); }
  const std::byte* raw() const { return buffer_.get(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(buffer_.get());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(buffer_.get());
  }
  template <typename T>
  std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(numel_)};
  }

  Tensor Clone() const;
  // Same data, other dims with the same element count (shares the buffer).
  Tensor Reshaped(Dims dims) const;
  // Element conversion; f16/bf16 round to nearest even; float to int truncates.
  Tensor CastTo(DataType dtype) const;

  // Element i as double / int64 whatever the dtype (for small shape tensors).
  double GetAsDouble(int64_t i) const;
  int64_t GetAsInt(int64_t i) const;
  // All elements as int64 (shape and index inputs).
  std::vector<int64_t> ToInt64Vector() const;

  // Byte-exact equality of dtype, dims and data.
  bool BitwiseEquals(const Tensor& other) const;
  // Whether another Tensor holds this one's buffer too (a copy shares it).
  bool SharesBuffer() const { return buffer_.use_count() > 1; }
  friend bool operator==(const Tensor& a, const Tensor& b) { return a.BitwiseEquals(b); }

 private:
  DataType dtype_ = DataType::kFloat32;
  Dims dims_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte[]> buffer_;
};

}  // namespace fusetune::graph
