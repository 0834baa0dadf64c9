// Transform rules of Matmul and AddMM. The primitive sees matrices: matmul()
// reshapes 1-D operands to (1, K) / (K, 1) and broadcasts the batch axes before
// it builds the node, so the rules work on (..., M, K) @ (..., K, N). A batch
// axis that an operand has fewer of, or as 1, is summed out of its cotangent
// (sum_to_shape). Complex products follow MLX: the cotangent of a is
// c @ b^H, that of b is a^H @ c.
#include <algorithm>
#include <optional>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/copy.h"
#include "tessera/ops/primitives/matmul.h"

namespace tessera {

namespace {

// The conjugate transpose of the last two axes (the transpose for real dtypes).
array adjoint(const array& x, Stream s) {
  array t = swapaxes(x, -1, -2, s);
  return is_complex(x.dtype()) ? conjugate(t, s) : t;
}

// a @ b through the Matmul primitive for any dtype (matmul() takes inexact
// dtypes only; integer products come from outer and inner): a (..., M, K) and
// b (..., K, N) of one dtype, batch axes broadcast.
array product(const array& a, const array& b, Stream s) {
  if (is_inexact(a.dtype())) return matmul(a, b, s);
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  Shape a_shape = batch, b_shape = batch, out_shape = batch;
  a_shape.insert(a_shape.end(), {a.shape(-2), a.shape(-1)});
  b_shape.insert(b_shape.end(), {b.shape(-2), b.shape(-1)});
  out_shape.insert(out_shape.end(), {a.shape(-2), b.shape(-1)});
  return array(std::move(out_shape), a.dtype(), std::make_shared<Matmul>(s),
               {broadcast_to(a, a_shape, s), broadcast_to(b, b_shape, s)});
}

// The cotangents of the operands of c = a @ b at `argnums` (0: a, 1: b),
// scaled by alpha.
std::vector<array> product_vjp(const array& a, const array& b, const array& c,
                               const std::vector<int>& argnums, float alpha, Stream s) {
  std::vector<array> grads;
  for (int arg : argnums) {
    const array& x = arg == 0 ? a : b;
    if (!is_inexact(x.dtype())) {
      grads.push_back(zeros_like(x, s));
      continue;
    }
    // b shared by a's batch (Note [A shared b]): one product over all rows.
    const bool shared = arg == 1 && b.ndim() == 2 && a.ndim() > 2;
    array g = arg == 0   ? matmul(c, adjoint(b, s), s)
              : shared ? matmul(adjoint(flatten(a, 0, -2, s), s), flatten(c, 0, -2, s), s)
                       : matmul(adjoint(a, s), c, s);
    if (alpha != 1.f) g = multiply(g, array(alpha, g.dtype()), s);
    grads.push_back(astype(sum_to_shape(g, x.shape(), s), x.dtype(), s));
  }
  return grads;
}

// The tangent of a @ b given the tangents of the operands at `argnums`.
array product_jvp(const array& a, const array& b, const std::vector<array>& tangents,
                  const std::vector<int>& argnums, Stream s) {
  std::optional<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] > 1) continue;
    array term = argnums[i] == 0 ? matmul(tangents[i], b, s) : matmul(a, tangents[i], s);
    out = out ? add(*out, term, s) : term;
  }
  return out ? *out : zeros_like(product(a, b, s), s);
}

// The largest rank of the node's inputs without their vmapped axes.
size_t node_rank(const std::vector<array>& inputs, const std::vector<int>& axes) {
  size_t rank = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    rank = std::max(rank, inputs[i].ndim() - (axes[i] >= 0));
  }
  return rank;
}

// An operand batched at axis 0 whose node's rank (its rank without that
// axis) is below `rank`: unit axes after axis 0 bring it there, so that the
// vmapped axes line up however many batch axes the node's operands have (a
// shared b has none: Note [A shared b]).
array lined_up(const array& x, size_t rank, Stream s) {
  if (x.ndim() - 1 >= rank) return x;
  Shape shape = x.shape();
  shape.insert(shape.begin() + 1, rank - (x.ndim() - 1), 1);
  return reshape(x, shape, s);
}

// The inputs batched at axis 0 with a batch of size n: batched ones moved
// there, unbatched ones broadcast along a new axis 0, all of one rank.
std::vector<array> batch_in_front(const std::vector<array>& inputs, const std::vector<int>& axes,
                                  Stream s) {
  int n = 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) n = inputs[i].shape(axes[i]);
  }
  const size_t rank = node_rank(inputs, axes);
  std::vector<array> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) {
      out.push_back(lined_up(moveaxis(inputs[i], axes[i], 0, s), rank, s));
    } else {
      Shape shape = inputs[i].shape();
      shape.insert(shape.begin(), rank - inputs[i].ndim(), 1);
      array x = reshape(inputs[i], shape, s);
      shape.insert(shape.begin(), n);
      out.push_back(broadcast_to(expand_dims(x, 0, s), shape, s));
    }
  }
  return out;
}

}  // namespace

// ---- Matmul

std::vector<array> Matmul::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  return product_vjp(primals[0], primals[1], cotangents[0], argnums, 1.f, stream());
}

std::vector<array> Matmul::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  const array& a = primals[0];
  if (!is_inexact(a.dtype())) return {zeros_like(product(a, primals[1], stream()), stream())};
  return {product_jvp(a, primals[1], tangents, argnums, stream())};
}

// A batched operand gets its batch axis in front, as a new leading batch axis
// that an unbatched operand (one axis fewer) broadcasts against.
std::pair<std::vector<array>, std::vector<int>> Matmul::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto s = stream();
  const size_t rank = node_rank(inputs, axes);
  array a = axes[0] >= 0 ? lined_up(moveaxis(inputs[0], axes[0], 0, s), rank, s) : inputs[0];
  array b = axes[1] >= 0 ? lined_up(moveaxis(inputs[1], axes[1], 0, s), rank, s) : inputs[1];
  return {{product(a, b, s)}, {0}};
}

// ---- AddMM: out = alpha (a @ b) + beta c

std::vector<array> AddMM::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents,
                              const std::vector<int>& argnums, const std::vector<array>&) {
  auto s = stream();
  const array& c = cotangents[0];
  std::vector<int> product_args;
  for (int arg : argnums) {
    if (arg < 2) product_args.push_back(arg);
  }
  auto product_grads = product_vjp(primals[0], primals[1], c, product_args, alpha_, s);
  std::vector<array> grads;
  size_t next = 0;
  for (int arg : argnums) {
    if (arg < 2) {
      grads.push_back(product_grads[next++]);
      continue;
    }
    const array& y = primals[2];
    array g = beta_ == 1.f ? c : multiply(c, array(beta_, c.dtype()), s);
    grads.push_back(astype(sum_to_shape(g, y.shape(), s), y.dtype(), s));
  }
  return grads;
}

std::vector<array> AddMM::jvp(const std::vector<array>& primals,
                              const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  auto s = stream();
  const array &a = primals[0], &b = primals[1];
  array out = product_jvp(a, b, tangents, argnums, s);
  if (alpha_ != 1.f) out = multiply(out, array(alpha_, out.dtype()), s);
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] != 2) continue;
    array term = beta_ == 1.f ? tangents[i] : multiply(tangents[i], array(beta_, out.dtype()), s);
    out = add(out, term, s);
  }
  return {out};
}

std::pair<std::vector<array>, std::vector<int>> AddMM::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  auto s = stream();
  auto in = batch_in_front(inputs, axes, s);
  return {{addmm(in[2], in[0], in[1], alpha_, beta_, s)}, {0}};
}

}  // namespace tessera
