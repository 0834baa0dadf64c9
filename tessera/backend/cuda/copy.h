// Copies with casts on the GPU: the kernels behind Copy, AsType, Contiguous,
// the copying shape primitives and compact matmul operands.
//
//   void* dst = gpu::allocate_output(out, s);
//   gpu::copy_gpu(in.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(),
//                 dst, out.dtype(), out.strides(), s, "Pad");
//
// Note [GPU copy paths]
// After the dimensions of a copy are collapsed (tessera::collapse_contiguous_dims),
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
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

#ifdef __CUDACC__
#include <limits>
#include <type_traits>

#include "tessera/backend/cuda/types.cuh"
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

// A copy's dimensions once collapsed (tessera::collapse_contiguous_dims over
// the shape and {source strides, destination strides}).
using CopyLayout = std::pair<Shape, std::vector<Strides>>;

// Whether a copy of this layout (one dtype) runs the strided kernel: neither
// dense nor tiled.
bool strided_copy(const CopyLayout& c);

// Two such copies of one layout and dtype in one launch, src[i] to dst[i].
void copy_gpu_pair(const CopyLayout& c, const void* const src[2], void* const dst[2], Dtype t,
                   const Stream& s, const char* op);

// n contiguous elements from src_t to dst_t; src may be dst when both types
// have the same width (an in-place cast).
void cast_gpu(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n, const Stream& s,
              const char* op);

// Blocks for a 1-D grid of n items of `threads` threads: enough to fill the
// GPU a few times over, at most what is needed.
unsigned int grid_blocks(int64_t n, int threads);

#ifdef __CUDACC__
// The conversion of tessera::cast_to, element for element: complex -> real keeps
// the real part, anything -> bool is "nonzero", float -> integer clamps to the
// destination range (NaN -> 0), 16-bit floats round to nearest even from float.
template <typename Out, typename In>
__device__ __forceinline__ Out cast_to(In v) {
  if constexpr (std::is_same_v<Out, In>) {
    return v;
  } else if constexpr (std::is_same_v<Out, bool>) {
    if constexpr (std::is_same_v<In, c64>) {
      return v.re != 0 || v.im != 0;
    } else {
      return widen(v) != 0;
    }
  } else if constexpr (std::is_same_v<In, c64>) {
    return cast_to<Out>(v.re);
  } else if constexpr (std::is_same_v<Out, c64>) {
    return c64{static_cast<float>(widen(v)), 0.f};
  } else if constexpr (std::is_same_v<Out, __half>) {
    return __float2half_rn(static_cast<float>(widen(v)));
  } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(widen(v)));
  } else if constexpr (std::is_integral_v<Out> && is_float_v<In>) {
    using F = std::conditional_t<std::is_same_v<In, double>, double, float>;
    return tessera::float_to_int<Out>(static_cast<F>(widen(v)));
  } else {
    return static_cast<Out>(widen(v));
  }
}
#endif  // __CUDACC__

}  // namespace tessera::gpu
