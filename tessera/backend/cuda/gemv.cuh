// The matrix-vector kernel of dense products with few rows (gemv.cu), on plain
// pointers, so that bench/gemv_gpu.cu times it beside cuBLAS.
//
// Note [Dense GEMV]
// y (M, N) = x (M, K) @ W^T with W (N, K) in rows, the layout of nn.Linear's
// x @ weight.T, for M = 1 to kMaxRows (decoding). Each block owns R weight
// rows whole: its kThreads threads take the 16-byte chunks t, t + kThreads,
// ... of those rows, load U chunks of every row before they use any (R * U
// loads in flight a thread, enough bytes to run at memory bandwidth), and add
// chunk . x for every row of x in float32, x read through L1 (every block
// reads the same x). A shuffle tree and shared memory sum the block's
// threads. Weights stream past L1 (__ldcs), read once.
//   cuBLASLt's choice for these shapes (nvjet kernels of a tile of 8 or more
// columns and split-K) reads the weights at a fraction of HBM bandwidth when
// M is 1; here a whole row is one block's work and nothing is written twice.
//   Exact to a float32 reference within float32 summation, as cuBLASLt's
// CUBLAS_COMPUTE_32F. gemv_rows picks R from the number of rows and the
// device's multiprocessors (bench/gemv_gpu.cu's sweep).
//   TESSERA_DENSE_GEMV=0 leaves every product to cuBLASLt (to measure it).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>
#endif

#include "tessera/backend/cuda/mma.cuh"

namespace tessera::gpu::gemv {

// At 8 rows cuBLASLt's kernels were 1.3 to 2 times faster than this one
// (bench/gemv_gpu.cu, H100, 2026-12-07); at 4 rows this one was 1.03 to 1.9
// times faster.
constexpr int kMaxRows = 4;
constexpr int kThreads = 128;
constexpr int kMaxWeights = 4;

// Weight rows per block: the most (up to 8) that still leave about four
// blocks per multiprocessor; 16-byte chunks per thread and row then set how
// many loads a thread keeps in flight (units(R)).
inline int rows_per_block(int64_t N, int sms) {
  for (int r : {8, 4, 2}) {
    if (N / r >= int64_t(sms) * 4) return r;
  }
  return 1;
}

#ifdef __CUDACC__

// Chunks of each row a thread loads before it uses them: R * U is 4 or 8.
template <int R>
__host__ __device__ constexpr int units() {
  return R >= 8 ? 1 : 4 / R;
}

// The weight matrices of one launch (Note [Grouped products] in
// core/grouped.h: q, k and v of one x, say): W_i (n_i, K) in rows
// at stride ldw_i, y_i rows at stride ldy_i; blocks [first_i, first_i+1) of
// the grid are W_i's.
template <typename T>
struct Weights {
  const T* w[kMaxWeights];
  T* y[kMaxWeights];
  int64_t ldw[kMaxWeights], ldy[kMaxWeights], n[kMaxWeights];
  unsigned first[kMaxWeights + 1];
  int count;
};

// Grid Weights::first[count] blocks of kThreads, R rows of one W each. x rows
// at stride ldx; K, ldx and every ldw multiples of V, x and every W 16-byte
// aligned; MM bounds M.
template <typename T, int MM, int R>
__global__ void __launch_bounds__(kThreads)
    dense_kernel(const T* __restrict__ x, int64_t ldx, const Weights<T> ws, int M, int64_t K) {
  constexpr int V = 16 / sizeof(T);
  constexpr int U = units<R>();
  // This block's matrix (selects, not an indexed load from the parameters).
  const T* w = ws.w[0];
  T* y = ws.y[0];
  int64_t ldw = ws.ldw[0], ldy = ws.ldy[0], N = ws.n[0];
  unsigned first = 0;
#pragma unroll
  for (int i = 1; i < kMaxWeights; ++i) {
    if (i < ws.count && blockIdx.x >= ws.first[i]) {
      w = ws.w[i], y = ws.y[i], ldw = ws.ldw[i], ldy = ws.ldy[i], N = ws.n[i];
      first = ws.first[i];
    }
  }
  const int64_t n0 = int64_t(blockIdx.x - first) * R;
  const int64_t chunks = K / V;
  const uint4* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    rows[r] = reinterpret_cast<const uint4*>(w + min(n0 + r, N - 1) * ldw);
  }
  float acc[MM][R];
#pragma unroll
  for (int m = 0; m < MM; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.f;
  }
  for (int64_t c0 = threadIdx.x; c0 < chunks; c0 += int64_t(kThreads) * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + int64_t(kThreads) * u;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wv[u][r] = c < chunks ? __ldcs(rows[r] + c) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + int64_t(kThreads) * u;
      if (c >= chunks) break;
      float xv[MM][V];
#pragma unroll
      for (int m = 0; m < MM; ++m) {
        if (m < M) mma::unpack16<T>(__ldg(reinterpret_cast<const uint4*>(x + m * ldx) + c), xv[m]);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float wf[V];
        mma::unpack16<T>(wv[u][r], wf);
#pragma unroll
        for (int m = 0; m < MM; ++m) {
          if (m >= M) break;
#pragma unroll
          for (int i = 0; i < V; ++i) acc[m][r] = fmaf(wf[i], xv[m][i], acc[m][r]);
        }
      }
    }
  }
  // Sum the block: each warp by shuffles, then the warps through shared memory.
  constexpr int kWarps = kThreads / 32;
  __shared__ float part[kWarps][MM * R];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int m = 0; m < MM; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = mma::warp_sum(acc[m][r]);
      if (lane == 0) part[warp][m * R + r] = v;
    }
  }
  __syncthreads();
  const int i = threadIdx.x;
  if (i < MM * R) {
    const int m = i / R, r = i % R;
    if (m < M && n0 + r < N) {
      float v = 0.f;
#pragma unroll
      for (int k = 0; k < kWarps; ++k) v += part[k][i];
      y[m * ldy + n0 + r] = mma::from_f<T>(v);
    }
  }
}

