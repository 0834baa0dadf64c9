#include "tessera/ops/shape.h"
#include "tessera/ops/array_api.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/primitives/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

// Clamps start/stop like NumPy for each axis's step direction and returns the
// shape of the slice.
Shape normalize_slice(const Shape& shape, Shape& start, Shape& stop, const Shape& strides,
                      const char* op) {
  size_t nd = shape.size();
  if (start.size() != nd || stop.size() != nd || strides.size() != nd) {
    throw_invalid(op, "start " + shape_str(start) + ", stop " + shape_str(stop) +
                          " and strides " + shape_str(strides) +
                          " must each have one entry per dimension of an array of shape " +
                          shape_str(shape));
  }
  Shape out_shape(nd);
  for (size_t i = 0; i < nd; ++i) {
    int64_t n = shape[i];
    int64_t st = strides[i];
    if (st == 0) throw_invalid(op, "stride 0 on axis " + std::to_string(i));
    int64_t b = start[i], e = stop[i];
    if (b < 0) b += n;
    if (e < 0) e += n;
    if (st > 0) {
      b = std::clamp<int64_t>(b, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      out_shape[i] = static_cast<int>(e > b ? (e - b + st - 1) / st : 0);
    } else {
      b = std::clamp<int64_t>(b, -1, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      out_shape[i] = static_cast<int>(b > e ? (b - e - st - 1) / (-st) : 0);
    }
    start[i] = static_cast<int>(b);
    stop[i] = static_cast<int>(e);
  }
  return out_shape;
}

// Normalizes axes in place (order kept) and rejects repeats.
void normalize_axes_in_order(std::vector<int>& axes, int ndim, const char* op) {
  std::vector<char> seen(ndim, 0);
  for (auto& ax : axes) {
    int n = normalize_axis(ax, ndim, op);
    if (seen[n]++) throw_invalid(op, "repeated axis in " + ints_str(axes));
    ax = n;
  }
}

// The start-index array of a dynamic slice: integers, one per axis.
void check_start_indices(const array& start, size_t num_axes, const char* op) {
  if (!is_integer(start.dtype())) {
    throw_invalid(op, "start indices must have an integer dtype, got " + dtype_name(start.dtype()));
  }
  if (start.ndim() > 1 || start.size() != num_axes) {
    throw_invalid(op, "start indices of shape " + shape_str(start.shape()) + " must be a vector with " +
                          std::to_string(num_axes) + " entries, one per axis");
  }
}

// shift mod n, in [0, n).
int positive_mod(int64_t shift, int n) {
  int64_t r = shift % n;
  return static_cast<int>(r < 0 ? r + n : r);
}

// Rolls along each axis by the summed shift for that axis.
array roll_axes(array a, const std::vector<int>& axes, const std::vector<int64_t>& shifts,
                StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  std::vector<int64_t> total(nd, 0);
  for (size_t i = 0; i < axes.size(); ++i) total[normalize_axis(axes[i], nd, "roll")] += shifts[i];
  for (int ax = 0; ax < nd; ++ax) {
    int n = a.shape(ax);
    if (n == 0) continue;
    int k = positive_mod(total[ax], n);
    if (k == 0) continue;
    Shape start(nd, 0), stop = a.shape();
    stop[ax] = n - k;
    array head = slice(a, start, stop, s);
    start[ax] = n - k;
    stop[ax] = n;
    array tail = slice(a, start, stop, s);
    a = concatenate({tail, head}, ax, s);
  }
  return a;
}

array atleast_nd(const array& a, int n, StreamOrDevice s) {
  switch (a.ndim()) {
    case 0: return reshape(a, Shape(n, 1), s);
    case 1:
      if (n == 1) return a;
      return reshape(a, n == 2 ? Shape{1, a.shape(0)} : Shape{1, a.shape(0), 1}, s);
    case 2:
      if (n < 3) return a;
      return expand_dims(a, 2, s);
    default: return a;
  }
}

std::vector<array> atleast_nd(const std::vector<array>& arrays, int n, StreamOrDevice s) {
  std::vector<array> out;
  for (auto& a : arrays) out.push_back(atleast_nd(a, n, s));
  return out;
}

}  // namespace

array transpose(const array& a, std::vector<int> axes, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (static_cast<int>(axes.size()) != nd) {
    throw_invalid("transpose", "axes " + ints_str(axes) + " do not match an array with " +
                                   std::to_string(nd) + " dimensions");
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    axes[i] = normalize_axis(axes[i], nd, "transpose");
    if (std::find(axes.begin(), axes.begin() + i, axes[i]) != axes.begin() + i) {
      throw_invalid("transpose", "repeated axis in " + ints_str(axes));
    }
  }
  Shape shape(nd);
  for (int i = 0; i < nd; ++i) shape[i] = a.shape(axes[i]);
  return array(std::move(shape), a.dtype(),
               std::make_shared<Transpose>(to_stream(s), std::move(axes)), {a});
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
  Shape out_shape = normalize_slice(a.shape(), start, stop, strides, "slice");
  if (out_shape == a.shape() && std::all_of(strides.begin(), strides.end(),
                                            [](int v) { return v == 1; })) {
    return a;
  }
  return array(std::move(out_shape), a.dtype(),
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
  auto primitive = std::make_shared<Reshape>(to_stream(s), shape);
  return array(std::move(shape), a.dtype(), std::move(primitive), {a});
}

array flatten(const array& a, int start_axis, int end_axis, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd == 0) return reshape(a, {1}, s);
  int start = std::max(0, start_axis < 0 ? start_axis + nd : start_axis);
  int end = std::min(nd - 1, end_axis < 0 ? end_axis + nd : end_axis);
  if (start >= nd || end < 0 || start > end) {
    throw_invalid("flatten", "cannot flatten axes " + std::to_string(start_axis) + " to " +
                                 std::to_string(end_axis) + " of an array with " +
                                 std::to_string(nd) + " dimensions");
  }
  Shape shape(a.shape().begin(), a.shape().begin() + start);
  int64_t merged = 1;
  for (int i = start; i <= end; ++i) merged *= a.shape(i);
  shape.push_back(static_cast<ShapeElem>(merged));
  shape.insert(shape.end(), a.shape().begin() + end + 1, a.shape().end());
  return reshape(a, std::move(shape), s);
}

array flatten(const array& a, StreamOrDevice s) { return flatten(a, 0, -1, s); }

array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  axis = normalize_axis(axis, nd, "unflatten");
  if (shape.empty()) throw_invalid("unflatten", "the new shape must not be empty");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      throw_invalid("unflatten", "invalid shape " + shape_str(shape) +
                                     " (at most one -1, no other negative sizes)");
    } else {
      known *= shape[i];
    }
  }
  int n = a.shape(axis);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      throw_invalid("unflatten", "cannot unflatten axis " + std::to_string(axis) + " of size " +
                                     std::to_string(n) + " into shape " + shape_str(shape));
    }
    shape[infer] = static_cast<ShapeElem>(n / known);
  } else if (known != n) {
    throw_invalid("unflatten", "cannot unflatten axis " + std::to_string(axis) + " of size " +
                                   std::to_string(n) + " into shape " + shape_str(shape));
  }
  Shape out(a.shape().begin(), a.shape().begin() + axis);
  out.insert(out.end(), shape.begin(), shape.end());
  out.insert(out.end(), a.shape().begin() + axis + 1, a.shape().end());
  return reshape(a, std::move(out), s);
}

