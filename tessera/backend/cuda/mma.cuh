// Warp-level tensor-core helpers (sm_80 and later) shared by the attention and
// quantized-product kernels: shared-memory addresses, cp.async, ldmatrix, the
// m16n8k16 product with float32 accumulators, 16-bit packing, and 16-byte
// chunks of float, __half or __nv_bfloat16 unpacked to float32.
//
//   float c[4] = {};
//   mma::mma16816<__nv_bfloat16>(c, a, b0, b1);  // c += a (16x16) b (16x8)
//
// Fragment layout of mma.sync m16n8k16 (lane = 4 g + t): a[0] holds A's row g,
// columns 2t and 2t+1; a[1] row g+8, the same columns; a[2] and a[3] the same
// rows, columns 2t+8 and 2t+9. b0 holds B's rows 2t, 2t+1 of column g; b1 rows
// 2t+8, 2t+9. c[0], c[1] hold C's row g, columns 2t, 2t+1; c[2], c[3] row g+8.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace tessera::gpu::mma {

#ifdef __CUDACC__

template <typename T>
struct Kind;
template <>
struct Kind<__nv_bfloat16> {
  static constexpr bool bf16 = true;
};
template <>
struct Kind<__half> {
  static constexpr bool bf16 = false;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool pred) {
  int n = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// One mma.sync of the given shape and operand types (a PTX suffix such as
// "m16n8k16.row.col.f32.bf16.bf16.f32"): four A registers, two B registers,
// four float32 accumulators c updated in place.
#define TESSERA_MMA_SYNC(shape_and_types, c, a, b0, b1)                                   \
  asm volatile("mma.sync.aligned." shape_and_types                                        \
               " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                 \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                          \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

// c += a b for a 16x16 (row) and b 16x8 (col) tile, float32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (Kind<T>::bf16) {
    TESSERA_MMA_SYNC("m16n8k16.row.col.f32.bf16.bf16.f32", c, a, b0, b1);
  } else {
    TESSERA_MMA_SYNC("m16n8k16.row.col.f32.f16.f16.f32", c, a, b0, b1);
  }
#endif
}

// c += a b for a 16x8 (row) and b 8x8 (col) tile of tf32 values (float32
// registers, of which the product reads 10 mantissa bits): lane 4g + t holds
// A's (g, t), (g+8, t), (g, t+4), (g+8, t+4) and B's rows t and t+4 of column g.
__device__ __forceinline__ void mma1688_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  TESSERA_MMA_SYNC("m16n8k8.row.col.f32.tf32.tf32.f32", c, a, b0, b1);
#endif
}

#undef TESSERA_MMA_SYNC

// Two floats rounded to T, x in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (Kind<T>::bf16) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// The 16 / sizeof(T) values (float, __half or __nv_bfloat16) of a 16-byte
// chunk, as float32.
template <typename T>
__device__ __forceinline__ void unpack16(const uint4& u, float (&v)[16 / sizeof(T)]) {
  if constexpr (std::is_same_v<T, float>) {
    v[0] = __uint_as_float(u.x), v[1] = __uint_as_float(u.y);
    v[2] = __uint_as_float(u.z), v[3] = __uint_as_float(u.w);
  } else {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
      } else {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
      }
    }
  }
}

// T to float, and float to T rounded to nearest even (the constructors of
// __half and __nv_bfloat16 round so).
template <typename T>
__device__ __forceinline__ float to_f(T x) {
  return static_cast<float>(x);
}
template <typename T>
__device__ __forceinline__ T from_f(float x) {
  return T(x);
}

// The sum of v over the warp's 32 lanes, in every lane (a butterfly of
// shuffles: every lane adds in the same order).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

#endif  // __CUDACC__

}  // namespace tessera::gpu::mma