// Launches dense_kernel over ws (first[] filled in here) with up to R rows a
// block (fewer for many rows of x, which hold more sums in registers);
// M <= kMaxRows.
template <typename T, int R>
cudaError_t launch(const T* x, int64_t ldx, Weights<T> ws, int M, int64_t K, cudaStream_t st) {
  constexpr int R4 = R < 4 ? R : 4;
  auto run = [&](auto kernel, int rows) {
    ws.first[0] = 0;
    for (int i = 0; i < ws.count; ++i) {
      ws.first[i + 1] = ws.first[i] + static_cast<unsigned>((ws.n[i] + rows - 1) / rows);
    }
    kernel<<<ws.first[ws.count], kThreads, 0, st>>>(x, ldx, ws, M, K);
  };
  if (M <= 1) {
    run(dense_kernel<T, 1, R>, R);
  } else if (M <= 2) {
    run(dense_kernel<T, 2, R>, R);
  } else {
    run(dense_kernel<T, 4, R4>, R4);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_rows(int rows, const T* x, int64_t ldx, const Weights<T>& ws, int M,
                        int64_t K, cudaStream_t st) {
  switch (rows) {
    case 8: return launch<T, 8>(x, ldx, ws, M, K, st);
    case 4: return launch<T, 4>(x, ldx, ws, M, K, st);
    case 2: return launch<T, 2>(x, ldx, ws, M, K, st);
    default: return launch<T, 1>(x, ldx, ws, M, K, st);
  }
}

// One matrix: y (M, N) rows at stride ldy = x @ W^T.
template <typename T>
cudaError_t launch_rows(int rows, const T* x, int64_t ldx, const T* w, int64_t ldw, T* y,
                        int64_t ldy, int M, int64_t N, int64_t K, cudaStream_t st) {
  Weights<T> ws{};
  ws.w[0] = w, ws.y[0] = y, ws.ldw[0] = ldw, ws.ldy[0] = ldy, ws.n[0] = N, ws.count = 1;
  return launch_rows<T>(rows, x, ldx, ws, M, K, st);
}

#endif  // __CUDACC__

}  // namespace tessera::gpu::gemv
