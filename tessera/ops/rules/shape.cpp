// Transform rules (jvp, vjp, vmap) of the shape primitives, written with the
// public ops on the primitive's stream.
//
// Shape primitives are linear in their array inputs, so each jvp applies the
// primitive to the tangents, and each vjp is the transposed map: a slice
// transposes to a slice_update into zeros, a concatenation to slices, a pad to
// the interior slice (plus the border sums in edge mode). Integer start
// indices (DynamicSlice, DynamicSliceUpdate) get zero cotangents.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/shape.h"
#include "tessera/ops/rules/vmap.h"

namespace tessera {

namespace {

// Slice bounds as a primitive stores them (clamped, where -1 on a negative
// stride means "before the first element") in the form that slice() and
// slice_update() normalize back to the same values.
Shape unclamped(Shape bounds, const Shape& shape) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (bounds[i] < 0) bounds[i] = -shape[i] - 1;
  }
  return bounds;
}

Shape inserted(Shape shape, int pos, ShapeElem value) {
  shape.insert(shape.begin() + pos, value);
  return shape;
}

using rules::batch_first;
using rules::batch_size;
using rules::shifted;

// The window starts of each batch element on axis `ax` (of the unbatched
// shape) of a batch-first array x: the k-th column of the batched starts
// (n, k), counted from the end when negative and clamped so that a window of
// `size` fits, as the kernels do. Shaped (n, 1, ..., 1) to broadcast over x.
array window_starts(const array& starts, int k, int ax, int size, const array& x, Stream s) {
  const int extent = x.shape(ax + 1);
  array st = astype(take(starts, k, 1, s), int64, s);
  st = where(less(st, array(0, int64), s), add(st, array(extent, int64), s), st, s);
  st = clip(st, array(0, int64), array(std::max(extent - size, 0), int64), s);
  Shape column(x.ndim(), 1);
  column[0] = starts.shape(0);
  return reshape(st, column, s);
}

// 0, 1, ..., n - 1 along axis ax + 1 of an array of rank ndim (1 elsewhere).
array positions(int n, int ax, int ndim, Stream s) {
  Shape row(ndim, 1);
  row[ax + 1] = n;
  return reshape(arange(0, n, 1, int64, s), row, s);
}

// The tangent of primals[i], or zeros when it has none.
array tangent_of(size_t i, const std::vector<array>& primals, const std::vector<array>& tangents,
                 const std::vector<int>& argnums, Stream s) {
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == static_cast<int>(i)) return tangents[k];
  }
  return zeros_like(primals[i], s);
}

bool has_tangent(int i, const std::vector<int>& argnums) {
  return std::find(argnums.begin(), argnums.end(), i) != argnums.end();
}

}  // namespace

// Transpose

std::vector<array> Transpose::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {transpose(tangents[0], axes_, stream())};
}

std::vector<array> Transpose::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                  const std::vector<int>&, const std::vector<array>&) {
  std::vector<int> inverse(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) inverse[axes_[i]] = static_cast<int>(i);
  return {transpose(cotangents[0], std::move(inverse), stream())};
}

std::pair<std::vector<array>, std::vector<int>> Transpose::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  int b = axes[0];
  std::vector<int> perm{b};
  for (int ax : axes_) perm.push_back(ax >= b ? ax + 1 : ax);
  return {{transpose(inputs[0], std::move(perm), stream())}, {0}};
}

// Slice

std::vector<array> Slice::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                              const std::vector<int>&) {
  const Shape& shape = primals[0].shape();
  return {slice(tangents[0], unclamped(start_, shape), unclamped(stop_, shape), strides_,
                stream())};
}

std::vector<array> Slice::vjp(const std::vector<array>& primals,
                              const std::vector<array>& cotangents, const std::vector<int>&,
                              const std::vector<array>&) {
  const Shape& shape = primals[0].shape();
  return {slice_update(zeros_like(primals[0], stream()), cotangents[0], unclamped(start_, shape),
                       unclamped(stop_, shape), strides_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> Slice::vmap(const std::vector<array>& inputs,
                                                            const std::vector<int>& axes) {
  // The batch axis stays in place, taken whole.
  int b = axes[0];
  Shape shape = inputs[0].shape();
  shape.erase(shape.begin() + b);
  Shape start = inserted(unclamped(start_, shape), b, 0);
  Shape stop = inserted(unclamped(stop_, shape), b, inputs[0].shape(b));
  Shape strides = inserted(strides_, b, 1);
  return {{slice(inputs[0], std::move(start), std::move(stop), std::move(strides), stream())},
          {b}};
}

// Reshape

std::vector<array> Reshape::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                const std::vector<int>&) {
  return {reshape(tangents[0], shape_, stream())};
}

std::vector<array> Reshape::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents, const std::vector<int>&,
                                const std::vector<array>&) {
  return {reshape(cotangents[0], primals[0].shape(), stream())};
}

std::pair<std::vector<array>, std::vector<int>> Reshape::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  int n = inputs[0].shape(axes[0]);
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  return {{reshape(x, inserted(shape_, 0, n), stream())}, {0}};
}

