// Elementwise primitives of one input. The op functions (ops/unary.cpp) cast
// the input to the dtype the kernel computes in (float-out ops lift integers
// to float32); the output has the input's shape and the dtype of the op's rule.
// Kernels: backend/cpu/unary.cpp and backend/cuda/unary.cu, scalar functors in backend/common/elementwise.h.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "tessera/core/primitive.h"
#include "tessera/ops/elementwise_table.h"

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

// A primitive without parameters (also used by binary.h).
#define TESSERA_ELEMENTWISE_PRIMITIVE(NAME) \
  class NAME : public UnaryPrimitive {      \
   public:                                  \
    using UnaryPrimitive::UnaryPrimitive;   \
    TESSERA_PRIMITIVE(NAME)                 \
  };

// The primitives of TESSERA_UNARY_OPS (Note [Elementwise tables] in ops/elementwise_table.h).
#define TESSERA_ELEMENTWISE_ROW(NAME, FN, RULE) TESSERA_ELEMENTWISE_PRIMITIVE(NAME)
TESSERA_UNARY_OPS(TESSERA_ELEMENTWISE_ROW)
#undef TESSERA_ELEMENTWISE_ROW
// Of those, Real / Imag: float32 of complex64 input; of real input the value
// itself / zeros of the input's dtype.

// The identity, whose gradient is zero: the output is a view of the input.
TESSERA_ELEMENTWISE_PRIMITIVE(StopGradient)

// Round half to even at `decimals` places.
class Round : public UnaryPrimitive {
 public:
  Round(Stream s, int decimals) : UnaryPrimitive(s), decimals_(decimals) {}
  TESSERA_PRIMITIVE(Round, decimals_)

 private:
  int decimals_;
};

// Replaces NaN, +inf and -inf; an unset infinity replacement means the
// dtype's largest / lowest finite value.
class NanToNum : public UnaryPrimitive {
 public:
  NanToNum(Stream s, float nan, std::optional<float> posinf, std::optional<float> neginf)
      : UnaryPrimitive(s), nan_(nan), posinf_(posinf), neginf_(neginf) {}
  TESSERA_PRIMITIVE(NanToNum, nan_, posinf_, neginf_)

 private:
  float nan_;
  std::optional<float> posinf_, neginf_;
};

}  // namespace tessera
