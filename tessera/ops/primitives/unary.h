// Elementwise primitives of one input. The op functions (ops/unary.cpp) cast
// the input to the dtype the kernel computes in (float-out ops lift integers
// to float32); the output has the input's shape and the dtype of the op's rule.
// Kernels: backend/cpu/unary.cpp, scalar functors in backend/cpu/elementwise.h.
#pragma once

#include <optional>

#include "tessera/core/primitive.h"

namespace tessera {

namespace detail {
// The one message of the elementwise ops for a dtype they reject:
// "[negative] dtype bool is not supported (expected a number)".
[[noreturn]] void throw_unsupported_dtype(const char* op, Dtype t, const char* expected);
}  // namespace detail

#define TESSERA_UNARY_PRIMITIVE(NAME)                                    \
  class NAME : public UnaryPrimitive {                                   \
   public:                                                               \
    using UnaryPrimitive::UnaryPrimitive;                                \
    void eval_cpu(const std::vector<array>& inputs, array& out) override; \
    TESSERA_PRIMITIVE_NAME(NAME)                                         \
    bool is_equivalent(const Primitive&) const override { return true; } \
  };

TESSERA_UNARY_PRIMITIVE(Abs)
TESSERA_UNARY_PRIMITIVE(Negative)
TESSERA_UNARY_PRIMITIVE(Sign)
TESSERA_UNARY_PRIMITIVE(LogicalNot)
TESSERA_UNARY_PRIMITIVE(Reciprocal)
TESSERA_UNARY_PRIMITIVE(Floor)
TESSERA_UNARY_PRIMITIVE(Ceil)
TESSERA_UNARY_PRIMITIVE(Trunc)
TESSERA_UNARY_PRIMITIVE(Square)
TESSERA_UNARY_PRIMITIVE(Exp)
TESSERA_UNARY_PRIMITIVE(Expm1)
TESSERA_UNARY_PRIMITIVE(Sqrt)
TESSERA_UNARY_PRIMITIVE(Rsqrt)
TESSERA_UNARY_PRIMITIVE(Sin)
TESSERA_UNARY_PRIMITIVE(Cos)
TESSERA_UNARY_PRIMITIVE(Tan)
TESSERA_UNARY_PRIMITIVE(ArcSin)
TESSERA_UNARY_PRIMITIVE(ArcCos)
TESSERA_UNARY_PRIMITIVE(ArcTan)
TESSERA_UNARY_PRIMITIVE(Sinh)
TESSERA_UNARY_PRIMITIVE(Cosh)
TESSERA_UNARY_PRIMITIVE(Tanh)
TESSERA_UNARY_PRIMITIVE(ArcSinh)
TESSERA_UNARY_PRIMITIVE(ArcCosh)
TESSERA_UNARY_PRIMITIVE(ArcTanh)
TESSERA_UNARY_PRIMITIVE(Degrees)
TESSERA_UNARY_PRIMITIVE(Radians)
TESSERA_UNARY_PRIMITIVE(Log)
TESSERA_UNARY_PRIMITIVE(Log2)
TESSERA_UNARY_PRIMITIVE(Log10)
TESSERA_UNARY_PRIMITIVE(Log1p)
TESSERA_UNARY_PRIMITIVE(Sigmoid)
TESSERA_UNARY_PRIMITIVE(Erf)
TESSERA_UNARY_PRIMITIVE(ErfInv)
TESSERA_UNARY_PRIMITIVE(Conjugate)
// Real / imaginary part: float32 of complex64 input; of real input the value
// itself / zeros of the input's dtype.
TESSERA_UNARY_PRIMITIVE(Real)
TESSERA_UNARY_PRIMITIVE(Imag)
TESSERA_UNARY_PRIMITIVE(BitwiseInvert)
TESSERA_UNARY_PRIMITIVE(IsNan)
TESSERA_UNARY_PRIMITIVE(IsInf)
TESSERA_UNARY_PRIMITIVE(IsFinite)
TESSERA_UNARY_PRIMITIVE(IsPosInf)
TESSERA_UNARY_PRIMITIVE(IsNegInf)
// The identity, whose gradient is zero: the output is a view of the input.
TESSERA_UNARY_PRIMITIVE(StopGradient)

#undef TESSERA_UNARY_PRIMITIVE

// Round half to even at `decimals` places.
class Round : public UnaryPrimitive {
 public:
  Round(Stream s, int decimals) : UnaryPrimitive(s), decimals_(decimals) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_PRIMITIVE_NAME(Round)
  bool is_equivalent(const Primitive& other) const override;
  int decimals() const { return decimals_; }

 private:
  int decimals_;
};

// Replaces NaN, +inf and -inf; an unset infinity replacement means the
// dtype's largest / lowest finite value.
class NanToNum : public UnaryPrimitive {
 public:
  NanToNum(Stream s, float nan, std::optional<float> posinf, std::optional<float> neginf)
      : UnaryPrimitive(s), nan_(nan), posinf_(posinf), neginf_(neginf) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_PRIMITIVE_NAME(NanToNum)
  bool is_equivalent(const Primitive& other) const override;

 private:
  float nan_;
  std::optional<float> posinf_, neginf_;
};

}  // namespace tessera
