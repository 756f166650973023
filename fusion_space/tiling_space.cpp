#include "fusion_space/tiling_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <type_traits>

#include "kernels/attention_decode.h"
#include "kernels/microkernel.h"

namespace fusetune::fusion_space {

using nlohmann::json;

KernelTemplate TilingTemplate(const Tiling& t) {
  switch (t.index()) {
    case 1:
      return KernelTemplate::kElementwise;
    case 2:
      return KernelTemplate::kRowwise;
    case 3:
      return KernelTemplate::kGemm;
    case 4:
      return KernelTemplate::kAttention;
    case 5:
      return KernelTemplate::kConv;
    case 6:
      return KernelTemplate::kPool;
    case 7:
      return KernelTemplate::kConvChain;
    default:
      return KernelTemplate::kReference;
  }
}

namespace {

// The precision field of a tiling whose template has one (GEMM, attention),
// else nullptr: a template that gains a bf16 form needs nothing here.
template <typename AnyTiling>
auto PrecisionOf(AnyTiling& tiling) {
  using Pointer = std::conditional_t<std::is_const_v<AnyTiling>, const kernels::Precision*,
                                     kernels::Precision*>;
  return std::visit(
      [](auto& t) -> Pointer {
        if constexpr (requires { t.precision; })
          return &t.precision;
        else
          return nullptr;
      },
      tiling);
}

// The values of a template's "precision" parameter.
std::vector<int64_t> PrecisionValues(bool offer_bf16) {
  return offer_bf16 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0};
}

}  // namespace

kernels::Precision TilingPrecision(const Tiling& tiling) {
  const kernels::Precision* precision = PrecisionOf(tiling);
  return precision != nullptr ? *precision : kernels::Precision::kF32;
}

Tiling WithPrecision(Tiling tiling, kernels::Precision precision) {
  if (kernels::Precision* field = PrecisionOf(tiling)) *field = precision;
  return tiling;
}

std::string TilingToString(const Tiling& t) {
  if (auto* x = std::get_if<kernels::ElementwiseTiling>(&t)) return x->ToString();
  if (auto* x = std::get_if<kernels::RowwiseTiling>(&t)) return x->ToString();
  if (auto* x = std::get_if<kernels::GemmTiling>(&t)) return x->ToString();
  if (auto* x = std::get_if<kernels::AttentionTiling>(&t)) return x->ToString();
  if (auto* x = std::get_if<kernels::ConvTiling>(&t)) return x->ToString();
  if (auto* x = std::get_if<kernels::PoolTiling>(&t)) return x->ToString();
  if (auto* x = std::get_if<kernels::ConvChainTiling>(&t)) return x->ToString();
  return "-";
}

namespace {

const std::vector<std::pair<int, int>>& MicroShapes() {
  static const std::vector<std::pair<int, int>> shapes = kernels::MicroTileShapes();
  return shapes;
}

// Thin micro-tiles (kernels/microkernel.h) are offered only to GEMMs of at
// most this many rows, and only where they have a vector kernel.
constexpr int64_t kThinGemmRows = 8;

// The indices into MicroShapes() a template's "micro" parameter offers.
std::vector<int64_t> MicroChoices(bool thin) {
  std::vector<int64_t> v;
  const auto& s = MicroShapes();
  for (size_t i = 0; i < s.size(); ++i) {
    const auto [mr, nr] = s[i];
    if (!kernels::IsThinMicroTile(mr, nr) || (thin && kernels::HasVectorThinMicroTile(mr, nr)))
      v.push_back(static_cast<int64_t>(i));
  }
  return v;
}

int MicroIndex(int mr, int nr) {
  const auto& s = MicroShapes();
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i].first == mr && s[i].second == nr) return static_cast<int>(i);
  return -1;
}

// Block sizes for a dimension of `extent`: multiples of `step` growing by
// about 1.5x, capped at the extent rounded up to `step`, and the sizes that
// cut the extent into 2, 3, 4, 6, 8, 12 or 16 blocks as even as `step`
// allows (3072 in 6 or 8 blocks of 512 or 384: without them, two threads
// got 4 and 3 blocks of 448).
std::vector<int64_t> BlockSizes(int64_t extent, int64_t step, int64_t first) {
  const int64_t cap = (extent + step - 1) / step * step;
  std::set<int64_t> v;
  for (int64_t x = first; x < cap; x = std::max(x + step, (x * 3 / 2) / step * step)) v.insert(x);
  v.insert(cap);
  for (int64_t blocks : {2, 3, 4, 6, 8, 12, 16}) {
    const int64_t even = ((extent + blocks - 1) / blocks + step - 1) / step * step;
    if (even >= first && even < cap) v.insert(even);
  }
  return {v.begin(), v.end()};
}

// Block sizes with extra multiples of `lcm` (every micro-tile's mr or nr
// divides it), capped as BlockSizes caps: a block that splits a dimension
// must hold whole micro-tiles of whichever shape is chosen.
std::vector<int64_t> BlockSizesWithMultiples(int64_t extent, int64_t step, int64_t first,
                                             int64_t lcm) {
  std::vector<int64_t> v = BlockSizes(extent, step, first);
  std::set<int64_t> all(v.begin(), v.end());
  for (int64_t x = lcm; x < v.back(); x *= 2) all.insert(x);
  return {all.begin(), all.end()};
}

// The block lists of a conv's tiling space. Channel blocks run to the
// output channels of a depthwise conv (its tiles cross groups), else to a
// group's. 48 and 112 hold whole micro-tiles of mr 6 and 8, and of 14 and 8;
// 96 of nr 16, 24 and 32.
struct ConvLists {
  std::vector<int64_t> oc, px, k;
};

