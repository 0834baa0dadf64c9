// Reductions over axes, softmax and trace: validate, pick the result dtype, create the node.
#include "tessera/ops/reduce.h"
#include "tessera/ops/array_api.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/reduce.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/sort.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

Shape reduced_shape(const Shape& shape, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  size_t k = 0;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (k < axes.size() && axes[k] == d) {
      ++k;
      if (keepdims) out.push_back(1);
    } else {
      out.push_back(shape[d]);
    }
  }
  return out;
}

int64_t reduced_count(const Shape& shape, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int ax : axes) n *= shape[ax];
  return n;
}

// Max and min have no identity: reducing zero elements into a non-empty output fails.
void check_nonempty(const array& a, const std::vector<int>& axes, const Shape& out_shape,
                    const char* op) {
  if (reduced_count(a.shape(), axes) == 0 && shape_size(out_shape) > 0) {
    throw_invalid(op, "cannot reduce an array of shape " + shape_str(a.shape()) +
                          " over the empty axes " + ints_str(axes) + ": there is no identity");
  }
}

array make_reduce(const array& a, const std::vector<int>& axes, bool keepdims,
                  Reduce::ReduceType type, Dtype out_dtype, const char* op, StreamOrDevice s) {
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), op);
  Shape out_shape = reduced_shape(a.shape(), ax, keepdims);
  if (type == Reduce::Max || type == Reduce::Min) check_nonempty(a, ax, out_shape, op);
  return array(std::move(out_shape), out_dtype,
               std::make_shared<Reduce>(to_stream(s), type, std::move(ax), keepdims), {a});
}

void check_real(const array& a, const char* op) {
  if (is_complex(a.dtype())) {
    throw_invalid(op, "complex input (" + dtype_name(a.dtype()) + ") is not supported");
  }
}

}  // namespace

#define TESSERA_REDUCTION_OVERLOADS(NAME)                                         \
  array NAME(const array& a, bool keepdims, StreamOrDevice s) {                  \
    return NAME(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);          \
  }                                                                              \
  array NAME(const array& a, StreamOrDevice s) { return NAME(a, false, s); }     \
  array NAME(const array& a, int axis, bool keepdims, StreamOrDevice s) {        \
    return NAME(a, std::vector<int>{axis}, keepdims, s);                         \
  }

array sum(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Sum, accumulation_type(a.dtype()), "sum", s);
}
array prod(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Prod, accumulation_type(a.dtype()), "prod", s);
}
array max(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Max, a.dtype(), "max", s);
}
array min(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Min, a.dtype(), "min", s);
}
array mean(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Mean, inexact_type(a.dtype()), "mean", s);
}
array all(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::And, bool_, "all", s);
}
array any(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return make_reduce(a, axes, keepdims, Reduce::Or, bool_, "any", s);
}
array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  check_real(a, "logsumexp");
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), "logsumexp");
  Shape out_shape = reduced_shape(a.shape(), ax, keepdims);
  return array(std::move(out_shape), inexact_type(a.dtype()),
               std::make_shared<LogSumExp>(to_stream(s), std::move(ax), keepdims), {a});
}

TESSERA_REDUCTION_OVERLOADS(sum)
TESSERA_REDUCTION_OVERLOADS(prod)
TESSERA_REDUCTION_OVERLOADS(max)
TESSERA_REDUCTION_OVERLOADS(min)
TESSERA_REDUCTION_OVERLOADS(mean)
TESSERA_REDUCTION_OVERLOADS(logsumexp)
// The median composes public ops (so every device runs it and it has
// derivatives): the reduced axes are moved last and flattened, sorted, and the
// two middle values averaged in the float-out dtype; a NaN gives NaN.
array median(const array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  const int nd = static_cast<int>(a.ndim());
  auto ax = normalize_axes(axes, nd, "median");
  const Dtype t = inexact_type(a.dtype());
  if (is_complex(t)) throw_invalid("median", "complex input (" + dtype_name(t) + ") has no order");
  Shape out_shape = reduced_shape(a.shape(), ax, keepdims);
  const int64_t n = reduced_count(a.shape(), ax);
  if (n == 0) {
    throw_invalid("median", "cannot take the median of an array of shape " +
                                shape_str(a.shape()) + " over the empty axes " + ints_str(ax));
  }
  std::vector<int> perm;
  Shape kept;
  for (int d = 0; d < nd; ++d) {
    if (std::find(ax.begin(), ax.end(), d) == ax.end()) {
      perm.push_back(d);
      kept.push_back(a.shape(d));
    }
  }
  perm.insert(perm.end(), ax.begin(), ax.end());
  Shape flat = kept;
  flat.push_back(static_cast<int>(n));
  array x = reshape(transpose(astype(a, t, s), perm, s), flat, s);
  array sorted = sort(x, -1, s);
  const int k = static_cast<int>(kept.size());
  auto middle = [&](int64_t i) {
    Shape start(k + 1, 0), stop = flat;
    start[k] = static_cast<int>(i);
    stop[k] = static_cast<int>(i + 1);
    return squeeze(slice(sorted, start, stop, s), k, s);
  };
  array m = multiply(add(middle((n - 1) / 2), middle(n / 2), s), array(0.5, t), s);
  array m_nan = where(any(isnan(x, s), -1, false, s), array(NAN, t), m, s);
  return reshape(m_nan, out_shape, s);
}

