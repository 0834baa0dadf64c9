// What the standalone GPU kernel harnesses (bench/gemv_gpu.cu,
// bench/quantized_kernels_gpu.cu) share: checked CUDA and cuBLAS calls,
// device values read back, the relative error against a reference, cuBLAS's
// y = x @ W^T as that reference, and the median time of a launch.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

// Exits with the file, line, call and error when a CUDA or cuBLAS call fails.
#define CHECKED(x, ok, describe)                                                    \
  do {                                                                             \
    auto e = (x);                                                                  \
    if (e != ok) {                                                                 \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, describe(e)); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
#define CK(x) CHECKED(x, cudaSuccess, cudaGetErrorString)
#define CB(x) CHECKED(x, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

namespace harness {

// n values of T on the device, as doubles.
template <typename T>
std::vector<double> host(const T* d, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<double> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>(h[i]);
  return f;
}

// |a - b| / |b| in the Frobenius norm; infinite where a has a non-finite value.
inline double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <typename T>
cudaDataType_t cuda_type() {
  return std::is_same_v<T, __nv_bfloat16> ? CUDA_R_16BF
         : std::is_same_v<T, float>       ? CUDA_R_32F
                                          : CUDA_R_16F;
}

// y (M, N) = x (M, K) @ W^T, W (N, K) row-major, through cublasGemmEx
// (float32 sums, the heuristics' algorithm).
template <typename T>
void cublas_product(cublasHandle_t h, const T* x, const T* W, T* y, int M, int N, int K) {
  const float one = 1.f, zero = 0.f;
  CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, cuda_type<T>(), K, x,
                  cuda_type<T>(), K, &zero, y, cuda_type<T>(), N, CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));
}

// Median milliseconds of f(i) over reps launches (after 5 untimed), i the
// rotation index.
template <typename F>
float time_ms(F&& f, int reps = 40) {
  for (int i = 0; i < 5; ++i) f(i);
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    f(i);
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace harness