ConvLists MakeConvLists(const kernels::ConvShape& s) {
  ConvLists l;
  const bool depthwise = kernels::ConvAlgorithmApplies(s, kernels::ConvAlgorithm::kDepthwise).ok();
  const int64_t channels = depthwise ? s.out_channels : s.out_per_group();
  l.oc = BlockSizesWithMultiples(channels, 16, 16, 48);
  for (int64_t x : BlockSizesWithMultiples(channels, 16, 16, 112)) l.oc.push_back(x);
  std::sort(l.oc.begin(), l.oc.end());
  l.oc.erase(std::unique(l.oc.begin(), l.oc.end()), l.oc.end());
  l.px = BlockSizesWithMultiples(s.pixels(), 16, 32, 96);
  // From 16: Winograd's slices count input channels, and its weight panels
  // (alpha^2 x oc_block x k_block floats) want them thin (256x14x14 F(4x4):
  // oc 128 k 16 ran 0.55 ms where the best of k >= 32 ran 0.64, measured).
  l.k = BlockSizes(s.in_per_group() * s.kernel_h * s.kernel_w, 16, 16);
  return l;
}

// Checking a tiling needs the lists of its shape; enumeration checks every
// point of one shape in a row, so the last shape's lists are kept.
const ConvLists& ConvListsOf(const kernels::ConvShape& s) {
  thread_local std::optional<std::pair<kernels::ConvShape, ConvLists>> last;
  if (!last || !(last->first == s)) last.emplace(s, MakeConvLists(s));
  return last->second;
}

