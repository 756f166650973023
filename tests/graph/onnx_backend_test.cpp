// ONNX's own backend node tests (Debian's libonnx-testdata: one folder per
// test with model.onnx and test_data_set_0/{input,output}_N.pb) run through
// import and the reference executor, for the ops of ops_conv.cpp and the ones
// CNN exports use next to them (Clip, Flatten). Skipped with a message when
// the package is not installed (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <onnx/onnx_pb.h>

#include "graph/onnx_io.h"
#include "graph/reference_executor.h"

namespace fusetune::graph {
namespace {

namespace fs = std::filesystem;

const char* kNodeTestDir = "/usr/share/libonnx-testdata/data/node";

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A TensorProto file as a Tensor (the element types these tests use).
Tensor ReadTensorProto(const fs::path& path, std::string* name) {
  onnx::TensorProto p;
  EXPECT_TRUE(p.ParseFromString(ReadAll(path))) << path;
  *name = p.name();
  auto dtype = DataTypeFromOnnx(p.data_type());
  EXPECT_TRUE(dtype.has_value()) << path << ": ONNX type " << p.data_type();
  Dims dims(p.dims().begin(), p.dims().end());
  Tensor t(*dtype, dims);
  if (t.numel() == 0) return t;
  if (!p.raw_data().empty()) {
    EXPECT_EQ(p.raw_data().size(), t.nbytes()) << path;
    std::memcpy(t.raw(), p.raw_data().data(), std::min(p.raw_data().size(), t.nbytes()));
  } else if (*dtype == DataType::kFloat32) {
    for (int64_t i = 0; i < t.numel() && i < p.float_data_size(); ++i)
      t.data<float>()[i] = p.float_data(static_cast<int>(i));
  } else if (*dtype == DataType::kInt64) {
    for (int64_t i = 0; i < t.numel() && i < p.int64_data_size(); ++i)
      t.data<int64_t>()[i] = p.int64_data(static_cast<int>(i));
  } else {
    ADD_FAILURE() << path << ": no raw_data and an element type this test does not read";
  }
  return t;
}

std::vector<fs::path> DataFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path f = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(f)) break;
    files.push_back(f);
  }
  return files;
}

// Imports a test's model with the inputs of test_data_set_0 as the run's
// values: those that carry shapes (Pad's pads, Resize's scales or sizes,
// Reshape's shape...) are bound by import (graph/input_values.h), as a run
// binds them; `feeds` gets every input. The tests of ops unchanged since
// opset 1 or 6 (GlobalAveragePool, GlobalMaxPool, HardSigmoid) declare that
// opset, below the 7 that fusetune imports; their model is read as opset
// 7, the same op.
Result<Graph> ImportNodeTest(const fs::path& dir, TensorMap* feeds) {
  onnx::ModelProto model;
  if (!model.ParseFromString(ReadAll(dir / "model.onnx")))
    return ImportOnnxFile((dir / "model.onnx").string());
  for (auto& imp : *model.mutable_opset_import())
    if ((imp.domain().empty() || imp.domain() == "ai.onnx") && imp.version() < 7)
      imp.set_version(7);
  const auto inputs = DataFiles(dir / "test_data_set_0", "input_");
  const onnx::GraphProto& graph = model.graph();
  for (int i = 0; i < graph.input_size() && static_cast<size_t>(i) < inputs.size(); ++i) {
    std::string name;
    (*feeds)[graph.input(i).name()] = ReadTensorProto(inputs[i], &name);
  }
  ImportOptions options;
  options.input_values = *feeds;
  return ImportOnnxBytes(model.SerializeAsString(), dir.string(), (dir / "model.onnx").string(),
                         options);
}

