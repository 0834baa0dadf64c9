// Device element types, shared by every CUDA kernel file: the device type of
// each host element type, the type arithmetic on it runs in, the dispatch on
// a dtype, and 16-byte vectors.
//
//   gpu::dispatch_device(in.dtype(), [&](auto tag) {
//     using T = typename decltype(tag)::type;  // __half for float16, c64 for complex64
//     float x = gpu::widen(p[i]);              // when T is __half or __nv_bfloat16
//   });
//
// Host element types (core/dispatch.h) map to device types of the same
// size and bit layout, so one buffer is read as either.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <type_traits>

#include "tessera/core/dispatch.h"

namespace tessera::gpu {

// complex64 on the device (the layout of std::complex<float>).
struct alignas(8) c64 {
  float re, im;
};
__host__ __device__ inline c64 operator+(c64 a, c64 b) { return {a.re + b.re, a.im + b.im}; }
__host__ __device__ inline c64 operator*(c64 a, c64 b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

// The device type of a host element type.
template <typename T>
struct DeviceType {
  using type = T;
};
template <>
struct DeviceType<float16_t> {
  using type = __half;
};
template <>
struct DeviceType<bfloat16_t> {
  using type = __nv_bfloat16;
};
template <>
struct DeviceType<complex64_t> {
  using type = c64;
};
template <typename T>
using device_t = typename DeviceType<T>::type;

// Calls f(tessera::TypeTag<device_t<T>>{}) for the host element type T of dtype t.
template <typename F>
decltype(auto) dispatch_device(Dtype t, F&& f) {
  return tessera::dispatch_all(t, [&](auto tag) -> decltype(auto) {
    return f(tessera::TypeTag<device_t<typename decltype(tag)::type>>{});
  });
}

// One unsigned type per element width (tessera::dispatch_bytes), for kernels that
// only move bytes.
template <typename F>
decltype(auto) dispatch_width(Dtype t, F&& f) {
  return tessera::dispatch_bytes(t, std::forward<F>(f));
}

// Predicates on device element types.
template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

// The type arithmetic on device type T runs in: float for 16-bit floats, T otherwise.
template <typename T>
using dev_compute_t = std::conditional_t<is_half_v<T>, float, T>;

// 16-bit floats widen to float; other types stay as they are.
template <typename T>
__device__ __forceinline__ dev_compute_t<T> widen(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

// float rounded to T (to nearest even for 16-bit floats).
template <typename T>
__device__ __forceinline__ T narrow(float v) {
  return T(v);
}

// N elements in one aligned load or store (16 bytes for the widest type).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per 16-byte access of the widest of T.
template <typename... T>
inline constexpr int vec_width = static_cast<int>(16 / std::max({sizeof(T)...}));

// Whether p is a multiple of `bytes` (a vector's alignment).
inline bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace tessera::gpu
