// Compiled: a chain of elementwise ops fused into one node by compile
// (transforms/compile.cpp), run as one pass over the output on each device.
//
//   FusedProgram p;                       // exp(x) * y
//   p.num_inputs = 2;
//   p.steps = {{FusedOp::Exp, {0}, float32, exp_primitive},
//              {FusedOp::Multiply, {2, 1}, float32, multiply_primitive}};
//   array z(shape, float32, std::make_shared<Compiled>(s, p), {x, y});
//
// Note [Fused programs]
// Registers are numbered inputs first (0 .. num_inputs - 1), then one per
// step, in order; the registers of `outputs` are written out, in that order
// (empty: the last step's alone). The last step is always an output: a step
// whose value no output needs is not in the program. Every step computes
// an array of the output's shape, except that an input may have fewer or
// size-1 dimensions: it is read broadcast to the output shape (NumPy's rule),
// and Broadcast steps, which only rename such an input, move no data (nor do
// Copy steps). Each step runs the scalar functor of its op (backend/common/elementwise.h) on the
// compute type of its first operand (Select: of its second) and stores the
// result in the step's dtype, exactly as the unfused kernel does, so that
// fused and unfused results are equal (16-bit floats are rounded after every
// step). Each step keeps the primitive it replaces: the transform rules run
// the program as those primitives again (Compiled::unfused), so derivatives
// and vmap see the original graph.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/core/primitive.h"
#include "tessera/ops/elementwise_table.h"

namespace tessera {

enum class FusedOp : uint8_t {
#define TESSERA_FUSED_ROW(NAME, FN, RULE) NAME,
  TESSERA_UNARY_OPS(TESSERA_FUSED_ROW) TESSERA_BINARY_OPS(TESSERA_FUSED_ROW)
#undef TESSERA_FUSED_ROW
  Equal,      // scalar::Equal
  EqualNan,   // scalar::EqualNan (Equal with equal_nan)
  Round,      // scalar::Round{params[0] decimals}
  NanToNum,   // scalar::NanToNum{params[0..2]: nan, posinf, neginf}
  IsClose,    // scalar::IsClose{params[0..2]: rtol, atol, equal_nan}
  Select,     // condition ? x : y
  AsType,     // cast_to the step's dtype
  Broadcast,  // the input itself, read broadcast
  Copy,       // the input itself
};

// The number of operands of op (1, 2 or 3).
int fused_arity(FusedOp op);
// The scalar functor's name ("Exp" for scalar::Exp); Select, AsType,
// Broadcast and Copy run no functor and give their own names.
const char* fused_op_name(FusedOp op);
// The fused op that p computes, if compile may fuse it.
std::optional<FusedOp> fused_op_of(const Primitive& p);

struct FusedStep {
  FusedOp op;
  std::vector<uint32_t> args;  // registers (Note [Fused programs])
  Dtype dtype;                 // of the result
  std::shared_ptr<Primitive> primitive;  // the node this step replaces
  std::vector<double> params = {};       // the functor's parameters (Round, NanToNum, IsClose)
};

// The functor parameters of a step of op computing `dtype` from primitive p
// (empty for the ops without parameters).
std::vector<double> fused_params(FusedOp op, const Primitive& p, Dtype dtype);

struct FusedProgram {
  uint32_t num_inputs = 0;
  std::vector<FusedStep> steps;
  Shape shape;                    // of the outputs and of every step
  std::vector<uint32_t> outputs;  // registers written out; empty: the last step's

  // The registers written out, in the order of the node's outputs.
  std::vector<uint32_t> output_registers() const {
    if (!outputs.empty()) return outputs;
    return {num_inputs + static_cast<uint32_t>(steps.size()) - 1};
  }
};

// One node with an output per register of program.output_registers().
class Compiled : public Primitive {
 public:
  Compiled(Stream s, FusedProgram program) : Primitive(s), program_(std::move(program)) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_EVAL_GPU_MULTI
  TESSERA_PRIMITIVE_NAME(Compiled)
  TESSERA_TRANSFORM_RULES
  void print(std::ostream& os) const override;

  const FusedProgram& program() const { return program_; }
  // True for the steps that only rename a register (Broadcast, Copy).
  static bool renames(FusedOp op) { return op == FusedOp::Broadcast || op == FusedOp::Copy; }
  // The dtype of register r on these inputs.
  Dtype register_dtype(const std::vector<array>& inputs, uint32_t r) const {
    return r < program_.num_inputs ? inputs[r].dtype() : program_.steps[r - program_.num_inputs].dtype;
  }
  // The program as a graph of its original primitives on `inputs`: its outputs.
  std::vector<array> unfused(const std::vector<array>& inputs) const;

 private:
  FusedProgram program_;
  // The GPU backend's kernels for this program, by the layout of the inputs.
  std::mutex kernels_mutex_;
  std::unordered_map<std::string, void*> kernels_;
};

}  // namespace tessera
