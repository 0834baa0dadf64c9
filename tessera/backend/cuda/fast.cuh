// The fused kernels of fast::rms_norm, layer_norm and rope on device pointers
// (Note [Fused norms and rope] below); backend/cuda/fast.cu runs them for the
// primitives.
//
//   NormArgs a{...};
//   NormLaunch l = norm_launch(a.d, vec_width<__nv_bfloat16>, aligned);
//   norm_forward<__nv_bfloat16>(a, l, stream);
//
// Note [Fused norms and rope]
// Every kernel reads its input once and writes its output once; arithmetic
// is in float32 whatever the storage type, and rounds where the fallback's
// graph rounds: the normalised value is rounded to the input type before the
// weight multiplies it, and that product before the bias is added.
//   - Norms: blockDim.x threads (a power of two) share a row and hold it in
//     registers, N accesses of W elements each (W = 16 bytes of T when the
//     row length and addresses allow, else 1); blockDim.y rows share a block
//     when rows are short. Sums go through warp shuffles, and through shared
//     memory across warps. The backward pass reads rows of 16-byte accesses
//     through shared memory, several rows ahead (Note [Staged norms]); other
//     rows go straight into registers. It computes dx row by row and
//     keeps each thread's share of dweight and dbias over the rows its block
//     visits (a grid that fills the GPU once); each block writes one row of
//     partial sums, and column_sums adds the blocks' rows up.
//   - RoPE: x is (B, M, T, D) contiguous, M all middle axes. A thread takes W
//     rotated pairs of one (b, t), computes their angles once (sincosf in
//     float32) and applies them to HPT consecutive heads. Columns past dims
//     are copied. The inverse rotation is the same kernel with scale negated.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>

#include "tessera/backend/cuda/mma.cuh"
#include "tessera/backend/cuda/types.cuh"

namespace tessera::gpu::fast_kernels {

// v rounded to T and back.
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return static_cast<float>(widen(narrow<T>(v)));
}

template <typename T, int W>
__device__ __forceinline__ void load(const T* p, float* v) {
  Vec<T, W> q = *reinterpret_cast<const Vec<T, W>*>(p);
#pragma unroll
  for (int j = 0; j < W; ++j) v[j] = widen(q.v[j]);
}

template <typename T, int W>
__device__ __forceinline__ void store(T* p, const float* v) {
  Vec<T, W> q;
#pragma unroll
  for (int j = 0; j < W; ++j) q.v[j] = narrow<T>(v[j]);
  *reinterpret_cast<Vec<T, W>*>(p) = q;
}

// ---- rms_norm and layer_norm

struct NormArgs {
  const void* x;
  const void* w;    // null without weight
  const void* b;    // null without bias (layer_norm)
  const void* cot;  // backward: the cotangent of the output
  void* out;        // forward: y; backward: dx
  float* part_w;    // backward with w: gridDim.x rows of d partial sums of dweight
  float* part_b;    // ... with b: of dbias
  int64_t rows;
  int d;
  float eps;
  bool rms;
  // Forward with a residual (Note [Fused pairs] in core/grouped.h): x is
  // x + res, rounded to T and written to sum, before it is normalised.
  const void* res;  // null: x alone
  void* sum;
};

// Sums K values over the blockDim.x threads of a row (a power of two; rows
// of more than 32 threads add their warps' sums through shared memory).
// Every thread of the row gets the same sums.
template <int K>
__device__ __forceinline__ void row_sums(float (&v)[K]) {
  __shared__ float warps[32 * K];
  const int tpr = blockDim.x;
#pragma unroll
  for (int o = (tpr < 32 ? tpr : 32) / 2; o > 0; o >>= 1) {
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
  }
  if (tpr > 32) {
    const int first = threadIdx.y * tpr / 32, warp = first + threadIdx.x / 32;
    __syncthreads();  // the previous sums are read
    if (threadIdx.x % 32 == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) warps[warp * K + k] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float t = 0;
      for (int i = first; i < first + tpr / 32; ++i) t += warps[i * K + k];
      v[k] = t;
    }
  }
}

// Threads that hold 16 floats of a row or more run in blocks of at most 512.
constexpr int max_threads(int floats) { return floats >= 16 ? 512 : 1024; }

