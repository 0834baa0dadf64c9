#include "tessera/ops/indexing.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/indexing.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

// An index array as the kernels read it (Note [Index arrays]): int32 or int64.
array index_array(const array& idx, const char* op, StreamOrDevice s) {
  if (!is_integer(idx.dtype())) {
    throw_invalid(op, "indices must have an integer dtype, got " + dtype_name(idx.dtype()));
  }
  if (idx.dtype() == int32 || idx.dtype() == int64) return idx;
  return astype(idx, idx.dtype().size < 4 ? int32 : int64, s);
}

void check_rank_match(const array& a, const array& indices, const char* op) {
  if (a.ndim() != indices.ndim()) {
    throw_invalid(op, "indices of shape " + shape_str(indices.shape()) +
                          " must have as many dimensions as the array of shape " +
                          shape_str(a.shape()));
  }
}

// Index arrays cast and broadcast to one shape, one per axis of `axes`
// (normalized in place, no repeats).
std::vector<array> prepare_indices(const array& a, const std::vector<array>& indices,
                                   std::vector<int>& axes, const char* op, StreamOrDevice s) {
  if (indices.size() != axes.size()) {
    throw_invalid(op, std::to_string(indices.size()) + " index arrays were given for " +
                          std::to_string(axes.size()) + " axes " + ints_str(axes));
  }
  int nd = static_cast<int>(a.ndim());
  std::vector<char> seen(nd, 0);
  for (auto& ax : axes) {
    ax = normalize_axis(ax, nd, op);
    if (seen[ax]++) throw_invalid(op, "repeated axis in " + ints_str(axes));
  }
  // One index dtype for all: int64 if any needs it.
  std::vector<array> idx;
  bool wide = false;
  for (auto& i : indices) {
    idx.push_back(index_array(i, op, s));
    wide = wide || idx.back().dtype() == int64;
  }
  if (wide) {
    for (auto& i : idx) i = astype(i, int64, s);
  }
  return idx.empty() ? idx : broadcast_arrays(idx, s);
}

Shape index_shape(const std::vector<array>& idx) { return idx.empty() ? Shape{} : idx[0].shape(); }

array scatter_op(const array& a, const std::vector<array>& indices, const array& updates,
                 std::vector<int> axes, Scatter::ReduceType type, const char* op,
                 StreamOrDevice s) {
  if ((type == Scatter::Max || type == Scatter::Min) && is_complex(a.dtype())) {
    throw_invalid(op, "complex64 arrays have no order");
  }
  auto idx = prepare_indices(a, indices, axes, op, s);
  Shape ishape = index_shape(idx);
  size_t want = ishape.size() + a.ndim();
  if (updates.ndim() != want) {
    throw_invalid(op, "updates of shape " + shape_str(updates.shape()) + " must have " +
                          std::to_string(want) + " dimensions: the index shape " +
                          shape_str(ishape) + " followed by one per dimension of a " +
                          shape_str(a.shape()));
  }
  Shape ushape = ishape;
  for (size_t d = 0; d < a.ndim(); ++d) {
    int w = updates.shape(ishape.size() + d);
    if (w > a.shape(d)) {
      throw_invalid(op, "updates of shape " + shape_str(updates.shape()) +
                            " have slices larger than a of shape " + shape_str(a.shape()));
    }
    ushape.push_back(w);
  }
  // The update's own leading axes broadcast with the index shape.
  Shape lead(updates.shape().begin(), updates.shape().begin() + ishape.size());
  if (broadcast_shapes(lead, ishape, op) != ishape) {
    throw_invalid(op, "updates of shape " + shape_str(updates.shape()) +
                          " do not match the index shape " + shape_str(ishape));
  }
  if (a.size() == 0 || shape_size(ushape) == 0) return a;
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), idx.begin(), idx.end());
  inputs.push_back(broadcast_to(astype(updates, a.dtype(), s), ushape, s));
  return array(a.shape(), a.dtype(), std::make_shared<Scatter>(to_stream(s), type, std::move(axes)),
               std::move(inputs));
}

