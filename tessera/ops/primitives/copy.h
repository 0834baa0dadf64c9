// Primitives that move or convert data without arithmetic.
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// Cast to the output dtype (row-contiguous result).
class AsType : public UnaryPrimitive {
 public:
  AsType(Stream s, Dtype dtype) : UnaryPrimitive(s), dtype_(dtype) {}
  TESSERA_PRIMITIVE(AsType, dtype_)

 private:
  Dtype dtype_;
};

// A copy: new buffer, row-contiguous.
class Copy : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  TESSERA_PRIMITIVE(Copy)
};

// A view of the input broadcast to the output shape (stride 0 on new axes).
class Broadcast : public UnaryPrimitive {
 public:
  Broadcast(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  TESSERA_VIEW_PRIMITIVE(Broadcast, shape_)

 private:
  Shape shape_;
};

// The adjoint of broadcasting to x's shape: x summed over the axes that
// broadcasting `shape` to x.shape() adds or stretches, reshaped to `shape`
// (Broadcast's vjp; the matrix products use it for broadcast batch axes).
array sum_to_shape(const array& x, const Shape& shape, Stream s);

// Makes the data row-contiguous (or column-contiguous when allowed): a view
// when it already is, else a copy.
class Contiguous : public UnaryPrimitive {
 public:
  Contiguous(Stream s, bool allow_col_major)
      : UnaryPrimitive(s), allow_col_major_(allow_col_major) {}
  TESSERA_PRIMITIVE(Contiguous, allow_col_major_)

 private:
  bool allow_col_major_;
};

}  // namespace tessera
