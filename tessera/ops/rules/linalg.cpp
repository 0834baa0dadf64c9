// Transform rules of the factorizations (real float matrices).
//
// Derivatives follow the matrix identities of the factorization (Giles,
// "An extended collection of matrix derivative results"; Townsend, "Differentiating
// the singular value decomposition"; Murray, "Differentiation of the Cholesky
// decomposition"). Cholesky and Eigh read one triangle of their input: their
// derivatives are those of the symmetric matrix built from that triangle,
// S = tril(A) + tril(A, -1)^T, so they match finite differences of any input.
// vmap moves the batched axis to the front, where it is one more batch axis.
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/linalg.h"

namespace tessera {

namespace {

array mT(const array& x, Stream s) { return swapaxes(x, -1, -2, s); }
array mm(const array& a, const array& b, Stream s) { return matmul(a, b, s); }

// The symmetric matrix an input with one meaningful triangle stands for, and
// the adjoint of that map.
array symmetric_from(const array& a, bool upper, Stream s) {
  return upper ? add(triu(a, 0, s), mT(triu(a, 1, s), s), s)
               : add(tril(a, 0, s), mT(tril(a, -1, s), s), s);
}
array symmetric_adjoint(const array& g, bool upper, Stream s) {
  return upper ? add(triu(g, 0, s), triu(mT(g, s), 1, s), s)
               : add(tril(g, 0, s), tril(mT(g, s), -1, s), s);
}

// x with its diagonal scaled by d.
array scale_diagonal(const array& x, double d, Stream s) {
  int n = x.shape(-1);
  array i = eye(n, x.dtype(), s);
  return subtract(x, multiply(multiply(x, i, s), array(1.0 - d, x.dtype()), s), s);
}

// F[i, j] = 1 / (v[j] - v[i]) off the diagonal, 0 on it (v: (..., k)).
array reciprocal_gaps(const array& v, Stream s) {
  int k = v.shape(-1);
  array i = eye(k, v.dtype(), s);
  array gaps = subtract(expand_dims(v, -2, s), expand_dims(v, -1, s), s);
  return divide(subtract(array(1.0, v.dtype()), i, s), add(gaps, i, s), s);
}

// Rows / columns [0, k) of the last two axes.
array first_columns(const array& x, int k, Stream s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  stop.back() = k;
  return slice(x, start, stop, s);
}
array first_rows(const array& x, int k, Stream s) {
  Shape start(x.ndim(), 0), stop = x.shape();
  stop[x.ndim() - 2] = k;
  return slice(x, start, stop, s);
}

// x (..., r, c) padded with zeros to (..., rows, cols).
array pad_to(const array& x, int rows, int cols, Stream s) {
  int nd = static_cast<int>(x.ndim());
  if (x.shape(-2) == rows && x.shape(-1) == cols) return x;
  return pad(x, {nd - 2, nd - 1}, {0, 0}, {rows - x.shape(-2), cols - x.shape(-1)},
             array(0, x.dtype()), "constant", s);
}

array diag_embed(const array& v, Stream s) {
  return multiply(expand_dims(v, -2, s), eye(v.shape(-1), v.dtype(), s), s);
}

array move_front(const array& x, int axis, Stream s) {
  return axis > 0 ? moveaxis(x, axis, 0, s) : x;
}

// The permutation matrix Pm with Pm @ a == (L U) for LUF's perm output.
array permutation_matrix(const array& perm, Dtype t, Stream s) {
  int m = perm.shape(-1);
  array rows = reshape(arange(0.0, static_cast<double>(m), 1.0, uint32, s), {m, 1}, s);
  return astype(equal(expand_dims(perm, -2, s), rows, s), t, s);
}

void require_square(const array& a, const char* prim, const char* rule) {
  if (a.shape(-1) != a.shape(-2)) {
    throw std::invalid_argument(std::string("[") + prim + "] the " + rule +
                                " is implemented for square matrices only");
  }
}

// The transforms pass every output of a multi-output primitive, dropped ones
// made again (array::outputs).
void require_outputs(const std::vector<array>& cotangents, size_t n, const char* prim) {
  if (cotangents.size() != n) {
    throw std::logic_error(std::string("[") + prim + "] the rule got " +
                           std::to_string(cotangents.size()) + " outputs, expected " +
                           std::to_string(n) + " (bug)");
  }
}

}  // namespace

// ---- LUF: P A = L U, X = L^-1 P dA U^-1, dL = L tril(X, -1), dU = triu(X) U.

namespace {
// The unit lower factor, the upper factor and the permutation matrix Pm of a
// square a (Pm a == L U), from a factorization with row indices.
struct LuParts {
  array l, u, pm;
};
LuParts lu_parts(const array& a, Stream s) {
  const int n = a.shape(-1);
  Shape perm_shape(a.shape().begin(), a.shape().end() - 1);
  auto f = array::make_arrays({a.shape(), perm_shape}, {a.dtype(), uint32},
                              std::make_shared<LUF>(s, LUF::row_indices), {a});
  return {add(tril(f[0], -1, s), eye(n, a.dtype(), s), s), triu(f[0], 0, s),
          permutation_matrix(f[1], a.dtype(), s)};
}
}  // namespace

std::vector<array> LUF::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  auto s = stream();
  const array& a = primals[0];
  require_square(a, "LUF", "jvp");
  auto [l, u, pm] = lu_parts(a, s);
  array x = mm(mm(linalg::tri_inv(l, false, s), mm(pm, tangents[0], s), s),
               linalg::tri_inv(u, true, s), s);
  array d = add(mm(l, tril(x, -1, s), s), mm(triu(x, 0, s), u, s), s);
  if (second_ == none) return {d};
  Shape second(a.shape().begin(), a.shape().end() - 1);
  return {d, zeros(second, uint32, s)};
}