template <typename T, int W, int N>
__global__ void __launch_bounds__(max_threads(N* W))
    norm_forward_kernel(NormArgs a) {
  const int tx = threadIdx.x, tpr = blockDim.x, d = a.d;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool live = row < a.rows;
  const T* x = static_cast<const T*>(a.x) + row * d;
  float v[N * W];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int col = (k * tpr + tx) * W;
    if (live && col < d) {
      load<T, W>(x + col, v + k * W);
      if (a.res) {
        float r[W];
        load<T, W>(static_cast<const T*>(a.res) + row * d + col, r);
#pragma unroll
        for (int j = 0; j < W; ++j) v[k * W + j] = round_to<T>(v[k * W + j] + r[j]);
        store<T, W>(static_cast<T*>(a.sum) + row * d + col, v + k * W);
      }
    } else {
#pragma unroll
      for (int j = 0; j < W; ++j) v[k * W + j] = 0.f;
    }
  }
  float mean = 0.f;
  if (!a.rms) {
    float s[1] = {0.f};
#pragma unroll
    for (int i = 0; i < N * W; ++i) s[0] += v[i];
    row_sums(s);
    mean = s[0] / d;
  }
  float q[1] = {0.f};
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if ((k * tpr + tx) * W >= d) continue;
#pragma unroll
    for (int j = 0; j < W; ++j) q[0] += (v[k * W + j] - mean) * (v[k * W + j] - mean);
  }
  row_sums(q);
  const float inv = rsqrtf(q[0] / d + a.eps);
  if (!live) return;
  T* y = static_cast<T*>(a.out) + row * d;
  const T* w = static_cast<const T*>(a.w);
  const T* b = static_cast<const T*>(a.b);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int col = (k * tpr + tx) * W;
    if (col >= d) continue;
    float o[W], ws[W], bs[W];
    if (w) load<T, W>(w + col, ws);
    if (b) load<T, W>(b + col, bs);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      float n = round_to<T>((v[k * W + j] - mean) * inv);
      if (w) n = round_to<T>(n * ws[j]);
      if (b) n = n + bs[j];
      o[j] = n;
    }
    store<T, W>(y + col, o);
  }
}

// What dx of a row needs (backward_stats): dx = inv * (g w - mg - n mgn),
// n = (x - mean) inv.
struct RowStats {
  float mean = 0.f, inv = 0.f, mg = 0.f, mgn = 0.f;
};

// Note [Staged norms]
// In the backward pass, rows of 16-byte accesses (W * sizeof(T) == 16) in
// blocks of at most 256 threads stream through shared memory: a grid that
// fills the GPU once visits the rows, and each thread copies its own chunks
// of the rows `stages - 1` steps ahead (cp.async), so that a block keeps that
// many rows in flight while it computes one. The same thread reads back what it
// copied, so waiting for its own copies is all the ordering it needs; a
// stage is copied into again only after the thread has used what it read
// from it. The backward pass streams x and the cotangent, with the weight in
// shared memory and the dweight and dbias sums in registers (each thread
// keeps the same columns on every row): 1.54 times the plain kernel for
// rms_norm over 8192 x 8192 bf16 on an H100 (2000 against 1296 GB/s), 1.57
// for layer_norm. The forward pass stays plain (see norm_forward).
//
// RowStage copies the rows of step i of a block into stage i % stages:
// `inputs` arrays, each thread's N chunks of 16 bytes of each.
template <typename T, int W, int N, int Inputs>
struct RowStage {
  uint4* stages;
  const T* src[Inputs];
  int count;  // stages
  int64_t first, step, rows;
  int d, threads, tid;

  __device__ __forceinline__ uint4* at(int64_t i, int input, int k) const {
    return stages + (static_cast<size_t>(i % count) * Inputs * N + input * N + k) * threads + tid;
  }
  __device__ __forceinline__ void issue(int64_t i) const {
    const int64_t row = first + i * step + threadIdx.y;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int col = (k * blockDim.x + threadIdx.x) * W;
      const bool ok = row < rows && col < d;
      const int64_t off = ok ? row * d + col : 0;
#pragma unroll
      for (int input = 0; input < Inputs; ++input) {
        mma::cp_async16(mma::smem_u32(at(i, input, k)), src[input] + off, ok);
      }
    }
    mma::cp_async_commit();
  }
  // Waits for the copies of step i, issued count - 1 steps before.
  __device__ __forceinline__ void wait() const {
    if (count >= 4) {
      mma::cp_async_wait<3>();
    } else if (count == 3) {
      mma::cp_async_wait<2>();
    } else {
      mma::cp_async_wait<1>();
    }
  }
  __device__ __forceinline__ void read(int64_t i, int input, int k, float* v) const {
    load<T, W>(reinterpret_cast<const T*>(at(i, input, k)), v);
  }
};

