// Products built from matmul and the elementwise ops, so they run on every
// device and under every transform through those ops' rules:
//
//   auto d = vecdot(a, b);                          // sum(a * b, -1), broadcast
//   auto y = gather_mm(a, b, std::nullopt, idx);    // a @ b[idx], b's batch by index
//   auto q = gather_qmm(x, w, scales, biases, std::nullopt, idx);  // quantized b
//   auto z = segmented_mm(a, b, segments);          // a[:, s:e] @ b[s:e] per segment
//   auto m = block_masked_mm(a, b, 32, out_mask);   // 32 x 32 tiles of the product kept or zeroed
//   auto h = hadamard_transform(x);                 // Walsh-Hadamard over the last axis
//   auto e = diff(x, 2);                            // second differences along the last axis
#pragma once

#include <optional>
#include <string>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// sum(a * b) over `axis`, after broadcasting (for complex a: sum(conj(a) * b)).
array vecdot(const array& a, const array& b, int axis = -1, StreamOrDevice s = {});

// The n-th difference along `axis` (NumPy's diff; boolean input: not_equal).
array diff(const array& a, int n = 1, int axis = -1, StreamOrDevice s = {});

// a (..., M, K) @ b (..., K, N) after choosing matrices by flat batch index:
// lhs_indices into a's batch dims, rhs_indices into b's (absent: a's or b's
// batch as it is). The index arrays broadcast with each other; the result is
// (broadcast batch..., M, N). sorted_indices is a hint and changes nothing.
array gather_mm(const array& a, const array& b, std::optional<array> lhs_indices = std::nullopt,
                std::optional<array> rhs_indices = std::nullopt, bool sorted_indices = false,
                StreamOrDevice s = {});

// quantized_matmul after selecting matrices by flat batch index, as gather_mm:
// lhs_indices into x's batch axes, rhs_indices into w's (and scales' and
// biases', which share w's batch axes). Only the chosen packed matrices are
// gathered; each is dequantized inside the product.
array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 std::optional<array> lhs_indices = std::nullopt,
                 std::optional<array> rhs_indices = std::nullopt, bool transpose = true,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 bool sorted_indices = false, StreamOrDevice s = {});

// a (M, K) @ b (K, N) computed separately for each [start, end) range of K
// in segments (..., 2): the result is (..., M, N).
array segmented_mm(const array& a, const array& b, const array& segments, StreamOrDevice s = {});

// a (..., M, K) @ b (..., K, N) where block_size x block_size tiles (32 or 64)
// of a, b and the product are masked: mask_lhs (..., ceil(M/bs), ceil(K/bs)),
// mask_rhs (..., ceil(K/bs), ceil(N/bs)), mask_out (..., ceil(M/bs),
// ceil(N/bs)). A boolean mask keeps or zeroes a tile; a floating one scales it.
array block_masked_mm(const array& a, const array& b, int block_size = 64,
                      std::optional<array> mask_out = std::nullopt,
                      std::optional<array> mask_lhs = std::nullopt,
                      std::optional<array> mask_rhs = std::nullopt, StreamOrDevice s = {});

// The Walsh-Hadamard transform over the last axis (Sylvester order), times
// scale (default 1/sqrt(n)); n must be a power of two. Integer input gives float32.
array hadamard_transform(const array& a, std::optional<float> scale = std::nullopt,
                         StreamOrDevice s = {});

}  // namespace tessera
