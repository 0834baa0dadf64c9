// Elementwise functions of one array: dtype rules (core.md §3.4), then a node.
#include "tessera/ops/unary.h"

#include "tessera/memory/pool.h"
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

array abs(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_ || is_unsigned(a.dtype())) return a;
  return make_unary<Abs>(a, is_complex(a.dtype()) ? float32 : a.dtype(), s);
}

array positive(const array& a, StreamOrDevice s) { return copy(a, s); }

array negative(const array& a, StreamOrDevice s) {
  if (a.dtype() == bool_) throw_unsupported_dtype("negative", a.dtype(), "expected a number; use logical_not for bool");
  return same_dtype<Negative>(a, s);
}

array sign(const array& a, StreamOrDevice s) { return same_dtype<Sign>(a, s); }
array logical_not(const array& a, StreamOrDevice s) { return predicate<LogicalNot>(a, s); }
array reciprocal(const array& a, StreamOrDevice s) { return float_out<Reciprocal>(a, s); }

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

array square(const array& a, StreamOrDevice s) { return same_dtype<Square>(a, s); }
array exp(const array& a, StreamOrDevice s) { return float_out<Exp>(a, s); }
array expm1(const array& a, StreamOrDevice s) { return float_out<Expm1>(a, s); }
array sqrt(const array& a, StreamOrDevice s) { return float_out<Sqrt>(a, s); }
array rsqrt(const array& a, StreamOrDevice s) { return float_out<Rsqrt>(a, s); }
array sin(const array& a, StreamOrDevice s) { return float_out<Sin>(a, s); }
array cos(const array& a, StreamOrDevice s) { return float_out<Cos>(a, s); }
array tan(const array& a, StreamOrDevice s) { return float_out<Tan>(a, s); }
array arcsin(const array& a, StreamOrDevice s) { return float_out<ArcSin>(a, s); }
array arccos(const array& a, StreamOrDevice s) { return float_out<ArcCos>(a, s); }
array arctan(const array& a, StreamOrDevice s) { return float_out<ArcTan>(a, s); }
array sinh(const array& a, StreamOrDevice s) { return float_out<Sinh>(a, s); }
array cosh(const array& a, StreamOrDevice s) { return float_out<Cosh>(a, s); }
array tanh(const array& a, StreamOrDevice s) { return float_out<Tanh>(a, s); }
array arcsinh(const array& a, StreamOrDevice s) { return float_out<ArcSinh>(a, s); }
array arccosh(const array& a, StreamOrDevice s) { return float_out<ArcCosh>(a, s); }
array arctanh(const array& a, StreamOrDevice s) { return float_out<ArcTanh>(a, s); }
array log(const array& a, StreamOrDevice s) { return float_out<Log>(a, s); }
array log2(const array& a, StreamOrDevice s) { return float_out<Log2>(a, s); }
array log10(const array& a, StreamOrDevice s) { return float_out<Log10>(a, s); }
array log1p(const array& a, StreamOrDevice s) { return float_out<Log1p>(a, s); }
array sigmoid(const array& a, StreamOrDevice s) { return float_out<Sigmoid>(a, s); }

array degrees(const array& a, StreamOrDevice s) {
  check_real("degrees", a);
  return float_out<Degrees>(a, s);
}

array radians(const array& a, StreamOrDevice s) {
  check_real("radians", a);
  return float_out<Radians>(a, s);
}

array erf(const array& a, StreamOrDevice s) {
  check_real("erf", a);
  return float_out<Erf>(a, s);
}

array erfinv(const array& a, StreamOrDevice s) {
  check_real("erfinv", a);
  return float_out<ErfInv>(a, s);
}

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

array isnan(const array& a, StreamOrDevice s) { return predicate<IsNan>(a, s); }
array isinf(const array& a, StreamOrDevice s) { return predicate<IsInf>(a, s); }
array isfinite(const array& a, StreamOrDevice s) { return predicate<IsFinite>(a, s); }

array isposinf(const array& a, StreamOrDevice s) {
  check_real("isposinf", a);
  return predicate<IsPosInf>(a, s);
}

array isneginf(const array& a, StreamOrDevice s) {
  check_real("isneginf", a);
  return predicate<IsNegInf>(a, s);
}

array nan_to_num(const array& a, float nan, std::optional<float> posinf,
                 std::optional<float> neginf, StreamOrDevice s) {
  if (!is_inexact(a.dtype())) return a;
  return make_unary<NanToNum>(a, a.dtype(), s, nan, posinf, neginf);
}

array operator-(const array& a) { return negative(a); }
array operator~(const array& a) { return bitwise_invert(a); }
array operator!(const array& a) { return logical_not(a); }

bool Round::is_equivalent(const Primitive& other) const {
  return dynamic_cast<const Round&>(other).decimals_ == decimals_;
}

bool NanToNum::is_equivalent(const Primitive& other) const {
  auto& o = dynamic_cast<const NanToNum&>(other);
  return o.nan_ == nan_ && o.posinf_ == posinf_ && o.neginf_ == neginf_;
}

}  // namespace tessera
