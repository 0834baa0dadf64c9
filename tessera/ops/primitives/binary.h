// Elementwise primitives of two (Select: three) inputs. The op functions
// (ops/binary.cpp) promote the inputs to one dtype and broadcast them to the
// output shape, so kernels see inputs of equal shape and dtype.
// Kernels: backend/cpu/binary.cpp and backend/cuda/binary.cu, scalar functors in backend/common/elementwise.h.
//
// Integer semantics (see Note [Integer semantics] in backend/common/elementwise.h):
// arithmetic wraps; division and remainder by zero give 0 (no trap);
// floor_divide of integers is native (truncating) division (as in MLX),
// remainder takes the sign of the divisor (Python); an integer to a negative
// power is the truncated real result (0 unless the base is 1 or -1); shifts by
// a negative count or by at least the bit width give 0 (-1 for a right shift
// of a negative value).
#pragma once

#include "tessera/core/primitive.h"
#include "tessera/ops/elementwise_table.h"
#include "tessera/ops/primitives/unary.h"

namespace tessera {

// The primitives of TESSERA_BINARY_OPS (Note [Elementwise tables] in ops/elementwise_table.h).
#define TESSERA_ELEMENTWISE_ROW(NAME, FN, RULE) TESSERA_ELEMENTWISE_PRIMITIVE(NAME)
TESSERA_BINARY_OPS(TESSERA_ELEMENTWISE_ROW)
#undef TESSERA_ELEMENTWISE_ROW

// condition ? x : y over inputs {condition (bool_), x, y}.
TESSERA_ELEMENTWISE_PRIMITIVE(Select)
// A bool_ scalar: every element of the (bool_) input is true. Used by allclose
// and array_equal.
TESSERA_ELEMENTWISE_PRIMITIVE(AllTrue)

// a == b; with equal_nan, NaN equals NaN.
class Equal : public UnaryPrimitive {
 public:
  Equal(Stream s, bool equal_nan) : UnaryPrimitive(s), equal_nan_(equal_nan) {}
  TESSERA_PRIMITIVE(Equal, equal_nan_)

 private:
  bool equal_nan_;
};

// |a - b| <= atol + rtol * |b| (computed in double).
class IsClose : public UnaryPrimitive {
 public:
  IsClose(Stream s, double rtol, double atol, bool equal_nan)
      : UnaryPrimitive(s), rtol_(rtol), atol_(atol), equal_nan_(equal_nan) {}
  TESSERA_PRIMITIVE(IsClose, rtol_, atol_, equal_nan_)

 private:
  double rtol_, atol_;
  bool equal_nan_;
};

// Outputs {a // b, a % b} in one node (floor_divide and remainder semantics).
class DivMod : public Primitive {
 public:
  using Primitive::Primitive;
  TESSERA_PRIMITIVE_MULTI(DivMod)
};

}  // namespace tessera