// The RowStats of one row: get(k, v, g) fills the thread's access k of the
// row, W values of x and of the cotangent times the weight (zeros past the
// row).

template <int W, int N, typename Get>
__device__ __forceinline__ RowStats backward_stats(const NormArgs& a, Get&& get) {
  const int tx = threadIdx.x, tpr = blockDim.x, d = a.d;
  RowStats r;
  if (a.rms) {
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float v[W], g[W];
      get(k, v, g);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        s[0] += v[j] * v[j];
        s[1] += g[j] * v[j];
      }
    }
    row_sums(s);
    r.inv = rsqrtf(s[0] / d + a.eps);
    r.mgn = s[1] * r.inv / d;
    return r;
  }
  float s[1] = {0.f};
#pragma unroll
  for (int k = 0; k < N; ++k) {
    float v[W], g[W];
    get(k, v, g);
#pragma unroll
    for (int j = 0; j < W; ++j) s[0] += v[j];
  }
  row_sums(s);
  r.mean = s[0] / d;
  float t[3] = {0.f, 0.f, 0.f};
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if ((k * tpr + tx) * W >= d) continue;
    float v[W], g[W];
    get(k, v, g);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const float cv = v[j] - r.mean;
      t[0] += cv * cv;
      t[1] += g[j];
      t[2] += g[j] * cv;
    }
  }
  row_sums(t);
  r.inv = rsqrtf(t[0] / d + a.eps);
  r.mg = t[1] / d;
  r.mgn = t[2] * r.inv / d;
  return r;
}

// Rows blockIdx.x * blockDim.y + threadIdx.y, then every gridDim.x * blockDim.y.
// Rows in registers; the dweight and dbias sums in shared memory.
template <typename T, int W, int N>
__global__ void __launch_bounds__(max_threads(N* W))
    norm_backward_kernel(NormArgs a, int) {
  // Sums of dweight then dbias (those wanted), each (blockDim.y, blockDim.x * N * W).
  extern __shared__ float acc[];
  const int tx = threadIdx.x, tpr = blockDim.x, d = a.d, width = tpr * N * W;
  const int threads = tpr * blockDim.y, tid = threadIdx.y * tpr + tx;
  const int sums = (a.w ? 1 : 0) + (a.b ? 1 : 0);
  float* acc_w = acc + threadIdx.y * width;
  float* acc_b = acc + ((a.w ? blockDim.y : 0) + threadIdx.y) * width;
  for (int i = tid; i < sums * blockDim.y * width; i += threads) acc[i] = 0.f;
  __syncthreads();
  const T* w = static_cast<const T*>(a.w);
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.y; first < a.rows;
       first += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t row = first + threadIdx.y;
    const bool live = row < a.rows;
    const T* x = static_cast<const T*>(a.x) + row * d;
    const T* c = static_cast<const T*>(a.cot) + row * d;
    float v[N * W], g0[N * W], ws[N * W];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int col = (k * tpr + tx) * W;
#pragma unroll
      for (int j = 0; j < W; ++j) v[k * W + j] = g0[k * W + j] = 0.f, ws[k * W + j] = 1.f;
      if (live && col < d) {
        load<T, W>(x + col, v + k * W);
        load<T, W>(c + col, g0 + k * W);
        if (w) load<T, W>(w + col, ws + k * W);
      }
    }
    const RowStats r = backward_stats<W, N>(a, [&](int k, float* vk, float* gk) {
#pragma unroll
      for (int j = 0; j < W; ++j) {
        vk[j] = v[k * W + j];
        gk[j] = g0[k * W + j] * ws[k * W + j];
      }
    });
    if (!live) continue;
    T* dx = static_cast<T*>(a.out) + row * d;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int col = (k * tpr + tx) * W;
      if (col >= d) continue;
      float o[W];
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const int i = k * W + j;
        const float n = (v[i] - r.mean) * r.inv;
        o[j] = r.inv * (g0[i] * ws[i] - r.mg - n * r.mgn);
        if (a.w) acc_w[col + j] += g0[i] * round_to<T>(n);
        if (a.b) acc_b[col + j] += g0[i];
      }
      store<T, W>(dx + col, o);
    }
  }
  __syncthreads();
  for (int col = tid; col < d; col += threads) {
    for (int which = 0; which < sums; ++which) {
      const float* from = acc + which * blockDim.y * width + col;
      float t = 0.f;
      for (int r = 0; r < blockDim.y; ++r) t += from[r * width];
      float* part = which == 0 && a.w ? a.part_w : a.part_b;
      part[static_cast<int64_t>(blockIdx.x) * d + col] = t;
    }
  }
}

