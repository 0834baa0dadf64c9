// Standalone timing of the quantized-product kernels of
// tessera/backend/cuda/quantized.cuh against cuBLAS's bfloat16 GEMV/GEMM, and
// against dequantizing one thread per value before the GEMM ("before"), with
// CUDA events. Each kernel's output is checked first: dequantize bit for bit against
// a one-thread-per-value kernel, the products against cuBLAS on the
// dequantized matrix (relative error in the Frobenius norm).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I. \
//     bench/quantized_kernels_gpu.cu -lcublas -o build/quantized_kernels_gpu
//   build/quantized_kernels_gpu          # check and time; a table last
//
// Bandwidth counts the packed weights, scales and biases read once (x and y
// are negligible for M <= 16); TFLOP/s counts 2 M N K. Weights rotate among
// copies filling at least 512 MB, so that no timed launch finds them in L2.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu_harness.cuh"
#include "tessera/backend/cuda/quantized.cuh"

using namespace tessera;
using namespace tessera::gpu;
using namespace harness;
using bf16 = __nv_bfloat16;

namespace {

// ---- the dequantize kernel before (one thread per value) ---------------------

template <typename T>
__global__ void old_dequantize(const uint32_t* w, const T* scales, const T* biases, T* out,
                               int64_t n, int64_t values, int group_size, int bits) {
  const int64_t words = values * bits / 32, groups = values / group_size;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / values, k = i - r * values;
    const int64_t gi = r * groups + k / group_size;
    const float q = static_cast<float>(quant::unpack(w + r * words, k, bits));
    out[i] = static_cast<T>(static_cast<float>(scales[gi]) * q + static_cast<float>(biases[gi]));
  }
}

// ---- helpers -----------------------------------------------------------------

template <typename T>
void fill(T* d, size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> h(n);
  for (auto& v : h) v = static_cast<T>(u(g));
  CK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
}
void fill_words(uint32_t* d, size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<uint32_t> h(n);
  for (auto& v : h) v = static_cast<uint32_t>(g());
  CK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
}
struct Weights {
  int copies;
  int64_t N, K, words, groups;
  uint32_t* w;
  void* s;
  void* b;
  size_t bytes(int elem) const { return words * 4 + 2 * groups * elem; }  // one copy
  const uint32_t* wp(int i) const { return w + (i % copies) * words; }
  template <typename T>
  const T* sp(int i) const { return static_cast<const T*>(s) + (i % copies) * groups; }
  template <typename T>
  const T* bp(int i) const { return static_cast<const T*>(b) + (i % copies) * groups; }
};

