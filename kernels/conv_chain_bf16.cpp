// The conv chain's expand and project products in bf16
// (conv_chain_products.h; ConvChainTiling::precision). The weights are
// pre-packed in bf16 rows, K rounded up to even: the expand's [E rounded up
// to mr][C rounded up to 2], the project's [C' rounded up to mr][E rounded
// up to 2]. X's band is rounded to k-pairs of input channels as it is
// packed (once per tile); each block's depthwise outputs, computed and
// activated in f32, are rounded to k-pairs of expanded channels just before
// the project reads them: one pass over eb x cols values against the
// project's C' x eb x cols multiply-adds. Blocks start on even channels
// (e_block even), so a block's project columns are whole pairs of the
// pre-packed rows.
#include <algorithm>
#include <cstring>
#include <memory>

#include "kernels/bf16.h"
#include "kernels/conv_chain_products.h"
#include "kernels/microkernel_bf16.h"

namespace fusetune::kernels::conv_detail {

namespace {

int64_t RoundUp(int64_t x, int64_t m) { return ChainRoundUp(x, m); }
int64_t Expanded(const ConvChainDesc& d) { return d.depthwise.in_channels; }
int64_t HalvesToFloats(int64_t halves) { return (halves + 1) / 2; }
int64_t RegionBytesOfHalves(int64_t halves) { return ChainRegionBytes(HalvesToFloats(halves)); }

// Row lengths of the pre-packed weights, in bf16 values (even).
int64_t ExpandRowHalves(const ConvChainDesc& d) { return RoundUp(d.in_channels, 2); }
int64_t ProjectRowHalves(const ConvChainDesc& d) { return RoundUp(Expanded(d), 2); }

int64_t ExpandPackedHalves(const ConvChainDesc& d, const ConvChainTiling& t) {
  return d.expand ? RoundUp(Expanded(d), t.mr) * ExpandRowHalves(d) : 0;
}
int64_t ProjectPackedHalves(const ConvChainDesc& d, const ConvChainTiling& t) {
  return RoundUp(d.out_channels, t.mr) * ProjectRowHalves(d);
}

// n columns of a k-pair of rows (`second` null: zeros) into consecutive
// nr-column B panels whose pair rows are panel_halves apart, zeros past n.
void InterleaveIntoPanels(const float* first, const float* second, int64_t n, int nr,
                          int64_t panel_halves, Bf16* dst) {
  for (int64_t p = 0; p * nr < n; ++p) {
    const int64_t cols = std::min<int64_t>(nr, n - p * nr);
    Bf16* panel = dst + p * panel_halves;
    InterleaveToBf16Pairs(first + p * nr, second ? second + p * nr : nullptr, cols, panel);
    std::fill(panel + 2 * cols, panel + 2 * nr, Bf16{0});
  }
}

class Bf16Products final : public ChainProducts {
 public:
  Bf16Products(const ConvChainDesc& d, const ConvChainTiling& t, const ChainExtents& x,
               const float* packed, LocalBuffer* local)
      : d_(d),
        t_(t),
        x_(x),
        mk_(*FindBf16MicroKernel(t.mr, t.nr)),
        in_pad_(ExpandRowHalves(d)),
        e_pad_(ProjectRowHalves(d)),
        expand_w_(reinterpret_cast<const Bf16*>(packed)),
        project_w_(reinterpret_cast<const Bf16*>(packed) + ExpandPackedHalves(d, t)) {
    block_project_w_ = Take(local, x.out_rows * t.e_block);
    dw_pairs_ = Take(local, t.e_block * x.out_ld);
    if (d.expand) {
      x_pairs_ = Take(local, in_pad_ * x.x_ld);
      block_expand_w_ = Take(local, t.e_block * in_pad_);
    }
  }

  static int64_t LocalBytes(const ConvChainDesc& d, const ConvChainTiling& t,
                            const ChainExtents& x) {
    int64_t bytes =
        RegionBytesOfHalves(x.out_rows * t.e_block) + RegionBytesOfHalves(t.e_block * x.out_ld);
    if (d.expand)
      bytes += RegionBytesOfHalves(ExpandRowHalves(d) * x.x_ld) +
               RegionBytesOfHalves(t.e_block * ExpandRowHalves(d));
    return bytes;
  }

  // Pairs of input channels (c, c + 1) into the expand's B panels of
  // in_pad_ / 2 k-pairs.
  void PackX(const float* x, int64_t plane, int64_t n, int64_t c0, int64_t count) override {
    for (int64_t c = c0; c < c0 + count; c += 2)
      InterleaveIntoPanels(x + (c - c0) * plane,
                           c + 1 < c0 + count ? x + (c + 1 - c0) * plane : nullptr, n, t_.nr,
                           in_pad_ * t_.nr, x_pairs_ + c * t_.nr);
  }

