// Integer and bool matrix products on the GPU (matmul_int.cu), for Matmul's
// eval_gpu (matmul.cpp) where cuBLASLt has no type:
//
//   gpu::integer_gemm({a_ptr, a_batch_strides, K, 1}, {b_ptr, b_batch_strides, 1, K},
//                     dst, int32, batch_shape, M, N, K, s, "Matmul");
#pragma once

#include <cstdint>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera::gpu {

// A device matrix per batch element: element (i, k) of batch element b is at
// data + elem_to_loc(b, batch_shape, batch_strides) + i * row + k * col
// (offsets in elements; broadcast batch axes have stride 0).
struct StridedMatrix {
  const void* data;
  Strides batch_strides;
  int64_t row, col;
};

// out (row-contiguous, batch_shape + (M, N)) = a (M, K) @ b (K, N) for every
// batch element, for integer and bool dtypes, with the CPU's results: integer
// sums wrap around in the dtype, bool is the OR of ANDs. Queued on s.
void integer_gemm(const StridedMatrix& a, const StridedMatrix& b, void* out, Dtype dtype,
                  const Shape& batch_shape, int64_t M, int64_t N, int64_t K, const Stream& s,
                  const char* op);

}  // namespace tessera::gpu