array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), "squeeze");
  for (int d : ax) {
    if (a.shape(d) != 1) {
      throw_invalid("squeeze", "cannot squeeze axis " + std::to_string(d) + " of size " +
                                   std::to_string(a.shape(d)) + " in an array of shape " +
                                   shape_str(a.shape()));
    }
  }
  Shape shape;
  for (int d = 0, j = 0; d < static_cast<int>(a.ndim()); ++d) {
    if (j < static_cast<int>(ax.size()) && ax[j] == d) {
      ++j;
    } else {
      shape.push_back(a.shape(d));
    }
  }
  return reshape(a, std::move(shape), s);
}

array squeeze(const array& a, int axis, StreamOrDevice s) {
  return squeeze(a, std::vector<int>{axis}, s);
}

array squeeze(const array& a, StreamOrDevice s) {
  Shape shape;
  for (auto d : a.shape()) {
    if (d != 1) shape.push_back(d);
  }
  return reshape(a, std::move(shape), s);
}

array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  int out_nd = static_cast<int>(a.ndim() + axes.size());
  auto ax = normalize_axes(axes, out_nd, "expand_dims");
  Shape shape;
  for (int d = 0, j = 0, k = 0; d < out_nd; ++d) {
    if (j < static_cast<int>(ax.size()) && ax[j] == d) {
      shape.push_back(1);
      ++j;
    } else {
      shape.push_back(a.shape(k++));
    }
  }
  return reshape(a, std::move(shape), s);
}

