#include "tessera/ops/shape.h"

#include <algorithm>

#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (static_cast<int>(axes.size()) != nd) {
    throw_invalid("transpose", "axes " + ints_str(axes) + " do not match an array with " +
                                   std::to_string(nd) + " dimensions");
  }
  std::vector<int> seen(nd, 0);
  for (auto& ax : axes) {
    ax = normalize_axis(ax, nd, "transpose");
    if (seen[ax]++) throw_invalid("transpose", "repeated axis in " + ints_str(axes));
  }
  Shape shape(nd);
  for (int i = 0; i < nd; ++i) shape[i] = a.shape(axes[i]);
  return array(shape, a.dtype(), std::make_shared<Transpose>(to_stream(s), std::move(axes)), {a});
}

array transpose(const array& a, std::initializer_list<int> axes, StreamOrDevice s) {
  return transpose(a, std::vector<int>(axes), s);
}

array transpose(const array& a, StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int>(axes.size() - 1 - i);
  return transpose(a, std::move(axes), s);
}

array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s) {
  size_t nd = a.ndim();
  if (start.size() != nd || stop.size() != nd || strides.size() != nd) {
    throw_invalid("slice", "start " + shape_str(start) + ", stop " + shape_str(stop) +
                               " and strides " + shape_str(strides) +
                               " must each have one entry per dimension of an array of shape " +
                               shape_str(a.shape()));
  }
  Shape out_shape(nd);
  for (size_t i = 0; i < nd; ++i) {
    int n = a.shape(static_cast<int>(i));
    int st = strides[i];
    if (st == 0) throw_invalid("slice", "stride 0 on axis " + std::to_string(i));
    // NumPy clamping of start/stop for this step's direction.
    int b = start[i], e = stop[i];
    if (b < 0) b += n;
    if (e < 0) e += n;
    if (st > 0) {
      b = std::clamp(b, 0, n);
      e = std::clamp(e, 0, n);
      out_shape[i] = e > b ? (e - b + st - 1) / st : 0;
    } else {
      b = std::clamp(b, -1, n - 1);
      e = std::clamp(e, -1, n - 1);
      out_shape[i] = b > e ? (b - e - st - 1) / (-st) : 0;
    }
    start[i] = b;
    stop[i] = e;
  }
  if (out_shape == a.shape() && std::all_of(strides.begin(), strides.end(),
                                            [](int v) { return v == 1; })) {
    return a;
  }
  return array(out_shape, a.dtype(),
               std::make_shared<Slice>(to_stream(s), std::move(start), std::move(stop),
                                       std::move(strides)),
               {a});
}

array slice(const array& a, std::initializer_list<int> start, Shape stop, Shape strides,
            StreamOrDevice s) {
  return slice(a, Shape(start), std::move(stop), std::move(strides), s);
}

array slice(const array& a, Shape start, Shape stop, StreamOrDevice s) {
  return slice(a, std::move(start), std::move(stop), Shape(a.ndim(), 1), s);
}

array reshape(const array& a, Shape shape, StreamOrDevice s) {
  int infer = -1;
  size_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw_invalid("reshape", "at most one dimension may be -1 in " + shape_str(shape));
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw_invalid("reshape", "negative dimension in " + shape_str(shape));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || a.size() % known != 0) {
      throw_invalid("reshape", "cannot reshape an array of shape " + shape_str(a.shape()) +
                                   " into shape " + shape_str(shape));
    }
    shape[infer] = static_cast<int>(a.size() / known);
    known = a.size();
  }
  if (known != a.size()) {
    throw_invalid("reshape", "cannot reshape an array of shape " + shape_str(a.shape()) +
                                 " (size " + std::to_string(a.size()) + ") into shape " +
                                 shape_str(shape));
  }
  if (shape == a.shape()) return a;
  return array(shape, a.dtype(), std::make_shared<Reshape>(to_stream(s), shape), {a});
}

bool Transpose::is_equivalent(const Primitive& other) const {
  return dynamic_cast<const Transpose&>(other).axes_ == axes_;
}
bool Slice::is_equivalent(const Primitive& other) const {
  auto& o = dynamic_cast<const Slice&>(other);
  return o.start_ == start_ && o.stop_ == stop_ && o.strides_ == strides_;
}
bool Reshape::is_equivalent(const Primitive& other) const {
  return dynamic_cast<const Reshape&>(other).shape_ == shape_;
}

}  // namespace tessera
