// The plan file: versioned JSON that names groups by node positions in the
// canonical graph (graph/workload_key.h), not by tensor or node names, so a
// plan tuned on one export applies to any export of the same structure.
//
//   {"format": "fusetune-plan", "version": 1, "graph_key": "…", "nodes": 49,
//    "groups": [{"nodes": [0, 1], "template": "gemm", "tiling": {…},
//                "kernel": "…", "workload_key": "…"}, …]}
//
// Groups are listed in kernel order; "kernel" and "workload_key" are for
// readers (the compiler takes a group's key from a plan of the same graph). Loading validates
// everything against the graph: format and version, node positions, each node in one group, each
// group legal and of the stated template, each tiling valid, and the order.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "fusion_space/space.h"

namespace fusetune::fusion_space {

inline constexpr int kPlanFormatVersion = 1;

nlohmann::json PlanToJson(FusionSpace& space, const Plan& plan);
Result<Plan> PlanFromJson(FusionSpace& space, const nlohmann::json& json);
// The same from the text, without building a document (a tenth of the time:
// what a compile reads from the database). `workload_keys`, when given,
// receives each group's stored "workload_key" ("" where there is none).
Result<Plan> PlanFromJsonText(FusionSpace& space, std::string_view text,
                              std::vector<std::string>* workload_keys = nullptr);

// A plan of the same structure tuned at other sizes of the graph's symbolic
// dimensions (the nearest tuned bucket's whole-model plan): the same groups
// by node position, each tiling that is not legal at this graph's sizes
// replaced by the nearest legal one (TilingSpace::Nearest). Fails where a
// group is not legal here, as PlanFromJsonText does. The plan's positions
// are its graph's exact canonical order, whose ties break on shapes;
// `structure_positions` (search::GraphWorkload stores it) gives each one's
// place in the structure order, the same at every size, by which they are
// read here. Empty: read as positions of this graph (tuning jobs before
// it was stored; right where the two sizes order their nodes alike).
Result<Plan> MovedPlanFromJsonText(FusionSpace& space, std::string_view text,
                                   std::span<const int32_t> structure_positions = {});

// The tiling of a one-group plan's group, read without a graph (what a
// compile compares with a whole-model plan's group); nullopt for a plan of
// another number of groups or one that does not parse; monostate for a
// reference group.
std::optional<Tiling> SingleGroupTiling(std::string_view text);

Status WritePlanFile(FusionSpace& space, const Plan& plan, const std::string& path);
Result<Plan> ReadPlanFile(FusionSpace& space, const std::string& path);

}  // namespace fusetune::fusion_space