// DynamicSlice: inputs (a, start)

std::vector<array> DynamicSlice::jvp(const std::vector<array>& primals,
                                     const std::vector<array>& tangents,
                                     const std::vector<int>& argnums) {
  if (!has_tangent(0, argnums)) return {zeros(slice_size_, primals[0].dtype(), stream())};
  return {slice(tangents[0], primals[1], axes_, slice_size_, stream())};
}

std::vector<array> DynamicSlice::vjp(const std::vector<array>& primals,
                                     const std::vector<array>& cotangents,
                                     const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(slice_update(zeros_like(primals[0], stream()), cotangents[0], primals[1],
                                  axes_, stream()));
    } else {
      vjps.push_back(zeros_like(primals[i], stream()));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> DynamicSlice::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  if (axes[1] >= 0) {
    // A start per batch element: a gather of the window along each sliced axis.
    int n = batch_size(inputs, axes);
    array out = batch_first(inputs[0], axes[0], n, s);
    array starts = moveaxis(inputs[1], axes[1], 0, s);
    for (size_t k = 0; k < axes_.size(); ++k) {
      const int ax = axes_[k], size = slice_size_[ax];
      array first = window_starts(starts, static_cast<int>(k), ax, size, out, s);
      out = take_along_axis(out, add(first, positions(size, ax, out.ndim(), s), s), ax + 1, s);
    }
    return {{out}, {0}};
  }
  int n = inputs[0].shape(axes[0]);
  array a = moveaxis(inputs[0], axes[0], 0, stream());
  return {{slice(a, inputs[1], shifted(axes_), inserted(slice_size_, 0, n), stream())}, {0}};
}

// SliceUpdate: inputs (src, update)

std::vector<array> SliceUpdate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  const Shape& shape = primals[0].shape();
  return {slice_update(tangent_of(0, primals, tangents, argnums, stream()),
                       tangent_of(1, primals, tangents, argnums, stream()),
                       unclamped(start_, shape), unclamped(stop_, shape), strides_, stream())};
}

std::vector<array> SliceUpdate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array& cot = cotangents[0];
  Shape start = unclamped(start_, cot.shape()), stop = unclamped(stop_, cot.shape());
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(slice_update(cot, array(0, cot.dtype()), start, stop, strides_, stream()));
    } else {
      vjps.push_back(astype(slice(cot, start, stop, strides_, stream()), primals[1].dtype(),
                            stream()));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> SliceUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  const Shape& shape = inputs[0].shape();
  Shape unbatched = shape;
  if (axes[0] >= 0) unbatched.erase(unbatched.begin() + axes[0]);
  array src = batch_first(inputs[0], axes[0], n, stream());
  // An unbatched update broadcasts over the batch axis of the region.
  array update = axes[1] >= 0 ? moveaxis(inputs[1], axes[1], 0, stream()) : inputs[1];
  Shape start = inserted(unclamped(start_, unbatched), 0, 0);
  Shape stop = inserted(unclamped(stop_, unbatched), 0, n);
  Shape strides = inserted(strides_, 0, 1);
  return {{slice_update(src, update, std::move(start), std::move(stop), std::move(strides),
                        stream())},
          {0}};
}

// DynamicSliceUpdate: inputs (src, update, start)

std::vector<array> DynamicSliceUpdate::jvp(const std::vector<array>& primals,
                                           const std::vector<array>& tangents,
                                           const std::vector<int>& argnums) {
  return {slice_update(tangent_of(0, primals, tangents, argnums, stream()),
                       tangent_of(1, primals, tangents, argnums, stream()), primals[2], axes_,
                       stream())};
}

