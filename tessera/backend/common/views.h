// Views shared by every backend: the primitives whose kernels only compute a
// new shape, strides and offset over the input's buffer (see Note [Strides and
// flags]). The view primitives' one kernel (eval_view, TESSERA_VIEW_PRIMITIVE)
// and the other kernels of both backends call these; nothing here touches data.
//
//   void Transpose::eval_view(const array& in, array& out) {
//     views::transpose(in, out, axes_);
//   }
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "tessera/core/array.h"

namespace tessera::views {

// A view of base's buffer (offset in elements, relative to base's offset).
array view_of(const array& base, const Shape& shape, const Strides& strides, int64_t offset);

// out as a view of in (an empty out gets an empty buffer of its own).
void set_view(const array& in, array& out, const Strides& strides, int64_t offset);

// in broadcast to out's shape (stride 0 on new and size-1 axes).
void broadcast(const array& in, array& out);
// A matrix operand m (..., R, C) of a product as a view over the batch axes of
// its output `out` (stride 0 where m has no such axis: Note [A shared b] in
// ops/primitives/matmul.h); m itself where it has out's rank.
array batched_like(const array& m, const array& out);
// Output axis i is input axis axes[i].
void transpose(const array& in, array& out, const std::vector<int>& axes);
// Elements start[i], start[i] + steps[i], ... on each axis.
void slice(const array& in, array& out, const Shape& start, const Shape& steps);
// The strides and element offset of that slice of a layout with `strides`.
std::pair<Strides, int64_t> slice_strides(const Strides& strides, const Shape& start,
                                          const Shape& steps);
// out as a view of in in out's shape when in's strides allow it (always for
// row-contiguous in); false when in must first be made row-contiguous.
bool reshape(const array& in, array& out);
// The diagonals of the (axis1, axis2) planes as the last axis.
void diagonal(const array& in, array& out, int offset, int axis1, int axis2);
// in's bytes read as out's dtype; false when in's layout does not allow it
// (the last axis must be dense and the other strides and the offset whole
// numbers of output elements), in which case view a row-contiguous copy.
bool reinterpret(const array& in, array& out);
// out's shape with the given strides and offset (elements) over in's buffer.
void as_strided(const array& in, array& out, const Strides& strides, int64_t offset);

// A layout over a buffer: shape, strides and offset in elements.
struct StridedView {
  Shape shape;
  Strides strides;
  int64_t offset;
};
// The diagonal at `offset` of the (axis1, axis2) planes of (shape, strides):
// the other axes in order, then the diagonal as the last axis; the offset is
// that of its first element (0 when it is empty).
StridedView diagonal_view(const Shape& shape, const Strides& strides, int offset, int axis1,
                          int axis2);

// The copies that fill the borders of a padded array once the input is in
// place: out (out_shape, out_strides) holds the input of in_shape at element
// offset `interior`. Each copy writes `shape` at dst_offset in out's strides,
// in order, from a source read with src_strides at src_offset: for
// constant padding the value (all strides 0); for edge padding out itself,
// broadcasting the first / last slab of what is filled so far (the padded
// extent on the axes done, the input's on the rest) axis by axis.
struct PadPlan {
  struct Copy {
    Shape shape;
    Strides src_strides;
    int64_t src_offset;
    int64_t dst_offset;
  };
  int64_t interior;
  std::vector<Copy> copies;
};
PadPlan pad_plan(const Shape& in_shape, const Shape& out_shape, const Strides& out_strides,
                 const std::vector<int>& axes, const Shape& low, const Shape& high, bool edge);

// A copy between two layouts of one shape that is dense along axis a in the
// source and along another axis b in the destination: the tiled-transpose plan
// both backends use, with the remaining axes as an outer loop.
struct TransposePlan {
  int a, b;
  Shape outer;
  Strides outer_in, outer_out;
};
// The plan when both dense axes exist, differ and are at least min_len long.
std::optional<TransposePlan> transpose_plan(const Shape& shape, const Strides& in_strides,
                                            const Strides& out_strides, int min_len);

}  // namespace tessera::views
