// Transform rules of the elementwise primitives of one input
// (ops/primitives/unary.h), and the helpers they share with ops/rules/binary.cpp.
//
// Note [Elementwise derivatives]
// A rule is the derivative of the real function, or of the holomorphic one for
// complex inputs: jvp = tangent * f'(x), vjp = cotangent * conj(f'(x)) (MLX's
// convention: the vjp is the adjoint of the jvp for the real inner product
// Re(conj(a) * b)). Non-holomorphic functions (abs, real, imag, conjugate)
// follow the same adjoint rule. A result of integer or bool dtype, or a
// piecewise-constant one (floor, sign, comparisons), has zero derivatives: the
// vjp is zeros like the primal, the jvp zeros of the output's shape and dtype.
// vmap applies the op to the batched inputs (detail::vmap_elementwise).
#include <numbers>
#include <stdexcept>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/unary.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"

namespace tessera {

std::vector<array> detail::zero_vjps(const std::vector<array>& primals,
                                     const std::vector<int>& argnums, const Stream& s) {
  std::vector<array> vjps;
  for (int arg : argnums) vjps.push_back(zeros_like(primals[arg], s));
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> detail::vmap_elementwise(
    const std::vector<array>& inputs, const std::vector<int>& axes,
    const std::function<std::vector<array>(const std::vector<array>&)>& op, const Stream& s) {
  int axis = -1;
  Shape shape;
  for (size_t i = 0; i < inputs.size() && axis < 0; ++i) {
    if (axes[i] >= 0) {
      axis = axes[i];
      shape = inputs[i].shape();
    }
  }
  std::vector<array> aligned;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axis < 0 || axes[i] == axis) {
      aligned.push_back(inputs[i]);
    } else if (axes[i] >= 0) {
      aligned.push_back(moveaxis(inputs[i], axes[i], axis, s));
    } else {
      aligned.push_back(broadcast_to(expand_dims(inputs[i], axis, s), shape, s));
    }
  }
  auto outputs = op(aligned);
  return {outputs, std::vector<int>(outputs.size(), axis)};
}

namespace {

// v in the dtype of `like`, so that constants never promote a 16-bit input.
array scalar(double v, const array& like) { return array(v, like.dtype()); }

std::vector<array> zero_jvp(const array& primal, Dtype out_dtype, const Stream& s) {
  return {zeros(primal.shape(), out_dtype, s)};
}

}  // namespace

// Derivatives f'(x) of the functions whose rules follow Note [Elementwise
// derivatives] directly, as expressions of x, y = f(x) and the stream s.
#define TESSERA_FOR_EACH_DERIVATIVE(X)                                                  \
  X(Reciprocal, negative(square(y, s), s))                                              \
  X(Square, multiply(scalar(2, x), x, s))                                               \
  X(Exp, y)                                                                             \
  X(Expm1, add(y, scalar(1, x), s))                                                     \
  X(Sqrt, divide(scalar(0.5, x), y, s))                                                 \
  X(Rsqrt, multiply(scalar(-0.5, x), divide(y, x, s), s))                               \
  X(Sin, cos(x, s))                                                                     \
  X(Cos, negative(sin(x, s), s))                                                        \
  X(Tan, add(scalar(1, x), square(y, s), s))                                            \
  X(ArcSin, rsqrt(subtract(scalar(1, x), square(x, s), s), s))                          \
  X(ArcCos, negative(rsqrt(subtract(scalar(1, x), square(x, s), s), s), s))             \
  X(ArcTan, reciprocal(add(scalar(1, x), square(x, s), s), s))                          \
  X(Sinh, cosh(x, s))                                                                   \
  X(Cosh, sinh(x, s))                                                                   \
  X(Tanh, subtract(scalar(1, x), square(y, s), s))                                      \
  X(ArcSinh, rsqrt(add(square(x, s), scalar(1, x), s), s))                              \
  X(ArcCosh, multiply(rsqrt(subtract(x, scalar(1, x), s), s),                           \
                      rsqrt(add(x, scalar(1, x), s), s), s))                            \
  X(ArcTanh, reciprocal(subtract(scalar(1, x), square(x, s), s), s))                    \
  X(Degrees, scalar(180 / std::numbers::pi, x))                                                     \
  X(Radians, scalar(std::numbers::pi / 180, x))                                                     \
  X(Log, reciprocal(x, s))                                                              \
  X(Log2, reciprocal(multiply(x, scalar(std::numbers::ln2, x), s), s))                              \
  X(Log10, reciprocal(multiply(x, scalar(std::numbers::ln10, x), s), s))                            \
  X(Log1p, reciprocal(add(x, scalar(1, x), s), s))                                      \
  X(Sigmoid, multiply(y, subtract(scalar(1, x), y, s), s))                              \
  X(Erf, multiply(scalar(2 * std::numbers::inv_sqrtpi, x), exp(negative(square(x, s), s), s), s))         \
  X(ErfInv, multiply(scalar(0.5 / std::numbers::inv_sqrtpi, x), exp(square(y, s), s), s))

