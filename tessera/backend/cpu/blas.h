// BLAS set-up shared by the CPU kernels that call it, and the one entry to
// its matrix products.
#pragma once

#include <complex>
#include <cstdint>

namespace tessera::cpu {

// Call before the first BLAS call of a kernel (cheap after the first time).
//
// OpenBLAS builds with DYNAMIC_ARCH pick their kernels from the CPU model at
// load. Models newer than the library are taken for the generic fallback
// ("Prescott", SSE3), which runs gemm at a fifth of the speed of the AVX-512
// kernels the CPU can run. When that happened and the user has not chosen a
// core with OPENBLAS_CORETYPE, this re-selects the core from the CPU's
// features, through OpenBLAS's own OPENBLAS_CORETYPE mechanism. Other BLAS
// libraries are left alone.
//
// It also makes OpenBLAS run each call on its caller's thread (Note [One pool
// for BLAS]).
void blas_init();

// Note [One pool for BLAS]
// OpenBLAS has threads of its own, which spin (sched_yield) for a while after
// each call, waiting for the next. Between two products, Tessera's pool runs
// the other kernels on every core, and the spinning threads took a core from
// them: in a training step on 2 cores, 19% of all samples were OpenBLAS's
// second thread yielding. So OpenBLAS runs on one thread, its caller's, and
// gemm below cuts c into parts (rows, or columns when there are more columns
// than rows, in multiples of 16) that run on Tessera's pool, one BLAS call
// each; a batch of products runs one product per pool thread (in Matmul).
// Each element of c is the same sum of the same products either way.
// LAPACK routines (linalg) are not cut: while one runs, OpenBLAS has as many
// threads as the pool (LapackThreads).

// For the lifetime of one: OpenBLAS runs its calls on as many threads as
// Tessera's pool (its own), then on one again when the last one ends.
// Calls blas_init.
class LapackThreads {
 public:
  LapackThreads();
  ~LapackThreads();
  LapackThreads(const LapackThreads&) = delete;
  LapackThreads& operator=(const LapackThreads&) = delete;
};

// c (M x N, row stride ldc) = alpha op(a) op(b) + beta c, row-major, op the
// transpose where asked; T is float, double or std::complex<float>.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

extern template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                 int64_t, const float*, int64_t, float, float*, int64_t);
extern template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                  int64_t, const double*, int64_t, double, double*, int64_t);
extern template void gemm<std::complex<float>>(bool, bool, int64_t, int64_t, int64_t,
                                               std::complex<float>, const std::complex<float>*,
                                               int64_t, const std::complex<float>*, int64_t,
                                               std::complex<float>, std::complex<float>*,
                                               int64_t);

}  // namespace tessera::cpu
