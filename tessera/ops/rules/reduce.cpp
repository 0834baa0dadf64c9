// Transform rules of the reductions (Reduce, ArgReduce, Variance, LogSumExp,
// Softmax, Trace). A cotangent is reshaped to the keepdims form of the output
// (see Note [Reduction axes]) and broadcast back over the reduced axes; vmap
// reduces the batched input over the same axes shifted past the batch axis.
// Outputs of integer or bool dtype have zero derivatives.
#include <algorithm>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/reduce.h"

namespace tessera {

namespace {

// `shape` with the reduced axes as 1s: the keepdims form of the output.
Shape kept_shape(const Shape& shape, const std::vector<int>& axes) {
  Shape out = shape;
  for (int ax : axes) out[ax] = 1;
  return out;
}

int64_t reduced_count(const Shape& shape, const std::vector<int>& axes) {
  int64_t n = 1;
  for (int ax : axes) n *= shape[ax];
  return n;
}

// The axes of the unbatched input as axes of the input batched at axis `b`.
std::vector<int> shift_axes(std::vector<int> axes, int b) {
  for (auto& ax : axes) {
    if (ax >= b) ++ax;
  }
  return axes;
}

// Where the batch axis `b` of the input lands in the output of a reduction
// over the (unbatched) axes.
int reduced_batch_axis(int b, const std::vector<int>& axes, bool keepdims) {
  if (keepdims) return b;
  auto before = std::count_if(axes.begin(), axes.end(), [b](int ax) { return ax < b; });
  return b - static_cast<int>(before);
}

// True when derivatives flow from x to an output of dtype `out`.
bool differentiable(const array& x, Dtype out) {
  return is_inexact(x.dtype()) && is_inexact(out);
}

array scalar_like(double v, const array& like) { return array(v, like.dtype()); }

array reduce_like(Reduce::ReduceType type, const array& x, const std::vector<int>& axes,
                  bool keepdims, Stream s) {
  switch (type) {
    case Reduce::And: return all(x, axes, keepdims, s);
    case Reduce::Or: return any(x, axes, keepdims, s);
    case Reduce::Sum: return sum(x, axes, keepdims, s);
    case Reduce::Prod: return prod(x, axes, keepdims, s);
    case Reduce::Max: return max(x, axes, keepdims, s);
    case Reduce::Min: return min(x, axes, keepdims, s);
    case Reduce::Mean: return mean(x, axes, keepdims, s);
  }
  throw std::logic_error("[Reduce] unknown reduce type (bug)");
}

// d prod(x) / d x_i: the product of the other elements of x_i's group (keepdims
// axes), written so that its own derivatives are exact where the group holds
// zeros: (product of the nonzero elements but x_i) times (product of the zeros
// but x_i). The second factor is 1 or 0 in value, but carries the derivative
// of the zeros: with one zero z it is z for the other elements; with two, the
// other zero for each of them (the sum of the zeros minus x_i).
array prod_of_others(const array& x, const std::vector<int>& axes, Stream s) {
  array zero = equal(x, scalar_like(0, x), s);
  array one_x = scalar_like(1, x), zero_x = scalar_like(0, x);
  array safe = where(zero, one_x, x, s);
  array nonzero_but_self = divide(prod(safe, axes, true, s), safe, s);
  array count = sum(zero, axes, true, s);
  auto count_is = [&](int n) { return equal(count, array(n, count.dtype()), s); };
  array zeros_sum = sum(where(zero, x, zero_x, s), axes, true, s);
  array zeros_prod = where(count_is(0), one_x, where(count_is(1), zeros_sum, zero_x, s), s);
  array zeros_prod_but_self =
      where(count_is(1), one_x, where(count_is(2), subtract(zeros_sum, x, s), zero_x, s), s);
  return multiply(nonzero_but_self, where(zero, zeros_prod_but_self, zeros_prod, s), s);
}

// Max / min: 1 / (number of ties) at the positions equal to the result, 0
// elsewhere (the cotangent is shared evenly among ties, as in MLX).
array extremum_weights(const array& x, const array& result_kept, const std::vector<int>& axes,
                       Stream s) {
  array mask = equal(x, result_kept, s);
  array ties = astype(sum(mask, axes, true, s), x.dtype(), s);
  return divide(astype(mask, x.dtype(), s), ties, s);
}

}  // namespace

// ---- Reduce

std::vector<array> Reduce::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents, const std::vector<int>&,
                               const std::vector<array>& outputs) {
  auto s = stream();
  const array& x = primals[0];
  if (!differentiable(x, outputs[0].dtype())) return {zeros_like(x, s)};
  array c = astype(reshape(cotangents[0], kept_shape(x.shape(), axes_), s), x.dtype(), s);
  switch (type_) {
    case Sum: break;
    case Mean:
      c = divide(c, scalar_like(static_cast<double>(reduced_count(x.shape(), axes_)), c), s);
      break;
    case Prod: {
      array others = prod_of_others(x, axes_, s);
      if (is_complex(x.dtype())) others = conjugate(others, s);
      return {multiply(c, others, s)};
    }
    case Max:
    case Min: {
      array result = reshape(outputs[0], kept_shape(x.shape(), axes_), s);
      return {multiply(c, extremum_weights(x, result, axes_, s), s)};
    }
    case And:
    case Or: return {zeros_like(x, s)};
  }
  return {broadcast_to(c, x.shape(), s)};
}

