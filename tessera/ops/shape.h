// Shape manipulation, slicing and joining. Views (reshape of contiguous data,
// transpose, broadcast, slices) share the input's buffer.
//
//   auto t = transpose(x);                  // a view
//   auto s = slice(x, {0, 1}, {2, 5}, {1, 2});
//   auto c = concatenate({a, b}, 1);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

array reshape(const array& a, Shape shape, StreamOrDevice s = {});
array flatten(const array& a, int start_axis, int end_axis = -1, StreamOrDevice s = {});
array flatten(const array& a, StreamOrDevice s = {});
array unflatten(const array& a, int axis, Shape shape, StreamOrDevice s = {});
array squeeze(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array squeeze(const array& a, int axis, StreamOrDevice s = {});
array squeeze(const array& a, StreamOrDevice s = {});
array expand_dims(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array expand_dims(const array& a, int axis, StreamOrDevice s = {});
array transpose(const array& a, std::vector<int> axes, StreamOrDevice s = {});
array transpose(const array& a, std::initializer_list<int> axes, StreamOrDevice s = {});
array transpose(const array& a, StreamOrDevice s = {});
array swapaxes(const array& a, int axis1, int axis2, StreamOrDevice s = {});
array moveaxis(const array& a, int source, int destination, StreamOrDevice s = {});

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s = {});
std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s = {});

// Static slices: [start, stop) with strides (negative strides walk backwards;
// bounds are clamped like NumPy's).
array slice(const array& a, Shape start, Shape stop, Shape strides, StreamOrDevice s = {});
array slice(const array& a, std::initializer_list<int> start, Shape stop, Shape strides,
            StreamOrDevice s = {});
array slice(const array& a, Shape start, Shape stop, StreamOrDevice s = {});
// Dynamic start (an integer array, one entry per axis in `axes`), fixed size.
array slice(const array& a, const array& start, std::vector<int> axes, Shape slice_size,
            StreamOrDevice s = {});
// src with the region [start, stop; strides) replaced by update (broadcast).
array slice_update(const array& src, const array& update, Shape start, Shape stop,
                   Shape strides, StreamOrDevice s = {});
array slice_update(const array& src, const array& update, Shape start, Shape stop,
                   StreamOrDevice s = {});
array slice_update(const array& src, const array& update, const array& start,
                   std::vector<int> axes, StreamOrDevice s = {});

array concatenate(std::vector<array> arrays, int axis, StreamOrDevice s = {});
array concatenate(std::vector<array> arrays, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, int axis, StreamOrDevice s = {});
array stack(const std::vector<array>& arrays, StreamOrDevice s = {});
std::vector<array> split(const array& a, int num_splits, int axis, StreamOrDevice s = {});
std::vector<array> split(const array& a, int num_splits, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, int axis, StreamOrDevice s = {});
std::vector<array> split(const array& a, const Shape& indices, StreamOrDevice s = {});
std::vector<array> unstack(const array& a, int axis, StreamOrDevice s = {});
std::vector<array> unstack(const array& a, StreamOrDevice s = {});

array repeat(const array& arr, int repeats, int axis, StreamOrDevice s = {});
array repeat(const array& arr, int repeats, StreamOrDevice s = {});
array tile(const array& arr, std::vector<int> reps, StreamOrDevice s = {});

// Pad with a constant ("constant"), the edge values ("edge"), or the values
// mirrored without ("reflect") or with ("symmetric") the edge.
array pad(const array& a, const std::vector<int>& axes, const Shape& low_pad_size,
          const Shape& high_pad_size, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});
array pad(const array& a, const std::vector<std::pair<int, int>>& pad_width,
          const array& pad_value = array(0), const std::string& mode = "constant",
          StreamOrDevice s = {});
array pad(const array& a, const std::pair<int, int>& pad_width,
          const array& pad_value = array(0), const std::string& mode = "constant",
          StreamOrDevice s = {});
array pad(const array& a, int pad_width, const array& pad_value = array(0),
          const std::string& mode = "constant", StreamOrDevice s = {});

array flip(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array flip(const array& a, int axis, StreamOrDevice s = {});
array flip(const array& a, StreamOrDevice s = {});

array roll(const array& a, int shift, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, StreamOrDevice s = {});
array roll(const array& a, int shift, int axis, StreamOrDevice s = {});
array roll(const array& a, int shift, const std::vector<int>& axes, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, int axis, StreamOrDevice s = {});
array roll(const array& a, const Shape& shift, const std::vector<int>& axes,
           StreamOrDevice s = {});

array atleast_1d(const array& a, StreamOrDevice s = {});
array atleast_2d(const array& a, StreamOrDevice s = {});
array atleast_3d(const array& a, StreamOrDevice s = {});
std::vector<array> atleast_1d(const std::vector<array>& a, StreamOrDevice s = {});
std::vector<array> atleast_2d(const std::vector<array>& a, StreamOrDevice s = {});
std::vector<array> atleast_3d(const std::vector<array>& a, StreamOrDevice s = {});

// Diagonals of the (axis1, axis2) planes, appended as the last axis.
array diagonal(const array& a, int offset = 0, int axis1 = 0, int axis2 = 1,
               StreamOrDevice s = {});
// 1-D -> matrix with a on diagonal k; 2-D -> its k-th diagonal.
array diag(const array& a, int k = 0, StreamOrDevice s = {});

}  // namespace tessera
