// linalg: validate, pick the dtype, create the factorization nodes; the ops
// that follow from a factorization (det, pinv, lu, norm, ...) are compositions
// of public ops, so their derivatives come from the primitives' rules.
#include "tessera/ops/linalg.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/linalg.h"

namespace tessera::linalg {

namespace {

std::string op_name(const char* op) { return std::string("linalg::") + op; }

// The factorizations take float32 and float64.
void check_float(const array& a, const char* op) {
  if (a.dtype() != float32 && a.dtype() != float64) {
    throw_invalid(op_name(op).c_str(), "only float32 and float64 are supported, got " +
                                           dtype_name(a.dtype()));
  }
}

void check_matrix(const array& a, const char* op) {
  if (a.ndim() < 2) {
    throw_invalid(op_name(op).c_str(), "the array must have at least 2 dimensions, got shape " +
                                           shape_str(a.shape()));
  }
  check_float(a, op);
}

void check_square(const array& a, const char* op) {
  check_matrix(a, op);
  if (a.shape(-1) != a.shape(-2)) {
    throw_invalid(op_name(op).c_str(),
                  "the last two dimensions must be equal (a square matrix), got shape " +
                      shape_str(a.shape()));
  }
}

Shape with_last(const array& a, int drop, std::initializer_list<int> tail) {
  Shape s(a.shape().begin(), a.shape().end() - drop);
  s.insert(s.end(), tail);
  return s;
}

// The sign of the row permutation that LAPACK's pivots describe: (-1)^swaps.
array pivot_sign(const array& pivots, Dtype t, StreamOrDevice s) {
  int k = pivots.shape(-1);
  array swaps = sum(not_equal(pivots, arange(0.0, static_cast<double>(k), 1.0, uint32, s), s), -1, false, s);
  array odd = astype(remainder(swaps, array(2, uint32), s), t, s);
  return subtract(array(1.0, t), multiply(array(2.0, t), odd, s), s);
}

// ---- norms

array to_inexact(const array& a, StreamOrDevice s) {
  return is_inexact(a.dtype()) ? a : astype(a, float32, s);
}

array vector_norm(const array& a, double ord, const std::vector<int>& axes, bool keepdims,
                  StreamOrDevice s) {
  array x = to_inexact(a, s);
  array m = abs(x, s);
  if (ord == 0) {
    return astype(sum(not_equal(x, array(0, x.dtype()), s), axes, keepdims, s), m.dtype(), s);
  }
  if (ord == std::numeric_limits<double>::infinity()) return max(m, axes, keepdims, s);
  if (ord == -std::numeric_limits<double>::infinity()) return min(m, axes, keepdims, s);
  if (ord == 1) return sum(m, axes, keepdims, s);
  if (ord == 2) return sqrt(sum(square(m, s), axes, keepdims, s), s);
  array p(ord, m.dtype());
  return power(sum(power(m, p, s), axes, keepdims, s), reciprocal(p, s), s);
}

// The singular values of the matrices spanned by axes (r, c), batched over the
// other axes in their order.
array singular_values(const array& a, int r, int c, StreamOrDevice s) {
  std::vector<int> perm;
  for (int d = 0; d < static_cast<int>(a.ndim()); ++d) {
    if (d != r && d != c) perm.push_back(d);
  }
  perm.push_back(r);
  perm.push_back(c);
  array x = a.dtype() == float64 ? a : astype(a, float32, s);
  return svd(transpose(x, perm, s), false, s)[0];
}

array restore_axes(array x, int r, int c, bool keepdims, StreamOrDevice s) {
  return keepdims ? expand_dims(x, {std::min(r, c), std::max(r, c)}, s) : x;
}

array matrix_norm(const array& a, double ord, const std::vector<int>& axes, bool keepdims,
                  StreamOrDevice s) {
  const int r = axes[0], c = axes[1];
  const double inf = std::numeric_limits<double>::infinity();
  array m = abs(to_inexact(a, s), s);
  auto squeeze_both = [&](array x) {
    return keepdims ? x : squeeze(x, {std::min(r, c), std::max(r, c)}, s);
  };
  if (ord == 1 || ord == -1) {
    array cols = sum(m, r, true, s);
    return squeeze_both(ord == 1 ? max(cols, c, true, s) : min(cols, c, true, s));
  }
  if (ord == inf || ord == -inf) {
    array rows = sum(m, c, true, s);
    return squeeze_both(ord == inf ? max(rows, r, true, s) : min(rows, r, true, s));
  }
  if (ord == 2 || ord == -2) {
    array sv = singular_values(a, r, c, s);
    array out = ord == 2 ? max(sv, -1, false, s) : min(sv, -1, false, s);
    return restore_axes(astype(out, m.dtype(), s), r, c, keepdims, s);
  }
  throw_invalid("linalg::norm", "ord " + std::to_string(ord) +
                                    " is not a matrix norm (use 1, -1, 2, -2, inf, -inf, "
                                    "'fro' or 'nuc')");
}

// The axes a norm reduces over, normalized: 1 (vector) or 2 (matrix).
std::vector<int> norm_axes(const array& a, const std::optional<std::vector<int>>& axis) {
  const int nd = static_cast<int>(a.ndim());
  std::vector<int> axes;
  if (!axis) {
    if (nd != 1 && nd != 2) {
      throw_invalid("linalg::norm", "an ord needs a 1-D or 2-D array or explicit axes, got shape " +
                                        shape_str(a.shape()));
    }
    for (int d = 0; d < nd; ++d) axes.push_back(d);
    return axes;
  }
  if (axis->size() != 1 && axis->size() != 2) {
    throw_invalid("linalg::norm", "axis must name 1 (vector) or 2 (matrix) axes, got " +
                                      ints_str(*axis));
  }
  for (int ax : *axis) axes.push_back(normalize_axis(ax, nd, "linalg::norm"));
  if (axes.size() == 2 && axes[0] == axes[1]) {
    throw_invalid("linalg::norm", "the two matrix axes must differ, got " + ints_str(*axis));
  }
  return axes;
}

}  // namespace

array norm(const array& a, const double ord, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  auto axes = norm_axes(a, axis);
  return axes.size() == 1 ? vector_norm(a, ord, axes, keepdims, s)
                          : matrix_norm(a, ord, axes, keepdims, s);
}

array norm(const array& a, const double ord, int axis, bool keepdims, StreamOrDevice s) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}