// jvp recomputes y with a new node of the primitive (same dtype as x: these
// ops lift integers to float before the node; Square of an integer is zero).
#define TESSERA_DEFINE_DERIVATIVE_RULES(NAME, DERIVATIVE)                                  \
  namespace {                                                                            \
  array derivative_of_##NAME(const array& x, const array& y, const Stream& s) {          \
    return DERIVATIVE;                                                                   \
  }                                                                                      \
  }                                                                                      \
  std::vector<array> NAME::jvp(const std::vector<array>& primals,                        \
                               const std::vector<array>& tangents, const std::vector<int>&) { \
    const array& x = primals[0];                                                         \
    if (!is_inexact(x.dtype())) return zero_jvp(x, x.dtype(), stream());                 \
    array y(x.shape(), x.dtype(), std::make_shared<NAME>(stream()), {x});                \
    return {multiply(tangents[0], derivative_of_##NAME(x, y, stream()), stream())};      \
  }                                                                                      \
  std::vector<array> NAME::vjp(const std::vector<array>& primals,                        \
                               const std::vector<array>& cotangents,                     \
                               const std::vector<int>& argnums,                          \
                               const std::vector<array>& outputs) {                      \
    const array& x = primals[0];                                                         \
    if (!is_inexact(x.dtype())) return detail::zero_vjps(primals, argnums, stream());    \
    array d = derivative_of_##NAME(x, outputs[0], stream());                             \
    return {multiply(cotangents[0], conjugate(d, stream()), stream())};                  \
  }
TESSERA_FOR_EACH_DERIVATIVE(TESSERA_DEFINE_DERIVATIVE_RULES)
#undef TESSERA_DEFINE_DERIVATIVE_RULES
#undef TESSERA_FOR_EACH_DERIVATIVE

// Piecewise-constant primitives, and whether their result is bool (else it
// has the input's dtype).
#define TESSERA_FOR_EACH_ZERO_DERIVATIVE(X)                                         \
  X(Floor, false) X(Ceil, false) X(Trunc, false) X(Round, false) X(BitwiseInvert, false) \
  X(StopGradient, false) X(LogicalNot, true) X(IsNan, true) X(IsInf, true)           \
  X(IsFinite, true) X(IsPosInf, true) X(IsNegInf, true)

TESSERA_FOR_EACH_ZERO_DERIVATIVE(TESSERA_DEFINE_ZERO_DERIVATIVES)
#undef TESSERA_FOR_EACH_ZERO_DERIVATIVE

// ---- rules written out: linear or non-holomorphic functions ----------------

// Piecewise constant for real x; x / |x| for complex x, whose rules are not
// provided.
namespace {
void check_real_sign(const array& x) {
  if (is_complex(x.dtype())) {
    throw std::invalid_argument("[Sign] derivatives of complex inputs are not supported");
  }
}
}  // namespace

std::vector<array> Sign::jvp(const std::vector<array>& primals, const std::vector<array>&,
                             const std::vector<int>&) {
  check_real_sign(primals[0]);
  return zero_jvp(primals[0], primals[0].dtype(), stream());
}

std::vector<array> Sign::vjp(const std::vector<array>& primals, const std::vector<array>&,
                             const std::vector<int>& argnums, const std::vector<array>&) {
  check_real_sign(primals[0]);
  return detail::zero_vjps(primals, argnums, stream());
}

std::vector<array> Negative::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents, const std::vector<int>&) {
  if (!is_inexact(primals[0].dtype())) return zero_jvp(primals[0], primals[0].dtype(), stream());
  return {negative(tangents[0], stream())};
}

std::vector<array> Negative::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<array>&) {
  if (!is_inexact(primals[0].dtype())) return detail::zero_vjps(primals, argnums, stream());
  return {negative(cotangents[0], stream())};
}

