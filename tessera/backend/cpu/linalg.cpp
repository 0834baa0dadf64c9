// eval_cpu of the linalg factorizations through LAPACKE.
//
// LAPACK is column-major; Tessera's outputs are row-major. A row-major R x C
// buffer read column-major is the C x R transpose, which the kernels use where
// it saves a copy: inv(A^T) = inv(A)^T, so getri on the raw buffer gives
// inv(A) row-major; A^T = P L U lets solve run getrs with trans 'T'; the SVD of
// A^T (= V S U^T) gives Vt and U row-major directly; the upper triangle of A^T
// is the lower triangle of A (cholesky, tri_inv, eigh). LU, QR and eig need A
// itself and transpose once into a column-major workspace.
//
// The matrices of a batch run in parallel on the pool when they are small;
// large ones run one after another, each threaded by the LAPACK library.
#define LAPACK_COMPLEX_CPP
#include <lapacke.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/backend/cpu/blas.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/linalg.h"

namespace tessera {

namespace {

// ---- LAPACKE by element type (column-major)

lapack_int getrf(int m, int n, float* a, int lda, lapack_int* ipiv) {
  return LAPACKE_sgetrf(LAPACK_COL_MAJOR, m, n, a, lda, ipiv);
}
lapack_int getrf(int m, int n, double* a, int lda, lapack_int* ipiv) {
  return LAPACKE_dgetrf(LAPACK_COL_MAJOR, m, n, a, lda, ipiv);
}
lapack_int getrs(char trans, int n, int nrhs, const float* a, int lda, const lapack_int* ipiv,
                 float* b, int ldb) {
  return LAPACKE_sgetrs(LAPACK_COL_MAJOR, trans, n, nrhs, a, lda, ipiv, b, ldb);
}
lapack_int getrs(char trans, int n, int nrhs, const double* a, int lda, const lapack_int* ipiv,
                 double* b, int ldb) {
  return LAPACKE_dgetrs(LAPACK_COL_MAJOR, trans, n, nrhs, a, lda, ipiv, b, ldb);
}
lapack_int getri(int n, float* a, int lda, const lapack_int* ipiv) {
  return LAPACKE_sgetri(LAPACK_COL_MAJOR, n, a, lda, ipiv);
}
lapack_int getri(int n, double* a, int lda, const lapack_int* ipiv) {
  return LAPACKE_dgetri(LAPACK_COL_MAJOR, n, a, lda, ipiv);
}
lapack_int trtri(char uplo, int n, float* a, int lda) {
  return LAPACKE_strtri(LAPACK_COL_MAJOR, uplo, 'N', n, a, lda);
}
lapack_int trtri(char uplo, int n, double* a, int lda) {
  return LAPACKE_dtrtri(LAPACK_COL_MAJOR, uplo, 'N', n, a, lda);
}
lapack_int potrf(char uplo, int n, float* a, int lda) {
  return LAPACKE_spotrf(LAPACK_COL_MAJOR, uplo, n, a, lda);
}
lapack_int potrf(char uplo, int n, double* a, int lda) {
  return LAPACKE_dpotrf(LAPACK_COL_MAJOR, uplo, n, a, lda);
}
lapack_int geqrf(int m, int n, float* a, int lda, float* tau) {
  return LAPACKE_sgeqrf(LAPACK_COL_MAJOR, m, n, a, lda, tau);
}
lapack_int geqrf(int m, int n, double* a, int lda, double* tau) {
  return LAPACKE_dgeqrf(LAPACK_COL_MAJOR, m, n, a, lda, tau);
}
lapack_int orgqr(int m, int n, int k, float* a, int lda, const float* tau) {
  return LAPACKE_sorgqr(LAPACK_COL_MAJOR, m, n, k, a, lda, tau);
}
lapack_int orgqr(int m, int n, int k, double* a, int lda, const double* tau) {
  return LAPACKE_dorgqr(LAPACK_COL_MAJOR, m, n, k, a, lda, tau);
}
lapack_int gesdd(char jobz, int m, int n, float* a, int lda, float* s, float* u, int ldu,
                 float* vt, int ldvt) {
  return LAPACKE_sgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, lda, s, u, ldu, vt, ldvt);
}
lapack_int gesdd(char jobz, int m, int n, double* a, int lda, double* s, double* u, int ldu,
                 double* vt, int ldvt) {
  return LAPACKE_dgesdd(LAPACK_COL_MAJOR, jobz, m, n, a, lda, s, u, ldu, vt, ldvt);
}
lapack_int syevd(char jobz, char uplo, int n, float* a, int lda, float* w) {
  return LAPACKE_ssyevd(LAPACK_COL_MAJOR, jobz, uplo, n, a, lda, w);
}
lapack_int syevd(char jobz, char uplo, int n, double* a, int lda, double* w) {
  return LAPACKE_dsyevd(LAPACK_COL_MAJOR, jobz, uplo, n, a, lda, w);
}
lapack_int geev(char jobvr, int n, float* a, int lda, float* wr, float* wi, float* vr, int ldvr) {
  return LAPACKE_sgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, a, lda, wr, wi, nullptr, 1, vr, ldvr);
}
lapack_int geev(char jobvr, int n, double* a, int lda, double* wr, double* wi, double* vr,
                int ldvr) {
  return LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', jobvr, n, a, lda, wr, wi, nullptr, 1, vr, ldvr);
}

