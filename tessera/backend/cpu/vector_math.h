// Transcendental functions and arithmetic over spans of float32, for the CPU's
// unary and binary kernels (unary.cpp, binary.cpp) and the fused interpreter
// (compiled.cpp), so that both compute the same values (Note [Vector math]).
//
//   cpu::unary_span(in, out, n, scalar::Tanh{});  // any functor, any stored type
//   cpu::binary_span<scalar::Add>(a, b, out, n, Operands::vector_scalar);
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "tessera/backend/common/elementwise.h"
#include "tessera/core/dispatch.h"

namespace tessera::cpu {

// The functors with a vector routine, each with its VectorMath name.
#define TESSERA_VECTOR_MATH_OPS(X)                                                       \
  X(Exp, exp) X(Expm1, expm1) X(Log, log) X(Log1p, log1p) X(Log2, log2) X(Log10, log10) \
  X(Sin, sin) X(Cos, cos) X(Tanh, tanh) X(Sigmoid, sigmoid)

// The functors whose float32 loop the compiler vectorises as it stands
// (exact or correctly rounded operations), compiled for each instruction set.
#define TESSERA_VECTOR_LOOP_OPS(X)                                                  \
  X(Abs, abs) X(Negative, negative) X(Reciprocal, reciprocal) X(Floor, floor)       \
  X(Ceil, ceil) X(Trunc, trunc) X(Square, square) X(Sqrt, sqrt) X(Rsqrt, rsqrt)     \
  X(Degrees, degrees) X(Radians, radians)

enum class VectorMath {
  none,
#define TESSERA_VECTOR_MATH_NAME(OP, NAME) NAME,
  TESSERA_VECTOR_MATH_OPS(TESSERA_VECTOR_MATH_NAME)
  first_loop,  // the loops from here on
  TESSERA_VECTOR_LOOP_OPS(TESSERA_VECTOR_MATH_NAME)
#undef TESSERA_VECTOR_MATH_NAME
};

// The routine of functor Op, or none.
template <typename Op>
constexpr VectorMath vector_math_routine() {
#define TESSERA_VECTOR_MATH_CASE(OP, NAME) \
  if constexpr (std::is_same_v<Op, scalar::OP>) return VectorMath::NAME; else
  TESSERA_VECTOR_MATH_OPS(TESSERA_VECTOR_MATH_CASE)
  TESSERA_VECTOR_LOOP_OPS(TESSERA_VECTOR_MATH_CASE)
#undef TESSERA_VECTOR_MATH_CASE
  return VectorMath::none;
}
template <typename Op>
inline constexpr VectorMath vector_math_of = vector_math_routine<Op>();

// y[i] = f(x[i]) for i < n; x and y may be the same span.
void vector_math(VectorMath f, const float* x, float* y, int64_t n);

// out[i] = op(in[i]) in the compute type of In, stored as Out. Float32 math of
// vector_math_of<Op> goes through vector_math (16-bit floats widened to float32
// a chunk at a time and rounded back as the scalar loop does); everything else
// is the scalar loop.
template <typename Op, typename In, typename Out>
void unary_span(const In* in, Out* out, int64_t n, const Op& op) {
  using C = compute_t<In>;
  constexpr VectorMath f = vector_math_of<Op>;
  if constexpr (f != VectorMath::none && std::is_same_v<C, float> &&
                std::is_same_v<compute_t<Out>, float>) {
    if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float>) {
      vector_math(f, in, out, n);
    } else {
      constexpr int64_t kChunk = 256;
      float buf[kChunk];
      for (int64_t b = 0; b < n; b += kChunk) {
        const int64_t m = std::min(kChunk, n - b);
        for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<float>(in[b + i]);
        vector_math(f, buf, buf, m);
        for (int64_t i = 0; i < m; ++i) out[b + i] = static_cast<Out>(buf[i]);
      }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(op(static_cast<C>(in[i])));
  }
}

// The binary functors whose float32 loops are compiled for each instruction
// set (their results are exact IEEE operations, the same bits in any width).
#define TESSERA_VECTOR_BINARY_OPS(X) \
  X(Add, add) X(Subtract, subtract) X(Multiply, multiply) X(Divide, divide) \
  X(Maximum, maximum) X(Minimum, minimum)

enum class VectorBinary {
  none,
#define TESSERA_VECTOR_BINARY_NAME(OP, NAME) NAME,
  TESSERA_VECTOR_BINARY_OPS(TESSERA_VECTOR_BINARY_NAME)
#undef TESSERA_VECTOR_BINARY_NAME
};

template <typename Op>
constexpr VectorBinary vector_binary_routine() {
#define TESSERA_VECTOR_BINARY_CASE(OP, NAME) \
  if constexpr (std::is_same_v<Op, scalar::OP>) return VectorBinary::NAME; else
  TESSERA_VECTOR_BINARY_OPS(TESSERA_VECTOR_BINARY_CASE)
#undef TESSERA_VECTOR_BINARY_CASE
  return VectorBinary::none;
}

// Which operands of a binary span are one value rather than n.
enum class Operands { vectors, scalar_vector, vector_scalar };

void vector_binary(VectorBinary f, Operands form, const float* a, const float* b, float* y,
                   int64_t n);

// dots[g] = sum over group g (group_size values, a multiple of 16) of q * x,
// for one row of K values of `bits` = 2, 4 or 8 packed in words (value i at
// bits bits * i): the quantized product's inner loop, compiled for each
// instruction set.
void q_group_dots(int bits, const uint32_t* w, const float* x, int64_t K, int group_size,
                  float* dots);

// The same for 4 bits, K a multiple of 64 and groups of a multiple of 32, x
// permuted by permute_q4_x (once per x, for every row): Note [4-bit dots].
void permute_q4_x(const float* x, int64_t K, float* xt);
void q4_group_dots(const uint32_t* w, const float* xt, int64_t K, int group_size, float* dots);

// Note [Half-precision GEMV]
// y[m * ldy + n] = sum over k of x[m * K + k] * w[n * ldw + k], for the rows n
// in [n0, n1) of a float16 (bf16 false) or bfloat16 weight matrix and m < M
// float32 rows of x: a product of few rows by a half-precision matrix whose
// rows are contiguous (nn.Linear's x @ w.T), reading each weight once and
// widening it in registers, in float32 (compiled for each instruction set).
void half_row_dots(bool bf16, const uint16_t* w, int64_t ldw, const float* x, int64_t M,
                   int64_t K, int64_t n0, int64_t n1, float* y, int64_t ldy);

// out[i] = op(a[i], b[i]) for i < n, a or b read as one value where form says
// so; out may be a or b.
template <typename Op, typename In, typename Out>
void binary_span(const In* a, const In* b, Out* out, int64_t n, Operands form, const Op& op) {
  constexpr VectorBinary f = vector_binary_routine<Op>();
  if constexpr (f != VectorBinary::none && std::is_same_v<In, float> &&
                std::is_same_v<Out, float>) {
    vector_binary(f, form, a, b, out, n);
  } else {
    using C = compute_t<In>;
    auto apply = [&](In x, In y) {
      return static_cast<Out>(op(static_cast<C>(x), static_cast<C>(y)));
    };
    if constexpr (std::is_same_v<Op, scalar::Power> && std::is_same_v<In, float> &&
                  std::is_same_v<Out, float>) {
      // x ** 2 and x ** 3 (tanh-GELU) as scalar::Power computes them, in a
      // loop without its branches and its std::pow call, which vectorizes.
      if (form == Operands::vector_scalar && (b[0] == 2.f || b[0] == 3.f)) {
        if (b[0] == 2.f) {
          for (int64_t i = 0; i < n; ++i) out[i] = a[i] * a[i];
        } else {
          for (int64_t i = 0; i < n; ++i) {
            const double d = a[i];
            out[i] = static_cast<float>(d * d * d);
          }
        }
        return;
      }
    }
    switch (form) {
      case Operands::vectors:
        for (int64_t i = 0; i < n; ++i) out[i] = apply(a[i], b[i]);
        break;
      case Operands::scalar_vector: {
        const In x = a[0];
        for (int64_t i = 0; i < n; ++i) out[i] = apply(x, b[i]);
        break;
      }
      case Operands::vector_scalar: {
        const In y = b[0];
        for (int64_t i = 0; i < n; ++i) out[i] = apply(a[i], y);
        break;
      }
    }
  }
}

}  // namespace tessera::cpu
