// A kernel instance: what one fusion group runs as. The template's descriptor
// (kernels/) with its shapes and strides fixed at match time, and, instead of
// data pointers, operand slots naming the graph values (and element offsets)
// that the runtime binds when it knows the buffers.
//
// Slot pointers are addresses inside a private array (SlotPointer(i)), so a
// descriptor straight from the matcher is non-null everywhere and the
// kernels' own validation and local-buffer sizing run on it unchanged.
#pragma once

#include <map>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/conv_chain.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/pool.h"
#include "kernels/rowwise.h"

namespace fusetune::fusion_space {

enum class KernelTemplate {
  kReference,
  kElementwise,
  kRowwise,
  kGemm,
  kAttention,
  kConv,
  kPool,
  kConvChain
};
const char* KernelTemplateName(KernelTemplate t);
std::optional<KernelTemplate> KernelTemplateFromName(const std::string& name);
inline constexpr int kNumKernelTemplates = 8;
// The version of each template's implementation. Bump it when a change alters
// what a tiling of the template measures (code, defaults, thread split):
// tuning records of an older version then go stale and are never a best plan.
int KernelTemplateVersion(KernelTemplate t);
// Every template's name and version, e.g. {"gemm": 1, ...}.
std::map<std::string, int> KernelTemplateVersions();

// Where one descriptor pointer points: a graph value (or an owned derived
// constant when value == kNoValue) plus an element offset.
struct OperandSlot {
  graph::ValueId value = graph::kNoValue;
  int owned = -1;  // index into KernelInstance::owned when value == kNoValue
  int64_t offset = 0;
};

inline constexpr int kMaxOperandSlots = 64;
float* SlotPointer(int slot);
// The slot index of a pointer made by SlotPointer, or -1 for any other pointer.
int SlotIndex(const float* pointer);

struct KernelInstance {
  KernelTemplate kind = KernelTemplate::kReference;
  std::vector<int32_t> nodes;           // graph node indices, ascending
  std::vector<graph::ValueId> inputs;   // values read from outside the group (constants included)
  std::vector<graph::ValueId> outputs;  // values the group materialises for others
  std::vector<OperandSlot> slots;
  std::vector<std::shared_ptr<const graph::Tensor>> owned;  // derived constants (attention masks)
  kernels::ElementwiseDesc elementwise;
  kernels::RowwiseDesc rowwise;
  kernels::GemmDesc gemm;
  kernels::AttentionDesc attention;
  kernels::ConvDesc conv;
  kernels::PoolDesc pool;
  kernels::ConvChainDesc conv_chain;
  std::string summary;  // one line for reports: "GEMM 16x32x32 +bias +GELU(erf)"

  // Adds a slot and returns the pointer that stands for it in a descriptor.
  float* AddSlot(graph::ValueId value, int64_t offset = 0);
  // True when a slot binds `value`: the kernel reads it as an operand at run
  // time (weights), rather than the matcher reading its contents.
  bool BindsValue(graph::ValueId value) const;
  float* AddOwned(std::shared_ptr<const graph::Tensor> tensor);
};

// Calls `visit` on every data pointer of the instance's descriptor (the
// runtime replaces slot pointers with buffer addresses this way).
void VisitDescriptorPointers(KernelInstance& instance, const std::function<void(float*&)>& visit);
void VisitDescriptorPointers(KernelInstance& instance,
                             const std::function<void(const float*&)>& visit_const,
                             const std::function<void(float*&)>& visit_mutable);

}  // namespace fusetune::fusion_space