// ---- helpers

// Calls f(tag) with the float type of t (float32 or float64; checked by the ops).
template <typename F>
void dispatch_float(Dtype t, const char* op, F f) {
  if (t == float32) {
    f(float{});
  } else if (t == float64) {
    f(double{});
  } else {
    throw std::logic_error(std::string("[") + op + "] needs float32 or float64 (bug)");
  }
}

int64_t batch_count(const array& a) {
  int64_t n = 1;
  for (size_t d = 0; d + 2 < a.ndim(); ++d) n *= a.shape(d);
  return n;
}

void check_lapack_size(int64_t m, int64_t n, const char* op) {
  if (m * std::max<int64_t>(n, 1) > INT_MAX || n * std::max<int64_t>(m, 1) > INT_MAX) {
    throw std::invalid_argument(std::string("[") + op + "] a matrix of " + std::to_string(m) +
                                " x " + std::to_string(n) + " is too large for LAPACK");
  }
}

// Runs f(b) for every matrix of the batch: on the pool when matrices are
// small, else in order (LAPACK threads each one).
template <typename F>
void for_each_matrix(int64_t batches, int64_t n, F f) {
  if (batches > 1 && n <= 128) {
    cpu::parallel_for(batches, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) f(b);
    });
  } else {
    for (int64_t b = 0; b < batches; ++b) f(b);
  }
}

// dst (C x R, row-major) = transpose of src (R x C, row-major).
template <typename T>
void transpose_copy(const T* src, int64_t R, int64_t C, T* dst) {
  constexpr int64_t tile = 32;
  for (int64_t r0 = 0; r0 < R; r0 += tile) {
    for (int64_t c0 = 0; c0 < C; c0 += tile) {
      const int64_t r1 = std::min(R, r0 + tile), c1 = std::min(C, c0 + tile);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) dst[c * R + r] = src[r * C + c];
      }
    }
  }
}

// Zeros the strictly upper (upper_part) or strictly lower triangle of a
// row-major n x n matrix.
template <typename T>
void zero_triangle(T* a, int64_t n, bool upper_part) {
  for (int64_t i = 0; i < n; ++i) {
    if (upper_part) {
      std::fill(a + i * n + i + 1, a + (i + 1) * n, T(0));
    } else {
      std::fill(a + i * n, a + i * n + i, T(0));
    }
  }
}

void allocate(array& out) { out.set_data(allocator::malloc(out.nbytes())); }

[[noreturn]] void throw_info(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("[") + op + "] " + what);
}

// The arguments are checked before LAPACK runs, but LAPACKE refuses a matrix
// that holds NaN (it names the matrix as the bad argument).
void check_argument(lapack_int info, const char* op, const char* routine) {
  if (info < 0) {
    throw std::invalid_argument(std::string("[") + op + "] the matrix holds NaN values (" +
                                routine + " refused argument " + std::to_string(-info) + ")");
  }
}

}  // namespace

