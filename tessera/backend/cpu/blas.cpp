#include "tessera/backend/cpu/blas.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tessera/backend/cpu/cblas.h"
#include "tessera/backend/cpu/threading.h"

// Present only when the BLAS is OpenBLAS built with DYNAMIC_ARCH.
extern "C" {
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
__attribute__((weak)) char* openblas_get_corename(void);
__attribute__((weak)) void openblas_set_num_threads(int);
}

namespace tessera::cpu {

namespace {

const char* best_core() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

void select_core() {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || !openblas_get_corename) return;
  if (std::getenv("OPENBLAS_CORETYPE")) return;
  const char* current = openblas_get_corename();
  if (!current || std::strcmp(current, "Prescott") != 0) return;
  const char* core = best_core();
  if (!core) return;
  setenv("OPENBLAS_CORETYPE", core, 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
}

}  // namespace

void blas_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    select_core();
    if (openblas_set_num_threads) openblas_set_num_threads(1);
  });
}

namespace {

std::mutex lapack_mutex;
int lapack_users = 0;  // LapackThreads alive

}  // namespace

LapackThreads::LapackThreads() {
  blas_init();
  if (!openblas_set_num_threads) return;
  std::lock_guard lock(lapack_mutex);
  if (lapack_users++ == 0) openblas_set_num_threads(num_threads());
}

LapackThreads::~LapackThreads() {
  if (!openblas_set_num_threads) return;
  std::lock_guard lock(lapack_mutex);
  if (--lapack_users == 0) openblas_set_num_threads(1);
}

namespace {

// Parts of c are whole multiples of kPart rows or columns (the BLAS kernels'
// register tiles), with at least kPartWork multiply-adds each.
constexpr int64_t kPart = 16;
constexpr int64_t kPartWork = int64_t{1} << 20;

template <typename T>
void blas_call(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  const int m = static_cast<int>(M), n = static_cast<int>(N), k = static_cast<int>(K);
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    cblas_cgemm(CblasRowMajor, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  }
}

}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  blas_init();
  if (M == 0 || N == 0) return;
  const bool by_rows = M >= N;
  const int64_t parts = ((by_rows ? M : N) + kPart - 1) / kPart;
  const int64_t part_work = kPart * (by_rows ? N : M) * std::max<int64_t>(K, 1);
  const int64_t grain = std::max<int64_t>(1, kPartWork / std::max<int64_t>(part_work, 1));
  parallel_for(parts, grain, [&](int64_t p0, int64_t p1) {
    const int64_t i0 = p0 * kPart, i1 = std::min((by_rows ? M : N), p1 * kPart);
    if (by_rows) {
      blas_call(trans_a, trans_b, i1 - i0, N, K, alpha, a + (trans_a ? i0 : i0 * lda), lda, b,
                ldb, beta, c + i0 * ldc, ldc);
    } else {
      blas_call(trans_a, trans_b, M, i1 - i0, K, alpha, a, lda, b + (trans_b ? i0 * ldb : i0),
                ldb, beta, c + i0, ldc);
    }
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                           int64_t, const double*, int64_t, double, double*, int64_t);
template void gemm<std::complex<float>>(bool, bool, int64_t, int64_t, int64_t,
                                        std::complex<float>, const std::complex<float>*,
                                        int64_t, const std::complex<float>*, int64_t,
                                        std::complex<float>, std::complex<float>*, int64_t);

}  // namespace tessera::cpu
