#include <gtest/gtest.h>

#include "graph/npy.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

TEST(Npy, RoundTripsEveryDtype) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt64,
                     DataType::kInt32, DataType::kInt8, DataType::kUInt8, DataType::kBool}) {
    Tensor f = testing::F32({2, 3}, {0, 1, 0, 1, 1, 0}).CastTo(t);
    auto back = ParseNpy(SerializeNpy(f), "mem");
    ASSERT_TRUE(back.ok()) << back.error().ToString();
    EXPECT_TRUE(back->BitwiseEquals(f)) << DataTypeName(t);
  }
  for (Dims dims : {Dims{}, Dims{5}, Dims{1, 2, 3}}) {
    Tensor t(DataType::kFloat32, dims);
    auto back = ParseNpy(SerializeNpy(t), "mem");
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->dims(), dims);
  }
}

TEST(Npy, ReadsWhatNumpyWrote) {
  auto t = ReadNpy(testing::TestData("mlp.in.x.npy"));
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(t->dtype(), DataType::kFloat32);
  EXPECT_EQ(t->dims(), (Dims{16, 32}));
}

TEST(Npy, BadFilesAreErrors) {
  EXPECT_FALSE(ParseNpy("garbage", "g.npy").ok());
  Tensor t(DataType::kFloat32, {4});
  std::string bytes = SerializeNpy(t);
  auto truncated = ParseNpy(bytes.substr(0, bytes.size() - 3), "t.npy");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().message().find("t.npy"), std::string::npos);
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_FALSE(ParseNpy(fortran, "f.npy").ok());
  std::string complex = bytes;
  complex.replace(complex.find("<f4"), 3, "<c8");
  auto c = ParseNpy(complex, "c.npy");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("'<c8' is not supported"), std::string::npos);
  EXPECT_EQ(ReadNpy("/nonexistent.npy").error().code(), ErrorCode::kIo);
}

// A version 1 .npy file of float32 with `shape` (header text) and `data_bytes` zero bytes of data.
std::string NpyWithShape(const std::string& shape, size_t data_bytes) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  header.resize((10 + header.size() + 1 + 63) / 64 * 64 - 10 - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data_bytes, '\0');
}

// Found by tests/fuzz/npy_fuzz: a shape is checked against the data before a
// tensor of it is made (a negative dimension aborted the process, a huge one
// overflowed the element count or asked for terabytes).
TEST(Npy, NegativeOrHugeShapesAreErrors) {
  ASSERT_TRUE(ParseNpy(NpyWithShape("(4,)", 16), "ok.npy").ok());
  ASSERT_TRUE(ParseNpy(NpyWithShape("(0, 3)", 0), "empty.npy").ok());
  for (const char* shape :
       {"(-4,)", "(4611686018427387904, 4)", "(4294967296, 4294967296, 0)", "(1048576, 1048576)"}) {
    auto t = ParseNpy(NpyWithShape(shape, 16), "bad.npy");
    ASSERT_FALSE(t.ok()) << shape;
    EXPECT_EQ(t.error().code(), ErrorCode::kParse) << shape;
    EXPECT_NE(t.error().message().find("bad.npy"), std::string::npos) << t.error().ToString();
  }
}

}  // namespace
}  // namespace fusetune::graph