// The backward pass of Note [Staged norms]. Shared memory: the weight (d
// elements, rounded up to 16 bytes; ones without one), then the stages, which
// afterwards hold the block's sums, (which, threadIdx.y, d).
template <typename T, int W, int N>
__global__ void __launch_bounds__(256) norm_backward_staged_kernel(NormArgs a, int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ uint4 smem[];
  const int tx = threadIdx.x, tpr = blockDim.x, d = a.d;
  const int threads = tpr * blockDim.y, tid = threadIdx.y * tpr + tx;
  const int weight_chunks = (d + W - 1) / W;
  const T* wsm = reinterpret_cast<const T*>(smem);
  const RowStage<T, W, N, 2> st{smem + weight_chunks,
                                {static_cast<const T*>(a.x), static_cast<const T*>(a.cot)},
                                stages,
                                static_cast<int64_t>(blockIdx.x) * blockDim.y,
                                static_cast<int64_t>(gridDim.x) * blockDim.y,
                                a.rows,
                                d,
                                threads,
                                tid};
  for (int i = tid; i < weight_chunks; i += threads) {
    if (a.w) {
      smem[i] = static_cast<const uint4*>(a.w)[i];
    } else {
      Vec<T, W> one;
#pragma unroll
      for (int j = 0; j < W; ++j) one.v[j] = narrow<T>(1.f);
      reinterpret_cast<Vec<T, W>*>(smem)[i] = one;
    }
  }
  for (int i = 0; i < stages - 1; ++i) st.issue(i);
  __syncthreads();  // the weight is in place
  float acc_w[N * W] = {}, acc_b[N * W] = {};
  for (int64_t i = 0; st.first + i * st.step < a.rows; ++i) {
    st.issue(i + stages - 1);
    st.wait();
    auto get = [&](int k, float* v, float* g) {
      float ws[W];
      st.read(i, 0, k, v);
      st.read(i, 1, k, g);
      load<T, W>(wsm + (k * tpr + tx) * W, ws);
#pragma unroll
      for (int j = 0; j < W; ++j) g[j] *= ws[j];
    };
    const RowStats r = backward_stats<W, N>(a, get);
    const int64_t row = st.first + i * st.step + threadIdx.y;
    if (row >= a.rows) continue;
    T* dx = static_cast<T*>(a.out) + row * d;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int col = (k * tpr + tx) * W;
      if (col >= d) continue;
      float v[W], g0[W], ws[W], o[W];
      st.read(i, 0, k, v);
      st.read(i, 1, k, g0);
      load<T, W>(wsm + col, ws);
#pragma unroll
      for (int j = 0; j < W; ++j) {
        const float n = (v[j] - r.mean) * r.inv;
        o[j] = r.inv * (g0[j] * ws[j] - r.mg - n * r.mgn);
        acc_w[k * W + j] += g0[j] * round_to<T>(n);
        acc_b[k * W + j] += g0[j];
      }
      store<T, W>(dx + col, o);
    }
  }
  mma::cp_async_wait<0>();
  __syncthreads();  // every stage is read: they now hold the sums
  float* red = reinterpret_cast<float*>(smem + weight_chunks);
  const int sums = (a.w ? 1 : 0) + (a.b ? 1 : 0);
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int col = (k * tpr + tx) * W;
    if (col >= d) continue;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      if (a.w) red[static_cast<int64_t>(threadIdx.y) * d + col + j] = acc_w[k * W + j];
      if (a.b) {
        red[static_cast<int64_t>((a.w ? blockDim.y : 0) + threadIdx.y) * d + col + j] =
            acc_b[k * W + j];
      }
    }
  }
  __syncthreads();
  for (int col = tid; col < d; col += threads) {
    for (int which = 0; which < sums; ++which) {
      const float* from = red + static_cast<int64_t>(which) * blockDim.y * d + col;
      float t = 0.f;
      for (int r = 0; r < blockDim.y; ++r) t += from[static_cast<int64_t>(r) * d];
      float* part = which == 0 && a.w ? a.part_w : a.part_b;
      part[static_cast<int64_t>(blockIdx.x) * d + col] = t;
    }
  }
