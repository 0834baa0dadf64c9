// Standalone timing of the quantized-product kernels of
// tessera/backend/cuda/quantized.cuh against cuBLAS's bfloat16 GEMV/GEMM, and
// against the kernels they replaced (reproduced below as "before"), with CUDA
// events. Each kernel's output is checked first: dequantize bit for bit against
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
#include <random>
#include <string>
#include <vector>

#include "tessera/backend/cuda/quantized.cuh"

using namespace tessera;
using namespace tessera::gpu;
using bf16 = __nv_bfloat16;

// Exits with the file, line, call and error when a CUDA or cuBLAS call fails.
#define CHECKED(x, ok, describe)                                                        \
  do {                                                                                 \
    auto e = (x);                                                                      \
    if (e != ok) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, describe(e));     \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CK(x) CHECKED(x, cudaSuccess, cudaGetErrorString)
#define CB(x) CHECKED(x, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

namespace {

// ---- the kernels before (one thread per value; one warp per column) ---------

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

template <typename T, int B, int M>
__global__ void old_small_m(const T* x, const uint32_t* w, const T* scales, const T* biases, T* y,
                            int rows, int64_t N, int64_t K, int group_size) {
  const int64_t n = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;
  const int64_t words = K * B / 32, groups = K / group_size, chunks = K / 32;
  const uint32_t* row = w + n * words;
  const T* sc = scales + n * groups;
  const T* bi = biases + n * groups;
  float acc[M];
  for (int m = 0; m < M; ++m) acc[m] = 0.f;
  uint32_t q[32];
  for (int64_t c = lane; c < chunks; c += 32) {
    quant::unpack32<B>(row + c * B, q);
    const int64_t g = c * 32 / group_size;
    const float s = static_cast<float>(sc[g]), z = static_cast<float>(bi[g]);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (m >= rows) break;
      const T* xm = x + m * K + c * 32;
      float dot = 0.f, sum = 0.f;
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const float v = static_cast<float>(xm[i]);
        dot += static_cast<float>(q[i]) * v;
        sum += v;
      }
      acc[m] += s * dot + z * sum;
    }
  }
  for (int m = 0; m < M; ++m) {
    float v = acc[m];
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0 && m < rows) y[m * N + n] = static_cast<T>(v);
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
template <typename T>
std::vector<float> host(const T* d, size_t n) {
  std::vector<T> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = static_cast<float>(h[i]);
  return f;
}
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - b[i];
    if (!std::isfinite(a[i])) return INFINITY;
    num += d * d;
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <typename T>
cudaDataType_t cuda_type() {
  return std::is_same_v<T, bf16> ? CUDA_R_16BF : CUDA_R_16F;
}

// y (M, N) = x (M, K) @ W^T, W (N, K) row-major.
template <typename T>
void gemm(cublasHandle_t h, const T* x, const T* W, T* y, int M, int N, int K) {
  const float one = 1.f, zero = 0.f;
  CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, cuda_type<T>(), K, x,
                  cuda_type<T>(), K, &zero, y, cuda_type<T>(), N, CUBLAS_COMPUTE_32F,
                  CUBLAS_GEMM_DEFAULT));
}

// Median milliseconds of f(i) over reps launches, i the rotation index.
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


