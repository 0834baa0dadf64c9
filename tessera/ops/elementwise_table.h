// The elementwise ops of one and two arrays, one row each.
//
// Note [Elementwise tables]
// A row X(Primitive, function, rule) generates, wherever the op appears:
//   - the declaration `array function(const array& a[, const array& b], StreamOrDevice s = {})`
//     (ops/unary.h, ops/binary.h) and its Python binding (python/src/elementwise.cpp);
//   - the definition of the op function from its dtype rule (below), unless the rule
//     is `custom`: then ops/unary.cpp or ops/binary.cpp write it by hand;
//   - the primitive class (ops/primitives/unary.h, binary.h), its vmap rule
//     (ops/rules/unary.cpp, binary.cpp), and its eval_cpu and eval_gpu
//     (backend/cpu/{unary,binary}.cpp, backend/cuda/{unary,binary}.cu), which run
//     the scalar functor scalar::Primitive (backend/common/elementwise.h) in the
//     backend's generic kernel; a CPU-only build declares the GPU gap once per table
//     (backend/no_cuda/primitives.cpp).
// The derivative is a row of TESSERA_FOR_EACH_DERIVATIVE or of the piecewise-constant
// table in ops/rules/unary.cpp (binary: ops/rules/binary.cpp). So an op is added with
// three edits: its row here, its functor, its derivative.
//
// Unary rules (ops/unary.cpp):
//   same_dtype      output has the input's dtype
//   float_out       inexact inputs kept, the rest computed in float32
//   float_out_real  float_out, complex rejected
//   predicate       bool output
//   predicate_real  predicate; complex z: FN(real(z)) and imag(z) == 0 (MLX's)
// Binary rules (ops/binary.cpp), after broadcasting:
//   arithmetic      the promoted dtype
//   float_out       promoted, lifted to float32 unless inexact; real (logaddexp: any)
//   comparison      inputs promoted, bool output
//   logical         inputs read as truth values, bool output
//   bitwise         integer or bool inputs, the promoted dtype
//   shift           bitwise, and bool is shifted as uint8
#pragma once

#define TESSERA_UNARY_OPS(X)                  \
  X(Abs, abs, custom)                         \
  X(Negative, negative, custom)               \
  X(Sign, sign, same_dtype)                   \
  X(LogicalNot, logical_not, predicate)       \
  X(Reciprocal, reciprocal, float_out)        \
  X(Floor, floor, custom)                     \
  X(Ceil, ceil, custom)                       \
  X(Trunc, trunc, custom)                     \
  X(Square, square, same_dtype)               \
  X(Exp, exp, float_out)                      \
  X(Expm1, expm1, float_out)                  \
  X(Sqrt, sqrt, float_out)                    \
  X(Rsqrt, rsqrt, float_out)                  \
  X(Sin, sin, float_out)                      \
  X(Cos, cos, float_out)                      \
  X(Tan, tan, float_out)                      \
  X(ArcSin, arcsin, float_out)                \
  X(ArcCos, arccos, float_out)                \
  X(ArcTan, arctan, float_out)                \
  X(Sinh, sinh, float_out)                    \
  X(Cosh, cosh, float_out)                    \
  X(Tanh, tanh, float_out)                    \
  X(ArcSinh, arcsinh, float_out)              \
  X(ArcCosh, arccosh, float_out)              \
  X(ArcTanh, arctanh, float_out)              \
  X(Degrees, degrees, float_out_real)         \
  X(Radians, radians, float_out_real)         \
  X(Log, log, float_out)                      \
  X(Log2, log2, float_out)                    \
  X(Log10, log10, float_out)                  \
  X(Log1p, log1p, float_out)                  \
  X(Sigmoid, sigmoid, float_out)              \
  X(Erf, erf, float_out_real)                 \
  X(ErfInv, erfinv, float_out_real)           \
  X(Conjugate, conjugate, custom)             \
  X(Real, real, custom)                       \
  X(Imag, imag, custom)                       \
  X(BitwiseInvert, bitwise_invert, custom)    \
  X(IsNan, isnan, predicate)                  \
  X(IsInf, isinf, predicate)                  \
  X(IsFinite, isfinite, predicate)            \
  X(IsPosInf, isposinf, predicate_real)       \
  X(IsNegInf, isneginf, predicate_real)

#define TESSERA_BINARY_OPS(X)                   \
  X(Add, add, arithmetic)                       \
  X(Subtract, subtract, custom)                 \
  X(Multiply, multiply, arithmetic)             \
  X(Divide, divide, custom)                     \
  X(FloorDivide, floor_divide, custom)          \
  X(Remainder, remainder, custom)               \
  X(Power, power, arithmetic)                   \
  X(Maximum, maximum, arithmetic)               \
  X(Minimum, minimum, arithmetic)               \
  X(LogAddExp, logaddexp, float_out)            \
  X(ArcTan2, arctan2, float_out)                \
  X(Hypot, hypot, float_out)                    \
  X(NotEqual, not_equal, comparison)            \
  X(Greater, greater, comparison)               \
  X(GreaterEqual, greater_equal, comparison)    \
  X(Less, less, comparison)                     \
  X(LessEqual, less_equal, comparison)          \
  X(LogicalAnd, logical_and, logical)           \
  X(LogicalOr, logical_or, logical)             \
  X(LogicalXor, logical_xor, logical)           \
  X(BitwiseAnd, bitwise_and, bitwise)           \
  X(BitwiseOr, bitwise_or, bitwise)             \
  X(BitwiseXor, bitwise_xor, bitwise)           \
  X(LeftShift, left_shift, shift)               \
  X(RightShift, right_shift, shift)
