// Linear algebra beyond products (namespace linalg): norms, factorizations,
// inverses, solves and eigenproblems, after MLX's mlx/linalg.h.
//
//   auto [q, r] = linalg::qr(a);             // a == q @ r
//   auto x = linalg::solve(a, b);            // a @ x == b
//   auto [w, v] = linalg::eigh(a);           // a @ v == v * w
//   auto n = linalg::norm(a, "fro");
//
// Matrix functions act on the last two axes and batch over the rest. The
// factorizations take float32 or float64 (float16 / bfloat16 / integer / bool
// input is a std::invalid_argument naming the op and the dtype); norm and cross
// take any numeric dtype. CPU through LAPACKE; GPU through cuSOLVER, except eig
// and eigvals, which run on the CPU only (as in MLX). A singular matrix given
// to inv, tri_inv, solve, or a matrix that is not positive definite given to
// cholesky, raises std::invalid_argument at evaluation (LAPACK's report);
// lu_factor, det and slogdet accept singular matrices.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera::linalg {

// Vector norms (axis an int or a 1-element list) and matrix norms (2 axes);
// without axis: the 1-D vector or 2-D matrix norm, or with no ord the 2-norm of
// the flattened array. ord: inf, -inf, 0, 1, -1, 2, -2, any p (vectors), "fro",
// "nuc" (matrices). Integer input is computed in float32.
array norm(const array& a, const double ord, const std::optional<std::vector<int>>& axis = std::nullopt,
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, const double ord, int axis, bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, const std::string& ord,
           const std::optional<std::vector<int>>& axis = std::nullopt, bool keepdims = false,
           StreamOrDevice s = {});
array norm(const array& a, const std::string& ord, int axis, bool keepdims = false,
           StreamOrDevice s = {});
array norm(const array& a, const std::optional<std::vector<int>>& axis = std::nullopt,
           bool keepdims = false, StreamOrDevice s = {});
array norm(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// Reduced QR: Q (..., M, K) with orthonormal columns, R (..., K, N) upper, K = min(M, N).
std::pair<array, array> qr(const array& a, StreamOrDevice s = {});
// {U (..., M, M), S (..., K), Vt (..., N, N)} with a == U[:, :K] diag(S) Vt[:K],
// S descending; {S} without compute_uv.
std::vector<array> svd(const array& a, bool compute_uv, StreamOrDevice s = {});
std::vector<array> svd(const array& a, StreamOrDevice s = {});
array inv(const array& a, StreamOrDevice s = {});
// Inverse of the lower (or upper) triangle of a; the other triangle is not read.
array tri_inv(const array& a, bool upper = false, StreamOrDevice s = {});
// Moore-Penrose pseudo-inverse through the SVD (singular values below
// max(M, N) * eps * max(S) count as zero).
array pinv(const array& a, StreamOrDevice s = {});
// L with L @ L^T == a (upper: U with U^T @ U == a); reads the matching triangle.
array cholesky(const array& a, bool upper = false, StreamOrDevice s = {});
// inv(a) from its Cholesky factor.
array cholesky_inv(const array& a, bool upper = false, StreamOrDevice s = {});
// {p (uint32, (..., M)), L (..., M, K), U (..., K, N)} with a == L[p, :] @ U.
std::vector<array> lu(const array& a, StreamOrDevice s = {});
// {LU (L below the diagonal, unit diagonal implied; U on and above),
//  pivots (uint32, (..., K)): row i was swapped with row pivots[i]}.
std::pair<array, array> lu_factor(const array& a, StreamOrDevice s = {});
// x with a @ x == b; b is (..., N, K), or (N,) for one vector. Batch axes broadcast.
array solve(const array& a, const array& b, StreamOrDevice s = {});
array solve_triangular(const array& a, const array& b, bool upper = false, StreamOrDevice s = {});
// Cross product of vectors of size 2 or 3 along axis (size 2 is padded with 0).
array cross(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});
// Eigenvalues and right eigenvectors (columns) of a general square matrix,
// complex64. CPU only.
std::pair<array, array> eig(const array& a, StreamOrDevice s = {});
array eigvals(const array& a, StreamOrDevice s = {});
// Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a
// symmetric matrix, read from its lower ("L") or upper ("U") triangle.
array eigvalsh(const array& a, std::string UPLO = "L", StreamOrDevice s = {});
std::pair<array, array> eigh(const array& a, std::string UPLO = "L", StreamOrDevice s = {});
array det(const array& a, StreamOrDevice s = {});
// {sign in {-1, 0, 1}, log|det|}; a singular matrix gives (0, -inf).
std::pair<array, array> slogdet(const array& a, StreamOrDevice s = {});

}  // namespace tessera::linalg
