// Scan: a running sum, product, max, min or log-sum-exp along one axis.
//
// The output has the input's shape and is row-contiguous. Exclusive scans
// start from the identity (0, 1, lowest, highest, -inf); reverse scans run from
// the end of the axis. Sum and Prod accumulate 16-bit floats in float32 and
// integers in their own type (wrapping), as the reductions do.
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

class Scan : public UnaryPrimitive {
 public:
  enum ReduceType { Sum, Prod, Max, Min, LogAddExp };

  Scan(Stream s, ReduceType type, int axis, bool reverse, bool inclusive)
      : UnaryPrimitive(s), type_(type), axis_(axis), reverse_(reverse), inclusive_(inclusive) {}
  TESSERA_PRIMITIVE(Scan, type_, axis_, reverse_, inclusive_)

 private:
  ReduceType type_;
  int axis_;
  bool reverse_;
  bool inclusive_;
};

}  // namespace tessera