#endif
}

// out[c] = sum over the rows p < parts of part[p * d + c], in a block of 32 x 32.
template <typename T>
__global__ void column_sums_kernel(const float* part, int parts, int d, T* out) {
  __shared__ float s[32][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.f;
  if (col < d) {
    for (int p = threadIdx.y; p < parts; p += 32) acc += part[static_cast<int64_t>(p) * d + col];
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < d) {
    float t = 0.f;
    for (int r = 0; r < 32; ++r) t += s[r][threadIdx.x];
    out[col] = narrow<T>(t);
  }
}

// How a row of d elements is spread over threads: W elements per access, N
// accesses per thread, tpr threads per row (a power of two), rpb rows per block.
struct NormLaunch {
  int w = 0, n = 0, tpr = 0, rpb = 0;
};

inline bool n_ok(const NormLaunch& l) { return l.n * l.w <= 32 && l.tpr <= max_threads(l.n * l.w); }

// The spread for rows of d elements; vec: elements per 16 bytes, usable when
// d is a multiple and the addresses are 16-byte aligned. A thread holds at
// most 32 floats of a row (fewer than 16 in blocks of 1024). Rows that
// fast::gpu_norm_row_fits admits always get one; others get tpr 0.
inline NormLaunch norm_launch(int d, int vec, bool vector_ok) {
  NormLaunch l;
  l.w = vector_ok && d % vec == 0 ? vec : 1;
  const int accesses = (d + l.w - 1) / l.w;
  auto spread = [&](int n) {
    l.n = n;
    l.tpr = 1;
    while (l.tpr * n < accesses) l.tpr *= 2;
  };
  const int ns[4] = {1, l.w == 1 ? 4 : 2, l.w == 1 ? 16 : 4, l.w == 1 ? 16 : 32 / l.w};
  bool found = false;
  for (int n : ns) {
    spread(n);
    if (l.tpr <= 256 && n * l.w <= 32) {
      found = true;
      break;
    }
  }
  for (int i = 0; !found && i < 4; ++i) {
    spread(ns[i]);
    found = n_ok(l);
  }
  if (!found) return NormLaunch{};
  l.rpb = l.tpr >= 256 ? 1 : 256 / l.tpr;
  return l;
}

template <typename T, template <typename, int, int> class K, typename F>
void with_kernel(const NormLaunch& l, F&& f) {
  constexpr int V = vec_width<T>;
  if (l.w == 1) {
    if (l.n == 1) return f(K<T, 1, 1>{});
    if (l.n == 4) return f(K<T, 1, 4>{});
    return f(K<T, 1, 16>{});
  }
  if (l.n == 1) return f(K<T, V, 1>{});
  if (l.n == 2) return f(K<T, V, 2>{});
  if constexpr (V == 4) {
    if (l.n == 8) return f(K<T, V, 8>{});
  }
  return f(K<T, V, 4>{});
}

template <typename T, int W, int N>
struct ForwardKernel {
  static constexpr auto fn = norm_forward_kernel<T, W, N>;
};
template <typename T, int W, int N>
struct BackwardKernel {
  static constexpr auto fn = norm_backward_kernel<T, W, N>;
};

// Blocks of kernel fn (`threads` threads, `smem` bytes of dynamic shared
// memory) that one multiprocessor holds, asked of the driver once per
// configuration, not per launch; the first ask for fn lets its blocks take
// as much shared memory as a block may (less what row_sums keeps).
inline int resident_blocks(const void* fn, int threads, size_t smem,
                           const cudaDeviceProp& props) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, size_t>, int> known;
  static std::set<const void*> raised;
  std::lock_guard lock(mutex);
  auto [it, fresh] = known.try_emplace({fn, threads, smem}, 1);
  if (!fresh) return it->second;
  if (raised.insert(fn).second && props.sharedMemPerBlockOptin > 48 * 1024) {
    cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(props.sharedMemPerBlockOptin - 1024));
  }
  int per_sm = 1;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem) != cudaSuccess) {
    cudaGetLastError();
    per_sm = 1;
  }
  it->second = std::max(per_sm, 1);
  return it->second;
}

