// Standalone timing of the dense matrix-vector kernel of
// tessera/backend/cuda/gemv.cuh (Note [Dense GEMV]) against cuBLAS
// (cublasGemmEx, CUBLAS_COMPUTE_32F, the heuristics' choice) on the shapes of
// decoding: y (M, N) = x (M, K) @ W^T, W (N, K) in rows, as nn.Linear. Each
// configuration's output is checked against cuBLAS first (relative error in
// the Frobenius norm), then timed with CUDA events; weights rotate among copies
// filling at least 512 MB, so that no timed launch finds them in L2.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. \
//     bench/gemv_gpu.cu -lcublas -o build/gemv_gpu
//   build/gemv_gpu            # bf16 shapes of the 1B and 8B models, M = 1, 2, 4, 8
//   build/gemv_gpu all        # and float32 and float16
//
// GB/s counts W read once (x and y are negligible); "pick" is the rows a block
// that gemv::rows_per_block chooses, the one Matmul uses.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/gpu_harness.cuh"
#include "tessera/backend/cuda/gemv.cuh"

using namespace tessera::gpu;
using namespace harness;
using bf16 = __nv_bfloat16;

namespace {

// Values in [-1, 1) from a hash of the index, on the device (a host fill of
// the 1 GB weights would take longer than their timing).
template <typename T>
__global__ void fill_kernel(T* d, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    d[i] = static_cast<T>(float(z >> 40) * (2.f / float(1 << 24)) - 1.f);
  }
}

template <typename T>
void fill(T* d, size_t n, uint64_t seed) {
  fill_kernel<<<4096, 256>>>(d, n, seed);
  CK(cudaGetLastError());
}

template <typename T>
const char* type_name() {
  return std::is_same_v<T, bf16> ? "bf16" : std::is_same_v<T, float> ? "f32" : "f16";
}

constexpr int kReps = 50;  // timed launches a median
int g_failures = 0;
int g_sms = 0;

template <typename T>
void one_shape(cublasHandle_t h, int64_t N, int64_t K, int M) {
  const size_t one = size_t(N) * K;
  const int copies = int(std::max<size_t>(1, ((size_t(512) << 20) + one * sizeof(T) - 1) /
                                                  (one * sizeof(T))));
  T *W, *x, *y, *y_ref;
  CK(cudaMalloc(&W, copies * one * sizeof(T)));
  CK(cudaMalloc(&x, M * K * sizeof(T)));
  CK(cudaMalloc(&y, M * N * sizeof(T)));
  CK(cudaMalloc(&y_ref, M * N * sizeof(T)));
  fill(W, one, 11 + N + K);
  for (int c = 1; c < copies; ++c) {
    CK(cudaMemcpy(W + c * one, W, one * sizeof(T), cudaMemcpyDeviceToDevice));
  }
  fill(x, M * K, 7 + M);
  cublas_product<T>(h, x, W, y_ref, M, N, K);
  const auto ref = host(y_ref, M * N);
  const double bytes = double(one) * sizeof(T);
  auto gbs = [&](float ms) { return bytes / (ms * 1e-3) / 1e9; };
  const float t_cublas =
      time_ms([&](int i) { cublas_product<T>(h, x, W + (i % copies) * one, y, M, N, K); }, kReps);
  const int pick = gemv::rows_per_block(N, g_sms);
  std::printf("| %s | %lldx%lld | %d | %.1f us %.0f GB/s |", type_name<T>(), (long long)N,
              (long long)K, M, t_cublas * 1e3, gbs(t_cublas));
  float best = 1e30f;
  for (int R : {1, 2, 4, 8}) {
    CK(cudaMemset(y, 0xff, M * N * sizeof(T)));
    CK(gemv::launch_rows<T>(R, x, K, W, K, y, N, M, N, K, 0));
    const double err = rel_err(host(y, M * N), ref);
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-2;
    if (!(err <= tol)) {
      ++g_failures;
      std::printf(" R%d FAIL err %.2e |", R, err);
      continue;
    }
    const float t = time_ms([&](int i) {
      CK(gemv::launch_rows<T>(R, x, K, W + (i % copies) * one, K, y, N, M, N, K, 0));
    }, kReps);
    best = std::min(best, t);
    std::printf(" %.1f us %.0f GB/s%s |", t * 1e3, gbs(t), R == pick ? " *" : "");
  }
  std::printf(" %.2f |\n", t_cublas / best);
  CK(cudaFree(W));
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(y_ref));
}