array norm(const array& a, const std::string& ord, const std::optional<std::vector<int>>& axis,
           bool keepdims, StreamOrDevice s) {
  auto axes = norm_axes(a, axis);
  if (axes.size() != 2) {
    throw_invalid("linalg::norm", "ord '" + ord + "' is a matrix norm and needs 2 axes, got " +
                                      ints_str(axes));
  }
  if (ord == "fro") return vector_norm(a, 2, axes, keepdims, s);
  if (ord == "nuc") {
    array sv = singular_values(a, axes[0], axes[1], s);
    return restore_axes(sum(sv, -1, false, s), axes[0], axes[1], keepdims, s);
  }
  throw_invalid("linalg::norm", "ord '" + ord + "' is not a norm (use 'fro' or 'nuc')");
}

array norm(const array& a, const std::string& ord, int axis, bool keepdims, StreamOrDevice s) {
  return norm(a, ord, std::vector<int>{axis}, keepdims, s);
}

array norm(const array& a, const std::optional<std::vector<int>>& axis, bool keepdims,
           StreamOrDevice s) {
  std::vector<int> axes;
  if (axis) {
    axes = norm_axes(a, axis);
  } else {
    axes = all_axes(static_cast<int>(a.ndim()));
  }
  return vector_norm(a, 2, axes, keepdims, s);
}

array norm(const array& a, int axis, bool keepdims, StreamOrDevice s) {
  return norm(a, std::vector<int>{axis}, keepdims, s);
}

