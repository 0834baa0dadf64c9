// Scans along one axis: validate, pick the result dtype, create the Scan node.
#include "tessera/ops/scan.h"

#include "tessera/ops/binary.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/scan.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

array make_scan(const array& a, int axis, bool reverse, bool inclusive, Scan::ReduceType type,
                Dtype out_dtype, const char* op, StreamOrDevice s) {
  int ax = normalize_axis(axis, static_cast<int>(a.ndim()), op);
  array in = a.dtype() == out_dtype ? a : astype(a, out_dtype, s);
  return array(in.shape(), out_dtype,
               std::make_shared<Scan>(to_stream(s), type, ax, reverse, inclusive), {in});
}

void check_real(const array& a, const char* op) {
  if (is_complex(a.dtype())) {
    throw_invalid(op, "complex input (" + dtype_name(a.dtype()) + ") is not supported");
  }
}

array cast_first(const array& a, std::optional<Dtype> dtype, StreamOrDevice s) {
  return dtype && *dtype != a.dtype() ? astype(a, *dtype, s) : a;
}

}  // namespace

array cumsum(const array& a, int axis, bool reverse, bool inclusive, std::optional<Dtype> dtype,
             StreamOrDevice s) {
  array x = cast_first(a, dtype, s);
  Dtype out = x.dtype() == bool_ ? int32 : x.dtype();
  return make_scan(x, axis, reverse, inclusive, Scan::Sum, out, "cumsum", s);
}
array cumprod(const array& a, int axis, bool reverse, bool inclusive, std::optional<Dtype> dtype,
              StreamOrDevice s) {
  array x = cast_first(a, dtype, s);
  return make_scan(x, axis, reverse, inclusive, Scan::Prod, x.dtype(), "cumprod", s);
}
array cummax(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  check_real(a, "cummax");
  return make_scan(a, axis, reverse, inclusive, Scan::Max, a.dtype(), "cummax", s);
}
array cummin(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  check_real(a, "cummin");
  return make_scan(a, axis, reverse, inclusive, Scan::Min, a.dtype(), "cummin", s);
}
array logcumsumexp(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    // The principal logarithm of the running sums of exp(a), shifted by the
    // largest real part along the axis (as logaddexp of complex inputs).
    int ax = normalize_axis(axis, static_cast<int>(a.ndim()), "logcumsumexp");
    array m = stop_gradient(max(real(a, s), ax, true, s), s);
    m = astype(where(isinf(m, s), array(0.0f), m, s), a.dtype(), s);
    return add(m, log(cumsum(exp(subtract(a, m, s), s), ax, reverse, inclusive, s), s), s);
  }
  return make_scan(a, axis, reverse, inclusive, Scan::LogAddExp, inexact_type(a.dtype()),
                   "logcumsumexp", s);
}

#define TESSERA_SCAN_FLAT(NAME)                                                           \
  array NAME(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {            \
    return NAME(flatten(a, s), 0, reverse, inclusive, s);                                 \
  }
TESSERA_SCAN_FLAT(cummax)
TESSERA_SCAN_FLAT(cummin)
TESSERA_SCAN_FLAT(logcumsumexp)
#undef TESSERA_SCAN_FLAT

#define TESSERA_SCAN_FLAT_DTYPE(NAME)                                                     \
  array NAME(const array& a, bool reverse, bool inclusive, std::optional<Dtype> dtype,    \
             StreamOrDevice s) {                                                          \
    return NAME(flatten(a, s), 0, reverse, inclusive, dtype, s);                          \
  }                                                                                       \
  array NAME(const array& a, bool reverse, bool inclusive, StreamOrDevice s) {            \
    return NAME(a, reverse, inclusive, std::nullopt, s);                                  \
  }                                                                                       \
  array NAME(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {  \
    return NAME(a, axis, reverse, inclusive, std::nullopt, s);                            \
  }
TESSERA_SCAN_FLAT_DTYPE(cumsum)
TESSERA_SCAN_FLAT_DTYPE(cumprod)
#undef TESSERA_SCAN_FLAT_DTYPE

}  // namespace tessera