// Blocks of a pass: the GPU filled once, at most one per group of rows.
template <typename T, template <typename, int, int> class K>
int norm_blocks(const NormArgs& a, const NormLaunch& l, size_t smem, const cudaDeviceProp& props) {
  int per_sm = 1;
  with_kernel<T, K>(l, [&](auto k) {
    per_sm = resident_blocks(reinterpret_cast<const void*>(decltype(k)::fn), l.tpr * l.rpb, smem,
                             props);
  });
  const int64_t groups = (a.rows + l.rpb - 1) / l.rpb;
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(groups, int64_t{per_sm} * props.multiProcessorCount)));
}

// The staged backward kernel where rows allow it (Note [Staged norms]),
// else the plain one (then never launched).
template <typename T, int W, int N, bool Staged = W * sizeof(T) == 16>
struct StagedBackwardKernelOf {
  static constexpr auto fn = norm_backward_kernel<T, W, N>;
};
template <typename T, int W, int N>
struct StagedBackwardKernelOf<T, W, N, true> {
  static constexpr auto fn = norm_backward_staged_kernel<T, W, N>;
};
template <typename T, int W, int N>
struct StagedBackwardKernel {
  static constexpr auto fn = StagedBackwardKernelOf<T, W, N>::fn;
};

// How the backward pass runs: `stages` > 0 for the staged kernel (Note
// [Staged norms]), its shared memory, and its blocks (the rows of partial
// sums it writes).
struct NormPlan {
  int stages = 0;
  size_t smem = 0;
  int blocks = 0;
};

// The most stages (2 to 4) of `stage` bytes that fit beside `fixed` bytes and
// hold at least `least` bytes; 0 where rows are not staged.
template <typename T>
int norm_stages(const NormLaunch& l, const cudaDeviceProp& props, size_t fixed, size_t stage,
                size_t least) {
  // TESSERA_STAGED_NORMS=0 keeps the plain kernels (for comparisons).
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_STAGED_NORMS");
    return !v || std::string_view(v) != "0";
  }();
  if (!on || l.w * sizeof(T) != 16 || l.tpr * l.rpb > 256 || props.major < 8) return 0;
  const size_t room = props.sharedMemPerBlockOptin - 1024;  // row_sums' own
  for (int stages = 4; stages >= 2; --stages) {
    if (fixed + stages * stage <= room && stages * stage >= least) return stages;
  }
  return 0;
}

// One block per group of rpb rows. (Staging the forward pass measured slower
// on an H100: 1949 against 2387 GB/s for rms_norm over 8192 x 8192 bf16.)
template <typename T>
cudaError_t norm_forward(const NormArgs& a, const NormLaunch& l, cudaStream_t s) {
  dim3 block(l.tpr, l.rpb);
  const unsigned blocks = static_cast<unsigned>((a.rows + l.rpb - 1) / l.rpb);
  with_kernel<T, ForwardKernel>(l, [&](auto k) { decltype(k)::fn<<<blocks, block, 0, s>>>(a); });
  return cudaGetLastError();
}

template <typename T>
NormPlan norm_backward_plan(const NormArgs& a, const NormLaunch& l, const cudaDeviceProp& props) {
  NormPlan p;
  const int sums = (a.w ? 1 : 0) + (a.b ? 1 : 0);
  const size_t weight = sizeof(T) * ((a.d + l.w - 1) / l.w) * l.w;
  const size_t stage = size_t{2} * 16 * l.tpr * l.rpb * l.n;
  p.stages = norm_stages<T>(l, props, weight, stage, sizeof(float) * sums * l.rpb * a.d);
  if (p.stages) {
    p.smem = weight + p.stages * stage;
    p.blocks = norm_blocks<T, StagedBackwardKernel>(a, l, p.smem, props);
  } else {
    p.smem = sizeof(float) * sums * l.rpb * l.tpr * l.n * l.w;
    p.blocks = norm_blocks<T, BackwardKernel>(a, l, p.smem, props);
  }
  return p;
}

