// Elementwise functions of two or three arrays: promote to one dtype
// (promote_types), broadcast to one shape, then a node. See
// ops/primitives/binary.h for the integer semantics (division by zero, ...).
#include "tessera/ops/binary.h"

#include "tessera/memory/pool.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/binary.h"
#include "tessera/ops/primitives/unary.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

using detail::throw_unsupported_dtype;

void check_real(const char* op, Dtype t) {
  if (is_complex(t)) throw_unsupported_dtype(op, t, "expected a real dtype");
}

void check_integer_or_bool(const char* op, const array& a, const array& b) {
  for (Dtype t : {a.dtype(), b.dtype()}) {
    if (is_inexact(t)) throw_unsupported_dtype(op, t, "expected integer or bool");
  }
}

// Both inputs cast to `dtype` and broadcast to their common shape. Inputs that
// already have both are taken as they are (the common case of a long chain of
// small ops: no shape is computed and no handle is copied twice).
std::vector<array> prepare(const char* op, const array& a, const array& b, Dtype dtype,
                           StreamOrDevice s) {
  std::vector<array> inputs;
  inputs.reserve(2);
  if (a.shape() == b.shape()) {
    for (const array* x : {&a, &b}) {
      inputs.push_back(x->dtype() == dtype ? *x : astype(*x, dtype, s));
    }
    return inputs;
  }
  Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  for (const array* x : {&a, &b}) inputs.push_back(broadcast_to(astype(*x, dtype, s), shape, s));
  return inputs;
}

template <typename P, typename... Args>
array make_binary(const char* op, const array& a, const array& b, Dtype dtype, Dtype out_dtype,
                  StreamOrDevice s, Args... args) {
  auto inputs = prepare(op, a, b, dtype, s);
  Shape shape = inputs[0].shape();
  return array(std::move(shape), out_dtype,
               std::allocate_shared<P>(pool::Allocator<P>(), to_stream(s), args...),
               std::move(inputs));
}

// Result dtype = promoted dtype.
template <typename P>
array arithmetic(const char* op, const array& a, const array& b, StreamOrDevice s) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  return make_binary<P>(op, a, b, t, t, s);
}

// Float-out: the promoted dtype lifted to float32 unless inexact; real only.
array complex_logaddexp(const array& a, const array& b, Dtype t, StreamOrDevice s);

template <typename P>
array float_out(const char* op, const array& a, const array& b, StreamOrDevice s) {
  Dtype t = inexact_type(promote_types(a.dtype(), b.dtype()));
  if constexpr (std::is_same_v<P, LogAddExp>) {
    if (is_complex(t)) return complex_logaddexp(a, b, t, s);
  }
  check_real(op, t);
  return make_binary<P>(op, a, b, t, t, s);
}

template <typename P>
array comparison(const char* op, const array& a, const array& b, StreamOrDevice s) {
  return make_binary<P>(op, a, b, promote_types(a.dtype(), b.dtype()), bool_, s);
}

// Inputs are read as truth values: no promotion needed when the dtypes agree.
template <typename P>
array logical(const char* op, const array& a, const array& b, StreamOrDevice s) {
  Dtype t = a.dtype() == b.dtype() ? a.dtype() : bool_;
  return make_binary<P>(op, a, b, t, bool_, s);
}

template <typename P>
array bitwise(const char* op, const array& a, const array& b, StreamOrDevice s) {
  check_integer_or_bool(op, a, b);
  return arithmetic<P>(op, a, b, s);
}

// Shifts of bool are shifts of uint8.
template <typename P>
array shift(const char* op, const array& a, const array& b, StreamOrDevice s) {
  check_integer_or_bool(op, a, b);
  Dtype t = promote_types(a.dtype(), b.dtype());
  if (t == bool_) t = uint8;
  return make_binary<P>(op, a, b, t, t, s);
}

array all_true(const array& a, StreamOrDevice s) {
  return array(Shape{}, bool_, std::make_shared<AllTrue>(to_stream(s)), {a});
}

// Complex logaddexp composes public ops: with m the larger real part (a real
// shift, so the imaginary parts are untouched), m + log(exp(a - m) + exp(b - m))
// is the principal logarithm of exp(a) + exp(b), as MLX gives.
array complex_logaddexp(const array& a, const array& b, Dtype t, StreamOrDevice s) {
  array x = astype(a, t, s), y = astype(b, t, s);
  array m = stop_gradient(maximum(real(x, s), real(y, s), s), s);
  m = where(isinf(m, s), array(0.0f), m, s);
  array mc = astype(m, t, s);
  return add(mc, log(add(exp(subtract(x, mc, s), s), exp(subtract(y, mc, s), s), s), s), s);
}

}  // namespace