std::vector<array> DynamicSliceUpdate::vjp(const std::vector<array>& primals,
                                           const std::vector<array>& cotangents,
                                           const std::vector<int>& argnums,
                                           const std::vector<array>&) {
  const array& cot = cotangents[0];
  const array& update = primals[1];
  const array& start = primals[2];
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(slice_update(cot, zeros(update.shape(), cot.dtype(), stream()), start, axes_,
                                  stream()));
    } else if (i == 1) {
      vjps.push_back(astype(slice(cot, start, axes_, update.shape(), stream()), update.dtype(),
                            stream()));
    } else {
      vjps.push_back(zeros_like(start, stream()));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> DynamicSliceUpdate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int n = batch_size(inputs, axes);
  array src = batch_first(inputs[0], axes[0], n, s);
  if (axes[2] >= 0) {
    // A start per batch element: along each axis the update is gathered into
    // place (position p reads update row p - start), then selected inside the
    // window. Axes without a start hold the update from 0.
    array placed = astype(batch_first(inputs[1], axes[1], n, s), src.dtype(), s);
    array starts = moveaxis(inputs[2], axes[2], 0, s);
    const int nd = src.ndim();
    std::optional<array> inside;
    for (int ax = 0; ax + 1 < nd; ++ax) {
      const int size = placed.shape(ax + 1), extent = src.shape(ax + 1);
      auto k = std::find(axes_.begin(), axes_.end(), ax) - axes_.begin();
      if (k == static_cast<long>(axes_.size()) && size == extent) continue;
      array first = k < static_cast<long>(axes_.size())
                        ? window_starts(starts, static_cast<int>(k), ax, size, src, s)
                        : array(0, int64);
      array rel = subtract(positions(extent, ax, nd, s), first, s);
      array in_window = logical_and(greater_equal(rel, array(0, int64), s),
                                    less(rel, array(size, int64), s), s);
      placed = take_along_axis(
          placed, clip(rel, array(0, int64), array(std::max(size - 1, 0), int64), s), ax + 1, s);
      inside = inside ? logical_and(*inside, in_window, s) : in_window;
    }
    if (!inside) return {{broadcast_to(placed, src.shape(), s)}, {0}};
    return {{where(*inside, placed, src, s)}, {0}};
  }
  // An unbatched update has one axis fewer than src: slice_update spans src's
  // batch axis with it.
  array update = axes[1] >= 0 ? moveaxis(inputs[1], axes[1], 0, stream()) : inputs[1];
  return {{slice_update(src, update, inputs[2], shifted(axes_), stream())}, {0}};
}

// Concatenate

std::vector<array> Concatenate::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  std::vector<array> parts;
  for (size_t i = 0; i < primals.size(); ++i) {
    parts.push_back(tangent_of(i, primals, tangents, argnums, stream()));
  }
  return {concatenate(std::move(parts), axis_, stream())};
}

std::vector<array> Concatenate::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array& cot = cotangents[0];
  std::vector<int> offsets{0};
  for (auto& p : primals) offsets.push_back(offsets.back() + p.shape(axis_));
  std::vector<array> vjps;
  for (int i : argnums) {
    Shape start(cot.ndim(), 0), stop = cot.shape();
    start[axis_] = offsets[i];
    stop[axis_] = offsets[i + 1];
    vjps.push_back(astype(slice(cot, std::move(start), std::move(stop), stream()),
                          primals[i].dtype(), stream()));
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> Concatenate::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  std::vector<array> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts.push_back(batch_first(inputs[i], axes[i], n, stream()));
  }
  return {{concatenate(std::move(parts), axis_ + 1, stream())}, {0}};
}

// Pad: inputs (a, value) in constant mode, (a) in edge mode

std::vector<array> Pad::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>& argnums) {
  if (mode_ == Mode::edge) return {pad(tangents[0], axes_, low_, high_, array(0), "edge", stream())};
  return {pad(tangent_of(0, primals, tangents, argnums, stream()), axes_, low_, high_,
              tangent_of(1, primals, tangents, argnums, stream()), "constant", stream())};
}

