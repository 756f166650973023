// Resize (ops_resize.cpp) beyond ONNX's node tests (onnx_backend_test.cpp):
// 4-D bilinear against PyTorch's F.interpolate (computed offline in double),
// the opset 10 and opset 18 forms, and the errors for non-constant scales and
// unsupported attributes. Also Clip as ReLU6 in its attribute (opset 6) and
// input (opset 11+) forms.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::Parse;
using testing::RunFirst;

using testing::ParseError;
using testing::Pattern;

// F.interpolate(x, size=(5, 3), mode='bilinear', align_corners=False/True).
TEST(ResizeOps, BilinearNchwMatchesPyTorch) {
  const TensorMap feeds = {{"x", Pattern({1, 2, 3, 4}, 7, 3, 0.5)}};
  Tensor half = RunFirst(Parse(R"(graph g opset 13 { input x: f32[1, 2, 3, 4]
    const sz: i64[4] = [1, 2, 5, 3]
    y = Resize(x, _, _, sz) {mode="linear", coordinate_transformation_mode="pytorch_half_pixel"}
    output y })"),
                         feeds);
  EXPECT_EQ(half.dims(), (Dims{1, 2, 5, 3}));
  EXPECT_VALUES_NEAR(
      half, (std::vector<float>{-1.4166667, -0.75, -0.0833333, -0.6166667, 0.05,  -0.45,
                                0.5833333,  1.25,  -1.0,       -0.3166667, 0.35,  -0.15,
                                -0.9166667, -0.25, 0.4166667,  1.0833333,  0.0,   -1.0833333,
                                0.4833333,  0.1,   -0.2833333, -0.4166667, 0.25,  0.9166667,
                                0.4333333,  -0.65, 0.0166667,  1.0,        -1.25, -0.5833333}),
      1e-5);
  Tensor corners = RunFirst(Parse(R"(graph g opset 13 { input x: f32[1, 2, 3, 4]
    const sz: i64[4] = [1, 2, 5, 3]
    y = Resize(x, _, _, sz) {mode="linear", coordinate_transformation_mode="align_corners"}
    output y })"),
                            feeds);
  EXPECT_VALUES_NEAR(
      corners, (std::vector<float>{-1.5, -0.75, 0.0,  -0.5,  0.25, -0.75, 0.5,  1.25, -1.5,  -0.25,
                                   0.5,  -0.5,  -1.0, -0.25, 0.5,  1.0,   0.0,  -1.0, 0.25,  0.125,
                                   0.0,  -0.5,  0.25, 1.0,   0.5,  -0.5,  0.25, 1.5,  -1.25, -0.5}),
      1e-5);
}

// Resize-10 is Upsample: x_original = x / scale, floored.
TEST(ResizeOps, Opset10NearestIsUpsample) {
  Tensor y = RunFirst(Parse(R"(graph g opset 10 { input x: f32[1, 1, 2, 2]
    const s: f32[4] = [1, 1, 2, 1.5]
    y = Resize(x, s)
    output y })"),
                      {{"x", testing::F32({1, 1, 2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(y.dims(), (Dims{1, 1, 4, 3}));
  EXPECT_VALUES_NEAR(y, (std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4}), 0);
}

// Opset 18's axes attribute: scales for the listed axes only.
TEST(ResizeOps, Opset18Axes) {
  Tensor y = RunFirst(Parse(R"(graph g opset 18 { input x: f32[1, 1, 2, 2]
    const s: f32[2] = [2, 2]
    y = Resize(x, _, s) {axes=[3, 2], mode="nearest", coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"}
    output y })"),
                      {{"x", testing::F32({1, 1, 2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(y.dims(), (Dims{1, 1, 4, 4}));
  EXPECT_VALUES_NEAR(y, (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}), 0);
}

TEST(ResizeOps, ErrorsNameTheNodeAndTheAttribute) {
  const std::string head = R"(graph g opset 18 { input x: f32[1, 1, 2, 2]
    const s: f32[4] = [1, 1, 2, 2]
    y = Resize(x, _, s) {)";
  const std::string tail = "}\n output y }";
  std::string e = ParseError(head + R"(mode="cubic")" + tail);
  EXPECT_NE(e.find("Resize"), std::string::npos) << e;
  EXPECT_NE(e.find("mode='cubic'"), std::string::npos) << e;
  e = ParseError(head + "antialias=1" + tail);
  EXPECT_NE(e.find("antialias"), std::string::npos) << e;
  e = ParseError(head + R"(keep_aspect_ratio_policy="not_larger")" + tail);
  EXPECT_NE(e.find("keep_aspect_ratio_policy"), std::string::npos) << e;
  e = ParseError(head + "exclude_outside=1" + tail);
  EXPECT_NE(e.find("exclude_outside"), std::string::npos) << e;
  e = ParseError(R"(graph g opset 13 { input x: f32[1, 1, 2, 2]  input s: f32[4]
    y = Resize(x, _, s) {mode="linear"}
    output y })");
  EXPECT_NE(e.find("Resize"), std::string::npos) << e;
  EXPECT_NE(e.find("scales"), std::string::npos) << e;
  EXPECT_NE(e.find("constant"), std::string::npos) << e;
  // A non-constant roi is fine where the coordinate mode ignores it.
  EXPECT_EQ(ParseError(R"(graph g opset 13 { input x: f32[1, 1, 2, 2]  input r: f32[8]
    const s: f32[4] = [1, 1, 2, 2]
    y = Resize(x, r, s)
    output y })"),
            "");
  e = ParseError(R"(graph g opset 13 { input x: f32[1, 1, 2, 2]
    const s: f32[4] = [1, 1, 2, 2]  const sz: i64[4] = [1, 1, 4, 4]
    y = Resize(x, _, s, sz)
    output y })");
  EXPECT_NE(e.find("exactly one of scales and sizes"), std::string::npos) << e;
}

// ReLU6 as PyTorch exports it: Clip with attributes (opset 6) or constant
// inputs (opset 11 and later).
TEST(ClipOps, Relu6BothForms) {
  const TensorMap feeds = {{"x", testing::F32({5}, {-2, 0.5, 3, 6.5, 9})}};
  const std::vector<float> want = {0, 0.5, 3, 6, 6};
  Tensor attrs = RunFirst(Parse(R"(graph g opset 7 { input x: f32[5]
    y = Clip(x) {min=0.0, max=6.0}
    output y })"),
                          feeds);
  EXPECT_VALUES_NEAR(attrs, want, 0);
  Tensor inputs = RunFirst(Parse(R"(graph g opset 13 { input x: f32[5]
    const lo: f32[] = [0]  const hi: f32[] = [6]
    y = Clip(x, lo, hi)
    output y })"),
                           feeds);
  EXPECT_VALUES_NEAR(inputs, want, 0);
}

}  // namespace
}  // namespace fusetune::graph
