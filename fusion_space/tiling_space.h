// Tilings and tiling spaces. A Tiling is the schedule of one kernel instance
// (one alternative per template); a TilingSpace is every tiling of one
// instance that is legal on the target: built from the instance's shapes and
// the local-buffer capacity, with its constraints (capacity with double
// buffering, divisibility of blocks by the micro-tile, vector alignment of
// partial slices), full enumeration, uniform sampling and its size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/rng.h"
#include "fusion_space/decision.h"
#include "fusion_space/kernel_instance.h"
#include "kernels/estimate.h"

namespace fusetune::fusion_space {

using Tiling = std::variant<std::monostate, kernels::ElementwiseTiling, kernels::RowwiseTiling,
                            kernels::GemmTiling, kernels::AttentionTiling, kernels::ConvTiling,
                            kernels::PoolTiling, kernels::ConvChainTiling>;

KernelTemplate TilingTemplate(const Tiling& tiling);
// The precision a tiling computes in (f32 for every template without a bf16 form).
kernels::Precision TilingPrecision(const Tiling& tiling);
// The same tiling computing in `precision` (a template without a bf16 form: unchanged).
Tiling WithPrecision(Tiling tiling, kernels::Precision precision);
std::string TilingToString(const Tiling& tiling);
nlohmann::json TilingToJson(const Tiling& tiling);
// A tiling as read from a plan's text: its fields by name, in the order
// given; a nested value is kept as monostate, which the reader reports for a
// field it needs. (A compile reads a tiling per group: a JSON object per
// tiling cost a tenth of compiling a stored 12-layer plan.)
struct TilingField {
  std::string name;
  std::variant<std::monostate, bool, int64_t, double, std::string> value;
};
using TilingFields = std::vector<TilingField>;
// The fields of a JSON object (a later duplicate name wins, as in JSON).
TilingFields TilingFieldsFromJson(const nlohmann::json& object);

// Errors name the field; the template decides which alternative is expected.
FusionDecision TilingFromFields(KernelTemplate kind, const TilingFields& fields, Tiling* tiling);
FusionDecision TilingFromJson(KernelTemplate kind, const nlohmann::json& json, Tiling* tiling);

// Analytical traffic, tiles and padding of `tiling` on `instance`
// (kernels/estimate.h); all zero for the reference template.
kernels::TilingEstimate EstimateTiling(const KernelInstance& instance, const Tiling& tiling,
                                       int threads);

// The parameter values of a tiling, in the order of its template's
// TilingSpace::params() (the micro-tile as its index in the micro shapes).
std::vector<int64_t> TilingValues(const Tiling& tiling);

// Allow() when `tiling` satisfies every constraint on `instance` (what
// TilingSpace::Check says, without building the space).
FusionDecision CheckTiling(const KernelInstance& instance, const kernels::KernelConfig& config,
                           const Tiling& tiling);
// CheckTiling(...).allowed() without building the reason (enumeration
// checks every point of a space, and most points break a rule).
bool TilingFits(const KernelInstance& instance, const kernels::KernelConfig& config,
                const Tiling& tiling);

struct TilingParam {
  std::string name;
  std::vector<int64_t> values;
};

class TilingSpace {
 public:
  TilingSpace(const KernelInstance& instance, const kernels::KernelConfig& config);

  const std::vector<TilingParam>& params() const { return params_; }
  // The tiling at one index per parameter (no constraint check).
  Tiling At(const std::vector<int>& choice) const;
  // The parameter indices of a tiling, or nullopt when a value is not in the space.
  std::optional<std::vector<int>> ChoiceOf(const Tiling& tiling) const;
  // Allow() when the tiling satisfies every constraint on this instance.
  // (Precision is not a constraint: a bf16 tiling runs anywhere. Whether
  // this space offers it, kernels::KernelConfig::offer_bf16, is Offers.)
  FusionDecision Check(const Tiling& tiling) const;
  // Whether the space's points include `precision`.
  bool Offers(kernels::Precision precision) const;

  // Every legal tiling, in parameter order (computed once).
  const std::vector<Tiling>& Enumerate() const;
  int64_t size() const { return static_cast<int64_t>(Enumerate().size()); }
  int64_t product_size() const;  // before constraints
  Tiling Sample(Rng& rng) const;
  // The tiling a rule-based compiler would pick: the kernel's default when it
  // is legal here, else the legal tiling nearest it.
  Tiling Default() const;
  // The legal tiling of this space nearest `wanted`: block sizes compared by
  // ratio, categorical parameters (micro-tile, order, split) by equality;
  // of equals, the first in enumeration order. nullopt when nothing is
  // legal or `wanted` is of another template. Checks only the points that
  // could be nearer than the best found, not the whole space.
  std::optional<Tiling> Nearest(const Tiling& wanted) const;

 private:
  const KernelInstance& instance_;
  kernels::KernelConfig config_;
  std::vector<TilingParam> params_;
  mutable std::optional<std::vector<Tiling>> legal_;
};

}  // namespace fusetune::fusion_space