std::vector<array> LUF::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>&) {
  auto s = stream();
  const array& a = primals[0];
  require_square(a, "LUF", "vjp");
  require_outputs(cotangents, second_ == none ? 1 : 2, "LUF");
  auto [l, u, pm] = lu_parts(a, s);
  const array& c = cotangents[0];
  array nmat = add(tril(mm(mT(l, s), tril(c, -1, s), s), -1, s),
                   triu(mm(triu(c, 0, s), mT(u, s), s), 0, s), s);
  array linv = linalg::tri_inv(l, false, s), uinv = linalg::tri_inv(u, true, s);
  return {mm(mT(pm, s), mm(mm(mT(linv, s), nmat, s), mT(uinv, s), s), s)};
}

std::pair<std::vector<array>, std::vector<int>> LUF::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto s = stream();
  array a = move_front(inputs[0], axes[0], s);
  auto prim = std::make_shared<LUF>(s, second_);
  if (second_ == none) return {array::make_arrays({a.shape()}, {a.dtype()}, prim, {a}), {0}};
  Shape second(a.shape().begin(), a.shape().end() - 2);
  const int m = a.shape(-2);
  second.push_back(second_ == row_indices ? m : std::min(m, a.shape(-1)));
  return {array::make_arrays({a.shape(), second}, {a.dtype(), uint32}, prim, {a}), {0, 0}};
}

// ---- Solve: X = A^-1 B, dX = A^-1 (dB - dA X).

std::vector<array> Solve::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                              const std::vector<int>& argnums) {
  auto s = stream();
  const array &a = primals[0], &b = primals[1];
  array x = linalg::solve(a, b, s);
  std::optional<array> rhs;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0 ? negative(mm(tangents[i], x, s), s) : tangents[i];
    rhs = rhs ? add(*rhs, term, s) : term;
  }
  return {linalg::solve(a, *rhs, s)};
}