// ---- factorizations

std::pair<array, array> qr(const array& a, StreamOrDevice s) {
  check_matrix(a, "qr");
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto out = array::make_arrays({with_last(a, 2, {m, k}), with_last(a, 2, {k, n})},
                                {a.dtype(), a.dtype()}, std::make_shared<QRF>(to_stream(s)), {a});
  return {out[0], out[1]};
}

std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s) {
  check_matrix(a, "svd");
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto prim = std::make_shared<SVD>(to_stream(s), compute_uv);
  if (!compute_uv) return array::make_arrays({with_last(a, 2, {k})}, {a.dtype()}, prim, {a});
  return array::make_arrays({with_last(a, 2, {m, m}), with_last(a, 2, {k}), with_last(a, 2, {n, n})},
                            {a.dtype(), a.dtype(), a.dtype()}, prim, {a});
}

std::vector<array> svd(const array& a, StreamOrDevice s) { return svd(a, true, s); }

array inv(const array& a, StreamOrDevice s) {
  check_square(a, "inv");
  return array(a.shape(), a.dtype(), std::make_shared<Inverse>(to_stream(s), false, false), {a});
}

array tri_inv(const array& a, bool upper, StreamOrDevice s) {
  check_square(a, "tri_inv");
  return array(a.shape(), a.dtype(), std::make_shared<Inverse>(to_stream(s), true, upper), {a});
}

array pinv(const array& a, StreamOrDevice s) {
  check_matrix(a, "pinv");
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  if (k == 0) return zeros(with_last(a, 2, {n, m}), a.dtype(), s);
  auto usv = svd(a, true, s);
  const int nd = static_cast<int>(a.ndim());
  Shape start(nd, 0), u_stop = usv[0].shape(), v_stop = usv[2].shape();
  u_stop[nd - 1] = k;
  v_stop[nd - 2] = k;
  array u = slice(usv[0], start, u_stop, s);   // (..., M, K)
  array vt = slice(usv[2], start, v_stop, s);  // (..., K, N)
  const array& sv = usv[1];
  const double eps = a.dtype() == float64 ? std::numeric_limits<double>::epsilon()
                                          : std::numeric_limits<float>::epsilon();
  array cutoff = multiply(max(sv, -1, true, s), array(eps * std::max(m, n), a.dtype()), s);
  array keep = greater(sv, cutoff, s);
  array safe = where(keep, sv, array(1.0, a.dtype()), s);
  array sinv = where(keep, reciprocal(safe, s), array(0.0, a.dtype()), s);
  array v_scaled = multiply(swapaxes(vt, -1, -2, s), expand_dims(sinv, -2, s), s);
  return matmul(v_scaled, swapaxes(u, -1, -2, s), s);
}

array cholesky(const array& a, bool upper, StreamOrDevice s) {
  check_square(a, "cholesky");
  return array(a.shape(), a.dtype(), std::make_shared<Cholesky>(to_stream(s), upper), {a});
}

array cholesky_inv(const array& a, bool upper, StreamOrDevice s) {
  check_square(a, "cholesky_inv");
  array t = tri_inv(a, upper, s);
  array tt = swapaxes(t, -1, -2, s);
  return upper ? matmul(t, tt, s) : matmul(tt, t, s);
}

namespace {
// LUF's outputs: {LU}, {LU, pivots} or {LU, perm}.
std::vector<array> lu_outputs(const array& a, LUF::Second second, StreamOrDevice s) {
  const int m = a.shape(-2), n = a.shape(-1);
  auto prim = std::make_shared<LUF>(to_stream(s), second);
  if (second == LUF::none) return array::make_arrays({a.shape()}, {a.dtype()}, prim, {a});
  return array::make_arrays(
      {a.shape(), with_last(a, 2, {second == LUF::row_indices ? m : std::min(m, n)})},
      {a.dtype(), uint32}, prim, {a});
}
}  // namespace