// |x|' is sign(x) for real x; for complex x, d|x| = Re(conj(x / |x|) dx).
std::vector<array> Abs::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return zero_jvp(x, x.dtype(), stream());
  array d = conjugate(sign(x, stream()), stream());
  return {real(multiply(d, tangents[0], stream()), stream())};
}

std::vector<array> Abs::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents,
                            const std::vector<int>& argnums, const std::vector<array>&) {
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return detail::zero_vjps(primals, argnums, stream());
  return {multiply(cotangents[0], sign(x, stream()), stream())};
}

// Conjugate, Real and Imag have nodes only for complex inputs (Imag also for
// real ones, where it is zero).
std::vector<array> Conjugate::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {conjugate(tangents[0], stream())};
}

std::vector<array> Conjugate::vjp(const std::vector<array>&,
                                  const std::vector<array>& cotangents,
                                  const std::vector<int>&, const std::vector<array>&) {
  return {conjugate(cotangents[0], stream())};
}

std::vector<array> Real::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return {real(tangents[0], stream())};
}

std::vector<array> Real::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  return {astype(cotangents[0], primals[0].dtype(), stream())};
}

std::vector<array> Imag::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  if (!is_complex(primals[0].dtype())) return zero_jvp(primals[0], primals[0].dtype(), stream());
  return {imag(tangents[0], stream())};
}

// Im(t) = Re(conj(i) * t): the adjoint multiplies by i.
std::vector<array> Imag::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums, const std::vector<array>&) {
  if (!is_complex(primals[0].dtype())) return detail::zero_vjps(primals, argnums, stream());
  return {multiply(cotangents[0], array(complex64_t(0, 1), primals[0].dtype()), stream())};
}

// The identity where x is finite; replaced elements have zero derivative.
std::vector<array> NanToNum::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents, const std::vector<int>&) {
  const array& t = tangents[0];
  return {where(isfinite(primals[0], stream()), t, scalar(0, t), stream())};
}

std::vector<array> NanToNum::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents, const std::vector<int>&,
                                 const std::vector<array>&) {
  const array& c = cotangents[0];
  return {where(isfinite(primals[0], stream()), c, scalar(0, c), stream())};
}

// ---- vmap: the op on the batched input, mapped along the same axis ---------

#define TESSERA_DEFINE_UNARY_VMAP(NAME, OP)                                              \
  std::pair<std::vector<array>, std::vector<int>> NAME::vmap(                            \
      const std::vector<array>& inputs, const std::vector<int>& axes) {                  \
    return {{OP(inputs[0], stream())}, axes};                                            \
  }
#define TESSERA_UNARY_VMAP_ROW(NAME, FN, RULE) TESSERA_DEFINE_UNARY_VMAP(NAME, FN)
TESSERA_UNARY_OPS(TESSERA_UNARY_VMAP_ROW)
TESSERA_DEFINE_UNARY_VMAP(StopGradient, stop_gradient)
#undef TESSERA_UNARY_VMAP_ROW
#undef TESSERA_DEFINE_UNARY_VMAP

std::pair<std::vector<array>, std::vector<int>> Round::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  return {{round(inputs[0], decimals_, stream())}, axes};
}

std::pair<std::vector<array>, std::vector<int>> NanToNum::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  return {{nan_to_num(inputs[0], nan_, posinf_, neginf_, stream())}, axes};
}

}  // namespace tessera
