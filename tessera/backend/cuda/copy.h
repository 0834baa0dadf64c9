// Copies with casts on the GPU: the kernels behind Copy, AsType, Contiguous,
// the copying shape primitives and compact matmul operands.
//
//   void* dst = gpu::allocate_output(out, s);
//   gpu::copy_gpu(in.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(),
//                 dst, out.dtype(), out.strides(), s, "Pad");
//
// Note [GPU copy paths]
// After the dimensions of a copy are collapsed (cpu::collapse_contiguous_dims),
// one of three kernels runs: a dense 1-D pass with 16-byte loads and stores
// (cudaMemcpyAsync when nothing is cast); a tiled transpose through shared
// memory when the source is dense along one axis and the destination along
// another; otherwise a strided kernel over the collapsed dimensions, each
// thread moving a few neighbours of the last one. Indices are 32-bit when the
// element count and every offset allow it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <limits>
#include <type_traits>
#endif

namespace tessera::gpu {

// Copies the elements of `in` (any strides, broadcast included) into `out`,
// which already has a buffer and out.shape() == in.shape(); casts to
// out.dtype() and honours out's strides. `op` names the primitive in errors.
void copy_gpu(const array& in, array& out, const Stream& s, const char* op = "Copy");

// Gives out a row-contiguous device buffer and copies `in` into it.
void copy_gpu_to_row_contiguous(const array& in, array& out, const Stream& s,
                                const char* op = "Copy");

// The same on device addresses of the first elements (strides in elements).
// src_dyn / dst_dyn, when given, point at a device int64 element offset added
// to src / dst when the kernel runs (dynamic slices: no host synchronisation).
void copy_gpu(const Shape& shape, const void* src, Dtype src_t, const Strides& src_strides,
              void* dst, Dtype dst_t, const Strides& dst_strides, const Stream& s,
              const char* op, const int64_t* src_dyn = nullptr,
              const int64_t* dst_dyn = nullptr);

// n contiguous elements from src_t to dst_t; src may be dst when both types
// have the same width (an in-place cast).
void cast_gpu(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n, const Stream& s,
              const char* op);

// Blocks for a 1-D grid of n items of `threads` threads: enough to fill the
// GPU a few times over, at most what is needed.
unsigned int grid_blocks(int64_t n, int threads);

#ifdef __CUDACC__
// ---- device element types and casts, shared by the .cu files of this family ----

// complex64 in device code (same layout as std::complex<float>).
struct alignas(8) Complex64 {
  float re, im;
};

template <typename T>
struct DeviceTag {
  using type = T;
};

// Calls f(DeviceTag<T>{}) with the device element type T of dtype t.
template <typename F>
decltype(auto) dispatch_device(Dtype t, F&& f) {
  switch (t.val) {
    case Dtype::Val::bool_: return f(DeviceTag<bool>{});
    case Dtype::Val::uint8: return f(DeviceTag<uint8_t>{});
    case Dtype::Val::uint16: return f(DeviceTag<uint16_t>{});
    case Dtype::Val::uint32: return f(DeviceTag<uint32_t>{});
    case Dtype::Val::uint64: return f(DeviceTag<uint64_t>{});
    case Dtype::Val::int8: return f(DeviceTag<int8_t>{});
    case Dtype::Val::int16: return f(DeviceTag<int16_t>{});
    case Dtype::Val::int32: return f(DeviceTag<int32_t>{});
    case Dtype::Val::int64: return f(DeviceTag<int64_t>{});
    case Dtype::Val::float16: return f(DeviceTag<__half>{});
    case Dtype::Val::bfloat16: return f(DeviceTag<__nv_bfloat16>{});
    case Dtype::Val::float32: return f(DeviceTag<float>{});
    case Dtype::Val::float64: return f(DeviceTag<double>{});
    case Dtype::Val::complex64: return f(DeviceTag<Complex64>{});
  }
  throw std::logic_error("[gpu] unknown dtype (bug)");
}

// One unsigned type per element width, for kernels that only move bytes.
template <typename F>
decltype(auto) dispatch_width(Dtype t, F&& f) {
  switch (t.size) {
    case 1: return f(DeviceTag<uint8_t>{});
    case 2: return f(DeviceTag<uint16_t>{});
    case 4: return f(DeviceTag<uint32_t>{});
    case 8: return f(DeviceTag<uint64_t>{});
  }
  throw std::logic_error("[gpu] unknown element size (bug)");
}

template <typename T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
template <typename T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

// 16-bit floats widen to float; other types stay as they are.
template <typename T>
__device__ __forceinline__ auto widen(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return v;
  }
}

// The conversion of cpu::cast_to, element for element: complex -> real keeps
// the real part, anything -> bool is "nonzero", float -> integer clamps to the
// destination range (NaN -> 0), 16-bit floats round to nearest even from float.
template <typename Out, typename In>
__device__ __forceinline__ Out cast_to(In v) {
  if constexpr (std::is_same_v<Out, In>) {
    return v;
  } else if constexpr (std::is_same_v<Out, bool>) {
    if constexpr (std::is_same_v<In, Complex64>) {
      return v.re != 0 || v.im != 0;
    } else {
      return widen(v) != 0;
    }
  } else if constexpr (std::is_same_v<In, Complex64>) {
    return cast_to<Out>(v.re);
  } else if constexpr (std::is_same_v<Out, Complex64>) {
    return Complex64{static_cast<float>(widen(v)), 0.f};
  } else if constexpr (std::is_same_v<Out, __half>) {
    return __float2half_rn(static_cast<float>(widen(v)));
  } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(widen(v)));
  } else if constexpr (std::is_integral_v<Out> && is_float_v<In>) {
    using F = std::conditional_t<std::is_same_v<In, double>, double, float>;
    F f = static_cast<F>(widen(v));
    if (f != f) return Out(0);
    if (f <= static_cast<F>(std::numeric_limits<Out>::lowest())) {
      return std::numeric_limits<Out>::lowest();
    }
    if (f >= static_cast<F>(std::numeric_limits<Out>::max())) {
      return std::numeric_limits<Out>::max();
    }
    return static_cast<Out>(f);
  } else {
    return static_cast<Out>(widen(v));
  }
}
#endif  // __CUDACC__

}  // namespace tessera::gpu
