// Winograd convolution (conv.h's kWinograd2 = F(2x2,3x3), kWinograd4 =
// F(4x4,3x3)): what the tests check of its accuracy.
//
// Winograd trades multiplications for a less exact sum: the input, weight
// and output transforms of F(4,3) multiply by constants that are not powers
// of two (1/6, 1/12, 1/24 in G, 5 in B^T) and by large ones (up to 8 in
// A^T), so the rounding errors of the alpha x alpha products are amplified
// on the way back; F(2,3)'s are 0, +-1 and 1/2. The
// tolerances are relative to the output's largest magnitude (as
// tests/kernels/conv_test_util.h's RunAgainstReference measures), in fp32,
// for normally distributed inputs and weights. Measured max relative errors
// (conv_winograd_test's WinogradAccuracy.ResNetLikeChannels: 1x{64,128,256,
// 512}x14x14 -> 32, 3x3 p1, one seed, against a double reference):
//   F(2x2,3x3): 3.0e-7 .. 4.6e-7 (its constants are 0, +-1 and 1/2, exact
//               in binary: about what any fp32 sum of these lengths gives)
//   F(4x4,3x3): 4.0e-6 .. 7.0e-6 (about 15x more, growing slowly with the
//               channels; the spread is how the compiler contracts the
//               transforms into FMAs)
// The tolerances leave about 14x (F(4x4)) and 20x (F(2x2)) over those, for
// other seeds and data: the error is a maximum over the tensor and grows
// with sqrt(channels).
//
// In bf16 (ConvTiling::precision) V and U are rounded to bf16 (relative
// 2^-9 each) before the batched GEMMs, and the output transform carries
// those roundings back amplified. Measured the same way
// (conv_winograd_bf16_test's WinogradBf16Accuracy.ResNetLikeChannels;
// 2026-12-05):
//   F(2x2,3x3): 3.4e-3 .. 4.3e-3
//   F(4x4,3x3): 4.2e-2 .. 7.0e-2 (past any useful error budget: conv.h's
//               ConvAlgorithmHasBf16 keeps F(4x4) in f32)
// The tolerance leaves about 4.5x over F(2x2)'s: bf16 rounding errors are
// larger relative to their spread than f32's, and the tuner verifies each
// bf16 candidate against the error budget on top.
#pragma once

namespace fusetune::kernels {

inline constexpr double kWinograd2Tolerance = 1e-5;
inline constexpr double kWinograd4Tolerance = 1e-4;
inline constexpr double kWinograd2Bf16Tolerance = 2e-2;

}  // namespace fusetune::kernels
