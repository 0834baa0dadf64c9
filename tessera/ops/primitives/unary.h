// Elementwise primitives of one input. The op functions (ops/unary.cpp) cast
// the input to the dtype the kernel computes in (float-out ops lift integers
// to float32); the output has the input's shape and the dtype of the op's rule.
// Kernels: backend/cpu/unary.cpp, scalar functors in backend/cpu/elementwise.h.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/core/primitive.h"

namespace tessera {

namespace detail {
// The one message of the elementwise ops for a dtype they reject:
// "[negative] dtype bool is not supported (expected a number)".
[[noreturn]] void throw_unsupported_dtype(const char* op, Dtype t, const char* expected);

// Shared by the transform rules of the elementwise primitives (ops/rules/unary.cpp).
// Zeros like each primal in argnums: the vjp of a piecewise-constant function.
std::vector<array> zero_vjps(const std::vector<array>& primals, const std::vector<int>& argnums,
                             const Stream& s);
// vmap of an elementwise op: the mapped axis of each batched input is moved to
// that of the first batched input, unbatched inputs are broadcast along it, and
// op's outputs on these inputs are mapped along it too.
std::pair<std::vector<array>, std::vector<int>> vmap_elementwise(
    const std::vector<array>& inputs, const std::vector<int>& axes,
    const std::function<std::vector<array>(const std::vector<array>&)>& op, const Stream& s);
}  // namespace detail

// Defines the rules of a piecewise-constant primitive (in ops/rules/): zero
// derivatives; the output is bool or has the first input's shape and dtype.
#define TESSERA_DEFINE_ZERO_DERIVATIVES(NAME, BOOL_OUT)                                  \
  std::vector<array> NAME::jvp(const std::vector<array>& primals,                        \
                               const std::vector<array>&, const std::vector<int>&) {     \
    const array& x = primals[0];                                                         \
    return {zeros(x.shape(), BOOL_OUT ? bool_ : x.dtype(), stream())};                   \
  }                                                                                      \
  std::vector<array> NAME::vjp(const std::vector<array>& primals,                        \
                               const std::vector<array>&, const std::vector<int>& argnums, \
                               const std::vector<array>&) {                              \
    return detail::zero_vjps(primals, argnums, stream());                                \
  }

// A primitive without parameters, with a CPU kernel (also used by binary.h).
#define TESSERA_ELEMENTWISE_PRIMITIVE(NAME)                              \
  class NAME : public UnaryPrimitive {                                   \
   public:                                                               \
    using UnaryPrimitive::UnaryPrimitive;                                \
    void eval_cpu(const std::vector<array>& inputs, array& out) override; \
    void eval_gpu(const std::vector<array>& inputs, array& out) override; \
    TESSERA_TRANSFORM_RULES                                            \
    TESSERA_PRIMITIVE_NAME(NAME)                                         \
    bool is_equivalent(const Primitive&) const override { return true; } \
  };

TESSERA_ELEMENTWISE_PRIMITIVE(Abs)
TESSERA_ELEMENTWISE_PRIMITIVE(Negative)
TESSERA_ELEMENTWISE_PRIMITIVE(Sign)
TESSERA_ELEMENTWISE_PRIMITIVE(LogicalNot)
TESSERA_ELEMENTWISE_PRIMITIVE(Reciprocal)
TESSERA_ELEMENTWISE_PRIMITIVE(Floor)
TESSERA_ELEMENTWISE_PRIMITIVE(Ceil)
TESSERA_ELEMENTWISE_PRIMITIVE(Trunc)
TESSERA_ELEMENTWISE_PRIMITIVE(Square)
TESSERA_ELEMENTWISE_PRIMITIVE(Exp)
TESSERA_ELEMENTWISE_PRIMITIVE(Expm1)
TESSERA_ELEMENTWISE_PRIMITIVE(Sqrt)
TESSERA_ELEMENTWISE_PRIMITIVE(Rsqrt)
TESSERA_ELEMENTWISE_PRIMITIVE(Sin)
TESSERA_ELEMENTWISE_PRIMITIVE(Cos)
TESSERA_ELEMENTWISE_PRIMITIVE(Tan)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcSin)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcCos)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcTan)
TESSERA_ELEMENTWISE_PRIMITIVE(Sinh)
TESSERA_ELEMENTWISE_PRIMITIVE(Cosh)
TESSERA_ELEMENTWISE_PRIMITIVE(Tanh)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcSinh)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcCosh)
TESSERA_ELEMENTWISE_PRIMITIVE(ArcTanh)
TESSERA_ELEMENTWISE_PRIMITIVE(Degrees)
TESSERA_ELEMENTWISE_PRIMITIVE(Radians)
TESSERA_ELEMENTWISE_PRIMITIVE(Log)
TESSERA_ELEMENTWISE_PRIMITIVE(Log2)
TESSERA_ELEMENTWISE_PRIMITIVE(Log10)
TESSERA_ELEMENTWISE_PRIMITIVE(Log1p)
TESSERA_ELEMENTWISE_PRIMITIVE(Sigmoid)
TESSERA_ELEMENTWISE_PRIMITIVE(Erf)
TESSERA_ELEMENTWISE_PRIMITIVE(ErfInv)
TESSERA_ELEMENTWISE_PRIMITIVE(Conjugate)
// Real / imaginary part: float32 of complex64 input; of real input the value
// itself / zeros of the input's dtype.
TESSERA_ELEMENTWISE_PRIMITIVE(Real)
TESSERA_ELEMENTWISE_PRIMITIVE(Imag)
TESSERA_ELEMENTWISE_PRIMITIVE(BitwiseInvert)
TESSERA_ELEMENTWISE_PRIMITIVE(IsNan)
TESSERA_ELEMENTWISE_PRIMITIVE(IsInf)
TESSERA_ELEMENTWISE_PRIMITIVE(IsFinite)
TESSERA_ELEMENTWISE_PRIMITIVE(IsPosInf)
TESSERA_ELEMENTWISE_PRIMITIVE(IsNegInf)
// The identity, whose gradient is zero: the output is a view of the input.
TESSERA_ELEMENTWISE_PRIMITIVE(StopGradient)


// Round half to even at `decimals` places.
class Round : public UnaryPrimitive {
 public:
  Round(Stream s, int decimals) : UnaryPrimitive(s), decimals_(decimals) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  void eval_gpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_TRANSFORM_RULES
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
  void eval_gpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_TRANSFORM_RULES
  TESSERA_PRIMITIVE_NAME(NanToNum)
  bool is_equivalent(const Primitive& other) const override;

 private:
  float nan_;
  std::optional<float> posinf_, neginf_;
};

}  // namespace tessera
