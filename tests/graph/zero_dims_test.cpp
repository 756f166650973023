// A symbolic dimension bound to 0 (a KV cache of no rows before a prompt):
// imported where the graph makes its tensors non-empty again, refused with
// the node named where a node would compute an empty tensor.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <algorithm>

#include "graph/onnx_io.h"
#include "graph/reference_executor.h"

namespace fusetune::graph {
namespace {

void AddInput(onnx::GraphProto* g, const std::string& name, const std::string& rows) {
  auto* in = g->add_input();
  in->set_name(name);
  auto* type = in->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  type->mutable_shape()->add_dim()->set_dim_value(1);
  type->mutable_shape()->add_dim()->set_dim_param(rows);
  type->mutable_shape()->add_dim()->set_dim_value(4);
}

// y = Relu(Concat(past, x)) over rows: past [1, past, 4], x [1, seq, 4].
std::string CacheModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  AddInput(g, "past", "past");
  AddInput(g, "x", "seq");
  auto* concat = g->add_node();
  concat->set_op_type("Concat");
  concat->set_name("cat");
  concat->add_input("past");
  concat->add_input("x");
  concat->add_output("rows");
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("act");
  relu->add_input("rows");
  relu->add_output("y");
  g->add_output()->set_name("y");
  return model.SerializeAsString();
}

Result<Graph> Import(int64_t past, int64_t seq) {
  ImportOptions options;
  options.dim_bindings = {{"past", past}, {"seq", seq}};
  return ImportOnnxBytes(CacheModel(), ".", "cache.onnx", options);
}

TEST(ZeroDims, ACacheOfNoRowsConcatenatedWithTheNewOnesImportsAndRuns) {
  auto graph = Import(0, 3);
  ASSERT_TRUE(graph.ok()) << graph.error().ToString();
  TensorMap feeds;
  feeds.emplace("past", Tensor::FromVector<float>(DataType::kFloat32, {1, 0, 4}, {}));
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 6.0f;
  feeds.emplace("x", Tensor::FromVector<float>(DataType::kFloat32, {1, 3, 4}, x));
  auto out = RunReference(*graph, feeds);
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  const Tensor& y = out->outputs.at("y");
  ASSERT_EQ(y.dims(), (Dims{1, 3, 4}));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y.data<float>()[i], std::max(0.0f, x[i]));
}

TEST(ZeroDims, ANodeThatWouldComputeAnEmptyTensorIsNamed) {
  auto graph = Import(0, 0);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.error().code(), ErrorCode::kUnsupported);
  const std::string message = graph.error().ToString();
  EXPECT_NE(message.find("with past=0, seq=0, node 'cat' (Concat) computes an empty tensor"),
            std::string::npos)
      << message;
}

TEST(ZeroDims, ANodeThatWouldReadAnEmptyTensorIsNamed) {
  // Relu(past) before the Concat: a kernel would run on no rows.
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(CacheModel()));
  onnx::GraphProto* g = model.mutable_graph();
  g->mutable_node(0)->set_input(0, "past_act");
  onnx::NodeProto act;
  act.set_op_type("Relu");
  act.set_name("early");
  act.add_input("past");
  act.add_output("past_act");
  *g->mutable_node()->Add() = g->node(1);
  *g->mutable_node(1) = g->node(0);
  *g->mutable_node(0) = act;
  ImportOptions options;
  options.dim_bindings = {{"past", 0}, {"seq", 3}};
  auto graph = ImportOnnxBytes(model.SerializeAsString(), ".", "cache.onnx", options);
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.error().ToString().find("node 'early' (Relu) reads an empty tensor ('past'"),
            std::string::npos)
      << graph.error().ToString();
  options.dim_bindings = {{"past", 2}, {"seq", 3}};  // the same graph with cached rows
  EXPECT_TRUE(ImportOnnxBytes(model.SerializeAsString(), ".", "cache.onnx", options).ok());
}

TEST(ZeroDims, ANegativeSizeIsAnError) {
  auto graph = Import(-1, 3);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(graph.error().ToString().find("never negative"), std::string::npos);
}

}  // namespace
}  // namespace fusetune::graph
