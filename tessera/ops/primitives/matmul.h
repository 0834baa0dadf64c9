// Matrix-product primitives.
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// out[..., i, j] = sum_k a[..., i, k] b[..., k, j]. Inputs come broadcast to the
// output's batch shape and cast to its dtype. float32 / float64 / complex64 go
// through BLAS; float16 / bfloat16 are computed in float32. Integer and bool
// dtypes (used by outer and inner with a scalar) run a plain loop.
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
