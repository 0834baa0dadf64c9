// Quantization: the rows of a matrix quantized in groups, and matrix products
// with quantized weights (and activations).
//
//   auto q = quantize(w, 64, 4);                        // {w_q, scales, biases}
//   auto w2 = dequantize(q[0], q[1], q[2], 64, 4);      // ≈ w
//   auto y = quantized_matmul(x, q[0], q[1], q[2]);     // x @ dequantize(...).T
//   auto f = quantize(w, std::nullopt, std::nullopt, "nvfp4");  // {w_q, scales}
//   auto z = qqmm(x, f[0], f[1]);                       // x rounded to nvfp4 too
//
// Modes (group size, bits): "affine" (32, 64 or 128 with default 64; 2, 3, 4,
// 5, 6 or 8 with default 4; Note [Affine quantization] in
// backend/common/quantize.h), and "mxfp4" (32, 4), "mxfp8" (32, 8), "nvfp4"
// (16, 4) with uint8 scales and no biases (Note [Floating-point quantization]
// in quantized.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// {w_q (uint32, (..., K * bits / 32)), scales, biases (w's dtype, (..., K / group_size))};
// {w_q, scales (uint8)} in the floating-point modes, where "nvfp4" takes an
// optional float32 scalar global_scale.
std::vector<array> quantize(const array& w, std::optional<int> group_size = std::nullopt,
                            std::optional<int> bits = std::nullopt,
                            const std::string& mode = "affine",
                            const std::optional<array>& global_scale = std::nullopt,
                            StreamOrDevice s = {});

// scales * q + biases per group; the dtype is `dtype`, else that of scales and
// biases (affine) or bfloat16, promoted with float32 when global_scale is given.
array dequantize(const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 const std::optional<array>& global_scale = std::nullopt,
                 std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});

// x @ dequantize(w).T (transpose) or x @ dequantize(w); batch axes of x and w
// broadcast. Floating-point modes give x's dtype.
array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases = std::nullopt, bool transpose = true,
                       std::optional<int> group_size = std::nullopt,
                       std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                       StreamOrDevice s = {});

// x @ w.T with x (float32, float16 or bfloat16) quantized and dequantized in
// mode "mxfp4", "mxfp8" or "nvfp4" on the fly, and w too unless it comes
// packed (uint32) with its scales; the global scales are nvfp4's. The
// gradient passes straight through the rounding to x and an unpacked w.
array qqmm(const array& x, const array& w, const std::optional<array>& scales = std::nullopt,
           std::optional<int> group_size = std::nullopt, std::optional<int> bits = std::nullopt,
           const std::string& mode = "nvfp4",
           const std::optional<array>& global_scale_x = std::nullopt,
           const std::optional<array>& global_scale_w = std::nullopt, StreamOrDevice s = {});

// qqmm with the matrices chosen by flat batch index, as gather_mm.
array gather_qqmm(const array& x, const array& w, const std::optional<array>& scales = std::nullopt,
                  std::optional<array> lhs_indices = std::nullopt,
                  std::optional<array> rhs_indices = std::nullopt,
                  std::optional<int> group_size = std::nullopt,
                  std::optional<int> bits = std::nullopt, const std::string& mode = "nvfp4",
                  const std::optional<array>& global_scale_x = std::nullopt,
                  const std::optional<array>& global_scale_w = std::nullopt,
                  bool sorted_indices = false, StreamOrDevice s = {});

// fp8 e4m3 ("fn": no infinities, 0x7f and 0xff are NaN, largest finite 448),
// stored as uint8. to_fp8 rounds to nearest, ties to even, and saturates
// finite and infinite values beyond 448 to +-448; from_fp8 decodes exactly.
array to_fp8(const array& x, StreamOrDevice s = {});
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

}  // namespace tessera
