// Primitives of the matrix factorizations (linalg). Each takes (..., M, N)
// inputs of one float dtype (float32 or float64) and factors every matrix of
// the batch; outputs are row-contiguous. Row-major storage is read by LAPACK
// and cuSOLVER (column-major) as the transpose, which the kernels use where it
// saves a copy (see backend/cpu/linalg.cpp).
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// P A = L U with partial pivoting. Outputs {LU (..., M, N)} (L below the
// diagonal, unit diagonal implied), and by `second`: nothing; pivots (..., K)
// uint32 (0-based, LAPACK's row swaps); or row indices perm (..., M) uint32 with
// a == (L U)[perm]. Singular matrices are factored (a zero on U's diagonal),
// not rejected.
class LUF : public Primitive {
 public:
  enum Second { none, pivots, row_indices };
  LUF(Stream s, Second second) : Primitive(s), second_(second) {}
  TESSERA_PRIMITIVE_MULTI(LUF, second_)

 private:
  Second second_;
};

// x with a x = b; inputs {a (..., N, N), b (..., N, K)} of one batch shape.
// A singular a is an error.
class Solve : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  TESSERA_PRIMITIVE(Solve)
};

// The inverse of a square matrix; with triangular, of its lower (upper) triangle,
// the other triangle of the result being zero. A singular matrix is an error.
class Inverse : public UnaryPrimitive {
 public:
  Inverse(Stream s, bool triangular, bool upper)
      : UnaryPrimitive(s), triangular_(triangular), upper_(upper) {}
  TESSERA_PRIMITIVE(Inverse, triangular_, upper_)

 private:
  bool triangular_, upper_;
};

// The Cholesky factor L (L L^T = a) read from a's lower triangle, or with upper
// U (U^T U = a) from its upper triangle; the other triangle of the result is 0.
class Cholesky : public UnaryPrimitive {
 public:
  Cholesky(Stream s, bool upper) : UnaryPrimitive(s), upper_(upper) {}
  TESSERA_PRIMITIVE(Cholesky, upper_)

 private:
  bool upper_;
};

// Reduced QR: outputs {Q (..., M, K), R (..., K, N)}, K = min(M, N).
class QRF : public Primitive {
 public:
  using Primitive::Primitive;
  TESSERA_PRIMITIVE_MULTI(QRF)
};

// Outputs {U (..., M, M), S (..., K), Vt (..., N, N)}, or {S} without compute_uv.
class SVD : public Primitive {
 public:
  SVD(Stream s, bool compute_uv) : Primitive(s), compute_uv_(compute_uv) {}
  TESSERA_PRIMITIVE_MULTI(SVD, compute_uv_)

 private:
  bool compute_uv_;
};

// The eigenproblems: outputs {w, V} (eigenvectors as columns), or {w}
// without compute_vectors.
class Eigenproblem : public Primitive {
 public:
  Eigenproblem(Stream s, bool compute_vectors)
      : Primitive(s), compute_vectors_(compute_vectors) {}

 protected:
  bool compute_vectors_;
};

// Symmetric, from the lower (upper) triangle: w (..., N) ascending, V (..., N, N).
class Eigh : public Eigenproblem {
 public:
  Eigh(Stream s, bool upper, bool compute_vectors)
      : Eigenproblem(s, compute_vectors), upper_(upper) {}
  TESSERA_PRIMITIVE_MULTI(Eigh, upper_, compute_vectors_)

 private:
  bool upper_;
};

// General: w (..., N) and V (..., N, N) complex64. CPU only (as in MLX).
class Eig : public Eigenproblem {
 public:
  using Eigenproblem::Eigenproblem;
  TESSERA_PRIMITIVE_MULTI(Eig, compute_vectors_)
};

}  // namespace tessera