// Candidate for few rows of x, 4-bit weights (not used by Tessera yet): the
// tensor cores with q exact. Lane 4g + t reads word t of a 32-value chunk of
// weight rows g and g + 8 of the warp's 16, so that both mma products of a
// chunk (m16n8k16, k in the order the nibble pairs come: values 8t + i and
// 8t + i + 4 share a register) take their 16 values of each row from one
// chunk, so from one group. q enters as 16-bit 128 + q (bfloat16) or 1024 + q
// (float16) minus the same, exact; the float32 products of a group are then
// scaled and the bias times the group's sum of x (kept per warp in shared
// memory) added, per row. x's row n (< M) is B's column n. The warps of a
// block split K by whole groups and add their results through shared memory.
template <typename T, int GPC, int WARPS, int UG>
__global__ void __launch_bounds__(WARPS * 32)
    tc_gemv_kernel(const T* __restrict__ x, const uint32_t* __restrict__ w,
                   const T* __restrict__ scales, const T* __restrict__ biases, T* __restrict__ y,
                   int M, int64_t N, int64_t K) {
  constexpr int kMaxGroupsPerWarp = 64;
  __shared__ float xsum[WARPS][8][kMaxGroupsPerWarp];
  __shared__ float red[WARPS][16][8];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t row0 = int64_t(blockIdx.x) * 16;
  const int64_t groups = K / (32 * GPC), words_per_row = K / 8;
  const int64_t per_warp = (groups + WARPS - 1) / WARPS;
  const int64_t g_begin = warp * per_warp, g_end = g_begin + per_warp < groups ? g_begin + per_warp : groups;
  // The sums of x over each group of this warp's range.
  for (int n = 0; n < M; ++n) {
    for (int64_t gi = g_begin; gi < g_end; ++gi) {
      float v = 0.f;
      for (int i = lane; i < 32 * GPC; i += 32) v += mma::to_f(x[n * K + gi * 32 * GPC + i]);
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) xsum[warp][n][gi - g_begin] = v;
    }
  }
  __syncwarp();
  const bool valid0 = row0 + g < N, valid8 = row0 + g + 8 < N;
  const uint32_t* w0 = w + (valid0 ? row0 + g : 0) * words_per_row + t;
  const uint32_t* w8 = w + (valid8 ? row0 + g + 8 : 0) * words_per_row + t;
  const T* s0 = scales + (valid0 ? row0 + g : 0) * groups;
  const T* s8 = scales + (valid8 ? row0 + g + 8 : 0) * groups;
  const T* b0p = biases + (valid0 ? row0 + g : 0) * groups;
  const T* b8p = biases + (valid8 ? row0 + g + 8 : 0) * groups;
  const bool has_x = g < M;
  const T* xrow = x + (has_x ? g : 0) * K + 8 * t;
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  constexpr uint32_t kMagic = kBf16 ? 0x43004300u : 0x64006400u;  // 128 or 1024, twice
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  // UG groups a pass: all their loads in flight before the first product.
  for (int64_t g0 = g_begin; g0 < g_end; g0 += UG) {
    uint32_t wa[UG][GPC], wb[UG][GPC];
    uint4 xv[UG][GPC];
    float sa[UG], sb[UG], ba[UG], bb[UG];
#pragma unroll
    for (int j = 0; j < UG; ++j) {
      const int64_t gi = g0 + j;
      const bool on = gi < g_end, on0 = on && valid0, on8 = on && valid8;
#pragma unroll
      for (int u = 0; u < GPC; ++u) {
        const int64_t c = gi * GPC + u;
        wa[j][u] = on0 ? __ldg(w0 + c * 4) : 0u;
        wb[j][u] = on8 ? __ldg(w8 + c * 4) : 0u;
        xv[j][u] = on && has_x ? __ldg(reinterpret_cast<const uint4*>(xrow + c * 32))
                               : make_uint4(0, 0, 0, 0);
      }
      sa[j] = on0 ? mma::to_f(s0[gi]) : 0.f, sb[j] = on8 ? mma::to_f(s8[gi]) : 0.f;
      ba[j] = on0 ? mma::to_f(b0p[gi]) : 0.f, bb[j] = on8 ? mma::to_f(b8p[gi]) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < UG; ++j) {
      if (g0 + j >= g_end) break;
      float cg[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int u = 0; u < GPC; ++u) {
        uint32_t pa[4], pb[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          uint32_t ra = ((wa[j][u] >> (4 * i)) & 0x000F000Fu) | kMagic;
          uint32_t rb = ((wb[j][u] >> (4 * i)) & 0x000F000Fu) | kMagic;
          if constexpr (kBf16) {
            const __nv_bfloat162 m = __floats2bfloat162_rn(128.f, 128.f);
            __nv_bfloat162 qa = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&ra), m);
            __nv_bfloat162 qb = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&rb), m);
            pa[i] = *reinterpret_cast<uint32_t*>(&qa);
            pb[i] = *reinterpret_cast<uint32_t*>(&qb);
          } else {
            const __half2 m = __floats2half2_rn(1024.f, 1024.f);
            __half2 qa = __hsub2(*reinterpret_cast<__half2*>(&ra), m);
            __half2 qb = __hsub2(*reinterpret_cast<__half2*>(&rb), m);
            pa[i] = *reinterpret_cast<uint32_t*>(&qa);
            pb[i] = *reinterpret_cast<uint32_t*>(&qb);
          }
        }
        // x pairs in the same order: (x0, x4), (x1, x5), (x2, x6), (x3, x7).
        const uint4 xq = xv[j][u];
        const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]};
        mma::mma16816<T>(cg, a0, __byte_perm(xq.x, xq.z, 0x5410), __byte_perm(xq.x, xq.z, 0x7632));
        const uint32_t a1[4] = {pa[2], pb[2], pa[3], pb[3]};
        mma::mma16816<T>(cg, a1, __byte_perm(xq.y, xq.w, 0x5410), __byte_perm(xq.y, xq.w, 0x7632));
      }
      const int lg = static_cast<int>(g0 + j - g_begin);
      const float xs0 = 2 * t < M ? xsum[warp][2 * t][lg] : 0.f;
      const float xs1 = 2 * t + 1 < M ? xsum[warp][2 * t + 1][lg] : 0.f;
      acc[0] += sa[j] * cg[0] + ba[j] * xs0;
      acc[1] += sa[j] * cg[1] + ba[j] * xs1;
      acc[2] += sb[j] * cg[2] + bb[j] * xs0;
      acc[3] += sb[j] * cg[3] + bb[j] * xs1;
    }
  }
  red[warp][g][2 * t] = acc[0];
  red[warp][g][2 * t + 1] = acc[1];
  red[warp][g + 8][2 * t] = acc[2];
  red[warp][g + 8][2 * t + 1] = acc[3];
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * 8; i += WARPS * 32) {
    const int r = i / 8, n = i % 8;
    if (n >= M || row0 + r >= N) continue;
    float v = 0.f;
#pragma unroll
    for (int k = 0; k < WARPS; ++k) v += red[k][r][n];
    y[n * N + row0 + r] = mma::from_f<T>(v);
  }
}

