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
  int group_size() const { return group_size_; }
  int bits() const { return bits_; }

 protected:
  int group_size_, bits_;
};

class Quantize : public Primitive, public QuantizedPrimitive {
 public:
  Quantize(Stream s, int group_size, int bits) : Primitive(s), QuantizedPrimitive(group_size, bits) {}
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_EVAL_GPU_MULTI
  TESSERA_PRIMITIVE_NAME(Quantize)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
};

class Dequantize : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  Dequantize(Stream s, int group_size, int bits)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Dequantize)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
};

class QuantizedMatmul : public UnaryPrimitive, public QuantizedPrimitive {
 public:
  QuantizedMatmul(Stream s, int group_size, int bits, bool transpose)
      : UnaryPrimitive(s), QuantizedPrimitive(group_size, bits), transpose_(transpose) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(QuantizedMatmul)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  bool transpose() const { return transpose_; }

 private:
  bool transpose_;
};

}  // namespace tessera