array expand_dims(const array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  axis1 = normalize_axis(axis1, nd, "swapaxes");
  axis2 = normalize_axis(axis2, nd, "swapaxes");
  auto axes = all_axes(nd);
  std::swap(axes[axis1], axes[axis2]);
  return transpose(a, std::move(axes), s);
}

array moveaxis(const array& a, int source, int destination, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  source = normalize_axis(source, nd, "moveaxis");
  destination = normalize_axis(destination, nd, "moveaxis");
  auto axes = all_axes(nd);
  axes.erase(axes.begin() + source);
  axes.insert(axes.begin() + destination, source);
  return transpose(a, std::move(axes), s);
}

array slice(const array& a, const array& start, std::vector<int> axes, Shape slice_size,
            StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  normalize_axes_in_order(axes, nd, "slice");
  check_start_indices(start, axes.size(), "slice");
  if (static_cast<int>(slice_size.size()) != nd) {
    throw_invalid("slice", "slice_size " + shape_str(slice_size) +
                               " must have one entry per dimension of an array of shape " +
                               shape_str(a.shape()));
  }
  for (int i = 0; i < nd; ++i) {
    if (slice_size[i] < 0 || slice_size[i] > a.shape(i)) {
      throw_invalid("slice", "slice_size " + shape_str(slice_size) +
                                 " does not fit in an array of shape " + shape_str(a.shape()));
    }
  }
  return array(slice_size, a.dtype(),
               std::make_shared<DynamicSlice>(to_stream(s), std::move(axes), slice_size),
               {a, start});
}

array slice_update(const array& src, const array& update, Shape start, Shape stop, Shape strides,
                   StreamOrDevice s) {
  Shape region = normalize_slice(src.shape(), start, stop, strides, "slice_update");
  if (update.ndim() > src.ndim() || broadcast_shapes(update.shape(), region, "slice_update") != region) {
    throw_invalid("slice_update", "an update of shape " + shape_str(update.shape()) +
                                      " cannot be broadcast to the slice shape " +
                                      shape_str(region));
  }
  if (shape_size(region) == 0) return src;
  // The kernel casts the update to src's dtype while it copies.
  return array(src.shape(), src.dtype(),
               std::make_shared<SliceUpdate>(to_stream(s), std::move(start), std::move(stop),
                                             std::move(strides)),
               {src, broadcast_to(update, region, s)});
}

array slice_update(const array& src, const array& update, Shape start, Shape stop,
                   StreamOrDevice s) {
  Shape strides(src.ndim(), 1);
  return slice_update(src, update, std::move(start), std::move(stop), std::move(strides), s);
}