// Launches tc_gemv_kernel for 4-bit weights, M <= 8, warps 4 or 8 a block and
// unroll 1, 2 or 4 groups a pass; false where it does not apply.
template <typename T>
bool tc_gemv(const T* x, const uint32_t* w, const T* s, const T* b, T* y, int M, int64_t N,
             int64_t K, int group, int warps, int unroll = 1) {
  if (M > 8 || K % group != 0) return false;
  const int64_t groups = K / group;
  if ((groups + warps - 1) / warps > 64) return false;
  const unsigned blocks = unsigned((N + 15) / 16);
  auto go = [&](auto gpc, auto nw, auto ug) {
    constexpr int G = decltype(gpc)::value, W = decltype(nw)::value, U = decltype(ug)::value;
    tc_gemv_kernel<T, G, W, U><<<blocks, W * 32>>>(x, w, s, b, y, M, N, K);
  };
  auto by_unroll = [&](auto gpc, auto nw) {
    if (unroll == 4) go(gpc, nw, std::integral_constant<int, 4>{});
    else if (unroll == 2) go(gpc, nw, std::integral_constant<int, 2>{});
    else go(gpc, nw, std::integral_constant<int, 1>{});
  };
  auto by_warps = [&](auto gpc) {
    if (warps == 4) by_unroll(gpc, std::integral_constant<int, 4>{});
    else by_unroll(gpc, std::integral_constant<int, 8>{});
  };
  if (group == 32) by_warps(std::integral_constant<int, 1>{});
  else if (group == 64) by_warps(std::integral_constant<int, 2>{});
  else by_warps(std::integral_constant<int, 4>{});
  return true;
}

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
  gemm<T>(h, x, Wd_old, y_ref, M, int(N), int(K));
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
  if (bits == 4 && M <= 8) {
    // The tensor-core candidate: checked always, timed with 4 and 8 warps a block.
    CK(cudaMemset(y, 0xff, M * N * sizeof(T)));
    if (tc_gemv<T>(x, W.wp(0), W.sp<T>(0), W.bp<T>(0), y, M, N, K, group, 4)) {
      CK(cudaDeviceSynchronize());
      const double terr = rel_err(host(y, M * N), host(y_ref, M * N));
      const bool tok = terr < 8e-3;
      if (!tok) ++g_failures;
      if (!tok || !timed) {
        std::printf("%s tc_gemv %s N %lld K %lld group %d M %d: rel err %.2e\n",
                    tok ? "ok  " : "FAIL", std::is_same_v<T, bf16> ? "bf16" : "f16",
                    (long long)N, (long long)K, group, M, terr);
      }
      if (timed) {
        const double qbytes = double(W.bytes(sizeof(T)));
        std::string times;
        for (int warps : {4, 8}) {
          for (int unroll : {1, 2, 4}) {
            if (unroll > 1) {  // checked once more: the unrolled pass has its own bounds
              CK(cudaMemset(y, 0xff, M * N * sizeof(T)));
              tc_gemv<T>(x, W.wp(0), W.sp<T>(0), W.bp<T>(0), y, M, N, K, group, warps, unroll);
              CK(cudaDeviceSynchronize());
              const double e = rel_err(host(y, M * N), host(y_ref, M * N));
              if (!(e < 8e-3)) {
                ++g_failures;
                std::printf("FAIL tc_gemv warps %d unroll %d: rel err %.2e\n", warps, unroll, e);
              }
            }
            const float tt = time_ms([&](int i) {
              tc_gemv<T>(x, W.wp(i), W.sp<T>(i), W.bp<T>(i), y, M, N, K, group, warps, unroll);
            });
            char cell[64];
            std::snprintf(cell, sizeof cell, " %d/%d: %.1f (%.0f GB/s)", warps, unroll, tt * 1e3,
                          qbytes / tt / 1e6);
            times += cell;
          }
        }
        char line[512];
        std::snprintf(line, sizeof line,
                      "| %lldx%lld | 4 | %d | %s | %d | tc_gemv warps/unroll:%s | rel err %.1e |",
                      (long long)N, (long long)K, group, std::is_same_v<T, bf16> ? "bf16" : "f16",
                      M, times.c_str(), terr);
        g_table.push_back(line);
        std::printf("%s\n", line);
      }
    }
  }
  if (timed) {
    const double qbytes = double(W.bytes(sizeof(T)));
    const float t_new = time_ms([&](int i) {
      qmm::small_m<T>(x, W.wp(i), W.sp<T>(i), W.bp<T>(i), y, partials, M, N, K, group, bits, 1,
                      plan, 0);
    });
    // Before: the warp-per-column kernel for M <= 8, else dequantize + GEMM.
    float t_old;
    if (M <= 8) {
      t_old = time_ms([&](int i) {
        quant::dispatch_bits(bits, [&](auto bb) {
          constexpr int BB = decltype(bb)::value;
          auto k = M <= 1 ? old_small_m<T, BB, 1>
                 : M <= 2 ? old_small_m<T, BB, 2>
                 : M <= 4 ? old_small_m<T, BB, 4>
                          : old_small_m<T, BB, 8>;
          k<<<unsigned((N + 7) / 8), 256>>>(x, W.wp(i), W.sp<T>(i), W.bp<T>(i), y, M, N, K, group);
        });
      });
    } else {
      t_old = time_ms([&](int i) {
        old_dequantize<T><<<4096, 256>>>(W.wp(i), W.sp<T>(i), W.bp<T>(i), Wd_old, N * K, K,
                                         group, bits);
        gemm<T>(h, x, Wd_old, y_ref, M, int(N), int(K));
      });
    }
    // cuBLAS on bf16 weights (rotating copies as well).
    const int64_t wbytes = N * K * sizeof(T);
    const int copies = int(std::max<int64_t>(1, rotate / wbytes));
    T* Wr;
    CK(cudaMalloc(&Wr, copies * wbytes));
    for (int c = 0; c < copies; ++c) {
      CK(cudaMemcpy(Wr + c * N * K, Wd, wbytes, cudaMemcpyDeviceToDevice));
    }
    const float t_blas = time_ms(
        [&](int i) { gemm<T>(h, x, Wr + (i % copies) * N * K, y_ref, M, int(N), int(K)); });
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
    gemm<bf16>(h, x, Wd, y, M, int(N), int(K));
  });
  const float t_deq = time_ms([&](int i) {
    qmm::dequantize<bf16>(W.wp(i), W.sp<bf16>(i), W.bp<bf16>(i), Wd, N * K, group, bits, 0);
  });
  const float t_old = time_ms([&](int i) {
    old_dequantize<bf16><<<4096, 256>>>(W.wp(i), W.sp<bf16>(i), W.bp<bf16>(i), Wd, N * K, K,
                                        group, bits);
    gemm<bf16>(h, x, Wd, y, M, int(N), int(K));
  });
  const float t_blas = time_ms([&](int) { gemm<bf16>(h, x, Wd, y, M, int(N), int(K)); });
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
