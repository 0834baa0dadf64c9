// Gathers and scatters with integer index arrays.
//
//   auto rows = take(x, array({2, 0}), 0);             // x[[2, 0], :]
//   auto picked = take_along_axis(x, argmax(x, 1, true), 1);
//   auto counts = scatter_add(zeros({5}), idx, ones({idx.size(), 1}), 0);
//   auto y = masked_scatter(x, greater(x, array(0.f)), src);
//
// Indices may have any integer dtype (not bool). Negative indices count from
// the end of their axis, once (-1 is the last element).
//
// Out-of-range indices (still outside [0, n) after that, or a gather/scatter
// slice that would not fit) are not an error, because indices are only known
// when the graph runs: gathers (take, take_along_axis, gather) give zeros for
// them, and scatters (scatter*, put_along_axis, scatter_add_axis) drop their
// updates. No kernel ever reads or writes outside an array.
#pragma once

#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// Elements of a at `indices` along `axis` (like a[:, indices]): the axis is
// replaced by the index shape.
array take(const array& a, const array& indices, int axis, StreamOrDevice s = {});
array take(const array& a, int index, int axis, StreamOrDevice s = {});
// Elements of the flattened a.
array take(const array& a, const array& indices, StreamOrDevice s = {});
array take(const array& a, int index, StreamOrDevice s = {});

// NumPy's take_along_axis: indices has a's rank and broadcasts with a except
// on `axis`.
array take_along_axis(const array& a, const array& indices, int axis, StreamOrDevice s = {});
// a with values (broadcast to the index shape) written at indices along axis.
array put_along_axis(const array& a, const array& indices, const array& values, int axis,
                     StreamOrDevice s = {});
// a with values added at indices along axis (repeated indices accumulate).
array scatter_add_axis(const array& a, const array& indices, const array& values, int axis,
                       StreamOrDevice s = {});

// Slices of size slice_sizes starting at the (broadcast) indices on `axes`:
// the output shape is the index shape followed by slice_sizes.
array gather(const array& a, const std::vector<array>& indices, const std::vector<int>& axes,
             const Shape& slice_sizes, StreamOrDevice s = {});
array gather(const array& a, const array& indices, int axis, const Shape& slice_sizes,
             StreamOrDevice s = {});

// a with the slices at the (broadcast) indices on `axes` replaced by, or
// combined with, updates of shape index shape + slice shape (a.ndim() axes).
array scatter(const array& a, const std::vector<array>& indices, const array& updates,
              const std::vector<int>& axes, StreamOrDevice s = {});
array scatter(const array& a, const array& indices, const array& updates, int axis,
              StreamOrDevice s = {});
array scatter_add(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_add(const array& a, const array& indices, const array& updates, int axis,
                  StreamOrDevice s = {});
array scatter_prod(const array& a, const std::vector<array>& indices, const array& updates,
                   const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_prod(const array& a, const array& indices, const array& updates, int axis,
                   StreamOrDevice s = {});
array scatter_max(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_max(const array& a, const array& indices, const array& updates, int axis,
                  StreamOrDevice s = {});
array scatter_min(const array& a, const std::vector<array>& indices, const array& updates,
                  const std::vector<int>& axes, StreamOrDevice s = {});
array scatter_min(const array& a, const array& indices, const array& updates, int axis,
                  StreamOrDevice s = {});

// a with its positions where mask (broadcast to a) is true filled, in
// row-major order, from the flattened src; positions past src's end keep a.
array masked_scatter(const array& a, const array& mask, const array& src, StreamOrDevice s = {});

}  // namespace tessera
