// Dense products of few rows through the matrix-vector kernel of gemv.cuh
// (Note [Dense GEMV]), for Matmul's eval_gpu (matmul.cpp) and grouped
// products (Note [Grouped products] in core/grouped.h):
//
//   if (gpu::dense_gemv(x, K, w, K, y, N, bfloat16, M, N, K, s)) return;  // else cuBLASLt
#pragma once

#include <cstdint>

#include "tessera/core/device.h"
#include "tessera/core/dtype.h"

namespace tessera::gpu {

// One weight matrix of a product: y (M, n), rows at stride ldy, = x @ W^T
// with W (n, K) in rows at stride ldw (strides in elements).
struct GemvWeight {
  const void* w;
  int64_t ldw;
  void* y;
  int64_t ldy;
  int64_t n;
};

// y_i = x (M, K), rows at stride ldx, @ W_i^T for each of count (1 to 4)
// weights, in one launch queued on s. dtype is float32, float16 or bfloat16
// (sums in float32). Returns false, queueing nothing, where the kernel does
// not apply: more than 4 rows of x (gemv::kMaxRows), another dtype, x or a W
// not 16-byte aligned, or K, ldx or an ldw not a whole number of 16-byte
// chunks.
bool dense_gemv(const void* x, int64_t ldx, const GemvWeight* weights, int count, Dtype dtype,
                int64_t M, int64_t K, const Stream& s);

// Whether dense_gemv applies (the y pointers are not read).
bool dense_gemv_applies(const void* x, int64_t ldx, const GemvWeight* weights, int count,
                        Dtype dtype, int64_t M, int64_t K);

inline bool dense_gemv(const void* x, int64_t ldx, const void* w, int64_t ldw, void* y,
                       int64_t ldy, Dtype dtype, int64_t M, int64_t N, int64_t K,
                       const Stream& s) {
  const GemvWeight one{w, ldw, y, ldy, N};
  return dense_gemv(x, ldx, &one, 1, dtype, M, K, s);
}

}  // namespace tessera::gpu
