// Transform rules of Scan. With S the scan of the same kind and flags and S'
// the cumsum in the opposite direction (same `inclusive`):
//   cumsum        jvp S(t); vjp S'(g).
//   cumprod       jvp out * S(t / x) + out1 * S(t at the first zero), vjp
//                 S'(g conj(out)) / conj(x) where x != 0, S'(g conj(out1)) at
//                 the first zero of each scan range and 0 at later zeros; out1
//                 is the scan of x with its first zero (in scan order)
//                 replaced by 1, so zeros are exact, with no division by them.
//   cummax/min    the derivative flows through the position where the running
//                 extreme was last attained ("heads": x == inclusive scan).
//                 The heads of a row, gathered first by a stable argsort and
//                 scattered back by its inverse (PermuteAxis), give each head
//                 the cotangent sum of its run (vjp) and the running tangent
//                 of the latest head (jvp). Exclusive scans shift by one.
//   logcumsumexp  vjp exp(x - c) S'(g exp(c - out)), jvp exp(c - out) S(t exp(x - c)),
//                 c the row max, and nothing flows from -inf outputs.
// Integer and bool scans have zero derivatives. vmap scans the batched input
// along the shifted axis.
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/scan.h"
#include "tessera/ops/primitives/sort.h"
#include "tessera/ops/scan.h"
#include "tessera/ops/sort.h"

namespace tessera {

namespace {

array scan_like(Scan::ReduceType type, const array& x, int axis, bool reverse, bool inclusive,
                Stream s) {
  switch (type) {
    case Scan::Sum: return cumsum(x, axis, reverse, inclusive, std::nullopt, s);
    case Scan::Prod: return cumprod(x, axis, reverse, inclusive, std::nullopt, s);
    case Scan::Max: return cummax(x, axis, reverse, inclusive, s);
    case Scan::Min: return cummin(x, axis, reverse, inclusive, s);
    case Scan::LogAddExp: return logcumsumexp(x, axis, reverse, inclusive, s);
  }
  return x;
}

array scalar_like(double v, const array& like) { return array(v, like.dtype()); }

// Moves every element one place along the axis: towards the end (forward) or
// the start, filling with zero.
array shift(const array& a, int axis, bool forward, Stream s) {
  const int n = a.shape(axis);
  if (n == 0) return a;
  Shape start(a.ndim(), 0), stop = a.shape();
  if (forward) {
    stop[axis] = n - 1;
  } else {
    start[axis] = 1;
  }
  std::vector<std::pair<int, int>> widths(a.ndim(), {0, 0});
  widths[axis] = forward ? std::pair<int, int>{1, 0} : std::pair<int, int>{0, 1};
  return pad(slice(a, start, stop, s), widths, scalar_like(0, a), "constant", s);
}

// 0, 1, ..., n-1 along `axis`, shaped to broadcast against an array of ndim dims.
array positions(int n, int axis, int ndim, Stream s) {
  Shape shape(ndim, 1);
  shape[axis] = n;
  return reshape(arange(0, n, int32, s), shape, s);
}

struct Heads {
  array order;    // argsort of "not a head": the heads first, in order
  array inverse;  // its inverse permutation
  array valid;    // position k < number of heads
  array next_valid;
};

// x and the inclusive running extreme `inc` in scan order (forward).
Heads heads_of(const array& x, const array& inc, int axis, Stream s) {
  array head = equal(x, inc, s);
  array order = argsort(astype(logical_not(head, s), uint8, s), axis, s);
  array inverse = argsort(order, axis, s);
  array count = sum(astype(head, int32, s), axis, true, s);
  array k = positions(x.shape(axis), axis, static_cast<int>(x.ndim()), s);
  return {order, inverse, less(k, count, s), less(add(k, array(1), s), count, s)};
}

array in_scan_order(const array& a, int axis, bool reverse, Stream s) {
  return reverse ? flip(a, axis, s) : a;
}

// What the derivatives of a cumulative product need where x has zeros: the
// zeros, the first zero of each scan (in scan order), the product with that
// first zero replaced by 1, and x with its zeros replaced by 1.
struct ProdZeros {
  array zero, first_zero, out1, safe_x;
};

ProdZeros prod_zeros(const array& x, int axis, bool reverse, bool inclusive, Stream s) {
  array zero = equal(x, scalar_like(0, x), s);
  array first_zero = logical_and(
      zero,
      equal(cumsum(astype(zero, int32, s), axis, reverse, true, std::nullopt, s), array(1), s), s);
  array out1 = cumprod(where(first_zero, scalar_like(1, x), x, s), axis, reverse, inclusive,
                       std::nullopt, s);
  return {zero, first_zero, out1, where(zero, scalar_like(1, x), x, s)};
}

}  // namespace

std::vector<array> Scan::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>& outputs) {
  const array& x = primals[0];
  const array& g = cotangents[0];
  const Stream s = stream();
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  auto back = [&](const array& v) {
    return cumsum(v, axis_, !reverse_, inclusive_, std::nullopt, s);
  };
  switch (type_) {
    case Sum: return {back(g)};
    case Prod: {
      const array& out = outputs[0];
      auto [zero, first_zero, out1, safe_x] = prod_zeros(x, axis_, reverse_, inclusive_, s);
      array nonzero_part =
          divide(back(multiply(g, conjugate(out, s), s)), conjugate(safe_x, s), s);
      array zero_part = back(multiply(g, conjugate(out1, s), s));
      return {where(zero, where(first_zero, zero_part, scalar_like(0, x), s), nonzero_part, s)};
    }
    case Max:
    case Min: {
      array xo = in_scan_order(x, axis_, reverse_, s);
      array go = in_scan_order(g, axis_, reverse_, s);
      array inc = type_ == Max ? cummax(xo, axis_, false, true, s) : cummin(xo, axis_, false, true, s);
      if (!inclusive_) go = shift(go, axis_, false, s);
      Heads h = heads_of(xo, inc, axis_, s);
      array tail = cumsum(go, axis_, true, true, std::nullopt, s);
      array p = detail::permute_axis(tail, h.order, axis_, s);
      array next = where(h.next_valid, shift(p, axis_, false, s), scalar_like(0, x), s);
      array d = where(h.valid, subtract(p, next, s), scalar_like(0, x), s);
      return {in_scan_order(detail::permute_axis(d, h.inverse, axis_, s), axis_, reverse_, s)};
    }
    case LogAddExp: {
      const array& out = outputs[0];
      array c = stop_gradient(max(x, axis_, true, s), s);
      array w = where(isneginf(out, s), scalar_like(0, x),
                      multiply(g, exp(subtract(c, out, s), s), s), s);
      return {multiply(exp(subtract(x, c, s), s), back(w), s)};
    }
  }
  return {zeros_like(x, s)};
}