// ---- LUF

void LUF::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::LapackThreads threads;
  array a = cpu::ensure_row_contiguous(inputs[0]);
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  check_lapack_size(m, n, "linalg::lu_factor");
  for (auto& o : outputs) allocate(o);
  uint32_t* second = second_ == none ? nullptr : outputs[1].data<uint32_t>();
  dispatch_float(a.dtype(), "LUF", [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* lu = outputs[0].data<T>();
    for_each_matrix(batch_count(a), std::max(m, n), [&](int64_t b) {
      std::vector<T> work(m * n);
      std::vector<lapack_int> ipiv(std::max<int64_t>(k, 1));
      transpose_copy(src + b * m * n, m, n, work.data());
      if (k > 0) {
        check_argument(getrf(m, n, work.data(), std::max<int64_t>(m, 1), ipiv.data()),
                       "linalg::lu_factor", "getrf");
      }
      transpose_copy(work.data(), n, m, lu + b * m * n);
      if (second_ == none) return;
      if (second_ == pivots) {
        for (int64_t i = 0; i < k; ++i) second[b * k + i] = static_cast<uint32_t>(ipiv[i] - 1);
        return;
      }
      std::vector<uint32_t> rows(m);
      std::iota(rows.begin(), rows.end(), 0u);
      for (int64_t i = 0; i < k; ++i) std::swap(rows[i], rows[ipiv[i] - 1]);
      // Row i of L U is row rows[i] of a: a[j] = (L U)[perm[j]].
      for (int64_t i = 0; i < m; ++i) second[b * m + rows[i]] = static_cast<uint32_t>(i);
    });
  });
}

// ---- Solve

void Solve::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::LapackThreads threads;
  array a = cpu::ensure_row_contiguous(inputs[0]);
  array rhs = cpu::ensure_row_contiguous(inputs[1]);
  const int64_t n = a.shape(-1), k = rhs.shape(-1);
  check_lapack_size(n, std::max(n, k), "linalg::solve");
  allocate(out);
  dispatch_float(out.dtype(), "Solve", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = rhs.data<T>();
    T* px = out.data<T>();
    if (n == 0 || k == 0) return;
    for_each_matrix(batch_count(a), n, [&](int64_t b) {
      // The buffer is A^T column-major: factor A^T, solve with its transpose.
      std::vector<T> lu(pa + b * n * n, pa + (b + 1) * n * n);
      std::vector<lapack_int> ipiv(n);
      lapack_int info = getrf(n, n, lu.data(), n, ipiv.data());
      check_argument(info, "linalg::solve", "getrf");
      if (info > 0) {
        throw_info("linalg::solve", "the matrix is singular: pivot " + std::to_string(info) +
                                        " of its LU factorization is zero");
      }
      T* x = px + b * n * k;
      std::vector<T> cols;
      T* target = x;
      if (k == 1) {
        std::memcpy(x, pb + b * n, n * sizeof(T));
      } else {
        cols.resize(n * k);
        transpose_copy(pb + b * n * k, n, k, cols.data());
        target = cols.data();
      }
      check_argument(getrs('T', n, k, lu.data(), n, ipiv.data(), target, n), "linalg::solve",
                     "getrs");
      if (k != 1) transpose_copy(cols.data(), k, n, x);
    });
  });
}

// ---- Inverse