std::vector<array> Pad::vjp(const std::vector<array>& primals,
                            const std::vector<array>& cotangents, const std::vector<int>& argnums,
                            const std::vector<array>&) {
  const array& x = primals[0];
  const array& cot = cotangents[0];
  Shape start(x.ndim(), 0), stop = cot.shape();
  for (size_t i = 0; i < axes_.size(); ++i) {
    start[axes_[i]] = low_[i];
    stop[axes_[i]] = low_[i] + x.shape(axes_[i]);
  }
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 1) {
      // The value fills the border: the sum of the cotangent outside the interior.
      vjps.push_back(sum(slice_update(cot, array(0, cot.dtype()), start, stop, stream()), stream()));
    } else if (mode_ == Mode::constant) {
      vjps.push_back(slice(cot, start, stop, stream()));
    } else {
      // Edge padding clamps each axis independently: along each padded axis,
      // the first element also receives the low border and the last the high
      // border.
      array g = cot;
      for (size_t k = 0; k < axes_.size(); ++k) {
        int ax = axes_[k], n = x.shape(ax), lo = low_[k], hi = high_[k];
        Shape b(g.ndim(), 0), e = g.shape();
        b[ax] = lo;
        e[ax] = lo + n;
        array core = slice(g, b, e, stream());
        if (lo > 0) {
          b[ax] = 0;
          e[ax] = lo;
          array border = sum(slice(g, b, e, stream()), ax, true, stream());
          core = add(core, pad(border, {ax}, {0}, {n - 1}, array(0), "constant", stream()),
                     stream());
        }
        if (hi > 0) {
          b[ax] = lo + n;
          e[ax] = g.shape(ax);
          array border = sum(slice(g, b, e, stream()), ax, true, stream());
          core = add(core, pad(border, {ax}, {n - 1}, {0}, array(0), "constant", stream()),
                     stream());
        }
        g = core;
      }
      vjps.push_back(g);
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> Pad::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  array x = batch_first(inputs[0], axes[0], n, stream());
  std::vector<int> pad_axes = shifted(axes_);
  if (mode_ == Mode::edge) {
    return {{pad(x, pad_axes, low_, high_, array(0), "edge", stream())}, {0}};
  }
  if (axes[1] < 0) {
    return {{pad(x, pad_axes, low_, high_, inputs[1], "constant", stream())}, {0}};
  }
  // One value per batch element: pad with zeros, then fill the border.
  array padded = pad(x, pad_axes, low_, high_, array(0), "constant", stream());
  Shape unbatched(x.shape().begin() + 1, x.shape().end());
  array border = pad(zeros(unbatched, bool_, stream()), axes_, low_, high_, array(true),
                     "constant", stream());
  Shape value_shape(padded.ndim(), 1);
  value_shape[0] = n;
  array value = reshape(inputs[1], value_shape, stream());
  return {{where(border, value, padded, stream())}, {0}};
}

// Diagonal

std::vector<array> Diagonal::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                 const std::vector<int>&) {
  return {diagonal(tangents[0], offset_, axis1_, axis2_, stream())};
}

std::vector<array> Diagonal::vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents, const std::vector<int>&,
                                 const std::vector<array>&) {
  // The cotangent goes on the diagonal of zeros laid out as (rest..., n1, n2)
  // with the last two axes flattened (a strided slice_update, as in diag),
  // then the axes are moved back.
  const array& x = primals[0];
  const array& cot = cotangents[0];
  int nd = static_cast<int>(x.ndim());
  int n1 = x.shape(axis1_), n2 = x.shape(axis2_), len = cot.shape().back();
  std::vector<int> perm;
  Shape rest;
  for (int d = 0; d < nd; ++d) {
    if (d != axis1_ && d != axis2_) {
      perm.push_back(d);
      rest.push_back(x.shape(d));
    }
  }
  perm.push_back(axis1_);
  perm.push_back(axis2_);
  int last = nd - 2;
  array flat = zeros(inserted(rest, last, n1 * n2), cot.dtype(), stream());
  if (len > 0) {
    int first = offset_ >= 0 ? offset_ : -offset_ * n2;
    Shape start(nd - 1, 0), stop = inserted(rest, last, first + (len - 1) * (n2 + 1) + 1);
    Shape strides(nd - 1, 1);
    start.back() = first;
    strides.back() = n2 + 1;
    flat = slice_update(flat, cot, std::move(start), std::move(stop), std::move(strides),
                        stream());
  }
  Shape planes = rest;
  planes.push_back(n1);
  planes.push_back(n2);
  std::vector<int> inverse(nd);
  for (int i = 0; i < nd; ++i) inverse[perm[i]] = i;
  return {transpose(reshape(flat, std::move(planes), stream()), std::move(inverse), stream())};
}

std::pair<std::vector<array>, std::vector<int>> Diagonal::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  // The batch axis stays among the leading (non-diagonal) axes.
  int b = axes[0];
  int a1 = axis1_ >= b ? axis1_ + 1 : axis1_;
  int a2 = axis2_ >= b ? axis2_ + 1 : axis2_;
  int out_axis = b - (a1 < b) - (a2 < b);
  return {{diagonal(inputs[0], offset_, a1, a2, stream())}, {out_axis}};
}

}  // namespace tessera