template <typename T>
Weights make_weights(int64_t N, int64_t K, int bits, int group, int64_t rotate_bytes,
                     uint64_t seed) {
  Weights W;
  W.N = N, W.K = K, W.words = N * K * bits / 32, W.groups = N * K / group;
  const size_t one = W.words * 4 + 2 * W.groups * sizeof(T);
  W.copies = int(std::max<int64_t>(1, (rotate_bytes + one - 1) / one));
  CK(cudaMalloc(&W.w, W.copies * W.words * 4));
  CK(cudaMalloc(&W.s, W.copies * W.groups * sizeof(T)));
  CK(cudaMalloc(&W.b, W.copies * W.groups * sizeof(T)));
  fill_words(W.w, W.words, seed);
  fill<T>(static_cast<T*>(W.s), W.groups, 0.002f, 0.02f, seed + 1);
  fill<T>(static_cast<T*>(W.b), W.groups, -0.1f, 0.1f, seed + 2);
  for (int c = 1; c < W.copies; ++c) {
    CK(cudaMemcpy(W.w + c * W.words, W.w, W.words * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(static_cast<T*>(W.s) + c * W.groups, W.s, W.groups * sizeof(T),
                  cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(static_cast<T*>(W.b) + c * W.groups, W.b, W.groups * sizeof(T),
                  cudaMemcpyDeviceToDevice));
  }
  return W;
}
void free_weights(Weights& W) {
  CK(cudaFree(W.w));
  CK(cudaFree(W.s));
  CK(cudaFree(W.b));
}

int g_failures = 0;
int g_sms = 0;
std::vector<std::string> g_table;


// Checks and (when timed) times y = x @ W^T for M rows: new kernel, old path,
// cuBLAS on bf16 weights.
template <typename T>
void small_m_case(cublasHandle_t h, int64_t N, int64_t K, int bits, int group, int M, bool timed,
                  int64_t rotate) {
  Weights W = make_weights<T>(N, K, bits, group, timed ? rotate : 0, 1000 + bits * 7 + M);
  T *x, *y, *y_ref, *Wd, *Wd_old;
  float* partials = nullptr;
  CK(cudaMalloc(&x, M * K * sizeof(T)));
  CK(cudaMalloc(&y, M * N * sizeof(T)));
  CK(cudaMalloc(&y_ref, M * N * sizeof(T)));
  CK(cudaMalloc(&Wd, N * K * sizeof(T)));
  CK(cudaMalloc(&Wd_old, N * K * sizeof(T)));
  fill<T>(x, M * K, -1.f, 1.f, 77 + M);
  // Dequantize: new against old, bit for bit.
  CK(qmm::dequantize<T>(W.wp(0), W.sp<T>(0), W.bp<T>(0), Wd, N * K, group, bits, 0));
  old_dequantize<T><<<4096, 256>>>(W.wp(0), W.sp<T>(0), W.bp<T>(0), Wd_old, N * K, K, group, bits);
  CK(cudaGetLastError());
  auto a = host(Wd, N * K), b = host(Wd_old, N * K);
  size_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
  if (diff) {
    std::printf("FAIL dequantize bits %d group %d: %zu of %zu values differ\n", bits, group, diff,
                a.size());
    ++g_failures;
  }
  cublas_product<T>(h, x, Wd_old, y_ref, M, int(N), int(K));
  const qmm::SmallM plan = qmm::small_m_plan<T>(bits, M, N, K, 1, g_sms);
  const int64_t pf = qmm::small_m_partials(plan, M, N, 1);
  if (pf) CK(cudaMalloc(&partials, pf * sizeof(float)));
  CK(cudaMemset(y, 0xff, M * N * sizeof(T)));  // NaN: every element must be written
  CK(qmm::small_m<T>(x, W.wp(0), W.sp<T>(0), W.bp<T>(0), y, partials, M, N, K, group, bits, 1,
                     plan, 0));
  CK(cudaDeviceSynchronize());
  const double err = rel_err(host(y, M * N), host(y_ref, M * N));
  const bool ok = err < 8e-3;
  if (!ok) ++g_failures;
  if (!ok || !timed) {
    std::printf("%s small_m %s N %lld K %lld bits %d group %d M %d splits %d: rel err %.2e\n",
                ok ? "ok  " : "FAIL", std::is_same_v<T, bf16> ? "bf16" : "f16", (long long)N,
                (long long)K, bits, group, M, plan.splits(), err);
  }
  if (M <= qmm::kGemvMaxRows) {
    // Note [Quantized GEMV]: checked as the kernel above, timed with 1, 2 and 4
    // weight rows a warp.
    CK(cudaMemset(y, 0xff, M * N * sizeof(T)));
    CK(qmm::gemv<T>(x, W.wp(0), W.sp<T>(0), W.bp<T>(0), y, M, N, K, group, bits, 1, 0));
    CK(cudaDeviceSynchronize());
    const double gerr = rel_err(host(y, M * N), host(y_ref, M * N));
    const bool gok = gerr < 8e-3;  // as small_m: y_ref rounds W and y to T
    if (!gok) ++g_failures;
    if (!gok || !timed) {
      std::printf("%s gemv %s N %lld K %lld bits %d group %d M %d: rel err %.2e\n",
                  gok ? "ok  " : "FAIL", std::is_same_v<T, bf16> ? "bf16" : "f16", (long long)N,
                  (long long)K, bits, group, M, gerr);
    }
    if (timed) {
      const double qbytes = double(W.bytes(sizeof(T)));
      auto run = [&](auto rtag) {
        constexpr int R = decltype(rtag)::value;
        return time_ms([&](int i) {
          qmm::gemv<T, R>(x, W.wp(i), W.sp<T>(i), W.bp<T>(i), y, M, N, K, group, bits, 1, 0);
        });
      };
      const float t1 = run(std::integral_constant<int, 1>{});
      const float t2 = run(std::integral_constant<int, 2>{});
      const float t4 = run(std::integral_constant<int, 4>{});
      char line[512];
      std::snprintf(line, sizeof line,
                    "| %lldx%lld | %d | %d | %s | %d | gemv R=1/2/4 | %.1f (%.0f GB/s) | %.1f "
                    "(%.0f GB/s) | %.1f (%.0f GB/s) | %.1e |",
                    (long long)N, (long long)K, bits, group,
                    std::is_same_v<T, bf16> ? "bf16" : "f16", M, t1 * 1e3, qbytes / t1 / 1e6,
                    t2 * 1e3, qbytes / t2 / 1e6, t4 * 1e3, qbytes / t4 / 1e6, gerr);
      g_table.push_back(line);
      std::printf("%s\n", line);
    }
  }
  if (timed) {
    const double qbytes = double(W.bytes(sizeof(T)));
    const float t_new = time_ms([&](int i) {
      qmm::small_m<T>(x, W.wp(i), W.sp<T>(i), W.bp<T>(i), y, partials, M, N, K, group, bits, 1,
                      plan, 0);
    });
    // Before: dequantize (one thread per value), then the GEMM.
    const float t_old = time_ms([&](int i) {
      old_dequantize<T><<<4096, 256>>>(W.wp(i), W.sp<T>(i), W.bp<T>(i), Wd_old, N * K, K, group,
                                       bits);
      cublas_product<T>(h, x, Wd_old, y_ref, M, int(N), int(K));
    });
    // cuBLAS on bf16 weights (rotating copies as well).
    const int64_t wbytes = N * K * sizeof(T);
    const int copies = int(std::max<int64_t>(1, rotate / wbytes));
    T* Wr;
    CK(cudaMalloc(&Wr, copies * wbytes));
    for (int c = 0; c < copies; ++c) {
      CK(cudaMemcpy(Wr + c * N * K, Wd, wbytes, cudaMemcpyDeviceToDevice));
    }
    const float t_blas = time_ms([&](int i) {
      cublas_product<T>(h, x, Wr + (i % copies) * N * K, y_ref, M, int(N), int(K));
    });
    CK(cudaFree(Wr));
    char line[512];
    std::snprintf(line, sizeof line,
                  "| %lldx%lld | %d | %d | %s | %d | %d | %.1f (%.0f GB/s) | %.1f (%.0f GB/s) | "
                  "%.1f (%.0f GB/s) | %.1e |",
                  (long long)N, (long long)K, bits, group, std::is_same_v<T, bf16> ? "bf16" : "f16",
                  M, plan.splits(), t_old * 1e3, qbytes / t_old / 1e6, t_new * 1e3,
                  qbytes / t_new / 1e6, t_blas * 1e3, double(wbytes) / t_blas / 1e6, err);
    g_table.push_back(line);
    std::printf("%s\n", line);
  }
  if (partials) CK(cudaFree(partials));
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(y_ref));
  CK(cudaFree(Wd));
  CK(cudaFree(Wd_old));
  free_weights(W);
}

// Prefill: dequantize + GEMM (new and old dequantize) against the bf16 GEMM.
void prefill_case(cublasHandle_t h, int64_t N, int64_t K, int bits, int group, int M,
                  int64_t rotate) {
  Weights W = make_weights<bf16>(N, K, bits, group, rotate, 5000 + bits);
  bf16 *x, *y, *Wd;
  CK(cudaMalloc(&x, M * K * 2));
  CK(cudaMalloc(&y, M * N * 2));
  CK(cudaMalloc(&Wd, N * K * 2));
  fill<bf16>(x, M * K, -1.f, 1.f, 99);
  const double flop = 2.0 * M * N * K;
  const float t_new = time_ms([&](int i) {
    qmm::dequantize<bf16>(W.wp(i), W.sp<bf16>(i), W.bp<bf16>(i), Wd, N * K, group, bits, 0);
    cublas_product<bf16>(h, x, Wd, y, M, int(N), int(K));
  });
  const float t_deq = time_ms([&](int i) {
    qmm::dequantize<bf16>(W.wp(i), W.sp<bf16>(i), W.bp<bf16>(i), Wd, N * K, group, bits, 0);
  });
  const float t_old = time_ms([&](int i) {
    old_dequantize<bf16><<<4096, 256>>>(W.wp(i), W.sp<bf16>(i), W.bp<bf16>(i), Wd, N * K, K,
                                        group, bits);
    cublas_product<bf16>(h, x, Wd, y, M, int(N), int(K));
  });
  const float t_blas = time_ms([&](int) { cublas_product<bf16>(h, x, Wd, y, M, int(N), int(K)); });
  char line[512];
  std::snprintf(line, sizeof line,
                "| %lldx%lld | %d | %d | bf16 | %d | prefill | %.1f (%.0f TFLOP/s) | %.1f (%.0f "
                "TFLOP/s; dequantize %.1f us, %.0f GB/s written+read) | %.1f (%.0f TFLOP/s) | |",
                (long long)N, (long long)K, bits, group, M, t_old * 1e3, flop / t_old / 1e9,
                t_new * 1e3, flop / t_new / 1e9, t_deq * 1e3,
                (double(W.bytes(2)) + N * K * 2.0) / t_deq / 1e6, t_blas * 1e3,
                flop / t_blas / 1e9);
  g_table.push_back(line);
  std::printf("%s\n", line);
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(Wd));
  free_weights(W);
}

}  // namespace

