// matmul, addmm, inner, outer, tensordot.
#include "tessera/ops/matmul.h"

#include <algorithm>
#include <stdexcept>

#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/matmul.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

void check_inexact(Dtype t, const array& a, const array& b, const char* op) {
  if (!is_inexact(t)) {
    throw_invalid(op, "only inexact (floating point or complex) dtypes are supported, got " +
                          dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
  }
}

// Operands of a product in the primitive's form: a (..., M, K) and b (..., K, N)
// broadcast to the same batch shape and cast to the result dtype.
struct Product {
  array a, b;
  Shape shape;        // the primitive's output shape: batch + (M, N)
  Shape final_shape;  // without the axes that 1-D operands gained
  bool a_vector, b_vector;
};

Product prepare_product(const array& a, const array& b, Dtype t, const char* op,
                        StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    throw_invalid(op, "both operands need at least one dimension, got shapes " +
                          shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  Product p{a, b, {}, {}, a.ndim() == 1, b.ndim() == 1};
  if (p.a_vector) p.a = reshape(a, {1, a.shape(0)}, s);
  if (p.b_vector) p.b = reshape(b, {b.shape(0), 1}, s);
  const int na = static_cast<int>(p.a.ndim()), nb = static_cast<int>(p.b.ndim());
  if (p.a.shape(na - 1) != p.b.shape(nb - 2)) {
    throw_invalid(op, "last dimension of a " + shape_str(a.shape()) +
                          " must match the second-to-last of b " + shape_str(b.shape()));
  }
  // The batch axes: a's alone when b is a matrix (the decoding step's
  // x @ w.T takes this path once per linear layer, so it allocates little).
  Shape batch(p.a.shape().begin(), p.a.shape().end() - 2);
  if (nb > 2) {
    Shape batch_b(p.b.shape().begin(), p.b.shape().end() - 2);
    try {
      batch = broadcast_shapes(batch, batch_b, op);
    } catch (const std::invalid_argument&) {
      throw_invalid(op, "batch dimensions of a " + shape_str(a.shape()) + " and b " +
                            shape_str(b.shape()) + " cannot be broadcast");
    }
  }
  const int M = p.a.shape(na - 2), K = p.a.shape(na - 1), N = p.b.shape(nb - 1);
  auto with = [&batch](std::initializer_list<int> tail) {
    Shape shape;
    shape.reserve(batch.size() + tail.size());
    shape.assign(batch.begin(), batch.end());
    shape.insert(shape.end(), tail);
    return shape;
  };
  // A b without batch axes (nn.Linear's weight) stays a matrix, which the
  // primitive shares across a's batch (Note [A shared b] in
  // ops/primitives/matmul.h).
  p.a = astype(p.a, t, s);
  if (p.a.ndim() != batch.size() + 2 ||
      !std::equal(batch.begin(), batch.end(), p.a.shape().begin())) {
    p.a = broadcast_to(p.a, with({M, K}), s);
  }
  p.b = astype(p.b, t, s);
  if (nb > 2) p.b = broadcast_to(p.b, with({K, N}), s);
  p.shape = with({M, N});
  if (!p.a_vector && !p.b_vector) {
    p.final_shape = p.shape;
  } else if (p.a_vector && p.b_vector) {
    p.final_shape = std::move(batch);
  } else {
    p.final_shape = with({p.a_vector ? N : M});
  }
  return p;
}

// a (M, K) @ b (K, N) for any dtype t (integer and bool included).
array product_2d(const array& a, const array& b, Dtype t, StreamOrDevice s) {
  Shape shape{a.shape(0), b.shape(1)};
  return array(std::move(shape), t, std::make_shared<Matmul>(to_stream(s)),
               {astype(a, t, s), astype(b, t, s)});
}

array tensordot_impl(const array& a, const array& b, std::vector<int> axes_a,
                     std::vector<int> axes_b, const char* op, StreamOrDevice s) {
  if (axes_a.size() != axes_b.size()) {
    throw_invalid(op, "axes " + ints_str(axes_a) + " of a and " + ints_str(axes_b) +
                          " of b must have the same length");
  }
  const int na = static_cast<int>(a.ndim()), nb = static_cast<int>(b.ndim());
  normalize_axes(axes_a, na, op);  // checks range and repeats
  normalize_axes(axes_b, nb, op);
  int64_t K = 1;
  for (size_t i = 0; i < axes_a.size(); ++i) {
    axes_a[i] = normalize_axis(axes_a[i], na, op);
    axes_b[i] = normalize_axis(axes_b[i], nb, op);
    if (a.shape(axes_a[i]) != b.shape(axes_b[i])) {
      throw_invalid(op, "axis " + std::to_string(axes_a[i]) + " of a " + shape_str(a.shape()) +
                            " does not match axis " + std::to_string(axes_b[i]) + " of b " +
                            shape_str(b.shape()));
    }
    K *= a.shape(axes_a[i]);
  }
  Dtype t = promote_types(a.dtype(), b.dtype());
  check_inexact(t, a, b, op);

  auto free_axes = [](int n, const std::vector<int>& contracted) {
    std::vector<int> f;
    for (int i = 0; i < n; ++i) {
      if (std::find(contracted.begin(), contracted.end(), i) == contracted.end()) f.push_back(i);
    }
    return f;
  };
  std::vector<int> free_a = free_axes(na, axes_a), free_b = free_axes(nb, axes_b);
  Shape out_shape;
  int64_t M = 1, N = 1;
  for (int ax : free_a) {
    out_shape.push_back(a.shape(ax));
    M *= a.shape(ax);
  }
  for (int ax : free_b) {
    out_shape.push_back(b.shape(ax));
    N *= b.shape(ax);
  }
  auto permuted = [&](const array& x, std::vector<int> perm) {
    return perm == all_axes(static_cast<int>(x.ndim())) ? x : transpose(x, std::move(perm), s);
  };
  std::vector<int> perm_a = free_a, perm_b = axes_b;
  perm_a.insert(perm_a.end(), axes_a.begin(), axes_a.end());
  perm_b.insert(perm_b.end(), free_b.begin(), free_b.end());
  array a2 = reshape(permuted(a, perm_a), {static_cast<int>(M), static_cast<int>(K)}, s);
  array b2 = reshape(permuted(b, perm_b), {static_cast<int>(K), static_cast<int>(N)}, s);
  return reshape(product_2d(a2, b2, t, s), out_shape, s);
}

}  // namespace

array matmul(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  Product p = prepare_product(a, b, t, "matmul", s);
  check_inexact(t, a, b, "matmul");
  array out(p.shape, t, std::make_shared<Matmul>(to_stream(s)), {p.a, p.b});
  return p.final_shape == p.shape ? out : reshape(out, p.final_shape, s);
}

array addmm(array c, array a, array b, const float& alpha, const float& beta, StreamOrDevice s) {
  Dtype t = promote_types(promote_types(a.dtype(), b.dtype()), c.dtype());
  Product p = prepare_product(a, b, t, "addmm", s);
  if (!is_inexact(t)) {
    throw_invalid("addmm", "only inexact (floating point or complex) dtypes are supported, got " +
                               dtype_name(c.dtype()) + ", " + dtype_name(a.dtype()) + " and " +
                               dtype_name(b.dtype()));
  }
  // c broadcasts against the final output; then it gains the 1-D operands' axes.
  auto c_fits = [&] {
    try {
      return c.ndim() <= p.final_shape.size() &&
             broadcast_shapes(c.shape(), p.final_shape, "addmm") == p.final_shape;
    } catch (const std::invalid_argument&) {
      return false;
    }
  };
  if (!c_fits()) {
    throw_invalid("addmm", "c of shape " + shape_str(c.shape()) +
                               " cannot be broadcast to the output shape " +
                               shape_str(p.final_shape));
  }
  Shape c_shape(p.final_shape.size() - c.ndim(), 1);
  c_shape.insert(c_shape.end(), c.shape().begin(), c.shape().end());
  if (p.a_vector && p.b_vector) {
    c_shape.insert(c_shape.end(), {1, 1});
  } else if (p.a_vector) {
    c_shape.insert(c_shape.end() - 1, 1);
  } else if (p.b_vector) {
    c_shape.push_back(1);
  }
  array c_full = broadcast_to(astype(reshape(c, c_shape, s), t, s), p.shape, s);
  array out(p.shape, t, std::make_shared<AddMM>(to_stream(s), alpha, beta), {p.a, p.b, c_full});
  return p.final_shape == p.shape ? out : reshape(out, p.final_shape, s);
}

array inner(const array& a, const array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0) {
    // A scalar operand: the elementwise product.
    Dtype t = promote_types(a.dtype(), b.dtype());
    const array& scalar = a.ndim() == 0 ? a : b;
    const array& other = a.ndim() == 0 ? b : a;
    array prod = product_2d(reshape(scalar, {1, 1}, s),
                            reshape(other, {1, static_cast<int>(other.size())}, s), t, s);
    return reshape(prod, other.shape(), s);
  }
  if (a.shape(-1) != b.shape(-1)) {
    throw_invalid("inner", "last dimensions of a " + shape_str(a.shape()) + " and b " +
                               shape_str(b.shape()) + " must match");
  }
  return tensordot_impl(a, b, {-1}, {-1}, "inner", s);
}

