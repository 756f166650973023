// KV caches served in place.
//
// A decoder exported the way PyTorch and Hugging Face export it takes its
// cache as graph inputs and gives it back as graph outputs:
//   present_k = Concat(past_k, k_new)   on the sequence axis
// so that, run as written, every decode step copies the whole cache into a
// new `present` tensor (at 2,047 cached tokens, 2.4 of a 9.2 ms step) and
// the caller feeds it back as the next step's `past`.
//
// Served in place, the program holds each cache itself, in the buffer of the
// `present` output, compiled at the cache's capacity (the past dimension
// bound to capacity - new rows). A step writes only its new rows, at the
// current length, and attention reads the first length + new rows: the
// Concat's output is written once, one row per step, and never copied.
// What a step does with the cache is decided here, once per program, from
// the plan's kernels; a program that cannot serve a cache in place (the
// Concat on the reference executor, a mask over the cache's columns, another
// reader of the cache) says why, and runs as written.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "fusion_space/kernel_instance.h"
#include "graph/graph.h"

namespace fusetune::runtime {

// A cache: `present` = Concat(`past`, new rows) along `axis`, `past` a graph
// input and `present` a graph output.
struct KvCacheLink {
  graph::ValueId past = graph::kNoValue, present = graph::kNoValue;
  int64_t axis = 0;
  int32_t concat_node = -1;
};

// The graph's caches: two-input Concats of a graph input (read by nothing
// else) and new rows into a graph output.
std::vector<KvCacheLink> FindKvCacheLinks(const graph::Graph& graph);

// What one step of a program does with the caches.
struct KvCacheStep {
  enum class Role { kNone, kAppend, kAttend };
  Role role = Role::kNone;
  // kAppend: the piece (0: the descriptor, i: pieces[i - 1]) that copies
  // `past` into `present`, dropped when served in place; every other piece
  // writes new rows, moved to the current length.
  size_t past_piece = 0;
  int64_t row_elements = 0;  // elements between rows along the axis
};

struct KvCachePlan {
  std::vector<KvCacheLink> links;
  std::vector<KvCacheStep> steps;  // one per program step
  int64_t capacity = 0;            // rows each cache holds (the present's extent)
  int64_t compiled_past = 0;       // the past rows the program was compiled for
  int64_t new_rows = 0;            // rows a run appends
};

// Whether the steps (null for a layout transform) of a program over `graph`
// can serve every cache in place, and how; an error says why not.
Result<KvCachePlan> PlanKvCacheInPlace(
    const graph::Graph& graph, const std::vector<const fusion_space::KernelInstance*>& steps);

// A program served in place runs as compiled, for the capacity, whatever
// the length: nothing it computes may depend on the past's length (positions
// taken from past_k.shape[2] at export, a mask over the cache), or that is
// computed for the capacity at every step. `longer` is the same model
// imported with the past one row longer: the two must have the same nodes
// and the same constants, or this says which constant depends on the length.
Status CheckLengthFree(const graph::Graph& graph, const graph::Graph& longer);

// The symbolic dimension of the caches' length (the past input's axis), or
// an error when the model was exported for one length.
Result<std::string> CacheLengthSymbol(const graph::Graph& graph, const KvCachePlan& plan);

// Rebinds a bound append step for a run that holds `length` rows: the copy
// of the past dropped, the new rows written at `length`.
void AppendAtLength(const KvCachePlan& plan, const KvCacheStep& step, int64_t length,
                    kernels::ElementwiseDesc* desc);

// Copies `rows` (a past's dims with any extent up to the capacity along the
// axis) into the first rows of `cache` (the present's dims), and back.
void CopyRowsIntoCache(const graph::Tensor& rows, int64_t axis, graph::Tensor* cache);
graph::Tensor CacheRows(const graph::Tensor& cache, int64_t axis, int64_t length);

}  // namespace fusetune::runtime
