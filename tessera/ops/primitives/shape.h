// Shape primitives. Views where the layout allows (see Note [Strides and flags]).
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// Output axis i is input axis axes[i]: a view.
class Transpose : public UnaryPrimitive {
 public:
  Transpose(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Transpose)
  TESSERA_TRANSFORM_RULES
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
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Slice)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  Shape start_, stop_, strides_;
};

// Same elements in a new shape: a view whenever the input's strides allow it
// (always for row-contiguous input, and for size-1 axes added or removed on any
// view), else a row-contiguous copy.
class Reshape : public UnaryPrimitive {
 public:
  Reshape(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Reshape)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;

 private:
  Shape shape_;
};

// A fixed-size window whose start along `axes` comes from the integer input
// inputs[1] at eval time (negative starts count from the end; starts are
// clamped so the window stays inside the array): a view.
class DynamicSlice : public UnaryPrimitive {
 public:
  DynamicSlice(Stream s, std::vector<int> axes, Shape slice_size)
      : UnaryPrimitive(s), axes_(std::move(axes)), slice_size_(std::move(slice_size)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(DynamicSlice)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  const std::vector<int>& axes() const { return axes_; }
  const Shape& slice_size() const { return slice_size_; }

 private:
  std::vector<int> axes_;
  Shape slice_size_;
};

// inputs[0] with the strided region [start, stop; strides) (clamped, as in
// Slice) replaced by inputs[1], which has the region's shape (any dtype: it is
// cast while it is copied). The source buffer is reused when it is donatable.
class SliceUpdate : public UnaryPrimitive {
 public:
  SliceUpdate(Stream s, Shape start, Shape stop, Shape strides)
      : UnaryPrimitive(s), start_(std::move(start)), stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(SliceUpdate)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  const Shape& start() const { return start_; }
  const Shape& stop() const { return stop_; }
  const Shape& strides() const { return strides_; }

 private:
  Shape start_, stop_, strides_;
};

// inputs[0] with the region of inputs[1]'s shape replaced by inputs[1]; the
// region starts at the integer input inputs[2] along `axes` (0 elsewhere),
// clamped as in DynamicSlice.
class DynamicSliceUpdate : public UnaryPrimitive {
 public:
  DynamicSliceUpdate(Stream s, std::vector<int> axes)
      : UnaryPrimitive(s), axes_(std::move(axes)) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(DynamicSliceUpdate)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  const std::vector<int>& axes() const { return axes_; }

 private:
  std::vector<int> axes_;
};

// The inputs joined along `axis` (each copied, with a cast to the output
// dtype, into its region of a row-contiguous output).
class Concatenate : public UnaryPrimitive {
 public:
  Concatenate(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Concatenate)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  int axis() const { return axis_; }

 private:
  int axis_;
};

// inputs[0] padded by low[i] / high[i] elements on axes[i]; the border holds
// inputs[1] (a 0-d value of the output dtype) in constant mode, the nearest
// edge element in edge mode.
class Pad : public UnaryPrimitive {
 public:
  enum class Mode { constant, edge };
  Pad(Stream s, std::vector<int> axes, Shape low, Shape high, Mode mode)
      : UnaryPrimitive(s), axes_(std::move(axes)), low_(std::move(low)), high_(std::move(high)),
        mode_(mode) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Pad)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  const std::vector<int>& axes() const { return axes_; }
  const Shape& low() const { return low_; }
  const Shape& high() const { return high_; }
  Mode mode() const { return mode_; }

 private:
  std::vector<int> axes_;
  Shape low_, high_;
  Mode mode_;
};

// The diagonals of the (axis1, axis2) planes, as the last axis: a view whose
// last stride is the sum of the two axes' strides.
class Diagonal : public UnaryPrimitive {
 public:
  Diagonal(Stream s, int offset, int axis1, int axis2)
      : UnaryPrimitive(s), offset_(offset), axis1_(axis1), axis2_(axis2) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  TESSERA_PRIMITIVE_NAME(Diagonal)
  TESSERA_TRANSFORM_RULES
  bool is_equivalent(const Primitive& other) const override;
  int offset() const { return offset_; }
  int axis1() const { return axis1_; }
  int axis2() const { return axis2_; }

 private:
  int offset_, axis1_, axis2_;
};


}  // namespace tessera
