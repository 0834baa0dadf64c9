// Index arithmetic shared by CUDA kernels.
#pragma once

#include <cstdint>

#include "tessera/core/array.h"

namespace tessera::gpu {

inline constexpr int kMaxDims = 8;

// Shape and up to N stride sets by value, for kernel arguments (after
// tessera::collapse_contiguous_dims, most arrays need 1-3 dimensions).
template <int N>
struct Dims {
  int ndim;
  int32_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];
};

// Builds Dims from a shape and N stride vectors; throws if ndim > kMaxDims.
template <int N>
Dims<N> make_dims(const Shape& shape, const std::vector<Strides>& strides);

// Offsets of flat index i in each stride set.
template <int N, typename I>
__host__ __device__ inline void elem_to_loc(I i, const Dims<N>& d, I (&loc)[N]) {
  for (int k = 0; k < N; ++k) loc[k] = 0;
  for (int dim = d.ndim - 1; dim >= 0 && i > 0; --dim) {
    I idx = i % d.shape[dim];
    i /= d.shape[dim];
    for (int k = 0; k < N; ++k) loc[k] += idx * static_cast<I>(d.strides[k][dim]);
  }
}

template <int N>
Dims<N> make_dims(const Shape& shape, const std::vector<Strides>& strides) {
  if (shape.size() > static_cast<size_t>(kMaxDims)) {
    throw std::invalid_argument("[gpu] arrays with more than 8 non-mergeable dimensions are not supported on the GPU");
  }
  Dims<N> d{};
  d.ndim = static_cast<int>(shape.size());
  for (int i = 0; i < d.ndim; ++i) {
    d.shape[i] = shape[i];
    for (int k = 0; k < N; ++k) d.strides[k][i] = strides[k][i];
  }
  return d;
}

}  // namespace tessera::gpu