std::pair<array, array> lu_factor(const array& a, StreamOrDevice s) {
  check_matrix(a, "lu_factor");
  auto out = lu_outputs(a, LUF::pivots, s);
  return {out[0], out[1]};
}

std::vector<array> lu(const array& a, StreamOrDevice s) {
  check_matrix(a, "lu");
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto out = lu_outputs(a, LUF::row_indices, s);
  const int nd = static_cast<int>(a.ndim());
  Shape start(nd, 0), l_stop = a.shape(), u_stop = a.shape();
  l_stop[nd - 1] = k;
  u_stop[nd - 2] = k;
  array l = add(tril(slice(out[0], start, l_stop, s), -1, s), eye(m, k, 0, a.dtype(), s), s);
  array u = triu(slice(out[0], start, u_stop, s), 0, s);
  return {out[1], l, u};
}

array solve(const array& a, const array& b, StreamOrDevice s) {
  check_square(a, "solve");
  if (b.ndim() < 1) {
    throw_invalid("linalg::solve", "b must have at least 1 dimension, got shape " +
                                       shape_str(b.shape()));
  }
  check_float(b, "solve");
  const int n = a.shape(-1);
  const bool vector = b.ndim() == 1;
  array b2 = vector ? reshape(b, {b.shape(0), 1}, s) : b;
  if (b2.shape(-2) != n) {
    throw_invalid("linalg::solve", "a of shape " + shape_str(a.shape()) +
                                       " cannot solve for b of shape " + shape_str(b.shape()) +
                                       ": b's rows must number " + std::to_string(n));
  }
  Dtype t = promote_types(a.dtype(), b.dtype());
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b2.shape().begin(), b2.shape().end() - 2), "linalg::solve");
  Shape a_shape = batch, b_shape = batch;
  a_shape.insert(a_shape.end(), {n, n});
  b_shape.insert(b_shape.end(), {n, b2.shape(-1)});
  array x(b_shape, t, std::make_shared<Solve>(to_stream(s)),
          {broadcast_to(astype(a, t, s), a_shape, s), broadcast_to(astype(b2, t, s), b_shape, s)});
  return vector ? squeeze(x, -1, s) : x;
}

array solve_triangular(const array& a, const array& b, bool upper, StreamOrDevice s) {
  check_square(a, "solve_triangular");
  check_float(b, "solve_triangular");
  if (b.ndim() < 1 || b.shape(b.ndim() == 1 ? 0 : -2) != a.shape(-1)) {
    throw_invalid("linalg::solve_triangular", "a of shape " + shape_str(a.shape()) +
                                                  " cannot solve for b of shape " +
                                                  shape_str(b.shape()));
  }
  return matmul(tri_inv(a, upper, s), b, s);
}