array slice_update(const array& src, const array& update, const array& start,
                   std::vector<int> axes, StreamOrDevice s) {
  int nd = static_cast<int>(src.ndim());
  normalize_axes_in_order(axes, nd, "slice_update");
  check_start_indices(start, axes.size(), "slice_update");
  if (update.ndim() > src.ndim()) {
    throw_invalid("slice_update", "an update of shape " + shape_str(update.shape()) +
                                      " has more dimensions than src of shape " +
                                      shape_str(src.shape()));
  }
  // The region has update's shape; leading axes update lacks span src, except
  // the sliced axes, where the region has size 1.
  int diff = nd - static_cast<int>(update.ndim());
  Shape region(nd);
  for (int d = 0; d < nd; ++d) {
    if (d < diff) {
      bool sliced = std::find(axes.begin(), axes.end(), d) != axes.end();
      region[d] = sliced ? 1 : src.shape(d);
    } else {
      region[d] = update.shape(d - diff);
    }
    if (region[d] > src.shape(d)) {
      throw_invalid("slice_update", "an update of shape " + shape_str(update.shape()) +
                                        " does not fit in src of shape " + shape_str(src.shape()));
    }
  }
  if (shape_size(region) == 0) return src;
  return array(src.shape(), src.dtype(),
               std::make_shared<DynamicSliceUpdate>(to_stream(s), std::move(axes)),
               {src, broadcast_to(update, region, s), start});
}

// The accumulating slice updates: the region is read, combined with the
// update (cast to src's dtype) and written back; a strided region has distinct
// elements, so this is exact, and it runs and differentiates everywhere.
#define TESSERA_SLICE_UPDATE_REDUCE(NAME, COMBINE)                                        \
  array NAME(const array& src, const array& update, Shape start, Shape stop, Shape strides, \
             StreamOrDevice s) {                                                            \
    Shape region = normalize_slice(src.shape(), start, stop, strides, #NAME);               \
    if (update.ndim() > src.ndim() ||                                                       \
        broadcast_shapes(update.shape(), region, #NAME) != region) {                        \
      throw_invalid(#NAME, "an update of shape " + shape_str(update.shape()) +              \
                               " cannot be broadcast to the slice shape " +                 \
                               shape_str(region));                                          \
    }                                                                                       \
    if (shape_size(region) == 0) return src;                                                \
    array current = slice(src, start, stop, strides, s);                                    \
    array combined = COMBINE(current, astype(update, src.dtype(), s), s);                   \
    return slice_update(src, combined, std::move(start), std::move(stop), std::move(strides), \
                        s);                                                                 \
  }                                                                                         \
  array NAME(const array& src, const array& update, Shape start, Shape stop,                \
             StreamOrDevice s) {                                                            \
    Shape strides(src.ndim(), 1);                                                           \
    return NAME(src, update, std::move(start), std::move(stop), std::move(strides), s);     \
  }
TESSERA_SLICE_UPDATE_REDUCE(slice_update_add, add)
TESSERA_SLICE_UPDATE_REDUCE(slice_update_prod, multiply)
TESSERA_SLICE_UPDATE_REDUCE(slice_update_max, maximum)
TESSERA_SLICE_UPDATE_REDUCE(slice_update_min, minimum)
#undef TESSERA_SLICE_UPDATE_REDUCE

array matrix_transpose(const array& a, StreamOrDevice s) {
  if (a.ndim() < 2) {
    throw_invalid("matrix_transpose", "the input must have at least 2 dimensions, got shape " +
                                          shape_str(a.shape()));
  }
  return swapaxes(a, -1, -2, s);
}

array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) throw_invalid("concatenate", "no arrays to concatenate");
  const array& first = arrays[0];
  int nd = static_cast<int>(first.ndim());
  if (nd == 0) throw_out_of_range("concatenate", "zero-dimensional arrays cannot be concatenated");
  axis = normalize_axis(axis, nd, "concatenate");
  Shape shape = first.shape();
  Dtype dtype = first.dtype();
  for (size_t i = 1; i < arrays.size(); ++i) {
    const array& a = arrays[i];
    bool ok = static_cast<int>(a.ndim()) == nd;
    for (int d = 0; ok && d < nd; ++d) ok = d == axis || a.shape(d) == first.shape(d);
    if (!ok) {
      throw_invalid("concatenate", "all shapes must match except on axis " + std::to_string(axis) +
                                       ", got " + shape_str(first.shape()) + " and " +
                                       shape_str(a.shape()));
    }
    int64_t n = int64_t(shape[axis]) + a.shape(axis);
    if (n > INT32_MAX) throw_invalid("concatenate", "the result is too large");
    shape[axis] = static_cast<ShapeElem>(n);
    dtype = promote_types(dtype, a.dtype());
  }
  if (arrays.size() == 1) return astype(first, dtype, s);
  // The kernel casts each input to the result dtype while it copies.
  return array(std::move(shape), dtype, std::make_shared<Concatenate>(to_stream(s), axis),
               std::move(arrays));
}