// The shape indices and a broadcast to in the along-axis ops: their common
// extents off `axis`, with `at_axis` on it.
Shape along_axis_shape(const array& a, const array& indices, int axis, int at_axis,
                       const char* op) {
  Shape as = a.shape(), is = indices.shape();
  as[axis] = 1;
  is[axis] = 1;
  Shape b = broadcast_shapes(as, is, op);
  b[axis] = at_axis;
  return b;
}

array scatter_axis_op(const array& a, const array& indices, const array& values, int axis,
                      ScatterAxis::ReduceType type, const char* op, StreamOrDevice s) {
  check_rank_match(a, indices, op);
  axis = normalize_axis(axis, static_cast<int>(a.ndim()), op);
  array idx = index_array(indices, op, s);
  Shape shape = along_axis_shape(a, idx, axis, idx.shape(axis), op);
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (static_cast<int>(d) != axis && shape[d] != a.shape(d)) {
      throw_invalid(op, "indices of shape " + shape_str(indices.shape()) +
                            " do not fit an array of shape " + shape_str(a.shape()) +
                            " off axis " + std::to_string(axis));
    }
  }
  if (values.ndim() > shape.size() || broadcast_shapes(values.shape(), shape, op) != shape) {
    throw_invalid(op, "values of shape " + shape_str(values.shape()) +
                          " cannot be broadcast to the index shape " + shape_str(shape));
  }
  if (a.size() == 0 || shape_size(shape) == 0) return a;
  return array(a.shape(), a.dtype(), std::make_shared<ScatterAxis>(to_stream(s), type, axis),
               {a, broadcast_to(idx, shape, s), broadcast_to(astype(values, a.dtype(), s), shape, s)});
}

}  // namespace

array gather(const array& a, const std::vector<array>& indices, const std::vector<int>& axes,
             const Shape& slice_sizes, StreamOrDevice s) {
  std::vector<int> ax = axes;
  auto idx = prepare_indices(a, indices, ax, "gather", s);
  if (slice_sizes.size() != a.ndim()) {
    throw_invalid("gather", "slice_sizes " + shape_str(slice_sizes) +
                                " must have one entry per dimension of an array of shape " +
                                shape_str(a.shape()));
  }
  for (size_t d = 0; d < a.ndim(); ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > a.shape(d)) {
      throw_invalid("gather", "slice_sizes " + shape_str(slice_sizes) +
                                  " do not fit in an array of shape " + shape_str(a.shape()));
    }
  }
  Shape out_shape = index_shape(idx);
  out_shape.insert(out_shape.end(), slice_sizes.begin(), slice_sizes.end());
  std::vector<array> inputs{a};
  inputs.insert(inputs.end(), idx.begin(), idx.end());
  return array(std::move(out_shape), a.dtype(),
               std::make_shared<Gather>(to_stream(s), std::move(ax), slice_sizes),
               std::move(inputs));
}

array gather(const array& a, const array& indices, int axis, const Shape& slice_sizes,
             StreamOrDevice s) {
  return gather(a, std::vector<array>{indices}, std::vector<int>{axis}, slice_sizes, s);
}

array take(const array& a, const array& indices_in, int axis, StreamOrDevice s) {
  array indices = index_array(indices_in, "take", s);
  int nd = static_cast<int>(a.ndim());
  if (nd == 0) throw_out_of_range("take", "a zero-dimensional array has no axis to take along");
  axis = normalize_axis(axis, nd, "take");
  if (a.shape(axis) == 0) {
    if (indices.size() > 0) {
      throw std::out_of_range("[take] cannot take " + std::to_string(indices.size()) +
                              " elements from an empty axis " + std::to_string(axis) +
                              " of an array of shape " + shape_str(a.shape()));
    }
    Shape shape(a.shape().begin(), a.shape().begin() + axis);
    shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
    shape.insert(shape.end(), a.shape().begin() + axis + 1, a.shape().end());
    return zeros(shape, a.dtype(), s);
  }
  Shape sizes = a.shape();
  sizes[axis] = 1;
  array g = gather(a, indices, axis, sizes, s);
  // g is (index dims, a's dims with 1 on axis): drop that 1 and move the
  // index dims to where axis was.
  int k = static_cast<int>(indices.ndim());
  g = squeeze(g, k + axis, s);
  if (axis == 0 || k == 0) return g;
  std::vector<int> perm;
  for (int d = 0; d < axis; ++d) perm.push_back(k + d);
  for (int d = 0; d < k; ++d) perm.push_back(d);
  for (int d = axis + 1; d < nd; ++d) perm.push_back(k + d - 1);
  return transpose(g, std::move(perm), s);
}