std::vector<array> Solve::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                              const std::vector<int>& argnums, const std::vector<array>& outputs) {
  auto s = stream();
  array gb = linalg::solve(mT(primals[0], s), cotangents[0], s);
  std::vector<array> grads;
  for (int arg : argnums) {
    grads.push_back(arg == 0 ? negative(mm(gb, mT(outputs[0], s), s), s) : gb);
  }
  return grads;
}

std::pair<std::vector<array>, std::vector<int>> Solve::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  auto s = stream();
  array a = axes[0] >= 0 ? move_front(inputs[0], axes[0], s) : inputs[0];
  array b = axes[1] >= 0 ? move_front(inputs[1], axes[1], s) : inputs[1];
  return {{linalg::solve(a, b, s)}, {0}};
}

// ---- Inverse: dY = -Y dA Y, restricted to the triangle for tri_inv.

std::vector<array> Inverse::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  auto s = stream();
  array y = array(primals[0].shape(), primals[0].dtype(),
                  std::make_shared<Inverse>(s, triangular_, upper_), {primals[0]});
  array da = tangents[0];
  if (triangular_) da = upper_ ? triu(da, 0, s) : tril(da, 0, s);
  return {negative(mm(mm(y, da, s), y, s), s)};
}

std::vector<array> Inverse::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                const std::vector<int>&, const std::vector<array>& outputs) {
  auto s = stream();
  array yt = mT(outputs[0], s);
  array g = negative(mm(mm(yt, cotangents[0], s), yt, s), s);
  if (triangular_) g = upper_ ? triu(g, 0, s) : tril(g, 0, s);
  return {g};
}

std::pair<std::vector<array>, std::vector<int>> Inverse::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  auto s = stream();
  array a = move_front(inputs[0], axes[0], s);
  return {{triangular_ ? linalg::tri_inv(a, upper_, s) : linalg::inv(a, s)}, {0}};
}

// ---- Cholesky: with L the lower factor of S, dL = L Phi(L^-1 dS L^-T), Phi
// taking the lower triangle with a halved diagonal.

std::vector<array> Cholesky::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                                 const std::vector<int>&) {
  auto s = stream();
  array f = linalg::cholesky(primals[0], upper_, s);
  array l = upper_ ? mT(f, s) : f;
  array linv = linalg::tri_inv(l, false, s);
  array ds = symmetric_from(tangents[0], upper_, s);
  array x = mm(mm(linv, ds, s), mT(linv, s), s);
  array dl = mm(l, scale_diagonal(tril(x, 0, s), 0.5, s), s);
  return {upper_ ? mT(dl, s) : dl};
}

std::vector<array> Cholesky::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                 const std::vector<int>&, const std::vector<array>& outputs) {
  auto s = stream();
  array l = upper_ ? mT(outputs[0], s) : outputs[0];
  array lbar = upper_ ? mT(cotangents[0], s) : cotangents[0];
  array linv = linalg::tri_inv(l, false, s);
  array phi = scale_diagonal(tril(mm(mT(l, s), lbar, s), 0, s), 0.5, s);
  array g = mm(mm(mT(linv, s), phi, s), linv, s);
  return {symmetric_adjoint(g, upper_, s)};
}

std::pair<std::vector<array>, std::vector<int>> Cholesky::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  auto s = stream();
  return {{linalg::cholesky(move_front(inputs[0], axes[0], s), upper_, s)}, {0}};
}

// ---- QRF (M >= N): X = Q^T dA R^-1, Y = triu(X) + tril(X, -1)^T,
// dR = Y R, dQ = dA R^-1 - Q Y.

std::vector<array> QRF::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  auto s = stream();
  const array& a = primals[0];
  if (a.shape(-2) < a.shape(-1)) {
    throw std::invalid_argument("[QRF] the jvp is implemented for M >= N only");
  }
  auto [q, r] = linalg::qr(a, s);
  array rinv = linalg::tri_inv(r, true, s);
  array dar = mm(tangents[0], rinv, s);
  array x = mm(mT(q, s), dar, s);
  array y = add(triu(x, 0, s), mT(tril(x, -1, s), s), s);
  return {subtract(dar, mm(q, y, s), s), mm(y, r, s)};
}

