// Precision as a tiling dimension (kernels/precision.h): offered only when
// the kernel config asks for it, every bf16 point runnable, and the tiling
// text round-trips (f32 keeps the text it had before precision existed).
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "fusion_space/space.h"
#include "kernels/attention_decode.h"
#include "kernels/microkernel_bf16.h"
#include "tests/graph/test_util.h"

namespace fusetune::fusion_space {
namespace {

constexpr const char* kMlp = R"(graph g { input x: f32[16, 64]  const w: f32[64, 96]
  const b: f32[96]  h = MatMul(x, w)  y = Add(h, b)  output y })";

int CountBf16(const TilingSpace& space) {
  int bf16 = 0;
  for (const Tiling& t : space.Enumerate()) bf16 += TilingPrecision(t) == kernels::Precision::kBf16;
  return bf16;
}

// A default tiling of `kind` writes no precision (the text of before bf16);
// in bf16 it writes "bf16", reads back equal and says so in its summary.
template <typename TilingT>
void ExpectBf16TextRoundTrips(KernelTemplate kind) {
  TilingT t;
  EXPECT_FALSE(TilingToJson(t).contains("precision")) << "f32 text as before bf16";
  t.precision = kernels::Precision::kBf16;
  const nlohmann::json j = TilingToJson(t);
  EXPECT_EQ(j.at("precision"), "bf16");
  Tiling back;
  ASSERT_TRUE(TilingFromJson(kind, j, &back));
  EXPECT_EQ(std::get<TilingT>(back), t);
  EXPECT_NE(TilingToString(back).find(" bf16"), std::string::npos);
}

TEST(PrecisionSpace, Bf16IsOfferedOnlyWhenAsked) {
  graph::Graph g = testing::Parse(kMlp);
  kernels::KernelConfig config;
  FusionSpace f32_space(g, config);
  const TilingSpace& f32 = f32_space.Tilings({0, 1});
  EXPECT_EQ(CountBf16(f32), 0);
  config.offer_bf16 = true;
  FusionSpace mixed_space(g, config);
  const TilingSpace& mixed = mixed_space.Tilings({0, 1});
  EXPECT_GT(CountBf16(mixed), 0);
  EXPECT_EQ(mixed.size() - CountBf16(mixed), f32.size()) << "the f32 points are the same";
  EXPECT_EQ(TilingPrecision(mixed.Default()), kernels::Precision::kF32);
  for (const Tiling& t : mixed.Enumerate()) {
    const auto& gemm = std::get<kernels::GemmTiling>(t);
    if (gemm.precision == kernels::Precision::kBf16) {
      EXPECT_NE(kernels::FindBf16MicroKernel(gemm.mr, gemm.nr), nullptr) << gemm.ToString();
    }
  }
}

constexpr const char* kAttention = R"(graph g { input q: f32[1, 2, SQ, 16]
  input k: f32[1, 2, 48, 16]  input v: f32[1, 2, 48, 16]
  kt = Transpose(k) {perm=[0, 1, 3, 2]}  s = MatMul(q, kt)
  p = Softmax(s) {axis=-1}  o = MatMul(p, v)  output o })";

