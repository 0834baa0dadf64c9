// Pieces shared by the reduction and softmax kernels (the CUDA reductions use
// the output types too).
#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/backend/cpu/dispatch.h"

// Hot leaf loops are compiled for AVX-512 and AVX2 too, chosen at load time.
#define TESSERA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace tessera::cpu {

// Elements a float sum accumulates in float before combining in float64.
inline constexpr int64_t kReduceBlock = 2048;

// The C++ type of accumulation_type(T) (sum, prod) and inexact_type(T) (mean,
// variance) for the C++ element type T.
template <typename T>
using sum_out_t = std::conditional_t<
    std::is_same_v<T, bool>, int32_t,
    std::conditional_t<is_integral_v<T> && sizeof(T) <= 4,
                       std::conditional_t<std::is_signed_v<T>, int32_t, uint32_t>, T>>;
template <typename T>
using mean_out_t = std::conditional_t<is_float_v<T> || is_complex_v<T>, T, float>;

// Max / min of n contiguous floats or doubles, NaN propagating (reduce.cpp).
template <typename C, bool IsMax>
C extremum_contiguous(const C* x, int64_t n);

}  // namespace tessera::cpu
