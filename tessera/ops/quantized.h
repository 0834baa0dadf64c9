// Quantization: affine quantization of the rows of a
// matrix in groups, and matrix products with quantized weights.
//
//   auto q = quantize(w, 64, 4);                        // {w_q, scales, biases}
//   auto w2 = dequantize(q[0], q[1], q[2], 64, 4);      // ≈ w
//   auto y = quantized_matmul(x, q[0], q[1], q[2]);     // x @ dequantize(...).T
//
// Mode "affine" (group sizes 32, 64, 128; bits 2, 3, 4, 5, 6, 8; defaults 64
// and 4) is implemented; "mxfp4", "mxfp8" and "nvfp4" are refused by name.
// Scheme and bit layout: Note [Affine quantization] in
// backend/common/quantize.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// {w_q (uint32, (..., K * bits / 32)), scales, biases (w's dtype, (..., K / group_size))}.
std::vector<array> quantize(const array& w, std::optional<int> group_size = std::nullopt,
                            std::optional<int> bits = std::nullopt,
                            const std::string& mode = "affine",
                            const std::optional<array>& global_scale = std::nullopt,
                            StreamOrDevice s = {});

// scales * q + biases per group; the dtype is `dtype`, else that of scales and biases.
array dequantize(const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 const std::optional<array>& global_scale = std::nullopt,
                 std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});

// x @ dequantize(w).T (transpose) or x @ dequantize(w); batch axes of x and w broadcast.
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases = std::nullopt, bool transpose = true,
                       std::optional<int> group_size = std::nullopt,
                       std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                       StreamOrDevice s = {});

// fp8 e4m3 ("fn": no infinities, 0x7f and 0xff are NaN, largest finite 448),
// stored as uint8. to_fp8 rounds to nearest, ties to even, and saturates
// finite and infinite values beyond 448 to +-448; from_fp8 decodes exactly.
array to_fp8(const array& x, StreamOrDevice s = {});
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

}  // namespace tessera