// The attention group: bf16 for query tiles, never for a decode step's few
// queries (the decode path computes in f32).
TEST(PrecisionSpace, AttentionOffersBf16ForQueryTilesOnly) {
  kernels::KernelConfig config;
  config.offer_bf16 = true;
  for (int seq_q : {48, 4}) {
    std::string text = kAttention;
    text.replace(text.find("SQ"), 2, std::to_string(seq_q));
    graph::Graph g = testing::Parse(text);
    FusionSpace space(g, config);
    std::vector<int32_t> all(g.nodes.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    const TilingSpace& tilings = space.Tilings(all);
    ASSERT_EQ(TilingTemplate(tilings.Default()), KernelTemplate::kAttention) << seq_q;
    EXPECT_EQ(CountBf16(tilings) > 0, seq_q > kernels::kDecodeMaxQueries) << seq_q;
    EXPECT_EQ(tilings.Offers(kernels::Precision::kBf16), seq_q > kernels::kDecodeMaxQueries);
    // An f32 tiling's text (as records before precision hold it) is a point of the space.
    Tiling read;
    ASSERT_TRUE(TilingFromJson(KernelTemplate::kAttention, TilingToJson(tilings.Default()), &read));
    EXPECT_TRUE(tilings.ChoiceOf(read).has_value()) << seq_q;
  }
  kernels::AttentionTiling t;
  t.precision = kernels::Precision::kBf16;
  const nlohmann::json j = TilingToJson(t);
  EXPECT_EQ(j.at("precision"), "bf16");
  Tiling back;
  ASSERT_TRUE(TilingFromJson(KernelTemplate::kAttention, j, &back));
  EXPECT_EQ(std::get<kernels::AttentionTiling>(back), t);
  EXPECT_EQ(TilingPrecision(WithPrecision(back, kernels::Precision::kF32)),
            kernels::Precision::kF32);
  // An attention tiling written before precision existed reads as f32.
  ASSERT_TRUE(TilingFromJson(KernelTemplate::kAttention,
                             {{"br", 64}, {"bc", 64}, {"mr", 8}, {"nr", 32}}, &back));
  EXPECT_EQ(TilingPrecision(back), kernels::Precision::kF32);
}

constexpr const char* kConvRelu = R"(graph g opset 17 { input x: f32[1, 8, 10, 10]
  const w: f32[16, 8, 3, 3]  const b: f32[16]
  c = Conv(x, w, b) {pads=[1, 1, 1, 1]}  r = Relu(c)  output r })";

// A conv offers bf16 (kernels/conv.h) for its implicit-GEMM and Winograd
// F(2x2) points with a bf16 micro-kernel and for its direct points (on this
// small shape every buffer fits: each f32 direct point has its bf16 twin);
// Winograd F(4x4) and depthwise stay f32. Its text round-trips.
TEST(PrecisionSpace, ConvOffersBf16ForImplicitGemmAndDirect) {
  graph::Graph g = testing::Parse(kConvRelu);
  kernels::KernelConfig config;
  FusionSpace f32_space(g, config);
  const TilingSpace& f32 = f32_space.Tilings({0, 1});
  ASSERT_EQ(TilingTemplate(f32.Default()), KernelTemplate::kConv);
  EXPECT_EQ(CountBf16(f32), 0);
  EXPECT_FALSE(f32.Offers(kernels::Precision::kBf16));
  config.offer_bf16 = true;
  FusionSpace mixed_space(g, config);
  const TilingSpace& mixed = mixed_space.Tilings({0, 1});
  EXPECT_TRUE(mixed.Offers(kernels::Precision::kBf16));
  std::map<kernels::ConvAlgorithm, int> f32_points, bf16_points;
  for (const Tiling& t : mixed.Enumerate()) {
    const auto& conv = std::get<kernels::ConvTiling>(t);
    if (conv.precision == kernels::Precision::kF32) {
      ++f32_points[conv.algorithm];
      continue;
    }
    ++bf16_points[conv.algorithm];
    EXPECT_TRUE(kernels::ConvAlgorithmHasBf16(conv.algorithm)) << conv.ToString();
    if (kernels::ConvAlgorithmUsesMicroTile(conv.algorithm)) {
      EXPECT_NE(kernels::FindBf16MicroKernel(conv.mr, conv.nr), nullptr) << conv.ToString();
    }
  }
  using kernels::ConvAlgorithm;
  EXPECT_GT(bf16_points[ConvAlgorithm::kIm2colGemm], 0);
  EXPECT_LE(bf16_points[ConvAlgorithm::kIm2colGemm], f32_points[ConvAlgorithm::kIm2colGemm]);
  EXPECT_GT(f32_points[ConvAlgorithm::kDirect], 0);
  EXPECT_EQ(bf16_points[ConvAlgorithm::kDirect], f32_points[ConvAlgorithm::kDirect]);
  EXPECT_GT(bf16_points[ConvAlgorithm::kWinograd2], 0);
  EXPECT_LE(bf16_points[ConvAlgorithm::kWinograd2], f32_points[ConvAlgorithm::kWinograd2]);
  EXPECT_GT(f32_points[ConvAlgorithm::kWinograd4], 0);
  EXPECT_EQ(bf16_points[ConvAlgorithm::kWinograd4], 0) << "F(4x4)'s bf16 error is too large";
  int bf16 = 0;
  for (const auto& [algorithm, n] : bf16_points) bf16 += n;
  EXPECT_EQ(mixed.size() - bf16, f32.size()) << "the f32 points are the same";

  ExpectBf16TextRoundTrips<kernels::ConvTiling>(KernelTemplate::kConv);
}

