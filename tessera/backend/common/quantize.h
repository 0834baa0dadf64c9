// The scalar math of affine quantization, shared by the CPU and CUDA kernels.
//
// Note [Affine quantization]
// Each row of w (its last axis, K elements) is cut into groups of g consecutive
// elements. A group with minimum lo and maximum hi gets, as in MLX,
//   s = max((hi - lo) / (2^bits - 1), 1e-7), negated unless |lo| > |hi|;
//   edge = lo if |lo| > |hi| else hi, q0 = round_half_even(edge / s);
//   if q0 != 0: scale = edge / q0, bias = edge (the scale is nudged so that
//   the extreme of larger magnitude, and so 0, is represented exactly);
//   else: scale = s, bias = 0.
// Each element w gets q = round_half_even((w - bias) / scale) clamped to
// [0, 2^bits - 1], computed from the unrounded scale and bias; the stored
// scale and bias are then rounded to w's dtype. Arithmetic is in float
// (double for float64 input).
//
// The bits-bit values of a row form one bit stream, value i at stream bits
// [i * bits, (i + 1) * bits), packed into uint32 words from low bits to high:
// word j holds stream bits [32 j, 32 j + 32). For 2, 4 and 8 bits each word
// holds 32 / bits whole values, the first in the lowest bits; 3, 5 and 6-bit
// values may straddle two words (8 three-bit values fill 3 bytes, as in MLX).
// 32 values fill exactly `bits` words, so every group starts on a word.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/core/dispatch.h"

#ifdef __CUDACC__
#define TESSERA_QUANT_HD __host__ __device__ __forceinline__
#else
#define TESSERA_QUANT_HD inline
#endif

namespace tessera::quant {

// The largest quantized value.
TESSERA_QUANT_HD uint32_t max_q(int bits) { return (1u << bits) - 1u; }

// Value i of a packed row.
TESSERA_QUANT_HD uint32_t unpack(const uint32_t* row, int64_t i, int bits) {
  const int64_t p = i * bits;
  const int64_t word = p >> 5;
  const int shift = static_cast<int>(p & 31);
  uint64_t v = row[word];
  if (shift + bits > 32) v |= static_cast<uint64_t>(row[word + 1]) << 32;
  return static_cast<uint32_t>(v >> shift) & max_q(bits);
}

// Packs 32 values (each <= max_q(bits)) into `bits` words.
TESSERA_QUANT_HD void pack32(const uint32_t* q, int bits, uint32_t* out) {
  uint64_t acc = 0;
  int filled = 0, word = 0;
  for (int i = 0; i < 32; ++i) {
    acc |= static_cast<uint64_t>(q[i]) << filled;
    filled += bits;
    if (filled >= 32) {
      out[word++] = static_cast<uint32_t>(acc);
      acc >>= 32;
      filled -= 32;
    }
  }
}

// The 32 values held by `B` consecutive words (a group's chunk of 32).
template <int B>
TESSERA_QUANT_HD void unpack32(const uint32_t* words, uint32_t* q) {
  // Every position is a compile-time constant once the loop is unrolled.
  // (nvcc unrolls a constant trip count of 32 by itself; a pragma here would
  // reach its host compiler too, which does not know nvcc's.)
#if !defined(__CUDACC__)
#pragma GCC unroll 32
#endif
  for (int i = 0; i < 32; ++i) {
    const int p = i * B, w = p >> 5, shift = p & 31;
    uint32_t v = words[w] >> shift;
    if (shift + B > 32) v |= words[w + 1] << (32 - shift);
    q[i] = v & ((1u << B) - 1u);
  }
}

// Calls f(std::integral_constant<int, B>{}) for bits B in {2, 3, 4, 5, 6, 8}.
template <typename F>
inline void dispatch_bits(int bits, F&& f) {
  switch (bits) {
    case 2: f(std::integral_constant<int, 2>{}); return;
    case 3: f(std::integral_constant<int, 3>{}); return;
    case 4: f(std::integral_constant<int, 4>{}); return;
    case 5: f(std::integral_constant<int, 5>{}); return;
    case 6: f(std::integral_constant<int, 6>{}); return;
    case 8: f(std::integral_constant<int, 8>{}); return;
  }
  throw std::logic_error("[quantization] unsupported bits reached a kernel (bug)");
}

// The scale and bias of a group with extremes lo and hi, before rounding to
// the stored dtype (Note [Affine quantization]).
template <typename C>
TESSERA_QUANT_HD void affine_params(C lo, C hi, int bits, C& scale, C& bias) {
  const C n_bins = static_cast<C>(max_q(bits));
  const C eps = static_cast<C>(1e-7f);
  const bool low_edge = (lo < 0 ? -lo : lo) > (hi < 0 ? -hi : hi);
  C s = (hi - lo) / n_bins;
  s = s < eps ? eps : s;
  s = low_edge ? s : -s;
  const C edge = low_edge ? lo : hi;
#ifdef __CUDA_ARCH__
  const C q0 = rint(edge / s);
#else
  const C q0 = std::nearbyint(edge / s);
#endif
  if (q0 != C(0)) {
    scale = edge / q0;
    bias = edge;
  } else {
    scale = s;
    bias = C(0);
  }
}

// The quantized value of w from the group's (unrounded) scale and bias.
template <typename C>
TESSERA_QUANT_HD uint32_t affine_q(C w, C scale, C bias, int bits) {
#ifdef __CUDA_ARCH__
  C r = rint((w - bias) / scale);
#else
  C r = std::nearbyint((w - bias) / scale);
#endif
  if (!(r > C(0))) return 0;  // also NaN
  const C top = static_cast<C>(max_q(bits));
  return r >= top ? max_q(bits) : static_cast<uint32_t>(r);
}

// Calls f(TypeTag<T>{}) for the element type T of a floating dtype, the
// dtypes of weights, scales and activations; any other dtype reaching a
// kernel is a bug (the op functions check).
template <typename F>
void dispatch_float(Dtype t, const char* op, F&& f) {
  tessera::dispatch_all(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (tessera::is_float_v<T>) {
      f(tag);
    } else {
      throw std::logic_error(std::string("[") + op + "] dtype " + dtype_name(t) +
                             " reached the kernel (bug)");
    }
  });
}

}  // namespace tessera::quant
