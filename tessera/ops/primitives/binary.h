// Elementwise primitives of two (Select: three) inputs. The op functions
// (ops/binary.cpp) promote the inputs to one dtype and broadcast them to the
// output shape, so kernels see inputs of equal shape and dtype.
// Kernels: backend/cpu/binary.cpp, scalar functors in backend/cpu/elementwise.h.
//
// Integer semantics (see Note [Integer semantics] in backend/cpu/elementwise.h):
// arithmetic wraps; division and remainder by zero give 0 (no trap);
// floor_divide of integers is native (truncating) division (core.md §3.4),
// remainder takes the sign of the divisor (Python); an integer to a negative
// power is the truncated real result (0 unless the base is 1 or -1); shifts by
// a negative count or by at least the bit width give 0 (-1 for a right shift
// of a negative value).
#pragma once

#include "tessera/core/primitive.h"
#include "tessera/ops/primitives/unary.h"

namespace tessera {

TESSERA_ELEMENTWISE_PRIMITIVE(Add)
TESSERA_ELEMENTWISE_PRIMITIVE(Subtract)
TESSERA_ELEMENTWISE_PRIMITIVE(Multiply)
TESSERA_ELEMENTWISE_PRIMITIVE(Divide)
TESSERA_ELEMENTWISE_PRIMITIVE(FloorDivide)
TESSERA_ELEMENTWISE_PRIMITIVE(Remainder)
TESSERA_ELEMENTWISE_PRIMITIVE(Power)
TESSERA_ELEMENTWISE_PRIMITIVE(Maximum)
TESSERA_ELEMENTWISE_PRIMITIVE(Minimum)
TESSERA_ELEMENTWISE_PRIMITIVE(LogAddExp)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcTan2)
TESSERA_ELEMENTWISE_PRIMITIVE(NotEqual)
TESSERA_ELEMENTWISE_PRIMITIVE(Greater)
TESSERA_ELEMENTWISE_PRIMITIVE(GreaterEqual)
TESSERA_ELEMENTWISE_PRIMITIVE(Less)
TESSERA_ELEMENTWISE_PRIMITIVE(LessEqual)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalAnd)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalOr)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalXor)
TESSERA_ELEMENTWISE_PRIMITIVE(BitwiseAnd)
TESSERA_ELEMENTWISE_PRIMITIVE(BitwiseOr)
TESSERA_ELEMENTWISE_PRIMITIVE(BitwiseXor)
TESSERA_ELEMENTWISE_PRIMITIVE(LeftShift)
TESSERA_ELEMENTWISE_PRIMITIVE(RightShift)
// condition ? x : y over inputs {condition (bool_), x, y}.
TESSERA_ELEMENTWISE_PRIMITIVE(Select)
// A bool_ scalar: every element of the (bool_) input is true. Used by allclose
// and array_equal.
TESSERA_ELEMENTWISE_PRIMITIVE(AllTrue)


// a == b; with equal_nan, NaN equals NaN.
class Equal : public UnaryPrimitive {
 public:
  Equal(Stream s, bool equal_nan) : UnaryPrimitive(s), equal_nan_(equal_nan) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  void eval_gpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_TRANSFORM_RULES
  TESSERA_PRIMITIVE_NAME(Equal)
  bool is_equivalent(const Primitive& other) const override;

 private:
  bool equal_nan_;
};

// |a - b| <= atol + rtol * |b| (computed in double).
class IsClose : public UnaryPrimitive {
 public:
  IsClose(Stream s, double rtol, double atol, bool equal_nan)
      : UnaryPrimitive(s), rtol_(rtol), atol_(atol), equal_nan_(equal_nan) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  void eval_gpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_TRANSFORM_RULES
  TESSERA_PRIMITIVE_NAME(IsClose)
  bool is_equivalent(const Primitive& other) const override;

 private:
  double rtol_, atol_;
  bool equal_nan_;
};

// Outputs {a // b, a % b} in one node (floor_divide and remainder semantics).
class DivMod : public Primitive {
 public:
  using Primitive::Primitive;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_TRANSFORM_RULES
  TESSERA_PRIMITIVE_NAME(DivMod)
  bool is_equivalent(const Primitive&) const override { return true; }
};

}  // namespace tessera
