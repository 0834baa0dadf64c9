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
#include "tessera/ops/primitives/shape.h"

namespace tessera {

// The reduced axes and keepdims of Reduce, Variance and LogSumExp.
class AxesReduction : public UnaryPrimitive {
 public:
  AxesReduction(Stream s, std::vector<int> axes, bool keepdims)
      : UnaryPrimitive(s), axes_(std::move(axes)), keepdims_(keepdims) {}

 protected:
  std::vector<int> axes_;
  bool keepdims_;
};

class Reduce : public AxesReduction {
 public:
  // Mean is a sum scaled by 1/N inside the kernel (float-out).
  enum ReduceType { And, Or, Sum, Prod, Max, Min, Mean };

  Reduce(Stream s, ReduceType type, std::vector<int> axes, bool keepdims)
      : AxesReduction(s, std::move(axes), keepdims), type_(type) {}
  TESSERA_PRIMITIVE(Reduce, type_, axes_, keepdims_)
  void print(std::ostream& os) const override;

 private:
  ReduceType type_;
};

// Index of the first max / min along one axis (NaN wins, as in NumPy); uint32.
class ArgReduce : public UnaryPrimitive {
 public:
  enum ReduceType { ArgMin, ArgMax };

  ArgReduce(Stream s, ReduceType type, int axis, bool keepdims)
      : UnaryPrimitive(s), type_(type), axis_(axis), keepdims_(keepdims) {}
  TESSERA_PRIMITIVE(ArgReduce, type_, axis_, keepdims_)

 private:
  ReduceType type_;
  int axis_;
  bool keepdims_;
};

// Variance with divisor max(N - ddof, 0), two passes in float64; with
// take_sqrt, the standard deviation. Complex input: the mean of |x - mean|^2.
class Variance : public AxesReduction {
 public:
  Variance(Stream s, std::vector<int> axes, bool keepdims, int ddof, bool take_sqrt)
      : AxesReduction(s, std::move(axes), keepdims), ddof_(ddof), take_sqrt_(take_sqrt) {}
  TESSERA_PRIMITIVE(Variance, axes_, keepdims_, ddof_, take_sqrt_)

 private:
  int ddof_;
  bool take_sqrt_;
};

// log(sum(exp(x))) computed as max + log(sum(exp(x - max))).
class LogSumExp : public AxesReduction {
 public:
  using AxesReduction::AxesReduction;
  TESSERA_PRIMITIVE(LogSumExp, axes_, keepdims_)
};

// exp(x - max) / sum(exp(x - max)) over the axes; the output has the input's shape.
// The CPU computes 16-bit inputs in float32 whether precise or not.
class Softmax : public UnaryPrimitive {
 public:
  Softmax(Stream s, std::vector<int> axes, bool precise)
      : UnaryPrimitive(s), axes_(std::move(axes)), precise_(precise) {}
  TESSERA_PRIMITIVE(Softmax, axes_, precise_)

 private:
  std::vector<int> axes_;
  bool precise_;
};

// Sum of the diagonals, in the sum dtype of the input; the kernel reduces a
// strided view of the diagonal, no copy.
class Trace : public DiagonalPlanes {
 public:
  using DiagonalPlanes::DiagonalPlanes;
  TESSERA_PRIMITIVE(Trace, offset_, axis1_, axis2_)
};

}  // namespace tessera
