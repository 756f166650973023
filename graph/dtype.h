// Element types. fusetune computes in f32; f16 and bf16 are recognised and
// converted at the edges, integer and bool tensors carry shapes, indices and
// masks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace fusetune::graph {

enum class DataType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt64,
  kInt32,
  kInt8,
  kUInt8,
  kBool,
};

size_t DataTypeSize(DataType t);
// Short name used by the text form and messages: f32, f16, bf16, f64, i64, i32, i8, u8, bool.
std::string_view DataTypeName(DataType t);
std::optional<DataType> ParseDataType(std::string_view name);
bool IsFloat(DataType t);

// ONNX TensorProto.DataType numbers.
std::optional<DataType> DataTypeFromOnnx(int onnx_type);
int DataTypeToOnnx(DataType t);

float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

}  // namespace fusetune::graph
