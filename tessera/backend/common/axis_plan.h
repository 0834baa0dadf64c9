// How the scan and sort kernels of every backend walk an array along one axis:
// the array seen as rows along `axis`, one row per position of the other axes.
// Row r starts at elem_to_loc(r, rest_shape, in_strides) in the input and at
// elem_to_loc(r, rest_shape, out_strides) in the row-contiguous output; element
// i of a row is i * in_stride (i * out_stride) further on. The other axes are
// collapsed where both layouts allow. Nothing here touches data.
#pragma once

#include <cstdint>

#include "tessera/core/array.h"

namespace tessera {

struct AxisPlan {
  Shape rest_shape;  // the other axes, collapsed (at least one dimension)
  Strides in_strides;
  Strides out_strides;
  int64_t rows = 1;
  int64_t n = 1;  // extent of the axis
  int64_t in_stride = 0;
  int64_t out_stride = 0;

  // The rows of the innermost rest dimension sit next to each other in both
  // layouts (stride 1): a kernel can sweep them as vectors.
  bool inner_contiguous() const {
    return rest_shape.back() > 1 && in_strides.back() == 1 && out_strides.back() == 1;
  }
};

AxisPlan axis_plan(const Shape& shape, const Strides& in_strides, int axis);

}  // namespace tessera