class OnnxBackendNode : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxBackendNode, MatchesTheExpectedOutputs) {
  const fs::path dir = fs::path(kNodeTestDir) / GetParam();
  if (!fs::exists(kNodeTestDir))
    GTEST_SKIP() << kNodeTestDir << " is absent: install Debian's libonnx-testdata to run "
                 << "ONNX's backend node tests";
  ASSERT_TRUE(fs::exists(dir / "model.onnx")) << dir;
  TensorMap feeds;
  auto g = ImportNodeTest(dir, &feeds);
  ASSERT_TRUE(g.ok()) << g.error().message();
  const fs::path data = dir / "test_data_set_0";
  auto r = RunReference(*g, feeds);
  ASSERT_TRUE(r.ok()) << r.error().message();
  const auto outputs = DataFiles(data, "output_");
  ASSERT_EQ(outputs.size(), g->outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name;
    Tensor want = ReadTensorProto(outputs[i], &name).CastTo(DataType::kFloat64);
    const std::string out_name = g->value(g->outputs[i]).name;
    ASSERT_TRUE(r->outputs.count(out_name)) << out_name;
    Tensor got = r->outputs.at(out_name);
    ASSERT_EQ(got.dims(), want.dims()) << out_name;
    got = got.CastTo(DataType::kFloat64);
    for (int64_t k = 0; k < got.numel(); ++k) {
      const double a = got.data<double>()[k], b = want.data<double>()[k];
      // ONNX's backend tolerance: rtol 1e-3, atol 1e-7.
      ASSERT_LE(std::abs(a - b), 1e-3 * std::abs(b) + 1e-7)
          << out_name << " element " << k << ": got " << a << ", expected " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    ConvOps, OnnxBackendNode,
    ::testing::Values(
        "test_basic_conv_with_padding", "test_basic_conv_without_padding",
        "test_conv_with_autopad_same", "test_conv_with_strides_and_asymmetric_padding",
        "test_conv_with_strides_no_padding", "test_conv_with_strides_padding",
        "test_batchnorm_epsilon", "test_batchnorm_example", "test_averagepool_1d_default",
        "test_averagepool_2d_ceil", "test_averagepool_2d_default", "test_averagepool_2d_pads",
        "test_averagepool_2d_pads_count_include_pad", "test_averagepool_2d_precomputed_pads",
        "test_averagepool_2d_precomputed_pads_count_include_pad",
        "test_averagepool_2d_precomputed_same_upper", "test_averagepool_2d_precomputed_strides",
        "test_averagepool_2d_same_lower", "test_averagepool_2d_same_upper",
        "test_averagepool_2d_strides", "test_maxpool_1d_default", "test_maxpool_2d_ceil",
        "test_maxpool_2d_default", "test_maxpool_2d_dilations", "test_maxpool_2d_pads",
        "test_maxpool_2d_precomputed_pads", "test_maxpool_2d_precomputed_same_upper",
        "test_maxpool_2d_precomputed_strides", "test_maxpool_2d_same_lower",
        "test_maxpool_2d_same_upper", "test_maxpool_2d_strides", "test_globalaveragepool",
        "test_globalaveragepool_precomputed", "test_globalmaxpool",
        "test_globalmaxpool_precomputed", "test_hardsigmoid", "test_hardsigmoid_default",
        "test_hardsigmoid_example", "test_hardswish", "test_hardswish_expanded", "test_clip",
        "test_clip_default_inbounds", "test_clip_default_max", "test_clip_default_min",
        "test_clip_example", "test_clip_inbounds", "test_clip_outbounds", "test_clip_splitbounds",
        "test_clip_default_int8_inbounds", "test_clip_default_int8_max",
        "test_clip_default_int8_min", "test_flatten_axis0", "test_flatten_axis1",
        "test_flatten_axis2", "test_flatten_axis3", "test_flatten_default_axis",
        "test_flatten_negative_axis1", "test_flatten_negative_axis2", "test_flatten_negative_axis3",
        "test_flatten_negative_axis4", "test_constant_pad", "test_edge_pad", "test_reflect_pad",
        // Resize: every nearest and linear test of the package (the cubic
        // ones are below, with the unsupported ops).
        "test_resize_downsample_scales_linear",
        "test_resize_downsample_scales_linear_align_corners",
        "test_resize_downsample_scales_nearest",
        "test_resize_downsample_sizes_linear_pytorch_half_pixel",
        "test_resize_downsample_sizes_nearest",
        "test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn",
        "test_resize_tf_crop_and_resize", "test_resize_upsample_scales_linear",
        "test_resize_upsample_scales_linear_align_corners", "test_resize_upsample_scales_nearest",
        "test_resize_upsample_sizes_nearest", "test_resize_upsample_sizes_nearest_ceil_half_pixel",
        "test_resize_upsample_sizes_nearest_floor_align_corners",
        "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric"));

// The tests whose shape-carrying inputs (Reshape's shape, Slice's starts,
// ends, axes and steps, Squeeze/Unsqueeze axes, Expand's and
// ConstantOfShape's shape, Split's sizes, Trilu's k, Range's bounds, Tile's
// repeats, ReduceSum's axes) are graph inputs: import binds them to the
// values of test_data_set_0, as a run binds them (graph/input_values.h).
INSTANTIATE_TEST_SUITE_P(
    ShapeInputs, OnnxBackendNode,
    ::testing::Values(
        "test_blackmanwindow_expanded", "test_blackmanwindow_symmetric_expanded",
        "test_constantofshape_float_ones", "test_constantofshape_int_shape_zero",
        "test_constantofshape_int_zeros", "test_expand_dim_changed", "test_expand_dim_unchanged",
        "test_hammingwindow_expanded", "test_hammingwindow_symmetric_expanded",
        "test_hannwindow_expanded", "test_hannwindow_symmetric_expanded",
        "test_range_float_type_positive_delta", "test_range_int32_type_negative_delta",
        "test_reduce_sum_default_axes_keepdims_example",
        "test_reduce_sum_default_axes_keepdims_random", "test_reduce_sum_do_not_keepdims_example",
        "test_reduce_sum_do_not_keepdims_random", "test_reduce_sum_empty_axes_input_noop_example",
        "test_reduce_sum_empty_axes_input_noop_random", "test_reduce_sum_keepdims_example",
        "test_reduce_sum_keepdims_random", "test_reduce_sum_negative_axes_keepdims_example",
        "test_reduce_sum_negative_axes_keepdims_random", "test_reshape_allowzero_reordered",
        "test_reshape_extended_dims", "test_reshape_negative_dim",
        "test_reshape_negative_extended_dims", "test_reshape_one_dim", "test_reshape_reduced_dims",
        "test_reshape_reordered_all_dims", "test_reshape_reordered_last_dims",
        "test_reshape_zero_and_negative_dim", "test_reshape_zero_dim", "test_slice",
        "test_slice_default_axes", "test_slice_default_steps", "test_slice_end_out_of_bounds",
        "test_slice_neg", "test_slice_neg_steps", "test_slice_negative_axes",
        "test_slice_start_out_of_bounds", "test_split_variable_parts_1d",
        "test_split_variable_parts_2d", "test_split_variable_parts_default_axis",
        "test_split_zero_size_splits", "test_squeeze", "test_squeeze_negative_axes", "test_tile",
        "test_tile_precomputed", "test_tril_neg", "test_tril_out_neg", "test_tril_out_pos",
        "test_tril_pos", "test_tril_square_neg", "test_tril_zero", "test_triu_neg",
        "test_triu_one_row", "test_triu_out_neg_out", "test_triu_out_pos", "test_triu_pos",
        "test_triu_square_neg", "test_triu_zero", "test_unsqueeze_axis_0", "test_unsqueeze_axis_1",
        "test_unsqueeze_axis_2", "test_unsqueeze_negative_axes", "test_unsqueeze_three_axes",
        "test_unsqueeze_two_axes", "test_unsqueeze_unsorted_axes"));

// The node tests of these ops that fusetune does not support yet: import
// fails cleanly, naming the node, instead of running something else.
class OnnxBackendUnsupported : public ::testing::TestWithParam<const char*> {};

TEST_P(OnnxBackendUnsupported, ImportFailsNamingTheNode) {
  const fs::path dir = fs::path(kNodeTestDir) / GetParam();
  if (!fs::exists(kNodeTestDir))
    GTEST_SKIP() << kNodeTestDir << " is absent: install Debian's libonnx-testdata";
  TensorMap feeds;
  auto g = ImportNodeTest(dir, &feeds);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message().find("node "), std::string::npos) << g.error().message();
}

INSTANTIATE_TEST_SUITE_P(
    ConvOps, OnnxBackendUnsupported,
    ::testing::Values("test_averagepool_3d_default", "test_maxpool_3d_default",
                      "test_maxpool_2d_uint8", "test_maxpool_with_argmax_2d_precomputed_pads",
                      "test_maxpool_with_argmax_2d_precomputed_strides",
                      "test_batchnorm_epsilon_training_mode",
                      "test_batchnorm_example_training_mode",
                      // Resize with mode=cubic (and exclude_outside=1).
                      "test_resize_downsample_scales_cubic",
                      "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
                      "test_resize_downsample_scales_cubic_align_corners",
                      "test_resize_downsample_sizes_cubic", "test_resize_upsample_scales_cubic",
                      "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
                      "test_resize_upsample_scales_cubic_align_corners",
                      "test_resize_upsample_scales_cubic_asymmetric",
                      "test_resize_upsample_sizes_cubic"));

}  // namespace
}  // namespace fusetune::graph
