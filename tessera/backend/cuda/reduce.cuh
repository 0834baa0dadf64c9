// Pieces shared by the reduction kernels and the softmax kernel (reduce.cu):
// conversions between device element types (types.cuh), strided offsets and
// warp / block reductions of any trivially copyable accumulator.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tessera/core/dispatch.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/backend/cuda/types.cuh"

namespace tessera::gpu {

// Converts between device element types (NumPy rules for the pairs used here:
// 16-bit floats through float, real -> complex with a zero imaginary part).
template <typename To, typename From>
__device__ __forceinline__ To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<From, __half>) {
    return convert<To>(__half2float(x));
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(__bfloat162float(x));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, c64>) {
    return c64{static_cast<float>(x), 0.0f};
  } else {
    return static_cast<To>(x);
  }
}

template <typename T>
__device__ __forceinline__ bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else if constexpr (std::is_same_v<T, c64>) {
    return x.re != x.re || x.im != x.im;
  } else {
    return false;
  }
}

// Element offset of flat index i in stride set k (row-major over d.shape).
template <int N>
__device__ __forceinline__ int64_t offset_of(int64_t i, const Dims<N>& d, int k = 0) {
  if (d.ndim == 1) return i * d.strides[k][0];
  int64_t off = 0;
  if (i <= INT32_MAX) {
    uint32_t r = static_cast<uint32_t>(i);
#pragma unroll 1
    for (int dim = d.ndim - 1; dim >= 0; --dim) {
      uint32_t n = static_cast<uint32_t>(d.shape[dim]);
      uint32_t q = r / n;
      off += static_cast<int64_t>(r - q * n) * d.strides[k][dim];
      r = q;
    }
  } else {
#pragma unroll 1
    for (int dim = d.ndim - 1; dim >= 0; --dim) {
      int64_t q = i / d.shape[dim];
      off += (i - q * d.shape[dim]) * d.strides[k][dim];
      i = q;
    }
  }
  return off;
}

// Elements per 16-byte vector (1 where T does not divide 16 bytes).
template <typename T>
inline constexpr int kVec = (16 % sizeof(T) == 0) ? static_cast<int>(16 / sizeof(T)) : 1;

// Shuffle of any trivially copyable value, word by word: `shuffle` is a
// __shfl_*_sync of one 32-bit word over the whole warp.
template <typename A, typename F>
__device__ __forceinline__ A shfl_words(const A& v, F shuffle) {
  constexpr int W = (sizeof(A) + 3) / 4;
  uint32_t w[W] = {};
  memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int k = 0; k < W; ++k) w[k] = shuffle(w[k]);
  A r;
  memcpy(&r, w, sizeof(A));
  return r;
}
template <typename A>
__device__ __forceinline__ A shfl_xor(const A& v, int lane_mask) {
  return shfl_words(v, [=](uint32_t w) { return __shfl_xor_sync(0xffffffffu, w, lane_mask); });
}
template <typename A>
__device__ __forceinline__ A shfl_down(const A& v, int delta) {
  return shfl_words(v, [=](uint32_t w) { return __shfl_down_sync(0xffffffffu, w, delta); });
}
template <typename A>
__device__ __forceinline__ A shfl_up(const A& v, int delta) {
  return shfl_words(v, [=](uint32_t w) { return __shfl_up_sync(0xffffffffu, w, delta); });
}

// Combines acc over groups of g lanes (a power of two <= 32, groups aligned in
// the warp); every lane of a group ends with the group's total. All lanes of
// the warp must call it.
template <typename A, typename M>
__device__ __forceinline__ A warp_reduce(A acc, int g, M merge) {
  for (int off = g / 2; off > 0; off /= 2) acc = merge(acc, shfl_xor(acc, off));
  return acc;
}

// Combines acc over the whole block (blockDim.x a multiple of 32, <= 1024);
// every thread gets the total. All threads must call it. The warps' totals
// are combined by the first warp in a tree (a serial pass by every thread
// cost softmax's merges, two exps each, as much as its rows); the order of the
// merges depends only on the block size, so results are deterministic.
template <typename A, typename M>
__device__ __forceinline__ A block_reduce(A acc, M merge) {
  __shared__ A warp_totals[32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int nwarps = blockDim.x / 32;
  acc = warp_reduce(acc, 32, merge);
  if (lane == 0) warp_totals[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = warp_totals[lane < nwarps ? lane : 0];
    for (int off = 16; off > 0; off /= 2) {
      A other = shfl_down(acc, off);
      if (lane + off < nwarps) acc = merge(acc, other);
    }
    __syncwarp();  // lanes past nwarps read warp_totals[0] above
    if (lane == 0) warp_totals[0] = acc;
  }
  __syncthreads();
  acc = warp_totals[0];
  __syncthreads();  // warp_totals may be reused by the next call
  return acc;
}

// Combines over groups of g threads: g <= 32 within warps, else g == blockDim.x.
template <typename A, typename M>
__device__ __forceinline__ A group_reduce(A acc, int g, M merge) {
  if (g <= 32) return warp_reduce(acc, g, merge);
  return block_reduce(acc, merge);
}

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }

// The running max m of a sequence and the sum s of exp(x - m) over it
// (logsumexp, softmax). A NaN makes m NaN; m == -inf means s == 0; when m is
// +inf, s is NaN wherever the CPU's exp(x - max) sums give NaN.
template <typename C>
struct MaxSum {
  C m, s;
};

template <typename C>
__device__ __forceinline__ MaxSum<C> max_sum_init() {
  return {-INFINITY, C(0)};
}

template <typename C>
__device__ __forceinline__ MaxSum<C> max_sum_step(MaxSum<C> a, C x) {
  if (x != x) {
    a.m = x;
  } else if (x > a.m) {
    a.s = a.s * exp_(a.m - x) + C(1);
    a.m = x;
  } else if (x != -C(INFINITY)) {
    a.s += exp_(x - a.m);
  }
  return a;
}

template <typename C>
__device__ __forceinline__ MaxSum<C> max_sum_merge(MaxSum<C> a, MaxSum<C> b) {
  if (a.m != a.m || b.m != b.m) return {a.m != a.m ? a.m : b.m, a.m != a.m ? a.m : b.m};
  C m = a.m > b.m ? a.m : b.m;
  if (m == -C(INFINITY)) return {m, C(0)};
  C sa = a.m == -C(INFINITY) ? C(0) : a.s * exp_(a.m - m);
  C sb = b.m == -C(INFINITY) ? C(0) : b.s * exp_(b.m - m);
  return {m, sa + sb};
}

}  // namespace tessera::gpu
