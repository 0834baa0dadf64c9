// Reduction primitives: Reduce (sum, prod, max, min, and, or, mean), ArgReduce,
// Variance, LogSumExp, Softmax and Trace.
//
// Note [Reduction axes]
// Every primitive here stores the reduced axes of its input, normalized and
// sorted. The output holds the kept axes in their input order, row-contiguous;
// with keepdims the reduced axes stay as 1s, which is the same layout, so the
// kernels never look at keepdims; the primitive keeps it for its rules, which
// build outputs of the same shape.
#pragma once

#include <vector>

#include "tessera/core/primitive.h"

namespace tessera {

class Reduce : public UnaryPrimitive {
 public:
  // Mean is a sum scaled by 1/N inside the kernel (float-out).
  enum ReduceType { And, Or, Sum, Prod, Max, Min, Mean };

  Reduce(Stream s, ReduceType type, std::vector<int> axes, bool keepdims)
      : UnaryPrimitive(s), type_(type), axes_(std::move(axes)), keepdims_(keepdims) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Reduce)
  TESSERA_TRANSFORM_RULES
  void print(std::ostream& os) const override;
  bool is_equivalent(const Primitive& other) const override;
  ReduceType type() const { return type_; }
  const std::vector<int>& axes() const { return axes_; }

 private:
  ReduceType type_;
  std::vector<int> axes_;
  bool keepdims_;
};

// Index of the first max / min along one axis (NaN wins, as in NumPy); uint32.
class ArgReduce : public UnaryPrimitive {
 public:
  enum ReduceType { ArgMin, ArgMax };

  ArgReduce(Stream s, ReduceType type, int axis, bool keepdims)
      : UnaryPrimitive(s), type_(type), axis_(axis), keepdims_(keepdims) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(ArgReduce)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  ReduceType type() const { return type_; }
  int axis() const { return axis_; }

 private:
  ReduceType type_;
  int axis_;
  bool keepdims_;
};

// Variance with divisor max(N - ddof, 0), two passes in float64; with
// take_sqrt, the standard deviation. Complex input: the mean of |x - mean|^2.
class Variance : public UnaryPrimitive {
 public:
  Variance(Stream s, std::vector<int> axes, bool keepdims, int ddof, bool take_sqrt)
      : UnaryPrimitive(s), axes_(std::move(axes)), keepdims_(keepdims), ddof_(ddof),
        take_sqrt_(take_sqrt) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Variance)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::vector<int> axes_;
  bool keepdims_;
  int ddof_;
  bool take_sqrt_;
};

// log(sum(exp(x))) computed as max + log(sum(exp(x - max))).
class LogSumExp : public UnaryPrimitive {
 public:
  LogSumExp(Stream s, std::vector<int> axes, bool keepdims)
      : UnaryPrimitive(s), axes_(std::move(axes)), keepdims_(keepdims) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(LogSumExp)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::vector<int> axes_;
  bool keepdims_;
};

// exp(x - max) / sum(exp(x - max)) over the axes; the output has the input's shape.
// The CPU computes 16-bit inputs in float32 whether precise or not.
class Softmax : public UnaryPrimitive {
 public:
  Softmax(Stream s, std::vector<int> axes, bool precise)
      : UnaryPrimitive(s), axes_(std::move(axes)), precise_(precise) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Softmax)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;

 private:
  std::vector<int> axes_;
  bool precise_;
};

// Sum of the diagonal `offset` of the (axis1, axis2) planes, in the sum dtype
// of the input; the kernel reduces a strided view of the diagonal, no copy.
class Trace : public UnaryPrimitive {
 public:
  Trace(Stream s, int offset, int axis1, int axis2)
      : UnaryPrimitive(s), offset_(offset), axis1_(axis1), axis2_(axis2) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Trace)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;

 private:
  int offset_;
  int axis1_;
  int axis2_;
};

}  // namespace tessera
