#include "tessera/backend/common/axis_plan.h"

namespace tessera {

AxisPlan axis_plan(const Shape& shape, const Strides& in_strides, int axis) {
  AxisPlan p;
  const int nd = static_cast<int>(shape.size());
  Strides out_strides(nd, 1);
  for (int d = nd - 2; d >= 0; --d) out_strides[d] = out_strides[d + 1] * shape[d + 1];
  p.n = nd == 0 ? 1 : shape[axis];
  p.in_stride = nd == 0 ? 0 : in_strides[axis];
  p.out_stride = nd == 0 ? 0 : out_strides[axis];
  for (int d = 0; d < nd; ++d) {
    if (d == axis || shape[d] == 1) continue;
    p.rows *= shape[d];
    if (!p.rest_shape.empty() &&
        p.in_strides.back() == in_strides[d] * shape[d] &&
        p.out_strides.back() == out_strides[d] * shape[d]) {
      p.rest_shape.back() *= shape[d];
      p.in_strides.back() = in_strides[d];
      p.out_strides.back() = out_strides[d];
    } else {
      p.rest_shape.push_back(shape[d]);
      p.in_strides.push_back(in_strides[d]);
      p.out_strides.push_back(out_strides[d]);
    }
  }
  for (int d = 0; d < nd; ++d) {
    if (d != axis && shape[d] == 0) p.rows = 0;
  }
  if (p.rest_shape.empty()) {
    p.rest_shape.push_back(1);
    p.in_strides.push_back(0);
    p.out_strides.push_back(0);
  }
  return p;
}

}  // namespace tessera