std::vector<array> minmax(const array& a, const std::vector<int>& axes, bool keepdims,
                          StreamOrDevice s) {
  return {min(a, axes, keepdims, s), max(a, axes, keepdims, s)};
}
std::vector<array> minmax(const array& a, bool keepdims, StreamOrDevice s) {
  return minmax(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
std::vector<array> minmax(const array& a, StreamOrDevice s) { return minmax(a, false, s); }
std::vector<array> minmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return minmax(a, std::vector<int>{axis}, keepdims, s);
}

array number_of_elements(const array& a, std::vector<int> axes, bool inverted, Dtype dtype,
                         StreamOrDevice s) {
  const int nd = static_cast<int>(a.ndim());
  auto ax = normalize_axes(axes, nd, "number_of_elements");
  if (inverted) {
    std::vector<int> rest;
    for (int d = 0; d < nd; ++d) {
      if (std::find(ax.begin(), ax.end(), d) == ax.end()) rest.push_back(d);
    }
    ax = std::move(rest);
  }
  double n = 1;
  for (int d : ax) n *= a.shape(d);
  return astype(array(n, float64), dtype, s);
}

TESSERA_REDUCTION_OVERLOADS(all)
TESSERA_REDUCTION_OVERLOADS(any)
TESSERA_REDUCTION_OVERLOADS(median)
#undef TESSERA_REDUCTION_OVERLOADS

namespace {

array moment(const array& a, const std::vector<int>& axes, bool keepdims, int ddof,
             bool take_sqrt, const char* op, StreamOrDevice s) {
  if (is_complex(a.dtype())) {
    // The variance of a complex array is that of its real and imaginary parts
    // added (the mean squared modulus of the deviation), and it is real.
    array v = add(moment(real(a, s), axes, keepdims, ddof, false, op, s),
                  moment(imag(a, s), axes, keepdims, ddof, false, op, s), s);
    return take_sqrt ? sqrt(v, s) : v;
  }
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), op);
  Shape out_shape = reduced_shape(a.shape(), ax, keepdims);
  return array(std::move(out_shape), inexact_type(a.dtype()),
               std::make_shared<Variance>(to_stream(s), std::move(ax), keepdims, ddof, take_sqrt),
               {a});
}

}  // namespace

