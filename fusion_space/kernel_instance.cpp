#include "fusion_space/kernel_instance.h"

#include <algorithm>
#include <functional>

#include "common/check.h"

namespace fusetune::fusion_space {

namespace {
float g_slot_anchor[kMaxOperandSlots];
}  // namespace

const char* KernelTemplateName(KernelTemplate t) {
  switch (t) {
    case KernelTemplate::kReference:
      return "reference";
    case KernelTemplate::kElementwise:
      return "elementwise";
    case KernelTemplate::kRowwise:
      return "rowwise";
    case KernelTemplate::kGemm:
      return "gemm";
    case KernelTemplate::kAttention:
      return "attention";
    case KernelTemplate::kConv:
      return "conv";
    case KernelTemplate::kPool:
      return "pool";
    case KernelTemplate::kConvChain:
      return "conv_chain";
  }
  return "?";
}

std::optional<KernelTemplate> KernelTemplateFromName(const std::string& name) {
  for (int i = 0; i < kNumKernelTemplates; ++i)
    if (name == KernelTemplateName(static_cast<KernelTemplate>(i)))
      return static_cast<KernelTemplate>(i);
  return std::nullopt;
}

int KernelTemplateVersion(KernelTemplate t) {
  switch (t) {
    case KernelTemplate::kReference:
      return 1;
    case KernelTemplate::kAttention:
      return 3;  // 3: K and V packed once per head per thread (tiles dealt by head)
    case KernelTemplate::kGemm:
      return 5;  // 3: constant B pre-packed per tiling; 4: its panels carried by the micro-kernels;
                 // 5: a bf16 GEMM's GELU piecewise (gelu_piecewise.h), B refilled in place
    case KernelTemplate::kConv:
      return 7;  // 2: depthwise tiles hold oc_block channels (1 before);
                 // 3: Winograd's GEMMs take tiles as rows and channels as columns;
                 // 4: Winograd's next weight panels carried by the micro-kernels,
                 //    bands that are X's rows copied as one run;
                 // 5: outputs that fit the last-level cache written with plain
                 //    stores (kernels/traffic.h StreamsOutput);
                 // 6: direct convs read a 1x1's NCHW16c input as it lies and
                 //    finish NCHW16c outputs in their blocks (conv_direct.cpp);
                 // 7: NCHW outputs of the direct conv and of the NCHW16c
                 //    depthwise finished in their blocks, transposed as they
                 //    are copied out (conv_finish_blocks.cpp)
    case KernelTemplate::kPool:
      return 2;  // 2: outputs that fit the last-level cache written with plain stores
    case KernelTemplate::kConvChain:
      return 4;  // 2: the depthwise activation once per block, panels packed by vectors;
                 // 3: each block's weights copied into the local buffer;
                 // 4: outputs that fit the last-level cache written with plain stores
    case KernelTemplate::kElementwise:
    case KernelTemplate::kRowwise:
      return 2;  // 2: Pow by a constant exponent strength-reduced (tile_program.cpp)
  }
  return 1;
}

std::map<std::string, int> KernelTemplateVersions() {
  std::map<std::string, int> versions;
  for (KernelTemplate t :
       {KernelTemplate::kReference, KernelTemplate::kElementwise, KernelTemplate::kRowwise,
        KernelTemplate::kGemm, KernelTemplate::kAttention, KernelTemplate::kConv,
        KernelTemplate::kPool, KernelTemplate::kConvChain})
    versions[KernelTemplateName(t)] = KernelTemplateVersion(t);
  return versions;
}

float* SlotPointer(int slot) {
  FT_CHECK(slot >= 0 && slot < kMaxOperandSlots, "operand slot out of range");
  return &g_slot_anchor[slot];
}

int SlotIndex(const float* pointer) {
  std::less<const float*> less;
  if (pointer == nullptr || less(pointer, &g_slot_anchor[0]) ||
      !less(pointer, &g_slot_anchor[0] + kMaxOperandSlots))
    return -1;
  return static_cast<int>(pointer - &g_slot_anchor[0]);
}

bool KernelInstance::BindsValue(graph::ValueId value) const {
  return std::any_of(slots.begin(), slots.end(),
                     [value](const OperandSlot& s) { return s.value == value; });
}

float* KernelInstance::AddSlot(graph::ValueId value, int64_t offset) {
  slots.push_back({value, -1, offset});
  return SlotPointer(static_cast<int>(slots.size()) - 1);
}

float* KernelInstance::AddOwned(std::shared_ptr<const graph::Tensor> tensor) {
  owned.push_back(std::move(tensor));
  slots.push_back({graph::kNoValue, static_cast<int>(owned.size()) - 1, 0});
  return SlotPointer(static_cast<int>(slots.size()) - 1);
}

namespace {

void VisitEpilogue(std::vector<kernels::EpilogueOp>& ops,
                   const std::function<void(const float*&)>& visit) {
  for (auto& op : ops)
    if (op.data) visit(op.data);
}

}  // namespace

void VisitDescriptorPointers(KernelInstance& k,
                             const std::function<void(const float*&)>& visit_const,
                             const std::function<void(float*&)>& visit_mutable) {
  switch (k.kind) {
    case KernelTemplate::kReference:
      return;
    case KernelTemplate::kElementwise:
      for (auto& in : k.elementwise.inputs) visit_const(in.data);
      for (auto& out : k.elementwise.outputs) visit_mutable(out);
      for (auto& piece : k.elementwise.pieces) {
        for (auto& in : piece.inputs) visit_const(in.data);
        for (auto& out : piece.outputs) visit_mutable(out);
      }
      return;
    case KernelTemplate::kRowwise:
      for (auto& in : k.rowwise.inputs) visit_const(in.data);
      for (auto& out : k.rowwise.outputs) visit_mutable(out.data);
      return;
    case KernelTemplate::kGemm: {
      auto& d = k.gemm;
      visit_const(d.a);
      VisitEpilogue(d.prologue.elementwise, visit_const);
      if (d.prologue.gamma) visit_const(d.prologue.gamma);
      if (d.prologue.beta) visit_const(d.prologue.beta);
      for (auto& out : d.outputs) {
        visit_const(out.b);
        if (out.c) visit_mutable(out.c);
        VisitEpilogue(out.epilogue, visit_const);
      }
      return;
    }
    case KernelTemplate::kAttention: {
      auto& d = k.attention;
      visit_const(d.q.data);
      visit_const(d.k.data);
      visit_const(d.v.data);
      visit_mutable(d.o);
      if (d.mask_data.data) visit_const(d.mask_data.data);
      return;
    }
    case KernelTemplate::kConv: {  // w_packed is set after binding, by the runtime
      auto& d = k.conv;
      visit_const(d.x);
      visit_const(d.w);
      if (d.bias) visit_const(d.bias);
      visit_mutable(d.y);
      VisitEpilogue(d.epilogue, visit_const);
      return;
    }
    case KernelTemplate::kPool:
      visit_const(k.pool.x);
      visit_mutable(k.pool.y);
      return;
    case KernelTemplate::kConvChain: {  // w_packed is set after binding, by the runtime
      auto& d = k.conv_chain;
      for (const float** p :
           {&d.x, &d.expand_w, &d.expand_bias, &d.dw_w, &d.dw_bias, &d.project_w, &d.project_bias})
        if (*p) visit_const(*p);
      visit_mutable(d.y);
      VisitEpilogue(d.epilogue, visit_const);
      return;
    }
  }
}

void VisitDescriptorPointers(KernelInstance& k, const std::function<void(float*&)>& visit) {
  VisitDescriptorPointers(
      k,
      [&](const float*& p) {
        float* q = const_cast<float*>(p);
        visit(q);
        p = q;
      },
      visit);
}

}  // namespace fusetune::fusion_space