array concatenate(std::vector<array> arrays, StreamOrDevice s) {
  for (auto& a : arrays) a = flatten(a, s);
  return concatenate(std::move(arrays), 0, s);
}

array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) throw_invalid("stack", "no arrays to stack");
  for (auto& a : arrays) {
    if (a.shape() != arrays[0].shape()) {
      throw_invalid("stack", "all arrays must have the same shape, got " +
                                 shape_str(arrays[0].shape()) + " and " + shape_str(a.shape()));
    }
  }
  axis = normalize_axis(axis, static_cast<int>(arrays[0].ndim()) + 1, "stack");
  std::vector<array> expanded;
  for (auto& a : arrays) expanded.push_back(expand_dims(a, axis, s));
  return concatenate(std::move(expanded), axis, s);
}

array stack(const std::vector<array>& arrays, StreamOrDevice s) { return stack(arrays, 0, s); }

std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s) {
  axis = normalize_axis(axis, static_cast<int>(a.ndim()), "split");
  int n = a.shape(axis);
  if (num_splits <= 0 || n % num_splits != 0) {
    throw_invalid("split", "an axis of size " + std::to_string(n) + " cannot be split into " +
                               std::to_string(num_splits) + " equal parts");
  }
  Shape indices;
  for (int i = 1; i < num_splits; ++i) indices.push_back(i * (n / num_splits));
  return split(a, indices, axis, s);
}

std::vector<array> split(const array& a, int num_splits, StreamOrDevice s) {
  return split(a, num_splits, 0, s);
}

std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  axis = normalize_axis(axis, nd, "split");
  std::vector<array> parts;
  Shape start(nd, 0), stop = a.shape();
  for (size_t i = 0; i <= indices.size(); ++i) {
    start[axis] = i == 0 ? 0 : indices[i - 1];
    stop[axis] = i == indices.size() ? a.shape(axis) : indices[i];
    parts.push_back(slice(a, start, stop, s));
  }
  return parts;
}

std::vector<array> split(const array& a, const Shape& indices, StreamOrDevice s) {
  return split(a, indices, 0, s);
}

std::vector<array> unstack(const array& a, int axis, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  axis = normalize_axis(axis, nd, "unstack");
  std::vector<array> parts;
  Shape start(nd, 0), stop = a.shape();
  for (int i = 0; i < a.shape(axis); ++i) {
    start[axis] = i;
    stop[axis] = i + 1;
    parts.push_back(squeeze(slice(a, start, stop, s), axis, s));
  }
  return parts;
}

std::vector<array> unstack(const array& a, StreamOrDevice s) { return unstack(a, 0, s); }

array repeat(const array& arr, int repeats, int axis, StreamOrDevice s) {
  int nd = static_cast<int>(arr.ndim());
  axis = normalize_axis(axis, nd, "repeat");
  if (repeats < 0) throw_invalid("repeat", "repeats must be non-negative, got " + std::to_string(repeats));
  if (repeats == 1) return arr;
  // (..., n, 1, ...) broadcast to (..., n, repeats, ...), then merged: one copy.
  Shape shape = arr.shape();
  shape.insert(shape.begin() + axis + 1, repeats);
  array b = broadcast_to(expand_dims(arr, axis + 1, s), shape, s);
  return flatten(b, axis, axis + 1, s);
}

array repeat(const array& arr, int repeats, StreamOrDevice s) {
  return repeat(flatten(arr, s), repeats, 0, s);
}

