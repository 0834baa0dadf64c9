// Dense products of few rows (Note [Dense GEMV] in gemv.cuh).
#include "tessera/backend/cuda/gemv.h"

#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/gemv.cuh"

namespace tessera::gpu {

namespace {

template <typename T>
cudaError_t launch(const void* x, int64_t ldx, const GemvWeight* weights, int count, int64_t M,
                   int64_t K, int rows, cudaStream_t st) {
  gemv::Weights<T> ws{};
  ws.count = count;
  for (int i = 0; i < count; ++i) {
    ws.w[i] = static_cast<const T*>(weights[i].w);
    ws.y[i] = static_cast<T*>(weights[i].y);
    ws.ldw[i] = weights[i].ldw, ws.ldy[i] = weights[i].ldy, ws.n[i] = weights[i].n;
  }
  return gemv::launch_rows<T>(rows, static_cast<const T*>(x), ldx, ws, static_cast<int>(M), K,
                              st);
}

// The weight rows of every matrix together where dense_gemv applies, else 0.
int64_t total_rows(const void* x, int64_t ldx, const GemvWeight* weights, int count, Dtype dtype,
                   int64_t M, int64_t K) {
  if (M < 1 || M > gemv::kMaxRows || K < 1 || count < 1 || count > gemv::kMaxWeights) return 0;
  if (dtype != float32 && dtype != float16 && dtype != bfloat16) return 0;
  const int64_t v = 16 / dtype.size;  // values in a 16-byte chunk
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (K % v || ldx % v || !aligned(x)) return 0;
  int64_t rows = 0;
  for (int i = 0; i < count; ++i) {
    if (weights[i].n < 1 || weights[i].ldw % v || !aligned(weights[i].w)) return 0;
    rows += weights[i].n;
  }
  return rows <= (int64_t(1) << 31) - 1 ? rows : 0;  // blocks of the grid
}

}  // namespace

bool dense_gemv_applies(const void* x, int64_t ldx, const GemvWeight* weights, int count,
                        Dtype dtype, int64_t M, int64_t K) {
  return total_rows(x, ldx, weights, count, dtype, M, K) > 0;
}

bool dense_gemv(const void* x, int64_t ldx, const GemvWeight* weights, int count, Dtype dtype,
                int64_t M, int64_t K, const Stream& s) {
  const int64_t rows_total = total_rows(x, ldx, weights, count, dtype, M, K);
  if (rows_total == 0) return false;
  const int rows = gemv::rows_per_block(rows_total, properties(s.device.index).multiProcessorCount);
  const cudaStream_t st = cuda_stream(s);
  cudaError_t err;
  if (dtype == float32) {
    err = launch<float>(x, ldx, weights, count, M, K, rows, st);
  } else if (dtype == float16) {
    err = launch<__half>(x, ldx, weights, count, M, K, rows, st);
  } else {
    err = launch<__nv_bfloat16>(x, ldx, weights, count, M, K, rows, st);
  }
  TESSERA_CUDA_CHECK(err);
  return true;
}

}  // namespace tessera::gpu
