// Pieces shared by the CPU reduction and softmax kernels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tessera/backend/common/reduce_plan.h"
#include "tessera/core/dispatch.h"

// Hot leaf loops are compiled for AVX-512 and AVX2 too, chosen at load time.
#define TESSERA_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace tessera::cpu {

// Elements a float sum accumulates in float before combining in float64.
inline constexpr int64_t kReduceBlock = 2048;

// Max / min of n contiguous floats or doubles, NaN propagating (reduce.cpp).
template <typename C, bool IsMax>
C extremum_contiguous(const C* x, int64_t n);

}  // namespace tessera::cpu