// The op functions of the rows of TESSERA_BINARY_OPS whose rule is not custom
// (Note [Elementwise tables]).
#define TESSERA_DEFINE_BINARY(NAME, FN, RULE) TESSERA_DEFINE_BINARY_##RULE(NAME, FN)
#define TESSERA_DEFINE_BINARY_custom(NAME, FN)
#define TESSERA_DEFINE_BINARY_RULE(NAME, FN, RULE)                      \
  array FN(const array& a, const array& b, StreamOrDevice s) {         \
    return RULE<NAME>(#FN, a, b, s);                                   \
  }
#define TESSERA_DEFINE_BINARY_arithmetic(NAME, FN) TESSERA_DEFINE_BINARY_RULE(NAME, FN, arithmetic)
#define TESSERA_DEFINE_BINARY_float_out(NAME, FN) TESSERA_DEFINE_BINARY_RULE(NAME, FN, float_out)
#define TESSERA_DEFINE_BINARY_comparison(NAME, FN) TESSERA_DEFINE_BINARY_RULE(NAME, FN, comparison)
#define TESSERA_DEFINE_BINARY_logical(NAME, FN) TESSERA_DEFINE_BINARY_RULE(NAME, FN, logical)
#define TESSERA_DEFINE_BINARY_bitwise(NAME, FN) TESSERA_DEFINE_BINARY_RULE(NAME, FN, bitwise)
#define TESSERA_DEFINE_BINARY_shift(NAME, FN) TESSERA_DEFINE_BINARY_RULE(NAME, FN, shift)
TESSERA_BINARY_OPS(TESSERA_DEFINE_BINARY)
#undef TESSERA_DEFINE_BINARY

// ---- the custom rules --------------------------------------------------------

array subtract(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  if (t == bool_) throw_unsupported_dtype("subtract", t, "expected a number; use logical_xor");
  return make_binary<Subtract>("subtract", a, b, t, t, s);
}

array divide(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = inexact_type(promote_types(a.dtype(), b.dtype()));
  return make_binary<Divide>("divide", a, b, t, t, s);
}

array floor_divide(const array& a, const array& b, StreamOrDevice s) {
  check_real("floor_divide", promote_types(a.dtype(), b.dtype()));
  return arithmetic<FloorDivide>("floor_divide", a, b, s);
}

array remainder(const array& a, const array& b, StreamOrDevice s) {
  check_real("remainder", promote_types(a.dtype(), b.dtype()));
  return arithmetic<Remainder>("remainder", a, b, s);
}

std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  check_real("divmod", t);
  auto inputs = prepare("divmod", a, b, t, s);
  Shape shape = inputs[0].shape();
  return array::make_arrays({shape, shape}, {t, t}, std::make_shared<DivMod>(to_stream(s)),
                            inputs);
}

array equal(const array& a, const array& b, StreamOrDevice s) {
  return make_binary<Equal>("equal", a, b, promote_types(a.dtype(), b.dtype()), bool_, s, false);
}

array where(const array& condition, const array& x, const array& y, StreamOrDevice s) {
  Shape shape = broadcast_shapes({condition.shape(), x.shape(), y.shape()}, "where");
  Dtype t = promote_types(x.dtype(), y.dtype());
  std::vector<array> inputs{broadcast_to(astype(condition, bool_, s), shape, s),
                            broadcast_to(astype(x, t, s), shape, s),
                            broadcast_to(astype(y, t, s), shape, s)};
  return array(shape, t, std::make_shared<Select>(to_stream(s)), std::move(inputs));
}

array clip(const array& a, const std::optional<array>& a_min, const std::optional<array>& a_max,
           StreamOrDevice s) {
  if (!a_min && !a_max) throw_invalid("clip", "at least one of a_min and a_max must be given");
  for (auto& bound : {a_min, a_max}) {
    if (bound) broadcast_shapes(a.shape(), bound->shape(), "clip");
  }
  array result = a;
  if (a_min) result = maximum(result, *a_min, s);
  if (a_max) result = minimum(result, *a_max, s);
  return result;
}

array isclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
              StreamOrDevice s) {
  return make_binary<IsClose>("isclose", a, b, promote_types(a.dtype(), b.dtype()), bool_, s,
                              rtol, atol, equal_nan);
}

array allclose(const array& a, const array& b, double rtol, double atol, bool equal_nan,
               StreamOrDevice s) {
  broadcast_shapes(a.shape(), b.shape(), "allclose");
  return all_true(isclose(a, b, rtol, atol, equal_nan, s), s);
}

array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice s) {
  if (a.shape() != b.shape()) return array(false);
  Dtype t = promote_types(a.dtype(), b.dtype());
  equal_nan = equal_nan && is_inexact(t);
  return all_true(make_binary<Equal>("array_equal", a, b, t, bool_, s, equal_nan), s);
}

array array_equal(const array& a, const array& b, StreamOrDevice s) {
  return array_equal(a, b, false, s);
}

#define TESSERA_DEFINE_BINARY_OPERATOR(OP, FN) \
  array operator OP(const array& a, const array& b) { return FN(a, b); }
TESSERA_FOR_EACH_BINARY_OPERATOR(TESSERA_DEFINE_BINARY_OPERATOR)
#undef TESSERA_DEFINE_BINARY_OPERATOR

}  // namespace tessera