void Inverse::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::LapackThreads threads;
  const int64_t n = out.shape(-1);
  check_lapack_size(n, n, "linalg::inv");
  const char* op = triangular_ ? "linalg::tri_inv" : "linalg::inv";
  allocate(out);
  cpu::copy_into(inputs[0], out);
  dispatch_float(out.dtype(), "Inverse", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    if (n == 0) return;
    for_each_matrix(batch_count(out), n, [&](int64_t b) {
      T* x = p + b * n * n;
      if (triangular_) {
        // The lower triangle of A is the upper one of the buffer (A^T).
        lapack_int info = trtri(upper_ ? 'L' : 'U', n, x, n);
        check_argument(info, op, "trtri");
        if (info > 0) {
          throw_info(op, "the matrix is singular: diagonal element " + std::to_string(info - 1) +
                             " is zero");
        }
        zero_triangle(x, n, !upper_);
        return;
      }
      std::vector<lapack_int> ipiv(n);
      lapack_int info = getrf(n, n, x, n, ipiv.data());
      check_argument(info, op, "getrf");
      if (info > 0) {
        throw_info(op, "the matrix is singular: pivot " + std::to_string(info) +
                           " of its LU factorization is zero");
      }
      check_argument(getri(n, x, n, ipiv.data()), op, "getri");
    });
  });
}

// ---- Cholesky

void Cholesky::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::LapackThreads threads;
  const int64_t n = out.shape(-1);
  check_lapack_size(n, n, "linalg::cholesky");
  allocate(out);
  cpu::copy_into(inputs[0], out);
  dispatch_float(out.dtype(), "Cholesky", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    if (n == 0) return;
    for_each_matrix(batch_count(out), n, [&](int64_t b) {
      T* x = p + b * n * n;
      // The buffer is A^T: A's lower triangle is its upper one, and the factor
      // U of A^T = U^T U, read row-major, is L = U^T.
      lapack_int info = potrf(upper_ ? 'L' : 'U', n, x, n);
      check_argument(info, "linalg::cholesky", "potrf");
      if (info > 0) {
        throw_info("linalg::cholesky", "the matrix is not positive definite: its leading minor "
                                       "of order " + std::to_string(info) + " is not");
      }
      zero_triangle(x, n, !upper_);
    });
  });
}

// ---- QRF

void QRF::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::LapackThreads threads;
  array a = cpu::ensure_row_contiguous(inputs[0]);
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  check_lapack_size(m, n, "linalg::qr");
  for (auto& o : outputs) allocate(o);
  dispatch_float(a.dtype(), "QRF", [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* q = outputs[0].data<T>();
    T* r = outputs[1].data<T>();
    if (k == 0) return;
    for_each_matrix(batch_count(a), std::max(m, n), [&](int64_t b) {
      std::vector<T> work(m * n), tau(k);
      transpose_copy(src + b * m * n, m, n, work.data());
      check_argument(geqrf(m, n, work.data(), m, tau.data()), "linalg::qr", "geqrf");
      T* rb = r + b * k * n;
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < n; ++j) rb[i * n + j] = j >= i ? work[j * m + i] : T(0);
      }
      check_argument(orgqr(m, k, k, work.data(), m, tau.data()), "linalg::qr", "orgqr");
      transpose_copy(work.data(), k, m, q + b * m * k);
    });
  });
}

// ---- SVD

void SVD::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::LapackThreads threads;
  array a = cpu::ensure_row_contiguous(inputs[0]);
  const int64_t m = a.shape(-2), n = a.shape(-1), k = std::min(m, n);
  check_lapack_size(m, n, "linalg::svd");
  for (auto& o : outputs) allocate(o);
  dispatch_float(a.dtype(), "SVD", [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* u = compute_uv_ ? outputs[0].data<T>() : nullptr;
    T* sv = outputs[compute_uv_ ? 1 : 0].data<T>();
    T* vt = compute_uv_ ? outputs[2].data<T>() : nullptr;
    for_each_matrix(batch_count(a), std::max(m, n), [&](int64_t b) {
      if (k == 0) {
        // No singular values: U and Vt are identities.
        if (compute_uv_) {
          std::fill(u + b * m * m, u + (b + 1) * m * m, T(0));
          std::fill(vt + b * n * n, vt + (b + 1) * n * n, T(0));
          for (int64_t i = 0; i < m; ++i) u[b * m * m + i * m + i] = T(1);
          for (int64_t i = 0; i < n; ++i) vt[b * n * n + i * n + i] = T(1);
        }
        return;
      }
      // The buffer is A^T (n x m, column-major) = V S U^T: its left factor is
      // V, whose column-major storage is Vt row-major, and its right factor
      // U^T, stored as U row-major.
      std::vector<T> work(src + b * m * n, src + (b + 1) * m * n);
      T dummy[1];
      lapack_int info =
          compute_uv_ ? gesdd('A', n, m, work.data(), n, sv + b * k, vt + b * n * n, n,
                              u + b * m * m, m)
                      : gesdd('N', n, m, work.data(), n, sv + b * k, dummy, 1, dummy, 1);
      check_argument(info, "linalg::svd", "gesdd");
      if (info > 0) throw std::runtime_error("[linalg::svd] the SVD did not converge");
    });
  });
}