std::vector<array> QRF::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>& outputs) {
  auto s = stream();
  if (primals[0].shape(-2) < primals[0].shape(-1)) {
    throw std::invalid_argument("[QRF] the vjp is implemented for M >= N only");
  }
  require_outputs(cotangents, 2, "QRF");
  const array &q = outputs[0], &r = outputs[1];
  const array &qbar = cotangents[0], &rbar = cotangents[1];
  array m = subtract(mm(rbar, mT(r, s), s), mm(mT(q, s), qbar, s), s);
  array nmat = add(triu(m, 0, s), mT(triu(m, 1, s), s), s);
  array rinv = linalg::tri_inv(r, true, s);
  return {mm(add(qbar, mm(q, nmat, s), s), mT(rinv, s), s)};
}

std::pair<std::vector<array>, std::vector<int>> QRF::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto s = stream();
  auto [q, r] = linalg::qr(move_front(inputs[0], axes[0], s), s);
  return {{q, r}, {0, 0}};
}

// ---- SVD (distinct singular values). With K = min(M, N), U_k, V_k the
// first K singular vectors, dP = U_k^T dA V_k and F = reciprocal_gaps(S^2):
//   dS = diag(dP)
//   dU_k = U_k (F o (dP S + S dP^T)) + (I - U_k U_k^T) dA V_k S^-1
//   dV_k = V_k (F o (S dP + dP^T S)) + (I - V_k V_k^T) dA^T U_k S^-1
// The remaining columns of U and rows of Vt are not determined by A; their
// tangents are zero and their cotangents are ignored.

std::vector<array> SVD::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  auto s = stream();
  const array& a = primals[0];
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  auto usv = linalg::svd(a, true, s);
  array uk = first_columns(usv[0], k, s), vk = mT(first_rows(usv[2], k, s), s);
  const array& sv = usv[1];
  const array& da = tangents[0];
  array dp = mm(mm(mT(uk, s), da, s), vk, s);
  array ds = diagonal(dp, 0, -2, -1, s);
  if (!compute_uv_) return {ds};
  array f = reciprocal_gaps(square(sv, s), s);
  array srow = expand_dims(sv, -2, s), scol = expand_dims(sv, -1, s);
  array sinv = reciprocal(srow, s);
  array du = add(mm(uk, multiply(f, add(multiply(dp, srow, s), multiply(scol, mT(dp, s), s), s), s), s),
                 multiply(subtract(mm(da, vk, s), mm(uk, mm(mT(uk, s), mm(da, vk, s), s), s), s),
                          sinv, s),
                 s);
  array dat_u = mm(mT(da, s), uk, s);
  array dv = add(mm(vk, multiply(f, add(multiply(scol, dp, s), multiply(mT(dp, s), srow, s), s), s), s),
                 multiply(subtract(dat_u, mm(vk, mm(mT(vk, s), dat_u, s), s), s), sinv, s), s);
  return {pad_to(du, m, m, s), ds, pad_to(mT(dv, s), n, n, s)};
}