// One qmm::gemv launch over several matrices (Note [Grouped products]) must
// write, for each, the bits that a launch of its own writes.
template <typename T>
void grouped_gemv_case(std::vector<int64_t> ns, int64_t K, int bits, int group, int M) {
  qmm::GemvWeights<T> ws{};
  ws.count = static_cast<int>(ns.size());
  std::vector<Weights> Ws;
  std::vector<T*> alone(ns.size());
  T* x;
  CK(cudaMalloc(&x, M * K * sizeof(T)));
  fill<T>(x, M * K, -1.f, 1.f, 91);
  for (size_t i = 0; i < ns.size(); ++i) {
    Ws.push_back(make_weights<T>(ns[i], K, bits, group, 0, 300 + i));
    CK(cudaMalloc(&ws.y[i], M * ns[i] * sizeof(T)));
    CK(cudaMalloc(&alone[i], M * ns[i] * sizeof(T)));
    CK(cudaMemset(ws.y[i], 0xff, M * ns[i] * sizeof(T)));
    ws.w[i] = Ws[i].wp(0), ws.s[i] = Ws[i].sp<T>(0), ws.b[i] = Ws[i].bp<T>(0), ws.n[i] = ns[i];
    CK(qmm::gemv<T>(x, Ws[i].wp(0), Ws[i].sp<T>(0), Ws[i].bp<T>(0), alone[i], M, ns[i], K, group,
                    bits, 1, 0));
  }
  CK(qmm::gemv<T>(x, ws, M, K, group, bits, 1, 0));
  CK(cudaDeviceSynchronize());
  for (size_t i = 0; i < ns.size(); ++i) {
    std::vector<T> a(M * ns[i]), b(M * ns[i]);
    CK(cudaMemcpy(a.data(), ws.y[i], a.size() * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), alone[i], b.size() * sizeof(T), cudaMemcpyDeviceToHost));
    const bool same = std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
    if (!same) ++g_failures;
    std::printf("%s grouped gemv matrix %zu of %zu (N %lld K %lld bits %d M %d)\n",
                same ? "ok  " : "FAIL", i, ns.size(), (long long)ns[i], (long long)K, bits, M);
    CK(cudaFree(ws.y[i]));
    CK(cudaFree(alone[i]));
    free_weights(Ws[i]);
  }
  CK(cudaFree(x));
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, g_sms, prop.l2CacheSize >> 20);
  cublasHandle_t h;
  CB(cublasCreate(&h));
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  const int64_t rotate = int64_t(512) << 20;
  if (argc > 1 && std::string(argv[1]) == "gemv") {  // the decode shapes alone, for profiling
    for (int bits : {4, 8}) {
      for (int M : {1, 4}) {
        small_m_case<bf16>(h, 14336, 4096, bits, 64, M, true, rotate);
        small_m_case<bf16>(h, 4096, 4096, bits, 64, M, true, rotate);
        small_m_case<bf16>(h, 4096, 14336, bits, 64, M, true, rotate);
      }
    }
    return g_failures != 0;
  }

  // Correctness sweep: tails in K (1152 = 2 steps of 512 + 128), N off the tiles.
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int group : {32, 64, 128}) {
      for (int M : {1, 2, 3, 4, 8, 9, 16}) {
        small_m_case<bf16>(h, 1000, 1152, bits, group, M, false, 0);
        if (group == 64) small_m_case<__half>(h, 1000, 1152, bits, group, M, false, 0);
      }
    }
  }
  small_m_case<bf16>(h, 300, 4096 + 384, 4, 64, 5, false, 0);
  grouped_gemv_case<bf16>({1000, 300, 64}, 1152, 4, 64, 1);
  grouped_gemv_case<__half>({2048, 512, 512, 8}, 2048, 8, 32, 1);
  grouped_gemv_case<float>({96, 200}, 1024, 3, 128, 4);
  std::printf("correctness failures: %d\n", g_failures);
  if (quick) return g_failures != 0;

  std::printf("\n| N x K | bits | group | x | M | splits | before us | after us | cuBLAS bf16 us "
              "| rel err |\n|---|---|---|---|---|---|---|---|---|---|\n");
  struct Shape {
    int64_t N, K;
  };
  for (Shape s : {Shape{14336, 4096}, Shape{4096, 14336}, Shape{4096, 4096}, Shape{8192, 2048},
                  Shape{2048, 8192}, Shape{2048, 2048}, Shape{512, 2048}}) {
    for (int bits : {4, 8, 2, 3, 6}) {
      for (int M : {1, 2, 4, 8, 16}) {
        if (bits != 4 && bits != 8 && M != 1) continue;
        small_m_case<bf16>(h, s.N, s.K, bits, 64, M, true, rotate);
      }
    }
  }
  // Split sensitivity: plans made for a fraction or multiple of the SMs.
  for (int scale : {-2, 2, 4}) {
    const int sms = g_sms;
    g_sms = scale < 0 ? sms / -scale : sms * scale;
    for (Shape s : {Shape{14336, 4096}, Shape{4096, 14336}}) {
      for (int M : {1, 16}) {
        g_table.push_back("plan for " + std::to_string(g_sms) + " SMs:");
        small_m_case<bf16>(h, s.N, s.K, 4, 64, M, true, rotate);
      }
    }
    g_sms = sms;
  }
  small_m_case<__half>(h, 14336, 4096, 4, 64, 1, true, rotate);
  small_m_case<bf16>(h, 14336, 4096, 4, 32, 1, true, rotate);
  small_m_case<bf16>(h, 14336, 4096, 4, 128, 1, true, rotate);
  for (int bits : {4, 8}) {
    prefill_case(h, 14336, 4096, bits, 64, 512, rotate);
    prefill_case(h, 4096, 14336, bits, 64, 512, rotate);
    prefill_case(h, 8192, 8192, bits, 64, 256, rotate);
    prefill_case(h, 8192, 8192, bits, 64, 2048, rotate);
  }
  std::printf("\nsummary (microseconds; bandwidth counts packed weights, scales, biases)\n");
  for (auto& l : g_table) std::printf("%s\n", l.c_str());
  std::printf("correctness failures: %d\n", g_failures);
  CB(cublasDestroy(h));
  return g_failures != 0;
}