array tile(const array& arr, std::vector<int> reps, StreamOrDevice s) {
  for (int r : reps) {
    if (r < 0) throw_invalid("tile", "reps must be non-negative, got " + ints_str(reps));
  }
  size_t nd = std::max(arr.ndim(), reps.size());
  Shape shape = arr.shape();
  shape.insert(shape.begin(), nd - shape.size(), 1);
  reps.insert(reps.begin(), nd - reps.size(), 1);
  // (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...), then merged pairwise.
  Shape expanded, broadcast, out;
  for (size_t i = 0; i < nd; ++i) {
    expanded.insert(expanded.end(), {1, shape[i]});
    broadcast.insert(broadcast.end(), {reps[i], shape[i]});
    int64_t n = int64_t(reps[i]) * shape[i];
    if (n > INT32_MAX) throw_invalid("tile", "the result is too large");
    out.push_back(static_cast<ShapeElem>(n));
  }
  if (std::all_of(reps.begin(), reps.end(), [](int r) { return r == 1; })) {
    return reshape(arr, std::move(shape), s);
  }
  return reshape(broadcast_to(reshape(arr, expanded, s), broadcast, s), out, s);
}

namespace {

// Modes 'reflect' (mirrored about the edge element, which is not repeated) and
// 'symmetric' (mirrored about the edge, which is repeated), with NumPy's
// repeated mirroring for widths beyond the axis: a `take` along each padded
// axis of host-computed positions, so every device runs it and it has
// derivatives.
array pad_mirrored(const array& a, const std::vector<int>& axes, const Shape& low,
                   const Shape& high, bool symmetric, StreamOrDevice s) {
  const char* mode = symmetric ? "symmetric" : "reflect";
  array out = a;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t lo = low[i], hi = high[i], n = a.shape(axes[i]);
    if (lo < 0 || hi < 0) {
      throw_invalid("pad", "pad widths must be non-negative, got low " + shape_str(low) +
                               " and high " + shape_str(high));
    }
    if (lo + hi == 0) continue;
    if (n == 0) {
      throw_invalid("pad", "cannot pad the empty axis " + std::to_string(axes[i]) + " in " +
                               mode + " mode");
    }
    if (n + lo + hi > INT32_MAX) throw_invalid("pad", "the result is too large");
    const int64_t period = symmetric ? 2 * n : 2 * (n - 1);
    std::vector<int32_t> idx;
    idx.reserve(n + lo + hi);
    for (int64_t p = -lo; p < n + hi; ++p) {
      int64_t q = 0;
      if (period > 0) {
        q = ((p % period) + period) % period;
        if (q >= n) q = symmetric ? period - 1 - q : period - q;
      }
      idx.push_back(static_cast<int32_t>(q));
    }
    const int len = static_cast<int>(idx.size());
    out = take(out, array(idx.begin(), Shape{len}, int32), axes[i], s);
  }
  return out;
}

}  // namespace

array pad(const array& a, const std::vector<int>& axes, const Shape& low_pad_size,
          const Shape& high_pad_size, const array& pad_value, const std::string& mode,
          StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (axes.size() != low_pad_size.size() || axes.size() != high_pad_size.size()) {
    throw_invalid("pad", "axes " + ints_str(axes) + ", low " + shape_str(low_pad_size) +
                             " and high " + shape_str(high_pad_size) +
                             " must have the same length");
  }
  std::vector<int> ax = axes;
  normalize_axes_in_order(ax, nd, "pad");
  Pad::Mode m;
  if (mode == "constant") {
    m = Pad::Mode::constant;
  } else if (mode == "edge") {
    m = Pad::Mode::edge;
  } else if (mode == "reflect" || mode == "symmetric") {
    return pad_mirrored(a, ax, low_pad_size, high_pad_size, mode == "symmetric", s);
  } else {
    throw_invalid("pad", "unsupported mode '" + mode +
                             "' (use 'constant', 'edge', 'reflect' or 'symmetric')");
  }
  if (pad_value.size() != 1) {
    throw_invalid("pad", "pad_value must be a scalar, got shape " + shape_str(pad_value.shape()));
  }
  Shape shape = a.shape();
  bool any = false;
  for (size_t i = 0; i < ax.size(); ++i) {
    int lo = low_pad_size[i], hi = high_pad_size[i];
    if (lo < 0 || hi < 0) {
      throw_invalid("pad", "pad widths must be non-negative, got low " + shape_str(low_pad_size) +
                               " and high " + shape_str(high_pad_size));
    }
    if (m == Pad::Mode::edge && a.shape(ax[i]) == 0 && lo + hi > 0) {
      throw_invalid("pad", "cannot pad the empty axis " + std::to_string(ax[i]) + " in edge mode");
    }
    int64_t n = int64_t(shape[ax[i]]) + lo + hi;
    if (n > INT32_MAX) throw_invalid("pad", "the result is too large");
    shape[ax[i]] = static_cast<ShapeElem>(n);
    any |= lo + hi > 0;
  }
  if (!any) return a;
  std::vector<array> inputs{a};
  if (m == Pad::Mode::constant) inputs.push_back(reshape(astype(pad_value, a.dtype(), s), {}, s));
  return array(std::move(shape), a.dtype(),
               std::make_shared<Pad>(to_stream(s), std::move(ax), low_pad_size, high_pad_size, m),
               std::move(inputs));
}