array take(const array& a, int index, int axis, StreamOrDevice s) {
  return take(a, array(index), axis, s);
}

array take(const array& a, const array& indices, StreamOrDevice s) {
  return take(reshape(a, {static_cast<int>(a.size())}, s), indices, 0, s);
}

array take(const array& a, int index, StreamOrDevice s) { return take(a, array(index), s); }

array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s) {
  check_rank_match(a, indices, "take_along_axis");
  axis = normalize_axis(axis, static_cast<int>(a.ndim()), "take_along_axis");
  array idx = index_array(indices, "take_along_axis", s);
  Shape out_shape = along_axis_shape(a, idx, axis, idx.shape(axis), "take_along_axis");
  Shape a_shape = out_shape;
  a_shape[axis] = a.shape(axis);
  return array(out_shape, a.dtype(), std::make_shared<GatherAxis>(to_stream(s), axis),
               {broadcast_to(a, a_shape, s), broadcast_to(idx, out_shape, s)});
}

array put_along_axis(const array& a, const array& indices, const array& values, int axis,
                     StreamOrDevice s) {
  return scatter_axis_op(a, indices, values, axis, ScatterAxis::None, "put_along_axis", s);
}

array scatter_add_axis(const array& a, const array& indices, const array& values, int axis,
                       StreamOrDevice s) {
  return scatter_axis_op(a, indices, values, axis, ScatterAxis::Sum, "scatter_add_axis", s);
}

#define TESSERA_SCATTER_OPS(NAME, TYPE)                                                      \
  array NAME(const array& a, const std::vector<array>& indices, const array& updates,       \
             const std::vector<int>& axes, StreamOrDevice s) {                              \
    return scatter_op(a, indices, updates, axes, Scatter::TYPE, #NAME, s);                  \
  }                                                                                          \
  array NAME(const array& a, const array& indices, const array& updates, int axis,          \
             StreamOrDevice s) {                                                             \
    return scatter_op(a, {indices}, updates, {axis}, Scatter::TYPE, #NAME, s);              \
  }
TESSERA_SCATTER_OPS(scatter, None)
TESSERA_SCATTER_OPS(scatter_add, Sum)
TESSERA_SCATTER_OPS(scatter_prod, Prod)
TESSERA_SCATTER_OPS(scatter_max, Max)
TESSERA_SCATTER_OPS(scatter_min, Min)
#undef TESSERA_SCATTER_OPS

array masked_scatter(const array& a, const array& mask, const array& src, StreamOrDevice s) {
  if (mask.dtype() != bool_) {
    throw_invalid("masked_scatter", "the mask must be bool, got " + dtype_name(mask.dtype()));
  }
  if (mask.ndim() > a.ndim() || broadcast_shapes(mask.shape(), a.shape(), "masked_scatter") != a.shape()) {
    throw_invalid("masked_scatter", "a mask of shape " + shape_str(mask.shape()) +
                                        " cannot be broadcast to a of shape " + shape_str(a.shape()));
  }
  if (a.size() == 0) return a;
  array flat = reshape(astype(src, a.dtype(), s), {static_cast<int>(src.size())}, s);
  return array(a.shape(), a.dtype(), std::make_shared<MaskedScatter>(to_stream(s)),
               {a, broadcast_to(mask, a.shape(), s), flat});
}

// ---- primitive equivalence --------------------------------------------------

void Scatter::print(std::ostream& os) const {
  static const char* names[] = {"Scatter", "ScatterSum", "ScatterProd", "ScatterMax",
                                "ScatterMin"};
  os << names[type_];
}

}  // namespace tessera
