// BLAS set-up shared by the CPU kernels that call it.
#pragma once

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
void blas_init();

}  // namespace tessera::cpu
