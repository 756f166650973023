// ONNX import against models exported by PyTorch (scripts/gen_models.py), and
// every malformed-input path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <onnx/onnx_pb.h>

#include "graph/npy.h"
#include "graph/onnx_io.h"
#include "graph/passes.h"
#include "test_util.h"

namespace fusetune::graph {
namespace {

using testing::TestData;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / ("fusetune_test_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

// An empty model of IR version 8 importing the default domain at `opset`.
onnx::ModelProto EmptyModel(int64_t opset = 17) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  return model;
}

class ExportedModel : public ::testing::TestWithParam<std::string> {};

// Imports the model, runs the reference executor (before and after the graph
// passes) and compares with PyTorch's own outputs.
TEST_P(ExportedModel, MatchesPyTorchWithinTolerance) {
  const std::string name = GetParam();
  ImportOptions options;
  if (name == "encoder_dynamic_op17") options.dim_bindings = {{"batch", 2}, {"seq", 8}};
  auto graph = ImportOnnxFile(TestData(name + ".onnx"), options);
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  auto x = ReadNpy(TestData(name + ".in.x.npy"));
  auto want = ReadNpy(TestData(name + ".out.y.npy"));
  ASSERT_TRUE(x.ok() && want.ok());
  const Tensor got = testing::RunFirst(*graph, {{"x", *x}});
  EXPECT_LE(testing::ScaledError(got, *want), 1e-4) << name;

  Graph optimized = *graph;
  ASSERT_TRUE(RunStandardPasses(optimized).ok());
  EXPECT_LE(optimized.nodes.size(), graph->nodes.size());
  const Tensor got_opt = testing::RunFirst(optimized, {{"x", *x}});
  EXPECT_LE(testing::ScaledError(got_opt, *want), 1e-4) << name << " after passes";
}

TEST_P(ExportedModel, ExportImportRoundTrip) {
  const std::string name = GetParam();
  ImportOptions options;
  if (name == "encoder_dynamic_op17") options.dim_bindings = {{"batch", 2}, {"seq", 8}};
  auto graph = ImportOnnxFile(TestData(name + ".onnx"), options);
  ASSERT_TRUE(graph.ok());
  auto bytes = ExportOnnxBytes(*graph);
  ASSERT_TRUE(bytes.ok());
  auto again = ImportOnnxBytes(*bytes, ".", "round trip");
  ASSERT_TRUE(again.ok()) << again.error().ToString();
  EXPECT_EQ(again->nodes.size(), graph->nodes.size());
  const TensorMap feeds = RandomFeeds(*graph, 5);
  EXPECT_EQ(
      testing::ScaledError(testing::RunFirst(*again, feeds), testing::RunFirst(*graph, feeds)),
      0.0);
}

INSTANTIATE_TEST_SUITE_P(PyTorch, ExportedModel,
                         ::testing::Values("mlp", "encoder_postln_op13", "encoder_postln_op17",
                                           "encoder_3layer_op13", "decoder_preln_op14",
                                           "decoder_preln_op17", "llama_op17",
                                           "encoder_dynamic_op17", "encoder_external_op17",
                                           "cnn_bn_op13", "cnn_folded_op13"));

TEST(OnnxImport, Opset13LayerNormIsDecomposedAndOpset17IsOneOp) {
  auto g13 = ImportOnnxFile(TestData("encoder_postln_op13.onnx"));
  auto g17 = ImportOnnxFile(TestData("encoder_postln_op17.onnx"));
  ASSERT_TRUE(g13.ok() && g17.ok());
  auto count = [](const Graph& g, const std::string& op) {
    return std::count_if(g.nodes.begin(), g.nodes.end(),
                         [&](const Node& n) { return n.op_type == op; });
  };
  EXPECT_EQ(count(*g13, "LayerNormalization"), 0);
  EXPECT_EQ(count(*g13, "ReduceMean"), 4);
  EXPECT_EQ(count(*g17, "LayerNormalization"), 2);
}

TEST(OnnxImport, SymbolicDimensionsNeedBindingsAndAreRecorded) {
  auto unbound = ImportOnnxFile(TestData("encoder_dynamic_op17.onnx"));
  ASSERT_FALSE(unbound.ok());
  EXPECT_NE(unbound.error().message().find("input 'x' dimension 0 is symbolic ('batch')"),
            std::string::npos)
      << unbound.error().message();
  ImportOptions options;
  options.dim_bindings = {{"batch", 1}, {"seq", 5}};
  auto bound = ImportOnnxFile(TestData("encoder_dynamic_op17.onnx"), options);
  ASSERT_TRUE(bound.ok()) << bound.error().ToString();
  const TensorType& x = bound->type(bound->inputs[0]);
  EXPECT_EQ(x.dims, (Dims{1, 5, 32}));
  EXPECT_EQ(x.symbols, (std::vector<std::string>{"batch", "seq", ""}));
  EXPECT_EQ(bound->type(bound->outputs[0]).dims, (Dims{1, 5, 32}));
}

TEST(OnnxImport, MissingFileIsAnIoError) {
  auto r = ImportOnnxFile("/nonexistent/model.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kIo);
  EXPECT_NE(r.error().message().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST(OnnxImport, NonOnnxFileIsAParseError) {
  auto r = ImportOnnxFile(WriteTemp("text.onnx", "this is not a model\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kParse);
  auto empty = ImportOnnxFile(WriteTemp("empty.onnx", ""));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("is empty"), std::string::npos);
}

TEST(OnnxImport, TruncatedFilesFailCleanlyAtEveryLength) {
  const std::string bytes = Slurp(TestData("mlp.onnx"));
  ASSERT_GT(bytes.size(), 1000u);
  // Cut at many points, including inside weights and inside the node list:
  // always an error value, never a crash.
  for (size_t cut = 1; cut < bytes.size(); cut += bytes.size() / 97 + 1) {
    auto r = ImportOnnxBytes(bytes.substr(0, cut), ".", "cut");
    EXPECT_FALSE(r.ok()) << "cut at " << cut << " of " << bytes.size();
  }
}

TEST(OnnxImport, UnsupportedOpsAreListedWithTheirFirstNode) {
  TextParseOptions no_infer;
  no_infer.infer_shapes = false;
  auto g = ParseGraphText(R"(graph g {
    input x: f32[1, 3, 8, 8]
    a = GridSample(x)  b = Relu(a)  c = custom.ns::MyOp(b)  d = GridSample(c)
    output d })",
                          no_infer);
  ASSERT_TRUE(g.ok());
  g->nodes[0].name = "grid_first";
  auto bytes = ExportOnnxBytes(*g);
  ASSERT_TRUE(bytes.ok());
  auto r = ImportOnnxBytes(*bytes, ".", "unsupported.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kUnsupported);
  const std::string& m = r.error().message();
  EXPECT_NE(m.find("2 unsupported op types"), std::string::npos) << m;
  EXPECT_NE(m.find("GridSample (first used by node 'grid_first' (GridSample))"), std::string::npos)
      << m;
  EXPECT_NE(m.find("custom.ns::MyOp"), std::string::npos) << m;
}

TEST(OnnxImport, MissingExternalDataIsReported) {
  const auto dir = std::filesystem::temp_directory_path() / "fusetune_ext";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(TestData("encoder_external_op17.onnx"), dir / "model.onnx",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(dir / "encoder_external_op17.weights");
  auto r = ImportOnnxFile((dir / "model.onnx").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("external data"), std::string::npos) << r.error().message();
}

TEST(OnnxImport, ReferencesToUndefinedValuesAreReported) {
  onnx::ModelProto model = EmptyModel();
  auto* graph = model.mutable_graph();
  auto* input = graph->add_input();
  input->set_name("x");
  input->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  input->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  auto* node = graph->add_node();
  node->set_op_type("Relu");
  node->set_name("relu0");
  node->add_input("nowhere");
  node->add_output("y");
  graph->add_output()->set_name("y");
  auto r = ImportOnnxBytes(model.SerializeAsString(), ".", "dangling.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("node 'relu0' (Relu) reads 'nowhere'"), std::string::npos)
      << r.error().message();
}

TEST(OnnxImport, WrongSizedInitializerIsCorrupt) {
  onnx::ModelProto model = EmptyModel();
  auto* graph = model.mutable_graph();
  auto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(1);
  w->add_dims(4);
  w->set_raw_data(std::string(8, '\0'));
  auto* node = graph->add_node();
  node->set_op_type("Relu");
  node->add_input("w");
  node->add_output("y");
  graph->add_output()->set_name("y");
  auto r = ImportOnnxBytes(model.SerializeAsString(), ".", "short.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.error().message().find("tensor 'w'"), std::string::npos) << r.error().message();
}

// Found by tests/fuzz/onnx_import_fuzz: a shape is checked against the data
// before a tensor of it is allocated (a huge one overflowed the byte count).
TEST(OnnxImport, HugeInitializerShapeIsCorrupt) {
  onnx::ModelProto model = EmptyModel();
  auto* graph = model.mutable_graph();
  auto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(1);
  w->add_dims(int64_t{1} << 62);  // 2^64 bytes of float32: wraps to 0
  auto* node = graph->add_node();
  node->set_op_type("Relu");
  node->add_input("w");
  node->add_output("y");
  graph->add_output()->set_name("y");
  auto r = ImportOnnxBytes(model.SerializeAsString(), ".", "huge.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.error().message().find("tensor 'w'"), std::string::npos) << r.error().message();
}

// Found by tests/fuzz/onnx_import_fuzz: an attribute of another type than
// the op reads is an error of the import, not an abort.
TEST(OnnxImport, AttributeOfTheWrongTypeIsAnError) {
  onnx::ModelProto model = EmptyModel();
  auto* graph = model.mutable_graph();
  for (const char* name : {"a", "b"}) {
    auto* in = graph->add_input();
    in->set_name(name);
    auto* type = in->mutable_type()->mutable_tensor_type();
    type->set_elem_type(1);
    type->mutable_shape()->add_dim()->set_dim_value(2);
    type->mutable_shape()->add_dim()->set_dim_value(2);
  }
  auto* node = graph->add_node();
  node->set_op_type("Gemm");
  node->add_input("a");
  node->add_input("b");
  node->add_output("y");
  auto* trans = node->add_attribute();
  trans->set_name("transB");
  trans->set_type(onnx::AttributeProto::FLOAT);
  trans->set_f(1.0f);
  graph->add_output()->set_name("y");
  auto r = ImportOnnxBytes(model.SerializeAsString(), ".", "gemm.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("transB"), std::string::npos) << r.error().message();
}

TEST(OnnxImport, MalformedExternalDataFieldsAreCorrupt) {
  onnx::ModelProto model = EmptyModel();
  auto* graph = model.mutable_graph();
  auto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(1);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  auto* off = w->add_external_data();
  off->set_key("offset");
  off->set_value("12abc");
  auto* node = graph->add_node();
  node->set_op_type("Relu");
  node->add_input("w");
  node->add_output("y");
  graph->add_output()->set_name("y");
  auto r = ImportOnnxBytes(model.SerializeAsString(), ".", "ext.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kCorrupt);
  EXPECT_NE(r.error().message().find("not a number"), std::string::npos) << r.error().message();
}

TEST(OnnxImport, NewerOpsetIsRejected) {
  onnx::ModelProto model = EmptyModel(99);
  model.mutable_graph()->add_output()->set_name("y");
  auto r = ImportOnnxBytes(model.SerializeAsString(), ".", "future.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("opset 99"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::graph