// a.part_w / a.part_b hold p.blocks * d floats each (where wanted); dw / db
// receive the column sums.
template <typename T>
cudaError_t norm_backward(const NormArgs& a, const NormLaunch& l, const NormPlan& p, T* dw,
                          T* db, cudaStream_t s) {
  dim3 block(l.tpr, l.rpb);
  // norm_backward_plan asked resident_blocks, which allowed the shared memory.
  auto launch = [&](auto k) { decltype(k)::fn<<<p.blocks, block, p.smem, s>>>(a, p.stages); };
  if (p.stages) {
    with_kernel<T, StagedBackwardKernel>(l, launch);
  } else {
    with_kernel<T, BackwardKernel>(l, launch);
  }
  const unsigned cols = static_cast<unsigned>((a.d + 31) / 32);
  if (dw) column_sums_kernel<T><<<cols, dim3(32, 32), 0, s>>>(a.part_w, p.blocks, a.d, dw);
  if (db) column_sums_kernel<T><<<cols, dim3(32, 32), 0, s>>>(a.part_b, p.blocks, a.d, db);
  return cudaGetLastError();
}

// ---- rope

struct RopeArgs {
  const void* x;
  void* out;
  const void* offset;  // one value, or one per batch element
  int offset_kind;     // 0 int32, 1 int64, 2 float32, 3 offset_value
  bool offset_per_batch;
  float offset_value;  // a scalar offset read on the host
  const float* freqs;  // null: base ** (-i / half)
  float base;
  float scale;
  int B, M, T, D, dims;
};

constexpr int kHeadsPerThread = 4;

__device__ __forceinline__ float rope_offset(const RopeArgs& a, int b) {
  if (a.offset_kind == 3) return a.offset_value;
  const int i = a.offset_per_batch ? b : 0;
  if (a.offset_kind == 0) return static_cast<float>(static_cast<const int32_t*>(a.offset)[i]);
  if (a.offset_kind == 1) return static_cast<float>(static_cast<const int64_t*>(a.offset)[i]);
  return static_cast<const float*>(a.offset)[i];
}

template <typename T, int W, bool TRAD>
__device__ __forceinline__ void rope_rows(const RopeArgs& a) {
  const int half = a.dims / 2, rot = half / W, chunks = rot + (a.D - a.dims) / W;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(a.B) * a.T * chunks) return;
  const int c = static_cast<int>(idx % chunks);
  const int64_t bt = idx / chunks;
  const int t = static_cast<int>(bt % a.T), b = static_cast<int>(bt / a.T);
  const T* __restrict__ x = static_cast<const T*>(a.x);
  T* __restrict__ y = static_cast<T*>(a.out);
  const int64_t row_stride = static_cast<int64_t>(a.T) * a.D;
  const int64_t first = (static_cast<int64_t>(b) * a.M * a.T + t) * a.D;
  if (c >= rot) {
    const int col = a.dims + (c - rot) * W;
    for (int m0 = blockIdx.y * kHeadsPerThread; m0 < a.M; m0 += gridDim.y * kHeadsPerThread) {
#pragma unroll
      for (int k = 0; k < kHeadsPerThread; ++k) {
        if (m0 + k >= a.M) break;
        const int64_t at = first + (m0 + k) * row_stride + col;
        *reinterpret_cast<Vec<T, W>*>(y + at) = *reinterpret_cast<const Vec<T, W>*>(x + at);
      }
    }
    return;
  }
  const int i0 = c * W, o1 = TRAD ? 2 * i0 : i0, o2 = TRAD ? 2 * i0 + W : i0 + half;
  const float pos = (static_cast<float>(t) + rope_offset(a, b)) * a.scale;
  float cs[W], sn[W];
