// What the elementwise CUDA kernels (unary.cu, binary.cu) share: the compute
// types functors see, loads and stores of 16-byte vectors, launch sizes and
// output allocation.
//
//   using D = gpu::device_t<float16_t>;               // __half
//   float c = gpu::to_compute(x);                      // the functor's argument
//   out[i] = gpu::from_compute<D>(scalar::Exp{}(c));
//
// Elements are stored as their device types (types.cuh); functors
// (backend/common/elementwise.h) see the compute types: float for the 16-bit
// floats, cuda::std::complex<float> for complex64.
#pragma once

#include <cuda/std/complex>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "tessera/core/dispatch.h"
#include "tessera/core/primitive.h"
#include "tessera/backend/common/elementwise.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/backend/cuda/types.cuh"

namespace tessera::gpu {

// The functor's argument: 16-bit floats as float, complex64 as
// cuda::std::complex<float>.
template <typename T>
__device__ __forceinline__ auto to_compute(T x) {
  if constexpr (std::is_same_v<T, c64>) {
    return cuda::std::complex<float>(x.re, x.im);
  } else {
    return widen(x);
  }
}

// The functor's result stored as device type Out.
template <typename Out, typename C>
__device__ __forceinline__ Out from_compute(C x) {
  if constexpr (std::is_same_v<Out, __half>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else if constexpr (std::is_same_v<Out, c64>) {
    const cuda::std::complex<float> z(x);
    return c64{z.real(), z.imag()};
  } else {
    return static_cast<Out>(x);
  }
}

template <typename T>
struct HostType {
  using type = T;
};
template <>
struct HostType<cuda::std::complex<float>> {
  using type = complex64_t;
};

// What a functor computes in on the device, for host element type T.
template <typename T>
using device_compute_t = std::conditional_t<tessera::is_complex_v<T>, cuda::std::complex<float>,
                                            dev_compute_t<device_t<T>>>;

// The stored (host) output type of Op on host input type In: the functor's
// result, except that a result of In's compute type is stored as In (16-bit
// floats stay 16-bit). The same rule as the CPU kernels.
template <typename Op, typename... In>
using device_result_t =
    decltype(std::declval<const Op&>()(std::declval<device_compute_t<In>>()...));
template <typename Op, typename In, typename... Rest>
using elementwise_out_t =
    std::conditional_t<std::is_same_v<device_result_t<Op, In, Rest...>, device_compute_t<In>>, In,
                       typename HostType<device_result_t<Op, In, Rest...>>::type>;

// The element type an op's kernel is instantiated for: ops whose integer
// results do not depend on signedness (wrapping arithmetic, bitwise ops,
// equality) run signed types through the unsigned kernel of the same width,
// which halves their instantiations.
template <typename Op>
inline constexpr bool sign_blind = false;
template <typename Op, typename T, bool = sign_blind<Op> && tessera::is_integral_v<T>>
struct KernelType {
  using type = T;
};
template <typename Op, typename T>
struct KernelType<Op, T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename Op, typename T>
using kernel_t = typename KernelType<Op, T>::type;

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p, int64_t vec_index) {
  return reinterpret_cast<const Vec<T, N>*>(p)[vec_index];
}
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, int64_t vec_index, const Vec<T, N>& v) {
  reinterpret_cast<Vec<T, N>*>(p)[vec_index] = v;
}
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> splat(T x) {
  Vec<T, N> r;
#pragma unroll
  for (int k = 0; k < N; ++k) r.v[k] = x;
  return r;
}

inline constexpr int kBlock = 256;

// Blocks for `items` work items of `per_block` each. One pass of blocks
// streams faster than a grid-stride loop over a few waves of them (an add of
// 2^28 float32 on an H200: 4.33 TB/s against 4.13 with 64 blocks per
// multiprocessor); the cap only bounds the grid, a grid-stride loop covers
// the rest.
inline unsigned grid_size(int64_t items, int64_t per_block, const Stream& s) {
  int64_t blocks = (items + per_block - 1) / per_block;
  int64_t cap = int64_t(properties(s.device.index).multiProcessorCount) * 4096;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, cap));
}

// The element offsets of flat index i (elem_to_loc), with 32-bit division
// while i fits (the common case); returns i's index in the last dimension.
template <int N>
__device__ __forceinline__ int32_t locate(int64_t i, const Dims<N>& d, int64_t (&loc)[N]) {
  const int last = d.ndim - 1;
  if (i <= INT32_MAX) {
#pragma unroll
    for (int k = 0; k < N; ++k) loc[k] = 0;
    uint32_t u = static_cast<uint32_t>(i);
    int32_t inner = static_cast<int32_t>(u % static_cast<uint32_t>(d.shape[last]));
    for (int dim = last; dim >= 0 && u > 0; --dim) {
      uint32_t extent = static_cast<uint32_t>(d.shape[dim]);
      uint32_t q = u / extent;
      int64_t r = u - q * extent;
#pragma unroll
      for (int k = 0; k < N; ++k) loc[k] += r * d.strides[k][dim];
      u = q;
    }
    return inner;
  }
  elem_to_loc(i, d, loc);
  return static_cast<int32_t>(i % d.shape[last]);
}

// Launches for the strided kernels: each thread handles kStridedWork
// consecutive elements of a row-contiguous output.
inline constexpr int kStridedWork = 4;
inline unsigned strided_grid(int64_t n) {
  return static_cast<unsigned>((n + kBlock * kStridedWork - 1) / (kBlock * kStridedWork));
}

// See Note [Donation] (core/eval.cpp): out takes over in's buffer, which the
// kernel then reads and writes in place, element by element.
template <typename T>
T* donate(array& out, const array& in, const Stream& s) {
  out.move_shared_buffer(in);
  return static_cast<T*>(writable_device_ptr(out, s));
}

// An output with the layout of the dense array `like`.
template <typename T>
T* allocate_like(array& out, const array& like, const Stream& s) {
  return static_cast<T*>(
      allocate_output(out, s, like.data_size(), like.strides(), like.flags()));
}

// A binary functor on two stored elements, its result stored as Out.
template <typename Out, typename Op, typename In>
__device__ __forceinline__ Out apply(const Op& op, In a, In b) {
  return from_compute<Out>(op(to_compute(a), to_compute(b)));
}

template <typename HostOut>
void check_out_dtype(const array& out, const char* family) {
  if (detail::exact_dtype<HostOut> != out.dtype()) {
    throw std::logic_error(std::string("[") + family + "] output dtype " +
                           dtype_name(out.dtype()) + " does not match the kernel's (bug)");
  }
}

// The outer step of an elementwise op of primitive p: an empty output gets
// its buffer and no kernel; otherwise f(TypeTag<T>{}) once for the stored type
// T of the input dtype t (dispatch_supported's error where Op lacks T).
template <typename Op, typename F>
void dispatch_elementwise(Dtype t, array& out, const Primitive& p, F&& f) {
  if (out.size() == 0) {
    allocate_output(out, p.stream());
    return;
  }
  dispatch_supported<Op>(t, p.name(), f);
}

}  // namespace tessera::gpu
