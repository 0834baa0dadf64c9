// ggml's quantized block types as GGUF stores them, and their conversion to
// Tessera's arrays (not a public header).
//
// Note [GGUF quantized blocks]
// A quantized tensor is a sequence of blocks along its rows (ggml's first
// dimension, our last axis), each holding `values` consecutive values in
// `bytes` bytes; float16 fields are little-endian halves.
//   Q4_0  32 values, 18 bytes: d (f16), qs[16]; value j = d * ((qs[j] & 15) - 8),
//         value j + 16 = d * ((qs[j] >> 4) - 8)
//   Q4_1  32, 20: d, m (f16), qs[16]; value = d * nibble + m (nibbles as Q4_0)
//   Q8_0  32, 34: d (f16), qs[32] (int8); value j = d * qs[j]
//   Q5_0  32, 22: d, qh (uint32), qs[16]; Q4_0's nibbles with bit 4 from qh
//         (bit j for value j, bit j + 16 for value j + 16), minus 16, times d
//   Q5_1  32, 24: d, m, qh, qs[16]; Q5_0's 5-bit values times d plus m
//   Q2_K 256, 84: scales[16], qs[64], d, dmin; 16 groups of 16 with 4-bit scale
//         and min; 2-bit values
//   Q3_K 256, 110: hmask[32], qs[64], scales[12], d; 16 groups of 16, 6-bit
//         signed scales; 2-bit values with a high bit from hmask
//   Q4_K 256, 144: d, dmin, scales[12], qs[128]; 8 groups of 32, 6-bit scale
//         and min; 4-bit values
//   Q5_K 256, 176: d, dmin, scales[12], qh[32], qs[128]; Q4_K's with a fifth bit
//   Q6_K 256, 210: ql[128], qh[64], scales[16] (int8), d; 16 groups of 16
//   Q8_K 256, 292: d (float32), qs[256] (int8), bsums[16] (int16, unused here)
// The K-quants' bit order is ggml's dequantize_row_* (ggml-quants.c), which
// gguf_quants.cpp follows step by step, in float32 arithmetic in ggml's order.
//
// Q4_0, Q4_1 and Q8_0 are affine quantization with group size 32 (Note [Affine
// quantization] in backend/common/quantize.h): value = scale * q + bias with
//   Q4_0: q = nibble,     scale = d, bias = -8 d
//   Q4_1: q = nibble,     scale = d, bias = m
//   Q8_0: q = qs + 128,   scale = d, bias = -128 d
// so they load as (packed q, scales, biases) without loss of information
// (the biases -8 d and -128 d rounded to float16). The others load
// dequantized to float16.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/core/array.h"

namespace tessera::io::detail {

struct GGMLBlock {
  int values;  // per block
  int bytes;   // per block
  bool affine;  // loads as an affine triple (Q4_0, Q4_1, Q8_0)
};
// The block layout of a quantized ggml type read here, or nullopt.
std::optional<GGMLBlock> ggml_block(uint32_t type);

// {w (uint32, shape[:-1] + (K * bits / 32)), scales, biases (float16,
// shape[:-1] + (K / 32))} of the blocks of an affine type; shape's last axis
// K is a multiple of 32.
std::vector<array> affine_from_blocks(uint32_t type, const char* blocks, const Shape& shape);
// The float16 values of the blocks of any other quantized type read here.
array float16_from_blocks(uint32_t type, const char* blocks, const Shape& shape);

}  // namespace tessera::io::detail