  // The project's columns [e0, e0 + eb rounded up to 2) of every (padded)
  // output row, and the expand's rows (padded to mr): the pre-packed rows'
  // zeros past E and past C pad the last pair.
  void CopyBlockWeights(int64_t e0, int64_t eb) override {
    const int64_t eb_pad = RoundUp(eb, 2);
    for (int64_t m = 0; m < x_.out_rows; ++m)
      std::memcpy(block_project_w_ + m * eb_pad, project_w_ + m * e_pad_ + e0,
                  static_cast<size_t>(eb_pad) * sizeof(Bf16));
    if (d_.expand)
      std::memcpy(block_expand_w_, expand_w_ + e0 * in_pad_,
                  static_cast<size_t>(RoundUp(eb, t_.mr) * in_pad_) * sizeof(Bf16));
  }

  void Expand(int64_t eb, int64_t n, float* expanded, int64_t ld) override {
    const int64_t panel_halves = in_pad_ * t_.nr;
    for (int64_t p = 0; p * t_.nr < n; ++p)
      for (int64_t m = 0; m < eb; m += t_.mr)
        mk_.fn(in_pad_ / 2, block_expand_w_ + m * in_pad_, in_pad_, x_pairs_ + p * panel_halves,
               expanded + m * ld + p * t_.nr, ld, false);
  }

  void Project(const float* dw, int64_t eb, int64_t cols, float* acc, int64_t ld,
               bool accumulate) override {
    const int64_t eb_pad = RoundUp(eb, 2), panel_halves = eb_pad * t_.nr;
    for (int64_t p = 0; p * t_.nr < cols; ++p) {
      const float* panel = dw + p * eb * t_.nr;  // f32 rows of nr, eb of them
      for (int64_t e = 0; e < eb; e += 2)
        InterleaveToBf16Pairs(panel + e * t_.nr, e + 1 < eb ? panel + (e + 1) * t_.nr : nullptr,
                              t_.nr, dw_pairs_ + p * panel_halves + e * t_.nr);
    }
    for (int64_t p = 0; p * t_.nr < cols; ++p)
      for (int64_t m = 0; m < d_.out_channels; m += t_.mr)
        mk_.fn(eb_pad / 2, block_project_w_ + m * eb_pad, eb_pad, dw_pairs_ + p * panel_halves,
               acc + m * ld + p * t_.nr, ld, accumulate);
  }

  void FillForComputeOnly() override {
    auto fill = [](Bf16* at, int64_t halves, float value) {
      std::fill(at, at + halves, FloatToBf16(value));
    };
    if (d_.expand) {
      fill(x_pairs_, in_pad_ * x_.x_ld, 0.5f);
      fill(block_expand_w_, t_.e_block * in_pad_, 0.01f);
    }
    fill(block_project_w_, x_.out_rows * t_.e_block, 0.01f);
  }

 private:
  static Bf16* Take(LocalBuffer* local, int64_t halves) {
    return reinterpret_cast<Bf16*>(local->Take(static_cast<size_t>(HalvesToFloats(halves))));
  }

  const ConvChainDesc& d_;
  const ConvChainTiling& t_;
  ChainExtents x_;
  const Bf16MicroKernel& mk_;
  int64_t in_pad_, e_pad_;  // C and E rounded up to even
  const Bf16* expand_w_;
  const Bf16* project_w_;
  Bf16 *x_pairs_ = nullptr, *block_expand_w_ = nullptr, *block_project_w_ = nullptr;
  Bf16* dw_pairs_ = nullptr;
};

void PrePack(const ConvChainDesc& d, const ConvChainTiling& t, float* dst) {
  Bf16* out = reinterpret_cast<Bf16*>(dst);
  const int64_t expand = ExpandPackedHalves(d, t), c_pad = ExpandRowHalves(d);
  const int64_t e_pad = ProjectRowHalves(d);
  std::fill(out, out + expand + ProjectPackedHalves(d, t), Bf16{0});
  if (d.expand)
    for (int64_t e = 0; e < Expanded(d); ++e)
      ConvertToBf16(d.expand_w + e * d.in_channels, d.in_channels, out + e * c_pad);
  for (int64_t c = 0; c < d.out_channels; ++c)
    ConvertToBf16(d.project_w + c * Expanded(d), Expanded(d), out + expand + c * e_pad);
}

}  // namespace

const ChainProductsOps& Bf16ChainProducts() {
  static const ChainProductsOps ops{
      Bf16Products::LocalBytes,
      [](const ConvChainDesc& d, const ConvChainTiling& t) {
        return HalvesToFloats(ExpandPackedHalves(d, t) + ProjectPackedHalves(d, t));
      },
      PrePack,
      [](const ConvChainDesc& d, const ConvChainTiling& t, int64_t eb) -> int64_t {
        const int64_t expand = d.expand ? RoundUp(eb, t.mr) * ExpandRowHalves(d) : 0;
        return static_cast<int64_t>(sizeof(Bf16)) *
               (RoundUp(d.out_channels, t.mr) * RoundUp(eb, 2) + expand);
      },
      [](const ConvChainDesc& d, const ConvChainTiling& t, const ChainExtents& x,
         const float* packed, LocalBuffer* local) -> std::unique_ptr<ChainProducts> {
        return std::make_unique<Bf16Products>(d, t, x, packed, local);
      }};
  return ops;
}

}  // namespace fusetune::kernels::conv_detail