std::vector<array> SVD::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>& outputs) {
  auto s = stream();
  const array& a = primals[0];
  const int m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  require_outputs(cotangents, compute_uv_ ? 3 : 1, "SVD");
  std::vector<array> usv = compute_uv_ ? outputs : linalg::svd(a, true, s);
  array uk = first_columns(usv[0], k, s), vk = mT(first_rows(usv[2], k, s), s);
  const array& sv = usv[1];
  const array& sbar = cotangents[compute_uv_ ? 1 : 0];
  array inner = diag_embed(sbar, s);
  if (!compute_uv_) return {mm(mm(uk, inner, s), mT(vk, s), s)};
  array ubar = first_columns(cotangents[0], k, s), vbar = mT(first_rows(cotangents[2], k, s), s);
  array f = reciprocal_gaps(square(sv, s), s);
  array srow = expand_dims(sv, -2, s), scol = expand_dims(sv, -1, s);
  array utu = mm(mT(uk, s), ubar, s), vtv = mm(mT(vk, s), vbar, s);
  array j = multiply(f, subtract(utu, mT(utu, s), s), s);
  array kk = multiply(f, subtract(vtv, mT(vtv, s), s), s);
  inner = add(add(inner, multiply(j, srow, s), s), multiply(scol, kk, s), s);
  array g = mm(mm(uk, inner, s), mT(vk, s), s);
  array sinv_row = reciprocal(srow, s);
  // (I - U_k U_k^T) Ubar S^-1 V_k^T and U_k S^-1 Vbar^T (I - V_k V_k^T).
  array ures = subtract(ubar, mm(uk, utu, s), s);
  array vres = subtract(vbar, mm(vk, vtv, s), s);
  g = add(g, mm(multiply(ures, sinv_row, s), mT(vk, s), s), s);
  g = add(g, mm(multiply(uk, sinv_row, s), mT(vres, s), s), s);
  return {g};
}

std::pair<std::vector<array>, std::vector<int>> SVD::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto s = stream();
  auto out = linalg::svd(move_front(inputs[0], axes[0], s), compute_uv_, s);
  return {out, std::vector<int>(out.size(), 0)};
}

// ---- Eigh: with dP = V^T dS V, dw = diag(dP), dV = V (F o dP),
// F[i, j] = 1 / (w[j] - w[i]).

std::vector<array> Eigh::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  auto s = stream();
  auto [w, v] = linalg::eigh(primals[0], upper_ ? "U" : "L", s);
  array dp = mm(mm(mT(v, s), symmetric_from(tangents[0], upper_, s), s), v, s);
  array dw = diagonal(dp, 0, -2, -1, s);
  if (!compute_vectors_) return {dw};
  return {dw, mm(v, multiply(reciprocal_gaps(w, s), dp, s), s)};
}

std::vector<array> Eigh::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>& outputs) {
  auto s = stream();
  require_outputs(cotangents, compute_vectors_ ? 2 : 1, "Eigh");
  const array& w = outputs[0];
  array inner = diag_embed(cotangents[0], s);
  array v = compute_vectors_ ? outputs[1] : linalg::eigh(primals[0], upper_ ? "U" : "L", s).second;
  if (compute_vectors_) {
    array vtv = mm(mT(v, s), cotangents[1], s);
    inner = add(inner, multiply(reciprocal_gaps(w, s), vtv, s), s);
  }
  return {symmetric_adjoint(mm(mm(v, inner, s), mT(v, s), s), upper_, s)};
}

std::pair<std::vector<array>, std::vector<int>> Eigh::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  auto s = stream();
  array a = move_front(inputs[0], axes[0], s);
  const char* uplo = upper_ ? "U" : "L";
  if (!compute_vectors_) return {{linalg::eigvalsh(a, uplo, s)}, {0}};
  auto [w, v] = linalg::eigh(a, uplo, s);
  return {{w, v}, {0, 0}};
}

// ---- Eig: not differentiable (as in MLX); vmap batches.

std::vector<array> Eig::jvp(const std::vector<array>&, const std::vector<array>&,
                            const std::vector<int>&) {
  throw std::invalid_argument("[Eig] linalg::eig and linalg::eigvals are not differentiable");
}

std::vector<array> Eig::vjp(const std::vector<array>&, const std::vector<array>&,
                            const std::vector<int>&, const std::vector<array>&) {
  throw std::invalid_argument("[Eig] linalg::eig and linalg::eigvals are not differentiable");
}

std::pair<std::vector<array>, std::vector<int>> Eig::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  auto s = stream();
  array a = move_front(inputs[0], axes[0], s);
  if (!compute_vectors_) return {{linalg::eigvals(a, s)}, {0}};
  auto [w, v] = linalg::eig(a, s);
  return {{w, v}, {0, 0}};
}

}  // namespace tessera