std::vector<array> Reduce::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  const array& x = primals[0];
  const array& t = tangents[0];
  switch (type_) {
    case Sum:
    case Mean:
      if (is_inexact(x.dtype())) return {reduce_like(type_, t, axes_, keepdims_, s)};
      break;
    case Prod:
      if (is_inexact(x.dtype())) {
        return {sum(multiply(t, prod_of_others(x, axes_, s), s), axes_, keepdims_, s)};
      }
      break;
    case Max:
    case Min:
      if (is_inexact(x.dtype())) {
        array result = reduce_like(type_, x, axes_, true, s);
        return {sum(multiply(t, extremum_weights(x, result, axes_, s), s), axes_, keepdims_, s)};
      }
      break;
    case And:
    case Or: break;
  }
  return {zeros_like(reduce_like(type_, x, axes_, keepdims_, s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Reduce::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  const int b = axes[0];
  return {{reduce_like(type_, inputs[0], shift_axes(axes_, b), keepdims_, stream())},
          {reduced_batch_axis(b, axes_, keepdims_)}};
}

// ---- ArgReduce: an index, so zero derivatives.

namespace {

array arg_reduce_like(ArgReduce::ReduceType type, const array& x, int axis, bool keepdims,
                      Stream s) {
  return type == ArgReduce::ArgMax ? argmax(x, axis, keepdims, s) : argmin(x, axis, keepdims, s);
}

}  // namespace

std::vector<array> ArgReduce::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                  const std::vector<int>&, const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::vector<array> ArgReduce::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                  const std::vector<int>&) {
  return {zeros_like(arg_reduce_like(type_, primals[0], axis_, keepdims_, stream()), stream())};
}

std::pair<std::vector<array>, std::vector<int>> ArgReduce::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  const int b = axes[0];
  const int axis = axis_ >= b ? axis_ + 1 : axis_;
  return {{arg_reduce_like(type_, inputs[0], axis, keepdims_, stream())},
          {reduced_batch_axis(b, {axis_}, keepdims_)}};
}

// ---- Variance: var = sum |x - mean|^2 / n with n = max(N - ddof, 0), so
// d var = 2 Re(conj(x - mean) dx) / n, and d std = d var / (2 std). For
// complex x the cotangent of the real result is its real part, and the
// gradient 2 (x - mean) c / n follows MLX's convention for real functions of
// complex inputs (as for abs).

namespace {

double variance_divisor(const Shape& shape, const std::vector<int>& axes, int ddof) {
  return static_cast<double>(std::max<int64_t>(reduced_count(shape, axes) - ddof, 0));
}

}  // namespace

std::vector<array> Variance::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents, const std::vector<int>&,
                                 const std::vector<array>& outputs) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  const Shape kept = kept_shape(x.shape(), axes_);
  array c = reshape(cotangents[0], kept, s);
  if (is_complex(x.dtype())) c = astype(real(c, s), x.dtype(), s);
  array centered = subtract(x, mean(x, axes_, true, s), s);
  const double n = variance_divisor(x.shape(), axes_, ddof_);
  if (!take_sqrt_) return {multiply(multiply(c, centered, s), scalar_like(2 / n, x), s)};
  array out = reshape(outputs[0], kept, s);
  if (is_complex(x.dtype())) out = astype(real(out, s), x.dtype(), s);
  return {divide(multiply(c, centered, s), multiply(out, scalar_like(n, out), s), s)};
}