// A conv chain's expanded-channel blocks: for every micro-tile's mr, its
// multiples growing by about 1.5x up to the expanded channels rounded up to
// mr (a block must hold whole micro-tiles of the expand GEMM).
std::vector<int64_t> ChainBlocks(int64_t expanded) {
  std::set<int64_t> v;
  for (auto [mr, nr] : MicroShapes()) {
    if (kernels::IsThinMicroTile(mr, nr)) continue;
    const int64_t cap = (expanded + mr - 1) / mr * mr;
    for (int64_t x = mr; x < cap; x = std::max(x + mr, (x * 3 / 2) / mr * mr)) v.insert(x);
    v.insert(cap);
  }
  return {v.begin(), v.end()};
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TilingSpace::TilingSpace(const KernelInstance& k, const kernels::KernelConfig& config)
    : instance_(k), config_(config) {
  switch (k.kind) {
    case KernelTemplate::kReference:
      break;
    case KernelTemplate::kElementwise: {
      std::vector<int64_t> tiles;
      for (int64_t t = 256; t <= 65536; t *= 2) tiles.push_back(t);
      params_ = {{"tile", tiles}};
      break;
    }
    case KernelTemplate::kRowwise:
      params_ = {{"rows_per_tile", {1, 2, 4, 8, 16, 32, 64}},
                 {"unroll", {1, 2, 4}},
                 {"prefetch", {0, 1, 2}}};
      break;
    case KernelTemplate::kGemm: {
      int64_t n = 0;
      bool row_norm = false;
      for (const auto& o : k.gemm.outputs) {
        n = std::max(n, o.n);
        row_norm = row_norm || kernels::HasRowNorm(o.epilogue);
      }
      // A LayerNorm epilogue needs whole rows in a tile: nc covers N.
      std::vector<int64_t> nc = BlockSizes(n, 16, 32);
      if (row_norm) nc = {nc.back()};
      params_ = {{"mc", BlockSizes(k.gemm.m, 8, 16)},
                 {"nc", nc},
                 {"kc", BlockSizes(k.gemm.k, 16, 32)},
                 {"micro", MicroChoices(k.gemm.m <= kThinGemmRows)},
                 {"order", {0, 1}},
                 {"split", {0, 1, 2}},
                 {"double_buffer", {0, 1}},
                 {"precision", PrecisionValues(config.offer_bf16)},
                 {"refill", {0, 1}}};
      break;
    }
    case KernelTemplate::kAttention:
      // bf16 for query tiles only: a decode step's queries (at most 8 rows)
      // take the decode path, which computes in f32 (kernels/attention.h).
      params_ = {{"br", BlockSizes(k.attention.seq_q, 16, 16)},
                 {"bc", BlockSizes(k.attention.seq_kv, 16, 16)},
                 {"micro", MicroChoices(false)},
                 {"precision", PrecisionValues(config.offer_bf16 &&
                                               k.attention.seq_q > kernels::kDecodeMaxQueries)}};
      break;
    case KernelTemplate::kConv: {
      const ConvLists& lists = ConvListsOf(k.conv.shape);
      params_ = {{"algorithm", Range(kernels::kNumConvAlgorithms)},
                 {"oc_block", lists.oc},
                 {"pixel_block", lists.px},
                 {"k_block", lists.k},
                 {"micro", MicroChoices(false)},
                 {"in_layout", Range(kernels::kNumActivationLayouts)},
                 {"out_layout", Range(kernels::kNumActivationLayouts)},
                 {"precision", PrecisionValues(config.offer_bf16)}};
      break;
    }
    case KernelTemplate::kConvChain: {
      const kernels::ConvChainDesc& d = k.conv_chain;
      params_ = {{"rows", BlockSizes(d.depthwise.out_h, 1, 1)},
                 {"e_block", ChainBlocks(d.depthwise.in_channels)},
                 {"micro", MicroChoices(false)},
                 {"split", {0, 1}},
                 {"precision", PrecisionValues(config.offer_bf16)}};
      break;
    }
    case KernelTemplate::kPool: {
      // Channels in steps of 4, and 1 and 2 for global pools of large
      // planes (a tile holds whole planes); whole output rows, one row block
      // for global pools (one output row).
      const kernels::PoolDesc& d = k.pool;
      std::vector<int64_t> channels = BlockSizes(d.channels, 4, 4);
      for (int64_t c : {2, 1})
        if (c < channels.front()) channels.insert(channels.begin(), c);
      params_ = {{"channel_block", channels},
                 {"row_block", kernels::IsGlobalPool(d.kind) ? std::vector<int64_t>{1}
                                                             : BlockSizes(d.out_h, 1, 1)}};
      break;
    }
  }
}

Tiling TilingSpace::At(const std::vector<int>& c) const {
  auto v = [&](size_t i) { return params_[i].values[c[i]]; };
  switch (instance_.kind) {
    case KernelTemplate::kReference:
      return std::monostate{};
    case KernelTemplate::kElementwise:
      return kernels::ElementwiseTiling{v(0)};
    case KernelTemplate::kRowwise:
      return kernels::RowwiseTiling{v(0), static_cast<int>(v(1)), static_cast<int>(v(2))};
    case KernelTemplate::kGemm: {
      kernels::GemmTiling t;
      t.mc = v(0);
      t.nc = v(1);
      t.kc = v(2);
      t.mr = MicroShapes()[v(3)].first;
      t.nr = MicroShapes()[v(3)].second;
      t.order = static_cast<kernels::LoopOrder>(v(4));
      t.split = static_cast<kernels::ParallelSplit>(v(5));
      t.double_buffer = v(6) != 0;
      t.precision = static_cast<kernels::Precision>(v(7));
      t.refill = v(8) != 0;
      return t;
    }
    case KernelTemplate::kAttention: {
      kernels::AttentionTiling t;
      t.br = v(0);
      t.bc = v(1);
      t.mr = MicroShapes()[v(2)].first;
      t.nr = MicroShapes()[v(2)].second;
      t.precision = static_cast<kernels::Precision>(v(3));
      return t;
    }
    case KernelTemplate::kConv: {
      kernels::ConvTiling t;
      t.algorithm = static_cast<kernels::ConvAlgorithm>(v(0));
      t.oc_block = v(1);
      t.pixel_block = v(2);
      t.k_block = v(3);
      t.mr = MicroShapes()[v(4)].first;
      t.nr = MicroShapes()[v(4)].second;
      t.in_layout = static_cast<kernels::ActivationLayout>(v(5));
      t.out_layout = static_cast<kernels::ActivationLayout>(v(6));
      t.precision = static_cast<kernels::Precision>(v(7));
      return t;
    }
    case KernelTemplate::kPool:
      return kernels::PoolTiling{v(0), v(1)};
    case KernelTemplate::kConvChain:
      return kernels::ConvChainTiling{v(0),
                                      v(1),
                                      MicroShapes()[v(2)].first,
                                      MicroShapes()[v(2)].second,
                                      v(3) != 0,
                                      static_cast<kernels::Precision>(v(4))};
  }
  return std::monostate{};
}

std::vector<int64_t> TilingValues(const Tiling& t) {
  std::vector<int64_t> values;
  if (auto* x = std::get_if<kernels::ElementwiseTiling>(&t)) values = {x->tile};
  if (auto* x = std::get_if<kernels::RowwiseTiling>(&t))
    values = {x->rows_per_tile, x->unroll, x->prefetch};
  if (auto* x = std::get_if<kernels::GemmTiling>(&t))
    values = {x->mc,
              x->nc,
              x->kc,
              MicroIndex(x->mr, x->nr),
              static_cast<int>(x->order),
              static_cast<int>(x->split),
              x->double_buffer ? 1 : 0,
              static_cast<int>(x->precision),
              x->refill ? 1 : 0};
  if (auto* x = std::get_if<kernels::AttentionTiling>(&t))
    values = {x->br, x->bc, MicroIndex(x->mr, x->nr), static_cast<int>(x->precision)};
  if (auto* x = std::get_if<kernels::ConvTiling>(&t))
    values = {static_cast<int>(x->algorithm),
              x->oc_block,
              x->pixel_block,
              x->k_block,
              MicroIndex(x->mr, x->nr),
              static_cast<int>(x->in_layout),
              static_cast<int>(x->out_layout),
              static_cast<int>(x->precision)};
  if (auto* x = std::get_if<kernels::PoolTiling>(&t)) values = {x->channel_block, x->row_block};
  if (auto* x = std::get_if<kernels::ConvChainTiling>(&t))
    values = {x->rows, x->e_block, MicroIndex(x->mr, x->nr), x->split_expanded ? 1 : 0,
              static_cast<int>(x->precision)};
  return values;
}

bool TilingSpace::Offers(kernels::Precision precision) const {
  if (precision == kernels::Precision::kF32) return true;
  for (const TilingParam& p : params_)
    if (p.name == "precision")
      return std::find(p.values.begin(), p.values.end(), static_cast<int64_t>(precision)) !=
             p.values.end();
  return false;
}

std::optional<std::vector<int>> TilingSpace::ChoiceOf(const Tiling& t) const {
  const std::vector<int64_t> values = TilingValues(t);
  if (values.size() != params_.size()) return std::nullopt;
  std::vector<int> choice;
  for (size_t i = 0; i < values.size(); ++i) {
    auto it = std::find(params_[i].values.begin(), params_[i].values.end(), values[i]);
    if (it == params_[i].values.end()) return std::nullopt;
    choice.push_back(static_cast<int>(it - params_[i].values.begin()));
  }
  return choice;
}

namespace {

// Algorithms ignore some fields (conv.h): a field an algorithm does not read
// keeps its first value, and a k_block covering the reduction is kept only
// at its smallest (k_block 32 and 64 covering 27 are the same schedule).
// `value` is the smallest of `list` whose key(value) equals key(value)'s.
template <typename Key>
bool FirstOfItsKind(const std::vector<int64_t>& list, int64_t value, Key&& key) {
  const int64_t mine = key(value);
  for (int64_t v : list)
    if (key(v) == mine) return v == value;
  return true;  // not in the list: ChoiceOf and the kernel's own checks decide
}

bool ConvTilingCanonical(const kernels::ConvShape& s, const kernels::ConvTiling& t) {
  using kernels::ConvAlgorithm;
  // bf16 is im2col's, direct's and Winograd F(2x2)'s (kernels/conv.h): the
  // other algorithms' bf16 points would be refused by the kernel's check.
  if (t.precision != kernels::Precision::kF32 && !kernels::ConvAlgorithmHasBf16(t.algorithm))
    return false;
  if (!kernels::ConvAlgorithmUsesMicroTile(t.algorithm) &&
      (t.mr != MicroShapes()[0].first || t.nr != MicroShapes()[0].second))
    return false;
  const ConvLists& lists = ConvListsOf(s);
  // Blocks at or past an extent run the same schedule.
  auto capped = [](int64_t extent) {
    return [extent](int64_t v) { return std::min(v, std::max<int64_t>(extent, 1)); };
  };
  const int64_t k_extent = kernels::ConvReductionExtent(s, t.algorithm);
  if (k_extent == 0 ? t.k_block != lists.k.front()
                    : !FirstOfItsKind(lists.k, t.k_block, capped(k_extent)))
    return false;
  const int64_t channels =
      t.algorithm == ConvAlgorithm::kDepthwise ? s.out_channels : s.out_per_group();
  if (!FirstOfItsKind(lists.oc, t.oc_block, capped(channels))) return false;
  if (t.algorithm == ConvAlgorithm::kIm2colGemm)
    return FirstOfItsKind(lists.px, t.pixel_block, capped(s.pixels()));
  // Whole-row algorithms run bands of max(1, px / out_w) rows, rounded up to
  // the Winograd tile, up to the whole output.
  const int64_t m = t.algorithm == ConvAlgorithm::kWinograd2   ? 2
                    : t.algorithm == ConvAlgorithm::kWinograd4 ? 4
                                                               : 1;
  const int64_t all_rows = (s.out_h + m - 1) / m * m;
  return FirstOfItsKind(lists.px, t.pixel_block, [&](int64_t v) {
    const int64_t rows = (std::max<int64_t>(1, v / s.out_w) + m - 1) / m * m;
    return std::min(rows, all_rows);
  });
}

// A block of expanded channels at or past their count (rounded up to the
// block unit) runs the same schedule: only the smallest such block that
// holds whole units is a point of the space. The unit is mr, and in bf16
// an even multiple of it (k-pairs: an odd mr's odd blocks are refused).
bool ConvChainTilingCanonical(const kernels::ConvChainDesc& d, const kernels::ConvChainTiling& t) {
  const int64_t unit = t.precision == kernels::Precision::kBf16 && t.mr % 2 != 0 ? 2 * t.mr : t.mr;
  if (unit < 1 || t.e_block % unit != 0) return true;  // the kernel's check explains
  const int64_t whole = (d.depthwise.in_channels + unit - 1) / unit * unit;
  return FirstOfItsKind(ChainBlocks(d.depthwise.in_channels), t.e_block,
                        [&](int64_t v) { return v % unit != 0 ? -v : std::min(v, whole); });
}

// The rules of a tiling on an instance, in order: its template's, then the
// kernel's own. `broken` is a KeepReason or IgnoreReason (common/status.h);
// the kernel's check is its explained one (kernels::Validate*) or, for
// IgnoreReason, its quiet one (kernels::*TilingFits).
template <typename Broken>
bool TilingRulesHold(const KernelInstance& k, const kernels::KernelConfig& config, const Tiling& t,
                     Broken&& broken) {
  constexpr bool loud = !std::is_same_v<std::decay_t<Broken>, IgnoreReason>;
  auto kernel_status = [&](const Status& s) {
    return s.ok() || broken([&] { return s.error().message(); });
  };
  if (TilingTemplate(t) != k.kind)
    return broken([&] {
      return fmt::format("a {} tiling for a {} kernel", KernelTemplateName(TilingTemplate(t)),
                         KernelTemplateName(k.kind));
    });
  if (auto* x = std::get_if<kernels::ElementwiseTiling>(&t)) {
    if (x->tile % 16 != 0)
      return broken(
          [&] { return fmt::format("tile {} is not a multiple of the 16-float vector", x->tile); });
    return kernel_status(kernels::ValidateElementwise(k.elementwise, *x, config));
  }
  if (auto* x = std::get_if<kernels::RowwiseTiling>(&t))
    return kernel_status(kernels::ValidateRowwise(k.rowwise, *x, config));
  if (auto* x = std::get_if<kernels::GemmTiling>(&t)) {
    // Blocks that split a dimension hold whole micro-tiles; one block
    // covering the dimension is padded by the kernel instead.
    int64_t n = 0;
    for (const auto& o : k.gemm.outputs) n = std::max(n, o.n);
    if (!(x->mr > 0 && (x->mc % x->mr == 0 || x->mc >= k.gemm.m)))
      return broken([&] { return fmt::format("mc {} is not a multiple of mr {}", x->mc, x->mr); });
    if (!(x->nr > 0 && (x->nc % x->nr == 0 || x->nc >= n)))
      return broken([&] { return fmt::format("nc {} is not a multiple of nr {}", x->nc, x->nr); });
    if (!(x->kc >= k.gemm.k || x->kc % 16 == 0))
      return broken(
          [&] { return fmt::format("kc {} splits K but is not a multiple of 16", x->kc); });
    if constexpr (!loud) return kernels::GemmTilingFits(k.gemm, *x, config);
    return kernel_status(kernels::ValidateGemm(k.gemm, *x, config));
  }
  if (auto* x = std::get_if<kernels::AttentionTiling>(&t)) {
    if (!(x->br % x->mr == 0 || x->br >= k.attention.seq_q))
      return broken([&] { return fmt::format("br {} is not a multiple of mr {}", x->br, x->mr); });
    if constexpr (!loud) return kernels::AttentionTilingFits(k.attention, *x, config);
    return kernel_status(kernels::ValidateAttention(k.attention, *x, config));
  }
  if (auto* x = std::get_if<kernels::ConvTiling>(&t)) {
    if (!ConvTilingCanonical(k.conv.shape, *x))
      return broken([&] {
        return fmt::format(
            "{} runs this tiling as another point of the space (a field it does not read "
            "keeps its first value; blocks past an extent, and pixel blocks of the same "
            "whole rows, keep their smallest)",
            kernels::ConvAlgorithmName(x->algorithm));
      });
    if constexpr (!loud) return kernels::ConvTilingFits(k.conv, *x, config);
    return kernel_status(kernels::ValidateConv(k.conv, *x, config));
  }
  if (auto* x = std::get_if<kernels::PoolTiling>(&t)) {
    if constexpr (!loud) return kernels::PoolTilingFits(k.pool, *x, config);
    return kernel_status(kernels::ValidatePool(k.pool, *x, config));
  }
  if (auto* x = std::get_if<kernels::ConvChainTiling>(&t)) {
    if (!ConvChainTilingCanonical(k.conv_chain, *x))
      return broken([&] {
        return fmt::format("e_block {} covers the expanded channels as a smaller block does",
                           x->e_block);
      });
    if constexpr (!loud) return kernels::ConvChainTilingFits(k.conv_chain, *x, config);
    return kernel_status(kernels::ValidateConvChain(k.conv_chain, *x, config));
  }
  return true;
}

}  // namespace

FusionDecision CheckTiling(const KernelInstance& k, const kernels::KernelConfig& config,
                           const Tiling& t) {
  // Messages are formatted only on failure: plans are checked at every compile.
  std::string why;
  if (!TilingRulesHold(k, config, t, KeepReason{&why})) return FusionDecision::Forbid(why);
  return FusionDecision::Allow();
}

bool TilingFits(const KernelInstance& k, const kernels::KernelConfig& config, const Tiling& t) {
  return TilingRulesHold(k, config, t, IgnoreReason{});
}

FusionDecision TilingSpace::Check(const Tiling& t) const {
  return CheckTiling(instance_, config_, t);
}

int64_t TilingSpace::product_size() const {
  int64_t n = 1;
  for (const auto& p : params_) n *= static_cast<int64_t>(p.values.size());
  return n;
}

const std::vector<Tiling>& TilingSpace::Enumerate() const {
  if (legal_) return *legal_;
  legal_.emplace();
  std::vector<int> c(params_.size(), 0);
  while (true) {
    Tiling t = At(c);
    if (TilingFits(instance_, config_, t)) legal_->push_back(t);
    size_t i = 0;
    for (; i < c.size(); ++i) {
      if (++c[i] < static_cast<int>(params_[i].values.size())) break;
      c[i] = 0;
    }
    if (i == c.size()) break;
  }
  return *legal_;
}

Tiling TilingSpace::Sample(Rng& rng) const {
  const auto& all = Enumerate();
  if (all.empty()) return std::monostate{};
  return all[rng.Below(all.size())];
}

namespace {
// What a rule-based compiler runs: depthwise convolutions on their own
// kernel, 1x1 convolutions as GEMMs, the rest direct. A max-pooled conv's
// bands hold 8 pooled rows, so that the recomputed halo rows are a few
// percent of its work rather than half of it.
kernels::ConvTiling DefaultConvTiling(const kernels::ConvDesc& d) {
  const kernels::ConvShape& s = d.shape;
  kernels::ConvTiling t;
  if (d.max_pool.active()) {
    const kernels::ConvMaxPool& p = d.max_pool;
    t.pixel_block = std::min(s.out_h, 7 * p.stride_h + p.kernel_h) * s.out_w;
  }
  if (kernels::ConvAlgorithmApplies(s, kernels::ConvAlgorithm::kDepthwise).ok())
    t.algorithm = kernels::ConvAlgorithm::kDepthwise;
  else if (s.kernel_h * s.kernel_w > 1 &&
           kernels::ConvAlgorithmApplies(s, kernels::ConvAlgorithm::kDirect).ok())
    t.algorithm = kernels::ConvAlgorithm::kDirect;
  if (!kernels::ConvAlgorithmUsesMicroTile(t.algorithm)) {
    t.mr = MicroShapes()[0].first;
    t.nr = MicroShapes()[0].second;
  }
  return t;
}

// Bands of about 784 output positions (the blocks that ran fastest on
// MobileNetV2's shapes), at most half the rows so both threads get a band;
// blocks of 48 expanded channels.
kernels::ConvChainTiling DefaultConvChainTiling(const kernels::ConvChainDesc& d) {
  const kernels::ConvShape& s = d.depthwise;
  kernels::ConvChainTiling t;
  t.rows = std::clamp<int64_t>(784 / s.out_w, 1, std::max<int64_t>(1, (s.out_h + 1) / 2));
  t.e_block = 48;
  t.mr = MicroShapes()[0].first;
  t.nr = MicroShapes()[0].second;
  return t;
}

// The GEMM template's defaults, except that a GEMM with fewer row blocks
// than threads (a decode step's 1 to 8 rows) splits its columns: split by
// rows, one thread would stream all the weights while the others wait.
kernels::GemmTiling DefaultGemmTiling(const kernels::GemmDesc& d,
                                      const kernels::KernelConfig& config) {
  kernels::GemmTiling t;
  if (d.batch * ((d.m + t.mc - 1) / t.mc) < config.threads) t.split = kernels::ParallelSplit::kN;
  return t;
}

}  // namespace

Tiling TilingSpace::Default() const {
  Tiling preferred;
  switch (instance_.kind) {
    case KernelTemplate::kReference:
      return std::monostate{};
    case KernelTemplate::kElementwise:
      preferred = kernels::ElementwiseTiling{4096};
      break;
    case KernelTemplate::kRowwise:
      preferred = kernels::RowwiseTiling{4, 2, 1};
      break;
    case KernelTemplate::kGemm:
      preferred = DefaultGemmTiling(instance_.gemm, config_);
      break;
    case KernelTemplate::kAttention:
      preferred = kernels::AttentionTiling{};
      break;
    case KernelTemplate::kConv:
      preferred = DefaultConvTiling(instance_.conv);
      break;
    case KernelTemplate::kPool:
      preferred = kernels::PoolTiling{};
      break;
    case KernelTemplate::kConvChain:
      preferred = DefaultConvChainTiling(instance_.conv_chain);
      break;
  }
  if (ChoiceOf(preferred) && TilingFits(instance_, config_, preferred)) return preferred;
  return Nearest(preferred).value_or(preferred);
}

namespace {

// How far value `v` of parameter `param` is from `want`: block sizes by
// |log2| ratio, categorical parameters (micro-tile, order, split) and
// non-positive values by equality.
double ParamDistance(const TilingParam& param, int64_t v, int64_t want) {
  // A conv's algorithm is what a rule-based compiler decides first: the
  // nearest tiling keeps it while any tiling of it is legal.
  if (param.name == "algorithm") return v != want ? 64.0 : 0.0;
  const bool numeric = v > 0 && want > 0 && param.name != "micro" && param.name != "order" &&
                       param.name != "split" && param.name != "algorithm" &&
                       param.name != "precision";
  return numeric ? std::abs(std::log2(static_cast<double>(v) / static_cast<double>(want)))
                 : (v != want ? 1.0 : 0.0);
}

}  // namespace

// Branch and bound over the parameters, each one's values nearest first:
// a point is checked only while it could still beat the best legal point
// found, so a 12-layer model's defaults check a few hundred points instead
// of enumerating spaces of 70,000 (1.2 s of a compile with nothing tuned).
// The sum runs over the parameters in order, as an enumeration would add
// it, and ties go to the point an enumeration meets first (parameter 0
// varying fastest), so the answer is the exhaustive one.
std::optional<Tiling> TilingSpace::Nearest(const Tiling& wanted) const {
  const std::vector<int64_t> want = TilingValues(wanted);
  const size_t p = params_.size();
  if (p == 0 || want.size() != p) return std::nullopt;
  std::vector<std::vector<double>> dist(p);
  std::vector<std::vector<int>> by_distance(p);
  std::vector<double> rest_bound(p + 1, 0);  // least distance of parameters i.. onwards
  for (size_t i = 0; i < p; ++i) {
    const auto& values = params_[i].values;
    for (int64_t v : values) dist[i].push_back(ParamDistance(params_[i], v, want[i]));
    by_distance[i].resize(values.size());
    for (size_t j = 0; j < values.size(); ++j) by_distance[i][j] = static_cast<int>(j);
    std::stable_sort(by_distance[i].begin(), by_distance[i].end(),
                     [&](int a, int b) { return dist[i][a] < dist[i][b]; });
  }
  for (size_t i = p; i-- > 0;) rest_bound[i] = rest_bound[i + 1] + dist[i][by_distance[i].front()];
  std::vector<int> choice(p), best_choice;
  double best = std::numeric_limits<double>::infinity();
  auto linear = [&](const std::vector<int>& c) {  // the enumeration's order
    int64_t index = 0;
    for (size_t i = p; i-- > 0;)
      index = index * static_cast<int64_t>(params_[i].values.size()) + c[i];
    return index;
  };
  auto visit = [&](auto&& self, size_t i, double partial) -> void {
    if (partial + rest_bound[i] > best + 1e-12) return;
    if (i == p) {
      if (partial > best || (partial == best && linear(choice) > linear(best_choice))) return;
      if (!TilingFits(instance_, config_, At(choice))) return;
      best = partial;
      best_choice = choice;
      return;
    }
    for (int j : by_distance[i]) {
      choice[i] = j;
      self(self, i + 1, partial + dist[i][j]);
    }
  };
  visit(visit, 0, 0.0);
  if (best_choice.empty()) return std::nullopt;
  return At(best_choice);
}

namespace {

// The last field of that name: a later duplicate wins, as in a JSON object.
const TilingField* FindField(const TilingFields& fields, std::string_view name) {
  for (auto it = fields.rbegin(); it != fields.rend(); ++it)
    if (it->name == name) return &*it;
  return nullptr;
}

template <typename T>
FusionDecision Field(const TilingFields& fields, const char* name, T* out) {
  const TilingField* f = FindField(fields, name);
  if (f == nullptr) return FusionDecision::Forbid(fmt::format("tiling is missing \"{}\"", name));
  if (const auto* i = std::get_if<int64_t>(&f->value))
    *out = static_cast<T>(*i);
  else if (const auto* b = std::get_if<bool>(&f->value))
    *out = static_cast<T>(*b);
  else
    return FusionDecision::Forbid(fmt::format("tiling.{} is not an integer", name));
  return FusionDecision::Allow();
}

std::string TextField(const TilingFields& fields, const char* name) {
  const TilingField* f = FindField(fields, name);
  const auto* text = f != nullptr ? std::get_if<std::string>(&f->value) : nullptr;
  return text != nullptr ? *text : std::string();
}

// An activation layout by name; absent is NCHW (records from before layouts
// were a dimension).
FusionDecision LayoutField(const TilingFields& fields, const char* name,
                           kernels::ActivationLayout* out) {
  if (FindField(fields, name) == nullptr) return FusionDecision::Allow();
  const std::string text = TextField(fields, name);
  const std::optional<kernels::ActivationLayout> layout = kernels::ActivationLayoutFromName(text);
  if (!layout)
    return FusionDecision::Forbid(
        fmt::format("tiling.{} \"{}\" is not a layout (nchw, nhwc, nchw16c)", name, text));
  *out = *layout;
  return FusionDecision::Allow();
}

// A precision by name; absent is f32 (plans and records of before bf16).
FusionDecision PrecisionField(const TilingFields& fields, kernels::Precision* out) {
  const std::string text = TextField(fields, "precision");
  if (text.empty()) return FusionDecision::Allow();
  const std::optional<kernels::Precision> precision = kernels::PrecisionFromName(text);
  if (!precision)
    return FusionDecision::Forbid(fmt::format("tiling.precision \"{}\" is not f32 or bf16", text));
  *out = *precision;
  return FusionDecision::Allow();
}

}  // namespace

json TilingToJson(const Tiling& t) {
  if (auto* x = std::get_if<kernels::ElementwiseTiling>(&t)) return {{"tile", x->tile}};
  if (auto* x = std::get_if<kernels::RowwiseTiling>(&t))
    return {{"rows_per_tile", x->rows_per_tile}, {"unroll", x->unroll}, {"prefetch", x->prefetch}};
  if (auto* x = std::get_if<kernels::GemmTiling>(&t)) {
    json j = {{"mc", x->mc},
              {"nc", x->nc},
              {"kc", x->kc},
              {"mr", x->mr},
              {"nr", x->nr},
              {"order", kernels::LoopOrderName(x->order)},
              {"split", kernels::ParallelSplitName(x->split)},
              {"double_buffer", x->double_buffer}};
    // Only bf16 is written: f32 tilings keep the text they had before
    // precision was a choice (records and plan files compare it).
    if (x->precision != kernels::Precision::kF32)
      j["precision"] = kernels::PrecisionName(x->precision);
    if (x->refill) j["refill"] = true;  // the same: absent is the tilings of before
    return j;
  }
  if (auto* x = std::get_if<kernels::AttentionTiling>(&t)) {
    json j = {{"br", x->br}, {"bc", x->bc}, {"mr", x->mr}, {"nr", x->nr}};
    if (x->precision != kernels::Precision::kF32)  // as the GEMM's
      j["precision"] = kernels::PrecisionName(x->precision);
    return j;
  }
  if (auto* x = std::get_if<kernels::ConvTiling>(&t)) {
    json j = {{"algorithm", kernels::ConvAlgorithmName(x->algorithm)},
              {"oc_block", x->oc_block},
              {"pixel_block", x->pixel_block},
              {"k_block", x->k_block},
              {"mr", x->mr},
              {"nr", x->nr},
              {"in_layout", kernels::ActivationLayoutName(x->in_layout)},
              {"out_layout", kernels::ActivationLayoutName(x->out_layout)}};
    if (x->precision != kernels::Precision::kF32)  // as the GEMM's
      j["precision"] = kernels::PrecisionName(x->precision);
    return j;
  }
  if (auto* x = std::get_if<kernels::PoolTiling>(&t))
    return {{"channel_block", x->channel_block}, {"row_block", x->row_block}};
  if (auto* x = std::get_if<kernels::ConvChainTiling>(&t)) {
    json j = {{"rows", x->rows},
              {"e_block", x->e_block},
              {"mr", x->mr},
              {"nr", x->nr},
              {"split_expanded", x->split_expanded}};
    if (x->precision != kernels::Precision::kF32)  // as the GEMM's
      j["precision"] = kernels::PrecisionName(x->precision);
    return j;
  }
  return json::object();
}

FusionDecision TilingFromFields(KernelTemplate kind, const TilingFields& fields, Tiling* out) {
  switch (kind) {
    case KernelTemplate::kReference:
      *out = std::monostate{};
      return FusionDecision::Allow();
    case KernelTemplate::kElementwise: {
      kernels::ElementwiseTiling t;
      FT_RETURN_IF_DECISION(Field(fields, "tile", &t.tile));
      *out = t;
      return FusionDecision::Allow();
    }
    case KernelTemplate::kRowwise: {
      kernels::RowwiseTiling t;
      FT_RETURN_IF_DECISION(Field(fields, "rows_per_tile", &t.rows_per_tile));
      FT_RETURN_IF_DECISION(Field(fields, "unroll", &t.unroll));
      FT_RETURN_IF_DECISION(Field(fields, "prefetch", &t.prefetch));
      *out = t;
      return FusionDecision::Allow();
    }
    case KernelTemplate::kGemm: {
      kernels::GemmTiling t;
      FT_RETURN_IF_DECISION(Field(fields, "mc", &t.mc));
      FT_RETURN_IF_DECISION(Field(fields, "nc", &t.nc));
      FT_RETURN_IF_DECISION(Field(fields, "kc", &t.kc));
      FT_RETURN_IF_DECISION(Field(fields, "mr", &t.mr));
      FT_RETURN_IF_DECISION(Field(fields, "nr", &t.nr));
      FT_RETURN_IF_DECISION(Field(fields, "double_buffer", &t.double_buffer));
      const std::string order = TextField(fields, "order"), split = TextField(fields, "split");
      if (order == kernels::LoopOrderName(kernels::LoopOrder::kMN))
        t.order = kernels::LoopOrder::kMN;
      else if (order == kernels::LoopOrderName(kernels::LoopOrder::kNM))
        t.order = kernels::LoopOrder::kNM;
      else
        return FusionDecision::Forbid(fmt::format("tiling.order \"{}\" is not mn or nm", order));
      bool found = false;
      for (auto s :
           {kernels::ParallelSplit::kM, kernels::ParallelSplit::kN, kernels::ParallelSplit::kMN})
        if (split == kernels::ParallelSplitName(s)) t.split = s, found = true;
      if (!found)
        return FusionDecision::Forbid(fmt::format("tiling.split \"{}\" is not m, n or mn", split));
      FT_RETURN_IF_DECISION(PrecisionField(fields, &t.precision));
      if (FindField(fields, "refill") != nullptr)
        FT_RETURN_IF_DECISION(Field(fields, "refill", &t.refill));
      *out = t;
      return FusionDecision::Allow();
    }
    case KernelTemplate::kAttention: {
      kernels::AttentionTiling t;
      FT_RETURN_IF_DECISION(Field(fields, "br", &t.br));
      FT_RETURN_IF_DECISION(Field(fields, "bc", &t.bc));
      FT_RETURN_IF_DECISION(Field(fields, "mr", &t.mr));
      FT_RETURN_IF_DECISION(Field(fields, "nr", &t.nr));
      FT_RETURN_IF_DECISION(PrecisionField(fields, &t.precision));
      *out = t;
      return FusionDecision::Allow();
    }
    case KernelTemplate::kConv: {
      kernels::ConvTiling t;
      const std::string algorithm = TextField(fields, "algorithm");
      const std::optional<kernels::ConvAlgorithm> a = kernels::ConvAlgorithmFromName(algorithm);
      if (!a)
        return FusionDecision::Forbid(
            fmt::format("tiling.algorithm \"{}\" is not a convolution algorithm", algorithm));
      t.algorithm = *a;
      FT_RETURN_IF_DECISION(Field(fields, "oc_block", &t.oc_block));
      FT_RETURN_IF_DECISION(Field(fields, "pixel_block", &t.pixel_block));
      FT_RETURN_IF_DECISION(Field(fields, "k_block", &t.k_block));
      FT_RETURN_IF_DECISION(Field(fields, "mr", &t.mr));
      FT_RETURN_IF_DECISION(Field(fields, "nr", &t.nr));
      // Absent in the records from before layouts were searched: NCHW.
      FT_RETURN_IF_DECISION(LayoutField(fields, "in_layout", &t.in_layout));
      FT_RETURN_IF_DECISION(LayoutField(fields, "out_layout", &t.out_layout));
      FT_RETURN_IF_DECISION(PrecisionField(fields, &t.precision));
      *out = t;
      return FusionDecision::Allow();
    }
    case KernelTemplate::kPool: {
      kernels::PoolTiling t;
      FT_RETURN_IF_DECISION(Field(fields, "channel_block", &t.channel_block));
      FT_RETURN_IF_DECISION(Field(fields, "row_block", &t.row_block));
      *out = t;
      return FusionDecision::Allow();
    }
    case KernelTemplate::kConvChain: {
      kernels::ConvChainTiling t;
      FT_RETURN_IF_DECISION(Field(fields, "rows", &t.rows));
      FT_RETURN_IF_DECISION(Field(fields, "e_block", &t.e_block));
      FT_RETURN_IF_DECISION(Field(fields, "mr", &t.mr));
      FT_RETURN_IF_DECISION(Field(fields, "nr", &t.nr));
      // Absent in the first records of the template, which all ran unsplit.
      if (FindField(fields, "split_expanded") != nullptr)
        FT_RETURN_IF_DECISION(Field(fields, "split_expanded", &t.split_expanded));
      FT_RETURN_IF_DECISION(PrecisionField(fields, &t.precision));
      *out = t;
      return FusionDecision::Allow();
    }
  }
  return FusionDecision::Forbid("unknown template");
}

TilingFields TilingFieldsFromJson(const json& j) {
  TilingFields fields;
  for (const auto& [name, value] : j.items()) {
    TilingField& f = fields.emplace_back();
    f.name = name;
    if (value.is_boolean())
      f.value = value.get<bool>();
    else if (value.is_number_integer())
      f.value = value.get<int64_t>();
    else if (value.is_number())
      f.value = value.get<double>();
    else if (value.is_string())
      f.value = value.get<std::string>();
  }
  return fields;
}

FusionDecision TilingFromJson(KernelTemplate kind, const json& j, Tiling* out) {
  if (!j.is_object()) return FusionDecision::Forbid("tiling is not an object");
  return TilingFromFields(kind, TilingFieldsFromJson(j), out);
}

kernels::TilingEstimate EstimateTiling(const KernelInstance& instance, const Tiling& tiling,
                                       int threads) {
  if (const auto* t = std::get_if<kernels::GemmTiling>(&tiling))
    return kernels::EstimateGemm(instance.gemm, *t, threads);
  if (const auto* t = std::get_if<kernels::RowwiseTiling>(&tiling))
    return kernels::EstimateRowwise(instance.rowwise, *t, threads);
  if (const auto* t = std::get_if<kernels::ElementwiseTiling>(&tiling))
    return kernels::EstimateElementwise(instance.elementwise, *t, threads);
  if (const auto* t = std::get_if<kernels::AttentionTiling>(&tiling))
    return kernels::EstimateAttention(instance.attention, *t, threads);
  if (const auto* t = std::get_if<kernels::ConvTiling>(&tiling))
    return kernels::EstimateConv(instance.conv, *t, threads);
  if (const auto* t = std::get_if<kernels::PoolTiling>(&tiling))
    return kernels::EstimatePool(instance.pool, *t, threads);
  if (const auto* t = std::get_if<kernels::ConvChainTiling>(&tiling))
    return kernels::EstimateConvChain(instance.conv_chain, *t, threads);
  return {};
}

}  // namespace fusetune::fusion_space
