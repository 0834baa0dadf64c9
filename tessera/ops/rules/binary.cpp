// Transform rules of the elementwise primitives of two or three inputs
// (ops/primitives/binary.h); see Note [Elementwise derivatives] in
// ops/rules/unary.cpp. The op functions broadcast before creating a node, so
// every input of a primitive has the output's shape (AllTrue: a scalar output).
#include <functional>
#include <optional>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/binary.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"

namespace tessera {

namespace {

// The derivative of a primitive for input `arg`, as a linear map applied to v:
// a tangent, or with adjoint, a cotangent.
using Linear = std::function<array(int arg, const array& v, bool adjoint)>;

// jvp: the sum of the maps of the differentiated inputs applied to their tangents.
std::vector<array> linear_jvp(const std::vector<array>& tangents, const std::vector<int>& argnums,
                              const Linear& linear, const Stream& s) {
  array out = linear(argnums[0], tangents[0], false);
  for (size_t i = 1; i < argnums.size(); ++i) {
    out = add(out, linear(argnums[i], tangents[i], false), s);
  }
  return {out};
}

std::vector<array> linear_vjp(const array& cotangent, const std::vector<int>& argnums,
                              const Linear& linear) {
  std::vector<array> vjps;
  for (int arg : argnums) vjps.push_back(linear(arg, cotangent, true));
  return vjps;
}

// v * d for a tangent, v * conj(d) for a cotangent.
array times(const array& v, const array& d, bool adjoint, const Stream& s) {
  return multiply(v, adjoint ? conjugate(d, s) : d, s);
}

array zero_like(const array& v) { return array(0, v.dtype()); }

// v where mask, else 0; the complement when `keep` is false.
array masked(const array& mask, const array& v, bool keep, const Stream& s) {
  return keep ? where(mask, v, zero_like(v), s) : where(mask, zero_like(v), v, s);
}

// The maps of each primitive, from its inputs p = {a, b} and its output y.
Linear add_linear(const std::vector<array>&, const array&, const Stream&) {
  return [](int, const array& v, bool) { return v; };
}

Linear subtract_linear(const std::vector<array>&, const array&, const Stream& s) {
  return [s](int arg, const array& v, bool) { return arg == 0 ? v : negative(v, s); };
}

Linear multiply_linear(const std::vector<array>& p, const array&, const Stream& s) {
  return [p, s](int arg, const array& v, bool adj) { return times(v, p[1 - arg], adj, s); };
}

// d/da = 1 / b, d/db = -y / b.
Linear divide_linear(const std::vector<array>& p, const array& y, const Stream& s) {
  return [p, y, s](int arg, const array& v, bool adj) {
    const array& b = p[1];
    if (arg == 0) return divide(v, adj ? conjugate(b, s) : b, s);
    return times(v, negative(divide(y, b, s), s), adj, s);
  };
}

// d/da = b a^(b-1), d/db = y log(a) (0 where a is 0).
Linear power_linear(const std::vector<array>& p, const array& y, const Stream& s) {
  return [p, y, s](int arg, const array& v, bool adj) {
    const array &a = p[0], &b = p[1];
    if (arg == 0) {
      array one(1, b.dtype());
      return times(v, multiply(b, power(a, subtract(b, one, s), s), s), adj, s);
    }
    array d = where(equal(a, zero_like(a), s), zero_like(y), multiply(y, log(a, s), s), s);
    return times(v, d, adj, s);
  };
}

// The tangent goes to a where a > b (a < b for the minimum), else to b.
Linear maximum_linear(const std::vector<array>& p, const array&, const Stream& s) {
  array first = greater(p[0], p[1], s);
  return [first, s](int arg, const array& v, bool) { return masked(first, v, arg == 0, s); };
}

Linear minimum_linear(const std::vector<array>& p, const array&, const Stream& s) {
  array first = less(p[0], p[1], s);
  return [first, s](int arg, const array& v, bool) { return masked(first, v, arg == 0, s); };
}

// d/da = sigmoid(a - b), d/db = sigmoid(b - a).
Linear logaddexp_linear(const std::vector<array>& p, const array&, const Stream& s) {
  return [p, s](int arg, const array& v, bool adj) {
    return times(v, sigmoid(subtract(p[arg], p[1 - arg], s), s), adj, s);
  };
}

// d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2).
Linear arctan2_linear(const std::vector<array>& p, const array&, const Stream& s) {
  array norm = add(square(p[0], s), square(p[1], s), s);
  return [p, norm, s](int arg, const array& v, bool adj) {
    array d = arg == 0 ? divide(p[1], norm, s) : negative(divide(p[0], norm, s), s);
    return times(v, d, adj, s);
  };
}

// d/da = a / y, d/db = b / y (0 at a = b = 0, where y is not differentiable).
Linear hypot_linear(const std::vector<array>& p, const array& y, const Stream& s) {
  array safe = where(equal(y, zero_like(y), s), array(1, y.dtype()), y, s);
  return [p, safe, s](int arg, const array& v, bool adj) {
    return times(v, divide(p[arg], safe, s), adj, s);
  };
}
// a % b = a - b floor(a / b): d/da = 1, d/db = -floor(a / b).
Linear remainder_linear(const std::vector<array>& p, const array&, const Stream& s) {
  return [p, s](int arg, const array& v, bool adj) {
    if (arg == 0) return v;
    return times(v, negative(floor_divide(p[0], p[1], s), s), adj, s);
  };
}

}  // namespace

// Primitives with a derivative, the op that makes them (to recompute the
// output in jvp) and their maps. Integer results have zero derivatives.
#define TESSERA_FOR_EACH_DIFFERENTIABLE(X)                                                   \
  X(Add, add) X(Subtract, subtract) X(Multiply, multiply) X(Divide, divide) X(Power, power) \
  X(Maximum, maximum) X(Minimum, minimum) X(LogAddExp, logaddexp) X(ArcTan2, arctan2)        \
  X(Remainder, remainder) X(Hypot, hypot)

#define TESSERA_DEFINE_LINEAR_RULES(NAME, OP)                                                \
  std::vector<array> NAME::jvp(const std::vector<array>& primals,                            \
                               const std::vector<array>& tangents,                           \
                               const std::vector<int>& argnums) {                            \
    const array& a = primals[0];                                                             \
    if (!is_inexact(a.dtype())) return {zeros(a.shape(), a.dtype(), stream())};              \
    array y = OP(a, primals[1], stream());                                                   \
    return linear_jvp(tangents, argnums, OP##_linear(primals, y, stream()), stream());       \
  }                                                                                          \
  std::vector<array> NAME::vjp(const std::vector<array>& primals,                            \
                               const std::vector<array>& cotangents,                         \
                               const std::vector<int>& argnums,                              \
                               const std::vector<array>& outputs) {                          \
    if (!is_inexact(primals[0].dtype())) return detail::zero_vjps(primals, argnums, stream()); \
    return linear_vjp(cotangents[0], argnums, OP##_linear(primals, outputs[0], stream()));   \
  }
TESSERA_FOR_EACH_DIFFERENTIABLE(TESSERA_DEFINE_LINEAR_RULES)
#undef TESSERA_DEFINE_LINEAR_RULES
#undef TESSERA_FOR_EACH_DIFFERENTIABLE

// Piecewise-constant primitives, and whether their result is bool (else it
// has the inputs' dtype).
#define TESSERA_FOR_EACH_ZERO_DERIVATIVE(X)                                                 \
  X(FloorDivide, false) X(BitwiseAnd, false) X(BitwiseOr, false) X(BitwiseXor, false)       \
  X(LeftShift, false) X(RightShift, false) X(Equal, true) X(NotEqual, true)                 \
  X(Greater, true) X(GreaterEqual, true) X(Less, true) X(LessEqual, true)                   \
  X(LogicalAnd, true) X(LogicalOr, true) X(LogicalXor, true) X(IsClose, true)

TESSERA_FOR_EACH_ZERO_DERIVATIVE(TESSERA_DEFINE_ZERO_DERIVATIVES)
#undef TESSERA_FOR_EACH_ZERO_DERIVATIVE

std::vector<array> AllTrue::jvp(const std::vector<array>&, const std::vector<array>&,
                                const std::vector<int>&) {
  return {zeros({}, bool_, stream())};
}

std::vector<array> AllTrue::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                const std::vector<int>& argnums, const std::vector<array>&) {
  return detail::zero_vjps(primals, argnums, stream());
}

// Inputs {condition, x, y}: the condition has zero derivative; x's tangent
// flows where it holds, y's elsewhere.
std::vector<array> Select::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const array &condition = primals[0], &x = primals[1];
  std::optional<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0 || !is_inexact(x.dtype())) continue;
    array t = masked(condition, tangents[i], argnums[i] == 1, stream());
    out = out ? add(*out, t, stream()) : t;
  }
  return {out ? *out : zeros(x.shape(), x.dtype(), stream())};
}