array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value, const std::string& mode, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (pad_width.size() != 1 && static_cast<int>(pad_width.size()) != nd) {
    throw_invalid("pad", "pad_width has " + std::to_string(pad_width.size()) +
                             " entries; an array of shape " + shape_str(a.shape()) +
                             " needs 1 or " + std::to_string(nd));
  }
  Shape low, high;
  for (int i = 0; i < nd; ++i) {
    auto& p = pad_width.size() == 1 ? pad_width[0] : pad_width[i];
    low.push_back(p.first);
    high.push_back(p.second);
  }
  return pad(a, all_axes(nd), low, high, pad_value, mode, s);
}

array pad(const array& a, const std::pair<int, int>& pad_width, const array& pad_value,
          const std::string& mode, StreamOrDevice s) {
  return pad(a, std::vector<std::pair<int, int>>{pad_width}, pad_value, mode, s);
}

array pad(const array& a, int pad_width, const array& pad_value, const std::string& mode,
          StreamOrDevice s) {
  return pad(a, std::vector<std::pair<int, int>>{{pad_width, pad_width}}, pad_value, mode, s);
}

array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  auto ax = normalize_axes(axes, nd, "flip");
  Shape start(nd, 0), stop = a.shape(), strides(nd, 1);
  for (int d : ax) {
    start[d] = a.shape(d) - 1;
    stop[d] = -a.shape(d) - 1;
    strides[d] = -1;
  }
  return slice(a, std::move(start), std::move(stop), std::move(strides), s);
}

array flip(const array& a, int axis, StreamOrDevice s) {
  return flip(a, std::vector<int>{axis}, s);
}

array flip(const array& a, StreamOrDevice s) {
  return flip(a, all_axes(static_cast<int>(a.ndim())), s);
}

array roll(const array& a, int shift, StreamOrDevice s) {
  return roll(a, Shape{shift}, s);
}

array roll(const array& a, const Shape& shift, StreamOrDevice s) {
  // On the flattened array; several shifts add up.
  std::vector<int64_t> shifts(shift.begin(), shift.end());
  std::vector<int> axes(shift.size(), 0);
  return reshape(roll_axes(flatten(a, s), axes, shifts, s), a.shape(), s);
}

array roll(const array& a, int shift, int axis, StreamOrDevice s) {
  return roll_axes(a, {axis}, {shift}, s);
}

array roll(const array& a, int shift, const std::vector<int>& axes, StreamOrDevice s) {
  return roll_axes(a, axes, std::vector<int64_t>(axes.size(), shift), s);
}

array roll(const array& a, const Shape& shift, int axis, StreamOrDevice s) {
  return roll_axes(a, std::vector<int>(shift.size(), axis),
                   std::vector<int64_t>(shift.begin(), shift.end()), s);
}

