#include "tessera/backend/cpu/blas.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

// Present only when the BLAS is OpenBLAS built with DYNAMIC_ARCH.
extern "C" {
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
__attribute__((weak)) char* openblas_get_corename(void);
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
  std::call_once(once, select_core);
}

}  // namespace tessera::cpu