array outer(const array& a, const array& b, StreamOrDevice s) {
  Dtype t = promote_types(a.dtype(), b.dtype());
  return product_2d(reshape(a, {static_cast<int>(a.size()), 1}, s),
                    reshape(b, {1, static_cast<int>(b.size())}, s), t, s);
}

array tensordot(const array& a, const array& b, const int axis, StreamOrDevice s) {
  const int na = static_cast<int>(a.ndim()), nb = static_cast<int>(b.ndim());
  if (axis < 0 || axis > na || axis > nb) {
    throw_invalid("tensordot", "axis " + std::to_string(axis) +
                                   " must be between 0 and the dimensions of a " +
                                   shape_str(a.shape()) + " and b " + shape_str(b.shape()));
  }
  std::vector<int> axes_a, axes_b;
  for (int i = 0; i < axis; ++i) {
    axes_a.push_back(na - axis + i);
    axes_b.push_back(i);
  }
  return tensordot_impl(a, b, std::move(axes_a), std::move(axes_b), "tensordot", s);
}

array tensordot(const array& a, const array& b, const std::vector<int>& axes_a,
                const std::vector<int>& axes_b, StreamOrDevice s) {
  return tensordot_impl(a, b, axes_a, axes_b, "tensordot", s);
}

}  // namespace tessera