std::vector<array> Select::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  const array& condition = primals[0];
  std::vector<array> vjps;
  for (int arg : argnums) {
    if (arg == 0 || !is_inexact(primals[arg].dtype())) {
      vjps.push_back(zeros_like(primals[arg], stream()));
    } else {
      vjps.push_back(masked(condition, cotangents[0], arg == 1, stream()));
    }
  }
  return vjps;
}

// Outputs {a // b, a % b}: the quotient is piecewise constant, the remainder
// has the derivatives of Remainder.
std::vector<array> DivMod::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const array& a = primals[0];
  array zero = zeros(a.shape(), a.dtype(), stream());
  if (!is_inexact(a.dtype())) return {zero, zero};
  // remainder_linear does not read the output (its second argument).
  return {zero, linear_jvp(tangents, argnums, remainder_linear(primals, a, stream()), stream())[0]};
}

std::vector<array> DivMod::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  if (!is_inexact(primals[0].dtype())) return detail::zero_vjps(primals, argnums, stream());
  return linear_vjp(cotangents[1], argnums, remainder_linear(primals, primals[1], stream()));
}

// ---- vmap: the op on the inputs batched along a common axis ----------------

namespace {
std::vector<array> as_outputs(array a) { return {std::move(a)}; }
std::vector<array> as_outputs(std::vector<array> a) { return a; }
}  // namespace

