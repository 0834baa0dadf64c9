// Elementwise functions of two or three arrays (NumPy broadcasting, promotion
// by the table of the reference; C++ scalars follow the C++ rule of cpp.md).
//
//   auto c = a + 1.0f;             // float32 scalar promotes with a
//   auto m = where(a > 0, a, 0);   // ReLU
#pragma once

#include <optional>
#include <type_traits>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"
#include "tessera/ops/elementwise_table.h"

namespace tessera {

// The ops of TESSERA_BINARY_OPS, all (a, b) (Note [Elementwise tables]).
#define TESSERA_DECLARE_BINARY(NAME, FN, RULE) \
  array FN(const array& a, const array& b, StreamOrDevice s = {});
TESSERA_BINARY_OPS(TESSERA_DECLARE_BINARY)
#undef TESSERA_DECLARE_BINARY
std::vector<array> divmod(const array& a, const array& b, StreamOrDevice s = {});
array equal(const array& a, const array& b, StreamOrDevice s = {});

// condition ? x : y, all three broadcast.
array where(const array& condition, const array& x, const array& y, StreamOrDevice s = {});
// Clamp to [a_min, a_max]; at least one bound is required.
array clip(const array& a, const std::optional<array>& a_min = std::nullopt,
           const std::optional<array>& a_max = std::nullopt, StreamOrDevice s = {});
// |a - b| <= atol + rtol * |b|, elementwise.
array isclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false, StreamOrDevice s = {});
// All of isclose, as a bool scalar.
array allclose(const array& a, const array& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false, StreamOrDevice s = {});
// Same shape and equal values (dtypes may differ), as a bool scalar.
array array_equal(const array& a, const array& b, bool equal_nan, StreamOrDevice s = {});
array array_equal(const array& a, const array& b, StreamOrDevice s = {});

// The operators and the op each stands for.
#define TESSERA_FOR_EACH_BINARY_OPERATOR(X)                                                \
  X(+, add) X(-, subtract) X(*, multiply) X(/, divide) X(%, remainder) X(==, equal)       \
  X(!=, not_equal) X(<, less) X(<=, less_equal) X(>, greater) X(>=, greater_equal)         \
  X(&&, logical_and) X(||, logical_or) X(&, bitwise_and) X(|, bitwise_or) X(^, bitwise_xor) \
  X(<<, left_shift) X(>>, right_shift)

// Operators. A C++ scalar becomes a 0-d array of its own dtype (cpp.md),
// shared from the cache of scalar operands (Note [Scalar operands]).
#define TESSERA_DECLARE_BINARY_OPERATOR(OP, FN)               \
  array operator OP(const array& a, const array& b);          \
  template <typename T>                                       \
    requires std::is_arithmetic_v<T>                          \
  array operator OP(T a, const array& b) {                    \
    return FN(scalar_operand(a), b);                          \
  }                                                           \
  template <typename T>                                       \
    requires std::is_arithmetic_v<T>                          \
  array operator OP(const array& a, T b) {                    \
    return FN(a, scalar_operand(b));                          \
  }
TESSERA_FOR_EACH_BINARY_OPERATOR(TESSERA_DECLARE_BINARY_OPERATOR)
#undef TESSERA_DECLARE_BINARY_OPERATOR

}  // namespace tessera
