// Quantization primitives (affine mode; Note [Affine quantization] in
// backend/common/quantize.h). The op functions hand them validated inputs:
//   Quantize         {w} floating, ndim >= 2, last dim divisible by group_size
//                    -> {w_q uint32, scales, biases} (w's dtype)
//   Dequantize       {w_q, scales, biases}, scales and biases of the output's
//                    dtype and of w_q's shape but for the last dim
//   QuantizedMatmul  {x, w_q, scales, biases}: x, scales and biases of the
//                    output's dtype. With a 2-D w_q, x is (..., K) and is
//                    multiplied row by row; with batch axes, x and w_q come
//                    broadcast to the output's batch shape.
// Kernels may read any strides (they make dense copies where they need them).
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

class QuantizedPrimitive {
 public:
  QuantizedPrimitive(int group_size, int bits) : group_size_(group_size), bits_(bits) {}

 protected:
  int group_size_, bits_;
};

class Quantize : public Primitive, public QuantizedPrimitive {
 public:
  Quantize(Stream s, int group_size, int bits) : Primitive(s), QuantizedPrimitive(group_size, bits) {}
  TESSERA_PRIMITIVE_MULTI(Quantize, group_size_, bits_)
};

class Dequantize : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  Dequantize(Stream s, int group_size, int bits)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits) {}
  TESSERA_PRIMITIVE(Dequantize, group_size_, bits_)
};

class QuantizedMatmul : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  QuantizedMatmul(Stream s, int group_size, int bits, bool transpose)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits), transpose_(transpose) {}
  TESSERA_PRIMITIVE(QuantizedMatmul, group_size_, bits_, transpose_)

 private:
  bool transpose_;
};

}  // namespace tessera