#define TESSERA_DEFINE_BINARY_VMAP(NAME, OP)                                                 \
  std::pair<std::vector<array>, std::vector<int>> NAME::vmap(                                \
      const std::vector<array>& inputs, const std::vector<int>& axes) {                      \
    auto op = [this](const std::vector<array>& x) {                                          \
      return as_outputs(OP(x[0], x[1], stream()));                                           \
    };                                                                                       \
    return detail::vmap_elementwise(inputs, axes, op, stream());                             \
  }
#define TESSERA_BINARY_VMAP_ROW(NAME, FN, RULE) TESSERA_DEFINE_BINARY_VMAP(NAME, FN)
TESSERA_BINARY_OPS(TESSERA_BINARY_VMAP_ROW)
TESSERA_DEFINE_BINARY_VMAP(DivMod, divmod)
#undef TESSERA_BINARY_VMAP_ROW
#undef TESSERA_DEFINE_BINARY_VMAP

std::pair<std::vector<array>, std::vector<int>> Equal::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  auto op = [this](const std::vector<array>& x) {
    return as_outputs(array(x[0].shape(), bool_, std::make_shared<Equal>(stream(), equal_nan_), x));
  };
  return detail::vmap_elementwise(inputs, axes, op, stream());
}

std::pair<std::vector<array>, std::vector<int>> IsClose::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  auto op = [this](const std::vector<array>& x) {
    return as_outputs(isclose(x[0], x[1], rtol_, atol_, equal_nan_, stream()));
  };
  return detail::vmap_elementwise(inputs, axes, op, stream());
}

std::pair<std::vector<array>, std::vector<int>> Select::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto op = [this](const std::vector<array>& x) {
    return as_outputs(where(x[0], x[1], x[2], stream()));
  };
  return detail::vmap_elementwise(inputs, axes, op, stream());
}

// One scalar per batch element: all of the axes but the mapped one.
std::pair<std::vector<array>, std::vector<int>> AllTrue::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  const array& x = inputs[0];
  std::vector<int> reduced;
  for (int d = 0; d < static_cast<int>(x.ndim()); ++d) {
    if (d != axes[0]) reduced.push_back(d);
  }
  return {{all(x, reduced, false, stream())}, {0}};
}

}  // namespace tessera