array cross(const array& a, const array& b, int axis, StreamOrDevice s) {
  const int nd = static_cast<int>(std::max(a.ndim(), b.ndim()));
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw_invalid("linalg::cross", "a " + shape_str(a.shape()) + " and b " +
                                       shape_str(b.shape()) + " must have at least 1 dimension");
  }
  const int ax = normalize_axis(axis, nd, "linalg::cross");
  auto size_at = [&](const array& x) {
    int d = ax - (nd - static_cast<int>(x.ndim()));
    return d < 0 ? 1 : x.shape(d);
  };
  const int na = size_at(a), nb = size_at(b);
  if ((na != 2 && na != 3) || (nb != 2 && nb != 3)) {
    throw_invalid("linalg::cross", "the vectors along axis " + std::to_string(axis) +
                                       " must have size 2 or 3, got shapes " +
                                       shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  auto three = [&](const array& x, int size) {
    array y = x;
    if (static_cast<int>(y.ndim()) < nd) {
      Shape sh(nd - y.ndim(), 1);
      sh.insert(sh.end(), y.shape().begin(), y.shape().end());
      y = reshape(y, sh, s);
    }
    if (size == 2) {
      std::vector<std::pair<int, int>> widths(nd, {0, 0});
      widths[ax] = {0, 1};
      y = pad(y, widths, array(0, y.dtype()), "constant", s);
    }
    return split(y, 3, ax, s);
  };
  auto x = three(a, na), y = three(b, nb);
  array c0 = subtract(multiply(x[1], y[2], s), multiply(x[2], y[1], s), s);
  array c1 = subtract(multiply(x[2], y[0], s), multiply(x[0], y[2], s), s);
  array c2 = subtract(multiply(x[0], y[1], s), multiply(x[1], y[0], s), s);
  return concatenate({c0, c1, c2}, ax, s);
}

namespace {
// eig runs on the CPU only, as in MLX.
void check_cpu(StreamOrDevice s, const char* op) {
  if (to_stream(s).device.type == Device::gpu) {
    throw_invalid(op_name(op).c_str(), "runs on the CPU only: pass a CPU stream or device");
  }
}
}  // namespace

std::pair<array, array> eig(const array& a, StreamOrDevice s) {
  check_square(a, "eig");
  check_cpu(s, "eig");
  const int n = a.shape(-1);
  auto out = array::make_arrays({with_last(a, 2, {n}), a.shape()}, {complex64, complex64},
                                std::make_shared<Eig>(to_stream(s), true), {a});
  return {out[0], out[1]};
}

array eigvals(const array& a, StreamOrDevice s) {
  check_square(a, "eigvals");
  check_cpu(s, "eigvals");
  const int n = a.shape(-1);
  return array::make_arrays({with_last(a, 2, {n})}, {complex64},
                            std::make_shared<Eig>(to_stream(s), false), {a})[0];
}

namespace {
bool upper_from(const std::string& uplo, const char* op) {
  if (uplo != "L" && uplo != "U") {
    throw_invalid(op_name(op).c_str(), "UPLO must be 'L' or 'U', got '" + uplo + "'");
  }
  return uplo == "U";
}
}  // namespace

array eigvalsh(const array& a, std::string UPLO, StreamOrDevice s) {
  check_square(a, "eigvalsh");
  bool upper = upper_from(UPLO, "eigvalsh");
  return array::make_arrays({with_last(a, 2, {a.shape(-1)})}, {a.dtype()},
                            std::make_shared<Eigh>(to_stream(s), upper, false), {a})[0];
}

std::pair<array, array> eigh(const array& a, std::string UPLO, StreamOrDevice s) {
  check_square(a, "eigh");
  bool upper = upper_from(UPLO, "eigh");
  auto out = array::make_arrays({with_last(a, 2, {a.shape(-1)}), a.shape()}, {a.dtype(), a.dtype()},
                                std::make_shared<Eigh>(to_stream(s), upper, true), {a});
  return {out[0], out[1]};
}

array det(const array& a, StreamOrDevice s) {
  check_square(a, "det");
  auto [f, pivots] = lu_factor(a, s);
  array d = diagonal(f, 0, -2, -1, s);
  return multiply(prod(d, -1, false, s), pivot_sign(pivots, a.dtype(), s), s);
}

std::pair<array, array> slogdet(const array& a, StreamOrDevice s) {
  check_square(a, "slogdet");
  // The sign from one factorization, log|det| from a second one without
  // pivots, so that either result may be used alone (transforms see the
  // outputs of a factorization that are alive).
  auto [f, pivots] = lu_factor(stop_gradient(a, s), s);
  array sgn = multiply(prod(sign(diagonal(f, 0, -2, -1, s), s), -1, false, s),
                       pivot_sign(pivots, a.dtype(), s), s);
  array d = diagonal(lu_outputs(a, LUF::none, s)[0], 0, -2, -1, s);
  array logabs = sum(log(abs(d, s), s), -1, false, s);
  return {sgn, logabs};
}

}  // namespace tessera::linalg

namespace tessera {

}  // namespace tessera
