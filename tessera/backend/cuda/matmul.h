// Matrix products on device memory through Matmul's cuBLASLt path (matmul.cpp),
// for kernels that lower their work to GEMMs:
//
//   // y (rows, O) with row stride O: group g's block of columns = windows_g @ weight_g^T
//   gpu::gemm({windows, {rows * cols}, cols, 1}, {weight, {out_group * cols}, 1, cols},
//             y, O, {out_group}, dtype, {groups}, rows, out_group, cols, s, "Convolution");
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/backend/cuda/matmul_int.h"
#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {
class GroupedProducts;
}

namespace tessera::gpu {

// Whether float32 products may run in TF32 on the tensor cores:
// MLX_ENABLE_TF32 as MLX reads it, an integer, 1 when unset or empty.
bool tf32_enabled();

// c = a (M x K) @ b (K x N) for every batch element, element (i, j) of batch
// element b at c + elem_to_loc(b, batch_shape, c_batch_strides) + i * ldc + j
// (in elements). a and b each need a unit row or column stride. float32,
// float64, complex64, and float16 / bfloat16 accumulating in float32. Queued on s.
void gemm(const StridedMatrix& a, const StridedMatrix& b, void* c, int64_t ldc,
          const Strides& c_batch_strides, Dtype dtype, const Shape& batch_shape, int64_t M,
          int64_t N, int64_t K, const Stream& s, const char* op);

// The members of a group of products (Note [Grouped products] in
// core/grouped.h), Matmul or QuantizedMatmul of one x, in one launch where
// the matrix-vector kernels apply to all of them: allocates the outputs and
// queues the launch on the group's stream; false, queueing and allocating
// nothing, otherwise. (grouped_quantized_matmul is in quantized.cu.)
bool grouped_matmul(const GroupedProducts& g, const std::vector<array>& inputs,
                    std::vector<array>& outputs);
bool grouped_quantized_matmul(const GroupedProducts& g, const std::vector<array>& inputs,
                              std::vector<array>& outputs);

}  // namespace tessera::gpu