array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s) {
  // One shift for every axis, one axis for every shift, or a pair per entry.
  size_t n = std::max(shift.size(), axes.size());
  if (shift.size() != axes.size() && shift.size() != 1 && axes.size() != 1) {
    throw_invalid("roll", "shift " + shape_str(shift) + " and axes " + ints_str(axes) +
                              " must have the same length");
  }
  if (shift.empty() || axes.empty()) n = 0;
  std::vector<int> ax(n);
  std::vector<int64_t> sh(n);
  for (size_t i = 0; i < n; ++i) {
    ax[i] = axes.size() == 1 ? axes[0] : axes[i];
    sh[i] = shift.size() == 1 ? shift[0] : shift[i];
  }
  return roll_axes(a, ax, sh, s);
}

array atleast_1d(const array& a, StreamOrDevice s) { return atleast_nd(a, 1, s); }
array atleast_2d(const array& a, StreamOrDevice s) { return atleast_nd(a, 2, s); }
array atleast_3d(const array& a, StreamOrDevice s) { return atleast_nd(a, 3, s); }

std::vector<array> atleast_1d(const std::vector<array>& a, StreamOrDevice s) {
  return atleast_nd(a, 1, s);
}
std::vector<array> atleast_2d(const std::vector<array>& a, StreamOrDevice s) {
  return atleast_nd(a, 2, s);
}
std::vector<array> atleast_3d(const std::vector<array>& a, StreamOrDevice s) {
  return atleast_nd(a, 3, s);
}

array diagonal(const array& a, int offset, int axis1, int axis2, StreamOrDevice s) {
  int nd = static_cast<int>(a.ndim());
  if (nd < 2) {
    throw_invalid("diagonal", "the array must have at least 2 dimensions, got shape " +
                                  shape_str(a.shape()));
  }
  axis1 = normalize_axis(axis1, nd, "diagonal");
  axis2 = normalize_axis(axis2, nd, "diagonal");
  if (axis1 == axis2) {
    throw_invalid("diagonal", "axis1 and axis2 must differ, both are " + std::to_string(axis1));
  }
  int64_t n1 = a.shape(axis1), n2 = a.shape(axis2);
  int64_t len = offset >= 0 ? std::min(n1, n2 - offset) : std::min(n1 + offset, n2);
  Shape shape;
  for (int d = 0; d < nd; ++d) {
    if (d != axis1 && d != axis2) shape.push_back(a.shape(d));
  }
  shape.push_back(static_cast<ShapeElem>(std::max<int64_t>(0, len)));
  return array(std::move(shape), a.dtype(),
               std::make_shared<Diagonal>(to_stream(s), offset, axis1, axis2), {a});
}

array diag(const array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 2) return diagonal(a, k, 0, 1, s);
  if (a.ndim() != 1) {
    throw_invalid("diag", "expects a 1-D or 2-D array, got shape " + shape_str(a.shape()));
  }
  // a goes on the diagonal of the flattened m x m result: a strided slice.
  int64_t n = a.shape(0);
  int64_t m = n + std::abs(int64_t(k));
  if (m * m > INT32_MAX) throw_invalid("diag", "the result is too large");
  int64_t first = k >= 0 ? k : -int64_t(k) * m;
  array zeros = broadcast_to(array(0, a.dtype()), {static_cast<ShapeElem>(m * m)}, s);
  Shape start{static_cast<ShapeElem>(first)};
  Shape stop{static_cast<ShapeElem>(n == 0 ? first : first + (n - 1) * (m + 1) + 1)};
  Shape step{static_cast<ShapeElem>(m + 1)};
  array flat = slice_update(zeros, a, start, stop, step, s);
  return reshape(flat, {static_cast<ShapeElem>(m), static_cast<ShapeElem>(m)}, s);
}

array array::ArrayIterator::operator*() const {
  Shape start(arr_.ndim(), 0), stop = arr_.shape();
  start[0] = idx_;
  stop[0] = idx_ + 1;
  return squeeze(slice(arr_, std::move(start), std::move(stop)), 0);
}

}  // namespace tessera
