#include "graph/dtype.h"

#include <cstring>

namespace fusetune::graph {

size_t DataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat64:
      return 8;
    case DataType::kInt64:
      return 8;
    case DataType::kInt32:
      return 4;
    case DataType::kInt8:
      return 1;
    case DataType::kUInt8:
      return 1;
    case DataType::kBool:
      return 1;
  }
  return 0;
}

std::string_view DataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "f32";
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat64:
      return "f64";
    case DataType::kInt64:
      return "i64";
    case DataType::kInt32:
      return "i32";
    case DataType::kInt8:
      return "i8";
    case DataType::kUInt8:
      return "u8";
    case DataType::kBool:
      return "bool";
  }
  return "?";
}

std::optional<DataType> ParseDataType(std::string_view name) {
  for (DataType t :
       {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kFloat64,
        DataType::kInt64, DataType::kInt32, DataType::kInt8, DataType::kUInt8, DataType::kBool}) {
    if (DataTypeName(t) == name) return t;
  }
  return std::nullopt;
}

bool IsFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16 ||
         t == DataType::kFloat64;
}

std::optional<DataType> DataTypeFromOnnx(int onnx_type) {
  switch (onnx_type) {
    case 1:
      return DataType::kFloat32;
    case 2:
      return DataType::kUInt8;
    case 3:
      return DataType::kInt8;
    case 6:
      return DataType::kInt32;
    case 7:
      return DataType::kInt64;
    case 9:
      return DataType::kBool;
    case 10:
      return DataType::kFloat16;
    case 11:
      return DataType::kFloat64;
    case 16:
      return DataType::kBFloat16;
    default:
      return std::nullopt;
  }
}

int DataTypeToOnnx(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 1;
    case DataType::kUInt8:
      return 2;
    case DataType::kInt8:
      return 3;
    case DataType::kInt32:
      return 6;
    case DataType::kInt64:
      return 7;
    case DataType::kBool:
      return 9;
    case DataType::kFloat16:
      return 10;
    case DataType::kFloat64:
      return 11;
    case DataType::kBFloat16:
      return 16;
  }
  return 0;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);  // inf/nan
  if (abs >= 0x477ff000) return sign | 0x7c00;                                   // overflow
  if (abs < 0x38800000) {                                                        // subnormal
    if (abs < 0x33000000) return sign;
    const uint32_t shift = 113 - (abs >> 23);
    uint32_t mant = (abs & 0x7fffff) | 0x800000;
    uint32_t half = mant >> (shift + 13);
    const uint32_t rem = mant & ((1u << (shift + 13)) - 1);
    const uint32_t mid = 1u << (shift + 12);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t half = ((abs - 0x38000000) >> 13);
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return sign | static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // nan
  const uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace fusetune::graph
