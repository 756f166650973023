// Tile programs: a small DAG of elementwise ops and last-axis reductions that
// the row-reduction and elementwise templates evaluate over a tile held in the
// local buffer. A group is compiled once into a program; running it on a tile
// is one vectorised loop per instruction, so no compiler is needed per group.
//
// Values have one of three shapes within a tile of R rows x W columns:
//   wide    R x W  (a loaded row-major operand, or anything combined with one)
//   vector  W      (an operand broadcast over rows, such as LayerNorm's gamma)
//   narrow  R      (one value per row: reductions, per-row operands, constants)
// Binary ops broadcast like NumPy between these; reductions take a wide value
// to a narrow one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace fusetune::kernels {

enum class TileOp : uint8_t {
  kInput,  // operand `input` of the kernel descriptor
  kConst,  // `value`
  // unary
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kSquare,
  kTanh,
  kErf,
  kSigmoid,
  kRelu,
  kGeluErf,
  kGeluTanh,
  kSilu,
  // binary
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  // reductions over the last axis of a wide value
  kReduceSum,
  kReduceMean,
  kReduceMax,
  kReduceMin,
};

const char* TileOpName(TileOp op);
bool IsUnary(TileOp op);
bool IsBinary(TileOp op);
bool IsReduction(TileOp op);

enum class ValueShape : uint8_t { kWide, kVector, kNarrow };

struct TileInstr {
  TileOp op;
  int a = -1, b = -1;  // operand values (instruction indices)
  int input = -1;      // for kInput
  float value = 0;     // for kConst
};

class TileProgram {
 public:
  int Input(int index);
  int Const(float value);
  int Unary(TileOp op, int a);
  int Binary(TileOp op, int a, int b);
  int Reduce(TileOp op, int a);
  void Output(int value) { outputs_.push_back(value); }

  const std::vector<TileInstr>& instrs() const { return instrs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  int num_inputs() const;
  bool has_reductions() const;
  // Transcendental evaluations per element of the row (exp, log, erf, ...), for cost models.
  int transcendentals() const;
  std::string ToString() const;
  // Checks operand indices and kinds; `where` prefixes errors ("rowwise.program").
  Status Validate(const std::string& where) const;

 private:
  int Add(TileInstr instr);
  std::vector<TileInstr> instrs_;
  std::vector<int> outputs_;
};

// A program prepared for one set of input shapes: the shape of every value
// and a slot in the tile frame, reusing slots of values that are dead.
class TileSchedule {
 public:
  // `input_shapes[i]` is how operand i is laid out in the frame.
  static Result<TileSchedule> Make(const TileProgram& program,
                                   const std::vector<ValueShape>& input_shapes,
                                   const std::string& where);
  // Floats of frame a tile of rows x width needs.
  int64_t FrameFloats(int64_t rows, int64_t width) const;
  ValueShape shape(int value) const { return shapes_[value]; }
  int num_slots() const { return static_cast<int>(slot_shape_.size()); }

  // Addresses of each value's storage within `frame` for a tile of rows x width.
  struct Frame {
    std::vector<float*> value;
  };
  Frame Bind(float* frame, int64_t rows, int64_t width) const;
  // Evaluates every non-input instruction; inputs must already be in the frame.
  // `unroll` (1, 2 or 4) is the number of independent 16-lane accumulators per reduction.
  void Compute(const Frame& frame, int64_t rows, int64_t width, int unroll) const;

  const TileProgram& program() const { return program_; }

 private:
  TileProgram program_;
  std::vector<ValueShape> shapes_;
  std::vector<int> slot_of_;  // per value
  std::vector<ValueShape> slot_shape_;
};

}  // namespace fusetune::kernels