// q, k and v (or gate and up) of one x: one launch over the matrices of
// `ns` (each ns[i] x K) against a launch each, both checked against cuBLAS.
void grouped(cublasHandle_t h, std::vector<int64_t> ns, int64_t K) {
  const int M = 1;
  gemv::Weights<bf16> ws{};
  ws.count = static_cast<int>(ns.size());
  std::vector<bf16*> W(ns.size()), y(ns.size()), ref(ns.size());
  bf16* x;
  CK(cudaMalloc(&x, K * sizeof(bf16)));
  fill(x, K, 5);
  double bytes = 0;
  for (size_t i = 0; i < ns.size(); ++i) {
    CK(cudaMalloc(&W[i], ns[i] * K * sizeof(bf16)));
    CK(cudaMalloc(&y[i], ns[i] * sizeof(bf16)));
    CK(cudaMalloc(&ref[i], ns[i] * sizeof(bf16)));
    fill(W[i], ns[i] * K, 100 + i);
    cublas_product<bf16>(h, x, W[i], ref[i], M, ns[i], K);
    ws.w[i] = W[i], ws.y[i] = y[i], ws.ldw[i] = K, ws.ldy[i] = ns[i], ws.n[i] = ns[i];
    bytes += double(ns[i]) * K * sizeof(bf16);
  }
  int64_t total = 0;
  for (int64_t n : ns) total += n;
  const int rows = gemv::rows_per_block(total, g_sms);
  CK(gemv::launch_rows<bf16>(rows, x, K, ws, M, K, 0));
  for (size_t i = 0; i < ns.size(); ++i) {
    const double err = rel_err(host(y[i], ns[i]), host(ref[i], ns[i]));
    if (!(err <= 1e-2)) {
      ++g_failures;
      std::printf("grouped matrix %zu: FAIL err %.2e\n", i, err);
    }
  }
  const float one =
      time_ms([&](int) { CK(gemv::launch_rows<bf16>(rows, x, K, ws, M, K, 0)); }, kReps);
  const float each = time_ms([&](int) {
    for (size_t i = 0; i < ns.size(); ++i) {
      CK(gemv::launch_rows<bf16>(gemv::rows_per_block(ns[i], g_sms), x, K, W[i], K, y[i], ns[i],
                                 M, ns[i], K, 0));
    }
  }, kReps);
  std::printf("| grouped %zu matrices, %lld rows x %lld | %.1f us %.0f GB/s | "
              "a launch each %.1f us |\n",
              ns.size(), (long long)total, (long long)K, one * 1e3,
              bytes / (one * 1e-3) / 1e9, each * 1e3);
  for (size_t i = 0; i < ns.size(); ++i) {
    CK(cudaFree(W[i]));
    CK(cudaFree(y[i]));
    CK(cudaFree(ref[i]));
  }
  CK(cudaFree(x));
}

}  // namespace

int main(int argc, char** argv) {
  const bool all = argc > 1 && std::strcmp(argv[1], "all") == 0;
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  g_sms = p.multiProcessorCount;
  std::printf("# %s, %d SMs\n\n", p.name, g_sms);
  cublasHandle_t h;
  CB(cublasCreate(&h));
  std::printf("| dtype | N x K | M | cuBLAS | R=1 | R=2 | R=4 | R=8 | cuBLAS / best |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  // 1B: q/o, k/v, gate/up, down, lm_head; 8B: the same.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {2048, 2048}, {512, 2048},  {8192, 2048},  {2048, 8192},  {128256, 2048},
      {4096, 4096}, {1024, 4096}, {14336, 4096}, {4096, 14336}, {128256, 4096}};
  for (int M : {1, 2, 3, 4}) {
    for (auto [N, K] : shapes) one_shape<bf16>(h, N, K, M);
  }
  if (all) {
    for (int M : {1, 4}) {
      for (auto [N, K] : shapes) {
        one_shape<float>(h, N, K, M);
        one_shape<__half>(h, N, K, M);
      }
    }
  }
  std::printf("\n");
  grouped(h, {2048, 512, 512}, 2048);  // 1B q, k, v (L2-warm: one copy)
  grouped(h, {8192, 8192}, 2048);      // 1B gate, up
  grouped(h, {4096, 1024, 1024}, 4096);
  std::printf("\nfailures: %d\n", g_failures);
  return g_failures != 0;
}
