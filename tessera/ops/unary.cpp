// Elementwise functions of one array: dtype rules (as in MLX), then a node.
#include "tessera/ops/unary.h"

#include "tessera/memory/pool.h"
#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/unary.h"
#include "tessera/ops/utils.h"

namespace tessera {

void detail::throw_unsupported_dtype(const char* op, Dtype t, const char* expected) {
  throw_invalid(op, "dtype " + dtype_name(t) + " is not supported (" + expected + ")");
}

namespace {

using detail::throw_unsupported_dtype;

void check_real(const char* op, const array& a) {
  if (is_complex(a.dtype())) throw_unsupported_dtype(op, a.dtype(), "expected a real dtype");
}

template <typename P, typename... Args>
array make_unary(const array& a, Dtype out_dtype, StreamOrDevice s, Args... args) {
  return array(a.shape(), out_dtype,
               std::allocate_shared<P>(pool::Allocator<P>(), to_stream(s), args...), {a});
}

template <typename P>
array same_dtype(const array& a, StreamOrDevice s) {
  return make_unary<P>(a, a.dtype(), s);
}

// Float-out ops: inexact input kept, everything else computed in float32.
template <typename P>
array float_out(const array& a, StreamOrDevice s) {
  Dtype t = inexact_type(a.dtype());
  return make_unary<P>(astype(a, t, s), t, s);
}

template <typename P>
array predicate(const array& a, StreamOrDevice s) {
  return make_unary<P>(a, bool_, s);
}

}  // namespace

// The op functions of the rows of TESSERA_UNARY_OPS whose rule is not custom
// (Note [Elementwise tables]).
#define TESSERA_DEFINE_UNARY_same_dtype(NAME, FN) \
  array FN(const array& a, StreamOrDevice s) { return same_dtype<NAME>(a, s); }
#define TESSERA_DEFINE_UNARY_float_out(NAME, FN) \
  array FN(const array& a, StreamOrDevice s) { return float_out<NAME>(a, s); }
#define TESSERA_DEFINE_UNARY_float_out_real(NAME, FN) \
  array FN(const array& a, StreamOrDevice s) {         \
    check_real(#FN, a);                                 \
    return float_out<NAME>(a, s);                       \
  }
#define TESSERA_DEFINE_UNARY_predicate(NAME, FN) \
  array FN(const array& a, StreamOrDevice s) { return predicate<NAME>(a, s); }
#define TESSERA_DEFINE_UNARY_predicate_real(NAME, FN)                                 \
  array FN(const array& a, StreamOrDevice s) {                                         \
    if (is_complex(a.dtype())) {                                                       \
      return logical_and(FN(real(a, s), s), equal(imag(a, s), array(0.0f), s), s);     \
    }                                                                                  \
    return predicate<NAME>(a, s);                                                      \
  }
#define TESSERA_DEFINE_UNARY_custom(NAME, FN)
#define TESSERA_DEFINE_UNARY(NAME, FN, RULE) TESSERA_DEFINE_UNARY_##RULE(NAME, FN)
TESSERA_UNARY_OPS(TESSERA_DEFINE_UNARY)
#undef TESSERA_DEFINE_UNARY

// ---- the custom rules --------------------------------------------------------

array abs(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_ || is_unsigned(a.dtype())) return a;
  return make_unary<Abs>(a, is_complex(a.dtype()) ? float32 : a.dtype(), s);
}

array positive(const array& a, StreamOrDevice s) { return copy(a, s); }

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) throw_unsupported_dtype("negative", a.dtype(), "expected a number; use logical_not for bool");
  return same_dtype<Negative>(a, s);
}

array floor(const array& a, StreamOrDevice s) {
  check_real("floor", a);
  return is_floating_point(a.dtype()) ? same_dtype<Floor>(a, s) : a;
}

array ceil(const array& a, StreamOrDevice s) {
  check_real("ceil", a);
  return is_floating_point(a.dtype()) ? same_dtype<Ceil>(a, s) : a;
}

array trunc(const array& a, StreamOrDevice s) {
  check_real("trunc", a);
  return is_floating_point(a.dtype()) ? same_dtype<Trunc>(a, s) : a;
}

array round(const array& a, int decimals, StreamOrDevice s) {
  if (!is_inexact(a.dtype()) && decimals >= 0) return a;
  return make_unary<Round>(a, a.dtype(), s, decimals);
}

array round(const array& a, StreamOrDevice s) { return round(a, 0, s); }

array stop_gradient(const array& a, StreamOrDevice s) { return same_dtype<StopGradient>(a, s); }

array conjugate(const array& a, StreamOrDevice s) {
  return is_complex(a.dtype()) ? same_dtype<Conjugate>(a, s) : a;
}

array real(const array& a, StreamOrDevice s) {
  return is_complex(a.dtype()) ? make_unary<Real>(a, float32, s) : a;
}

array imag(const array& a, StreamOrDevice s) {
  return make_unary<Imag>(a, is_complex(a.dtype()) ? float32 : a.dtype(), s);
}

array bitwise_invert(const array& a, StreamOrDevice s) {
  if (is_inexact(a.dtype())) throw_unsupported_dtype("bitwise_invert", a.dtype(), "expected integer or bool");
  return same_dtype<BitwiseInvert>(a, s);
}

array nan_to_num(const array& a, float nan, std::optional<float> posinf,
                 std::optional<float> neginf, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return a;
  return make_unary<NanToNum>(a, a.dtype(), s, nan, posinf, neginf);
}

array operator-(const array& a) { return negative(a); }
array operator~(const array& a) { return bitwise_invert(a); }
array operator!(const array& a) { return logical_not(a); }

}  // namespace tessera