std::vector<array> Variance::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  const array& x = primals[0];
  array variance = var(x, axes_, keepdims_, ddof_, s);
  if (!is_inexact(x.dtype())) return {zeros_like(variance, s)};
  array centered = subtract(x, mean(x, axes_, true, s), s);
  array dot = multiply(is_complex(x.dtype()) ? conjugate(centered, s) : centered, tangents[0], s);
  if (is_complex(x.dtype())) dot = astype(real(dot, s), x.dtype(), s);
  const double n = variance_divisor(x.shape(), axes_, ddof_);
  array dvar = multiply(sum(dot, axes_, keepdims_, s), scalar_like(2 / n, x), s);
  if (!take_sqrt_) return {dvar};
  return {divide(dvar, multiply(sqrt(variance, s), scalar_like(2, x), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Variance::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  const int b = axes[0];
  auto ax = shift_axes(axes_, b);
  array out = take_sqrt_ ? tessera::std(inputs[0], ax, keepdims_, ddof_, stream())
                         : var(inputs[0], ax, keepdims_, ddof_, stream());
  return {{out}, {reduced_batch_axis(b, axes_, keepdims_)}};
}

// ---- LogSumExp: the derivative is the softmax over the axes.

std::vector<array> LogSumExp::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>& outputs) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  const Shape kept = kept_shape(x.shape(), axes_);
  array weights = exp(subtract(x, reshape(outputs[0], kept, s), s), s);
  return {multiply(reshape(cotangents[0], kept, s), weights, s)};
}

std::vector<array> LogSumExp::jvp(const std::vector<array>& primals,
                                  const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(logsumexp(x, axes_, keepdims_, s), s)};
  return {sum(multiply(tangents[0], softmax(x, axes_, false, s), s), axes_, keepdims_, s)};
}

std::pair<std::vector<array>, std::vector<int>> LogSumExp::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  const int b = axes[0];
  return {{logsumexp(inputs[0], shift_axes(axes_, b), keepdims_, stream())},
          {reduced_batch_axis(b, axes_, keepdims_)}};
}

// ---- Softmax: with y the output, d y = y (dx - sum(y dx)) and the vjp is
// y (c - sum(y c)), sums over the axes.

std::vector<array> Softmax::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents, const std::vector<int>&,
                                const std::vector<array>& outputs) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  const array& y = outputs[0];
  const array& c = cotangents[0];
  return {multiply(y, subtract(c, sum(multiply(c, y, s), axes_, true, s), s), s)};
}

std::vector<array> Softmax::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  const array& x = primals[0];
  array y = softmax(x, axes_, precise_, s);
  if (!is_inexact(x.dtype())) return {zeros_like(y, s)};
  const array& t = tangents[0];
  return {multiply(y, subtract(t, sum(multiply(t, y, s), axes_, true, s), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> Softmax::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  return {{softmax(inputs[0], shift_axes(axes_, axes[0]), precise_, stream())}, axes};
}

// ---- Trace: the vjp puts the cotangent on the diagonal `offset` of each
// (axis1, axis2) plane, built with those axes last and moved back.

std::vector<array> Trace::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>&,
                              const std::vector<array>&) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  const int nd = static_cast<int>(x.ndim());
  std::vector<int> perm;
  for (int d = 0; d < nd; ++d) {
    if (d != axis1_ && d != axis2_) perm.push_back(d);
  }
  perm.push_back(axis1_);
  perm.push_back(axis2_);
  std::vector<int> inverse(nd);
  for (int i = 0; i < nd; ++i) inverse[perm[i]] = i;
  array diagonal = eye(x.shape(axis1_), x.shape(axis2_), offset_, x.dtype(), s);
  array c = expand_dims(astype(cotangents[0], x.dtype(), s), {nd - 2, nd - 1}, s);
  return {transpose(multiply(c, diagonal, s), inverse, s)};
}

std::vector<array> Trace::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents, const std::vector<int>&) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(trace(x, offset_, axis1_, axis2_, s), s)};
  return {trace(tangents[0], offset_, axis1_, axis2_, s)};
}

std::pair<std::vector<array>, std::vector<int>> Trace::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  const int b = axes[0];
  const int axis1 = axis1_ >= b ? axis1_ + 1 : axis1_;
  const int axis2 = axis2_ >= b ? axis2_ + 1 : axis2_;
  const int out_axis = b - (axis1_ < b) - (axis2_ < b);
  return {{trace(inputs[0], offset_, axis1, axis2, stream())}, {out_axis}};
}

}  // namespace tessera