constexpr const char* kInvertedResidual = R"(graph g opset 17 { input x: f32[1, 8, 12, 12]
  const we: f32[48, 8, 1, 1]  const be: f32[48]  const wd: f32[48, 1, 3, 3]  const bd: f32[48]
  const wp: f32[8, 48, 1, 1]  const bp: f32[8]  const zero: f32[] = [0]  const six: f32[] = [6]
  e = Conv(x, we, be)  re = Clip(e, zero, six)  d = Conv(re, wd, bd) {group=48, pads=[1, 1, 1, 1]}
  rd = Clip(d, zero, six)  p = Conv(rd, wp, bp)  a = Add(p, x)  output a })";

// A conv chain offers bf16 (kernels/conv_chain.h) for its points with a
// bf16 micro-kernel and an even block of expanded channels; its text
// round-trips.
TEST(PrecisionSpace, ConvChainOffersBf16WithEvenBlocksAndBf16MicroTiles) {
  graph::Graph g = testing::Parse(kInvertedResidual);
  const std::vector<int32_t> chain = {0, 1, 2, 3, 4, 5};
  kernels::KernelConfig config;
  FusionSpace f32_space(g, config);
  const TilingSpace& f32 = f32_space.Tilings(chain);
  ASSERT_EQ(TilingTemplate(f32.Default()), KernelTemplate::kConvChain);
  EXPECT_FALSE(f32.Offers(kernels::Precision::kBf16));
  EXPECT_EQ(CountBf16(f32), 0);
  config.offer_bf16 = true;
  FusionSpace mixed_space(g, config);
  const TilingSpace& mixed = mixed_space.Tilings(chain);
  EXPECT_TRUE(mixed.Offers(kernels::Precision::kBf16));
  const int bf16 = CountBf16(mixed);
  EXPECT_GT(bf16, 0);
  EXPECT_EQ(mixed.size() - bf16, f32.size()) << "the f32 points are the same";
  for (const Tiling& t : mixed.Enumerate()) {
    const auto& c = std::get<kernels::ConvChainTiling>(t);
    if (c.precision != kernels::Precision::kBf16) continue;
    EXPECT_EQ(c.e_block % 2, 0) << c.ToString();
    EXPECT_NE(kernels::FindBf16MicroKernel(c.mr, c.nr), nullptr) << c.ToString();
  }
  ExpectBf16TextRoundTrips<kernels::ConvChainTiling>(KernelTemplate::kConvChain);
}

TEST(PrecisionSpace, TilingTextRoundTrips) {
  ExpectBf16TextRoundTrips<kernels::GemmTiling>(KernelTemplate::kGemm);
  kernels::GemmTiling t;
  t.precision = kernels::Precision::kBf16;
  nlohmann::json bad = TilingToJson(t);
  bad["precision"] = "fp8";
  Tiling back;
  const FusionDecision d = TilingFromJson(KernelTemplate::kGemm, bad, &back);
  ASSERT_FALSE(d);
  EXPECT_NE(d.reason().find("tiling.precision \"fp8\" is not f32 or bf16"), std::string::npos)
      << d.reason();
}

}  // namespace
}  // namespace fusetune::fusion_space
