// Shape primitives. Views where the layout allows (see Note [Strides and flags]).
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

// Output axis i is input axis axes[i]: a view.
class Transpose : public UnaryPrimitive {
 public:
  Transpose(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}
  TESSERA_VIEW_PRIMITIVE(Transpose, axes_)

 private:
  std::vector<int> axes_;
};

// The region that Slice reads and SliceUpdate writes: on each axis the
// elements start[i], start[i] + strides[i], ... below stop[i] (already
// clamped; the output's or the update's shape gives the count on each axis).
class SliceRegion : public UnaryPrimitive {
 public:
  SliceRegion(Stream s, Shape start, Shape stop, Shape strides)
      : UnaryPrimitive(s), start_(std::move(start)), stop_(std::move(stop)),
        strides_(std::move(strides)) {}
  const Shape& start() const { return start_; }
  const Shape& steps() const { return strides_; }

 protected:
  Shape start_, stop_, strides_;
};

// The region of the input: a view.
class Slice : public SliceRegion {
 public:
  using SliceRegion::SliceRegion;
  TESSERA_VIEW_PRIMITIVE(Slice, start_, stop_, strides_)
};

// Same elements in a new shape: a view whenever the input's strides allow it
// (always for row-contiguous input, and for size-1 axes added or removed on any
// view), else a row-contiguous copy.
class Reshape : public UnaryPrimitive {
 public:
  Reshape(Stream s, Shape shape) : UnaryPrimitive(s), shape_(std::move(shape)) {}
  TESSERA_PRIMITIVE(Reshape, shape_)

 private:
  Shape shape_;
};

// The region of DynamicSlice and DynamicSliceUpdate: a window whose start
// along `axes` (0 on the other axes) comes from an integer input at eval time;
// negative starts count from the end, and starts are clamped so that the
// window stays inside the array.
class DynamicRegion : public UnaryPrimitive {
 public:
  DynamicRegion(Stream s, std::vector<int> axes) : UnaryPrimitive(s), axes_(std::move(axes)) {}

 protected:
  std::vector<int> axes_;
};

// The window of shape slice_size starting at inputs[1]: a view.
class DynamicSlice : public DynamicRegion {
 public:
  DynamicSlice(Stream s, std::vector<int> axes, Shape slice_size)
      : DynamicRegion(s, std::move(axes)), slice_size_(std::move(slice_size)) {}
  TESSERA_PRIMITIVE(DynamicSlice, axes_, slice_size_)

 private:
  Shape slice_size_;
};

// inputs[0] with the region replaced by inputs[1], which has the region's
// shape (any dtype: it is cast while it is copied). The source buffer is
// reused when it is donatable.
class SliceUpdate : public SliceRegion {
 public:
  using SliceRegion::SliceRegion;
  TESSERA_PRIMITIVE(SliceUpdate, start_, stop_, strides_)
};

// inputs[0] with the window of inputs[1]'s shape starting at inputs[2]
// replaced by inputs[1].
class DynamicSliceUpdate : public DynamicRegion {
 public:
  using DynamicRegion::DynamicRegion;
  TESSERA_PRIMITIVE(DynamicSliceUpdate, axes_)
};

// The inputs joined along `axis` (each copied, with a cast to the output
// dtype, into its region of a row-contiguous output).
class Concatenate : public UnaryPrimitive {
 public:
  Concatenate(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  TESSERA_PRIMITIVE(Concatenate, axis_)

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
  TESSERA_PRIMITIVE(Pad, axes_, low_, high_, mode_)

 private:
  std::vector<int> axes_;
  Shape low_, high_;
  Mode mode_;
};

// The diagonal `offset` of the (axis1, axis2) planes, which Diagonal and
// Trace read.
class DiagonalPlanes : public UnaryPrimitive {
 public:
  DiagonalPlanes(Stream s, int offset, int axis1, int axis2)
      : UnaryPrimitive(s), offset_(offset), axis1_(axis1), axis2_(axis2) {}

 protected:
  int offset_, axis1_, axis2_;
};

// The diagonals, as the last axis: a view whose last stride is the sum of the
// two axes' strides.
class Diagonal : public DiagonalPlanes {
 public:
  using DiagonalPlanes::DiagonalPlanes;
  TESSERA_VIEW_PRIMITIVE(Diagonal, offset_, axis1_, axis2_)
};


}  // namespace tessera