std::vector<array> Scan::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  const array& x = primals[0];
  const array& t = tangents[0];
  const Stream s = stream();
  array out = scan_like(type_, x, axis_, reverse_, inclusive_, s);
  if (!is_inexact(x.dtype())) return {zeros_like(out, s)};
  auto fwd = [&](const array& v) {
    return cumsum(v, axis_, reverse_, inclusive_, std::nullopt, s);
  };
  switch (type_) {
    case Sum: return {fwd(t)};
    case Prod: {
      auto [zero, first_zero, out1, safe_x] = prod_zeros(x, axis_, reverse_, inclusive_, s);
      array a = multiply(out, fwd(where(zero, scalar_like(0, x), divide(t, safe_x, s), s)), s);
      array b = multiply(out1, fwd(where(first_zero, t, scalar_like(0, x), s)), s);
      return {add(a, b, s)};
    }
    case Max:
    case Min: {
      array xo = in_scan_order(x, axis_, reverse_, s);
      array to = in_scan_order(t, axis_, reverse_, s);
      array inc = type_ == Max ? cummax(xo, axis_, false, true, s) : cummin(xo, axis_, false, true, s);
      Heads h = heads_of(xo, inc, axis_, s);
      array p = detail::permute_axis(to, h.order, axis_, s);
      array prev = shift(p, axis_, true, s);
      array d = where(h.valid, subtract(p, prev, s), scalar_like(0, x), s);
      array j = cumsum(detail::permute_axis(d, h.inverse, axis_, s), axis_, false, true,
                       std::nullopt, s);
      if (!inclusive_) j = shift(j, axis_, true, s);
      return {in_scan_order(j, axis_, reverse_, s)};
    }
    case LogAddExp: {
      array c = stop_gradient(max(x, axis_, true, s), s);
      array r = multiply(exp(subtract(c, out, s), s), fwd(multiply(t, exp(subtract(x, c, s), s), s)), s);
      return {where(isneginf(out, s), scalar_like(0, out), r, s)};
    }
  }
  return {zeros_like(out, s)};
}

std::pair<std::vector<array>, std::vector<int>> Scan::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  const int b = axes[0];
  const int axis = axis_ >= b ? axis_ + 1 : axis_;
  return {{scan_like(type_, inputs[0], axis, reverse_, inclusive_, stream())}, {b}};
}

}  // namespace tessera