// ---- Eigh

void Eigh::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::LapackThreads threads;
  array a = cpu::ensure_row_contiguous(inputs[0]);
  const int64_t n = a.shape(-1);
  check_lapack_size(n, n, "linalg::eigh");
  for (auto& o : outputs) allocate(o);
  dispatch_float(a.dtype(), "Eigh", [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    T* w = outputs[0].data<T>();
    T* v = compute_vectors_ ? outputs[1].data<T>() : nullptr;
    if (n == 0) return;
    for_each_matrix(batch_count(a), n, [&](int64_t b) {
      std::vector<T> work(src + b * n * n, src + (b + 1) * n * n);
      // The buffer is A^T: A's lower triangle is its upper one.
      lapack_int info = syevd(compute_vectors_ ? 'V' : 'N', upper_ ? 'L' : 'U', n, work.data(), n,
                              w + b * n);
      check_argument(info, "linalg::eigh", "syevd");
      if (info > 0) throw std::runtime_error("[linalg::eigh] the eigensolver did not converge");
      if (compute_vectors_) transpose_copy(work.data(), n, n, v + b * n * n);
    });
  });
}

// ---- Eig

void Eig::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::LapackThreads threads;
  array a = cpu::ensure_row_contiguous(inputs[0]);
  const int64_t n = a.shape(-1);
  check_lapack_size(n, n, "linalg::eig");
  for (auto& o : outputs) allocate(o);
  complex64_t* w = outputs[0].data<complex64_t>();
  complex64_t* v = compute_vectors_ ? outputs[1].data<complex64_t>() : nullptr;
  dispatch_float(a.dtype(), "Eig", [&](auto tag) {
    using T = decltype(tag);
    const T* src = a.data<T>();
    if (n == 0) return;
    for_each_matrix(batch_count(a), n, [&](int64_t b) {
      std::vector<T> work(n * n), wr(n), wi(n), vr(compute_vectors_ ? n * n : 1);
      transpose_copy(src + b * n * n, n, n, work.data());
      lapack_int info = geev(compute_vectors_ ? 'V' : 'N', n, work.data(), n, wr.data(),
                             wi.data(), vr.data(), compute_vectors_ ? n : 1);
      check_argument(info, "linalg::eig", "geev");
      if (info > 0) throw std::runtime_error("[linalg::eig] the eigensolver did not converge");
      for (int64_t j = 0; j < n; ++j) {
        w[b * n + j] = complex64_t(static_cast<float>(wr[j]), static_cast<float>(wi[j]));
      }
      if (!compute_vectors_) return;
      // A complex pair j, j + 1 (wi[j] > 0) is stored as vr[:, j] +- i vr[:, j + 1].
      complex64_t* vb = v + b * n * n;
      for (int64_t j = 0; j < n; ++j) {
        if (wi[j] != 0 && j + 1 < n) {
          for (int64_t i = 0; i < n; ++i) {
            const float re = static_cast<float>(vr[j * n + i]);
            const float im = static_cast<float>(vr[(j + 1) * n + i]);
            vb[i * n + j] = complex64_t(re, im);
            vb[i * n + j + 1] = complex64_t(re, -im);
          }
          ++j;
        } else {
          for (int64_t i = 0; i < n; ++i) vb[i * n + j] = complex64_t(static_cast<float>(vr[j * n + i]), 0.f);
        }
      }
    });
  });
}

}  // namespace tessera
