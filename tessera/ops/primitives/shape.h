// Shape primitives. Views where the layout allows (see Note [Strides and flags]).
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// Output axis i is input axis axes[i]: a view.
class Transpose : public UnaryPrimitive {
 public:
  Transpose(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_PRIMITIVE_NAME(Transpose)
  bool is_equivalent(const Primitive& other) const override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

// Elements start[i], start[i] + strides[i], ... (already clamped; the output
// shape gives the count on each axis): a view.
class Slice : public UnaryPrimitive {
 public:
  Slice(Stream s, Shape start, Shape stop, Shape strides)
      : UnaryPrimitive(s), start_(std::move(start)), stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_PRIMITIVE_NAME(Slice)
  bool is_equivalent(const Primitive& other) const override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  Shape start_, stop_, strides_;
};

// Same elements in a new shape: a view of row-contiguous input, else a copy.
class Reshape : public UnaryPrimitive {
 public:
  Reshape(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_PRIMITIVE_NAME(Reshape)
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape shape_;
};

}  // namespace tessera
