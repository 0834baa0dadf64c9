// Matrix-product primitives.
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// out[..., i, j] = sum_k a[..., i, k] b[..., k, j]. Inputs come broadcast to the
// output's batch shape and cast to its dtype, except a b of no batch axes
// (Note [A shared b]). float32 / float64 / complex64 go through BLAS;
// float16 / bfloat16 are computed in float32. Integer and bool dtypes (used by
// outer and inner with a scalar) run a plain loop.
//
// Note [A shared b]
// x (..., M, K) @ w (K, N), nn.Linear's product, keeps w a matrix in the node:
// the backends read it at batch stride 0 (views::batched_like), and the
// vjp computes w's cotangent as one product over all rows of x and of the
// cotangent, flattened (K, rows) @ (rows, N), where a batched product would
// write one (K, N) matrix per batch element and then sum them. Flattening
// merges axes only, so shapeless traces still infer every shape.
class Matmul : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  TESSERA_PRIMITIVE(Matmul)
};

// out = alpha (a @ b) + beta c; inputs {a, b, c}, c broadcast to the output
// shape. Inexact dtypes only.
class AddMM : public UnaryPrimitive {
 public:
  AddMM(Stream s, float alpha, float beta) : UnaryPrimitive(s), alpha_(alpha), beta_(beta) {}
  TESSERA_PRIMITIVE(AddMM, alpha_, beta_)

 private:
  float alpha_, beta_;
};

}  // namespace tessera