#define TESSERA_MOMENT_OVERLOADS(NAME, SQRT)                                              \
  array NAME(const array& a, const std::vector<int>& axes, bool keepdims, int ddof,       \
             StreamOrDevice s) {                                                          \
    return moment(a, axes, keepdims, ddof, SQRT, #NAME, s);                               \
  }                                                                                       \
  array NAME(const array& a, bool keepdims, int ddof, StreamOrDevice s) {                 \
    return NAME(a, all_axes(static_cast<int>(a.ndim())), keepdims, ddof, s);             \
  }                                                                                       \
  array NAME(const array& a, StreamOrDevice s) { return NAME(a, false, 0, s); }           \
  array NAME(const array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {       \
    return NAME(a, std::vector<int>{axis}, keepdims, ddof, s);                            \
  }
TESSERA_MOMENT_OVERLOADS(var, false)
TESSERA_MOMENT_OVERLOADS(std, true)
#undef TESSERA_MOMENT_OVERLOADS

namespace {

array arg_reduce(const array& a, int axis, bool keepdims, ArgReduce::ReduceType type,
                 const char* op, StreamOrDevice s) {
  int ax = normalize_axis(axis, static_cast<int>(a.ndim()), op);
  if (a.shape(ax) == 0) {
    throw_invalid(op, "attempt to take the " + std::string(op) + " of an empty sequence: axis " +
                          std::to_string(axis) + " of shape " + shape_str(a.shape()) +
                          " has no elements");
  }
  Shape out_shape = reduced_shape(a.shape(), {ax}, keepdims);
  return array(std::move(out_shape), uint32,
               std::make_shared<ArgReduce>(to_stream(s), type, ax, keepdims), {a});
}

array arg_reduce_all(const array& a, bool keepdims, ArgReduce::ReduceType type, const char* op,
                     StreamOrDevice s) {
  if (a.size() == 0) {
    throw_invalid(op, "attempt to take the " + std::string(op) +
                          " of an empty sequence: shape " + shape_str(a.shape()));
  }
  array flat = reshape(a, {static_cast<ShapeElem>(a.size())}, s);
  array out = arg_reduce(flat, 0, false, type, op, s);
  if (keepdims) out = reshape(out, Shape(a.ndim(), 1), s);
  return out;
}

}  // namespace

array argmax(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce(a, axis, keepdims, ArgReduce::ArgMax, "argmax", s);
}
array argmax(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_reduce_all(a, keepdims, ArgReduce::ArgMax, "argmax", s);
}
array argmax(const array& a, StreamOrDevice s) { return argmax(a, false, s); }
array argmin(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return arg_reduce(a, axis, keepdims, ArgReduce::ArgMin, "argmin", s);
}
array argmin(const array& a, bool keepdims, StreamOrDevice s) {
  return arg_reduce_all(a, keepdims, ArgReduce::ArgMin, "argmin", s);
}
array argmin(const array& a, StreamOrDevice s) { return argmin(a, false, s); }

array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims,
                    StreamOrDevice s) {
  normalize_axes(axes, static_cast<int>(a.ndim()), "count_nonzero");
  // sum of bool is int32 (accumulation_type).
  return sum(astype(a, bool_, s), axes, keepdims, s);
}
array count_nonzero(const array& a, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, all_axes(static_cast<int>(a.ndim())), keepdims, s);
}
array count_nonzero(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return count_nonzero(a, std::vector<int>{axis}, keepdims, s);
}

array softmax(const array& a, const std::vector<int>& axes, bool precise, StreamOrDevice s) {
  check_real(a, "softmax");
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), "softmax");
  return array(a.shape(), inexact_type(a.dtype()),
               std::make_shared<Softmax>(to_stream(s), std::move(ax), precise), {a});
}
array softmax(const array& a, bool precise, StreamOrDevice s) {
  return softmax(a, all_axes(static_cast<int>(a.ndim())), precise, s);
}
array softmax(const array& a, int axis, bool precise, StreamOrDevice s) {
  return softmax(a, std::vector<int>{axis}, precise, s);
}

array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd < 2) {
    throw_invalid("trace", "the array must have at least 2 dimensions, it has shape " +
                               shape_str(a.shape()));
  }
  int ax1 = normalize_axis(axis1, nd, "trace");
  int ax2 = normalize_axis(axis2, nd, "trace");
  if (ax1 == ax2) {
    throw_invalid("trace", "axis1 (" + std::to_string(axis1) + ") and axis2 (" +
                               std::to_string(axis2) + ") must be different axes");
  }
  Shape out_shape;
  for (int d = 0; d < nd; ++d) {
    if (d != ax1 && d != ax2) out_shape.push_back(a.shape(d));
  }
  array out(std::move(out_shape), accumulation_type(a.dtype()),
            std::make_shared<Trace>(to_stream(s), offset, ax1, ax2), {a});
  return astype(out, dtype, s);
}
array trace(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  return trace(a, offset, axis1, axis2, accumulation_type(a.dtype()), s);
}
array trace(const array& a, StreamOrDevice s) { return trace(a, 0, 0, 1, s); }

// ---- primitive parameters ---------------------------------------------------

void Reduce::print(std::ostream& os) const {
  static const char* names[] = {"And", "Or", "Sum", "Prod", "Max", "Min", "Mean"};
  os << "Reduce(" << names[type_] << ", axes " << ints_str(axes_) << ")";
}
}  // namespace tessera