#pragma unroll
  for (int j = 0; j < W; ++j) {
    const int i = i0 + j;
    const float inv = a.freqs ? 1.f / a.freqs[i]
                              : powf(a.base, -static_cast<float>(i) / static_cast<float>(half));
    sincosf(pos * inv, &sn[j], &cs[j]);
  }
  for (int m0 = blockIdx.y * kHeadsPerThread; m0 < a.M; m0 += gridDim.y * kHeadsPerThread) {
#pragma unroll
    for (int k = 0; k < kHeadsPerThread; ++k) {
      if (m0 + k >= a.M) break;
      const int64_t at = first + (m0 + k) * row_stride;
      float p[W], q[W];
      load<T, W>(x + at + o1, p);
      load<T, W>(x + at + o2, q);
      if constexpr (TRAD && W > 1) {
        // Pairs (2i, 2i + 1): the first W / 2 in p, the rest in q.
#pragma unroll
        for (int j = 0; j < W; ++j) {
          float* e = j < W / 2 ? p + 2 * j : q + 2 * (j - W / 2);
          const float x1 = e[0], x2 = e[1];
          e[0] = x1 * cs[j] - x2 * sn[j];
          e[1] = x1 * sn[j] + x2 * cs[j];
        }
      } else {
#pragma unroll
        for (int j = 0; j < W; ++j) {
          const float x1 = p[j], x2 = q[j];
          p[j] = x1 * cs[j] - x2 * sn[j];
          q[j] = x1 * sn[j] + x2 * cs[j];
        }
      }
      store<T, W>(y + at + o1, p);
      store<T, W>(y + at + o2, q);
    }
  }
}

template <typename T, int W, bool TRAD>
__global__ void rope_kernel(RopeArgs a) {
  rope_rows<T, W, TRAD>(a);
}

// Two rotations in one launch (Note [Fused pairs] in core/grouped.h): the
// grid's z index picks one.
template <typename T, int W, bool TRAD>
__global__ void rope_pair_kernel(RopeArgs a, RopeArgs b) {
  if (blockIdx.z == 0) {
    rope_rows<T, W, TRAD>(a);
  } else {
    rope_rows<T, W, TRAD>(b);
  }
}

// Whether rows allow accesses of `vec` elements: the rotated halves (or pairs)
// and the copied columns in whole vectors, and aligned addresses.
inline bool rope_vector_ok(const RopeArgs& a, int vec, bool traditional, bool aligned_ptrs) {
  const int unit = traditional ? 2 * vec : vec;
  return aligned_ptrs && a.D % vec == 0 &&
         (traditional ? a.dims % unit == 0 : (a.dims / 2) % vec == 0);
}

// The grid of one rotation: (threads of a head's rows, head groups).
inline dim3 rope_grid(const RopeArgs& a, int w, int block) {
  const int chunks = a.dims / 2 / w + (a.D - a.dims) / w;
  const int64_t threads = static_cast<int64_t>(a.B) * a.T * chunks;
  return dim3(static_cast<unsigned>((threads + block - 1) / block),
              static_cast<unsigned>(std::min(65535, (a.M + kHeadsPerThread - 1) / kHeadsPerThread)));
}

template <typename T>
cudaError_t rope(const RopeArgs& a, bool traditional, bool vector_ok, cudaStream_t s) {
  constexpr int V = vec_width<T>;
  const int block = 256;
  const dim3 grid = rope_grid(a, vector_ok ? V : 1, block);
  if (traditional) {
    if (vector_ok) rope_kernel<T, V, true><<<grid, block, 0, s>>>(a);
    else rope_kernel<T, 1, true><<<grid, block, 0, s>>>(a);
  } else {
    if (vector_ok) rope_kernel<T, V, false><<<grid, block, 0, s>>>(a);
    else rope_kernel<T, 1, false><<<grid, block, 0, s>>>(a);
  }
  return cudaGetLastError();
}

// a and b, of one element type and rotation kind, in one launch.
template <typename T>
cudaError_t rope_pair(const RopeArgs& a, const RopeArgs& b, bool traditional, bool vector_ok,
                      cudaStream_t s) {
  constexpr int V = vec_width<T>;
  const int block = 256;
  const dim3 ga = rope_grid(a, vector_ok ? V : 1, block), gb = rope_grid(b, vector_ok ? V : 1, block);
  const dim3 grid(std::max(ga.x, gb.x), std::max(ga.y, gb.y), 2);
  if (traditional) {
    if (vector_ok) rope_pair_kernel<T, V, true><<<grid, block, 0, s>>>(a, b);
    else rope_pair_kernel<T, 1, true><<<grid, block, 0, s>>>(a, b);
  } else {
    if (vector_ok) rope_pair_kernel<T, V, false><<<grid, block, 0, s>>>(a, b);
    else rope_pair_kernel<T, 1, false><<<grid, block, 0, s>>>(a, b);
  }
  return cudaGetLastError();
}

}  // namespace tessera::gpu::fast_kernels
