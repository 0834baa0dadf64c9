// The scalar math of creation kernels, shared by the CPU and CUDA backends.
//
// Note [Linspace rounding]
// Element i of linspace(start, stop, num) is (1 - t) * start + t * stop with
// t = i / div (div = num - 1, or num without the endpoint), each step rounded
// in the compute type: float64 for a float64 result, float32 for every other
// dtype (then converted, integers by truncation). These are MLX's operations
// in MLX's order, so the results agree to the bit; no step is fused into an
// FMA on the GPU.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define TESSERA_CREATION_HD __host__ __device__ __forceinline__
#else
#define TESSERA_CREATION_HD inline
#endif

namespace tessera::creation {

// a * b rounded once, never fused into an FMA (T is float or double).
template <typename T>
TESSERA_CREATION_HD T mul_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == sizeof(float)) {
    return __fmul_rn(a, b);
  } else {
    return __dmul_rn(a, b);
  }
#else
  return a * b;
#endif
}

// Element i of a linspace in compute type C (Note [Linspace rounding]).
template <typename C>
TESSERA_CREATION_HD C linspace_value(int64_t i, int64_t div, C start, C stop) {
  const C t = static_cast<C>(i) / static_cast<C>(div);
  const C a = mul_rn(static_cast<C>(1) - t, start);
  const C b = mul_rn(t, stop);
  return a + b;
}

}  // namespace tessera::creation
