// Functions of MLX's API that came with its array-API names and later
// releases: the median, min and max in one call, the last-two-axes transpose,
// the accumulating slice updates, and helpers on shapes and dtypes.
//
//   auto m = median(x, {0, 2});                      // float-out
//   auto [lo, hi] = std::pair{minmax(x)[0], minmax(x)[1]};
//   auto y = slice_update_add(x, u, {1}, {5}, {2});  // x[1:5:2] += u
//   Dtype t = result_type({a, b});
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// The median over axes (the mean of the two middle values for an even count);
// float-out like mean. A NaN in the reduced values gives NaN.
array median(const array& a, const std::vector<int>& axes, bool keepdims = false,
             StreamOrDevice s = {});
array median(const array& a, bool keepdims, StreamOrDevice s = {});
array median(const array& a, StreamOrDevice s = {});
array median(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// {min, max} over axes.
std::vector<array> minmax(const array& a, const std::vector<int>& axes, bool keepdims = false,
                          StreamOrDevice s = {});
std::vector<array> minmax(const array& a, bool keepdims, StreamOrDevice s = {});
std::vector<array> minmax(const array& a, StreamOrDevice s = {});
std::vector<array> minmax(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// The product of a's dimensions over axes (over all the others with inverted),
// as a scalar of dtype.
array number_of_elements(const array& a, std::vector<int> axes, bool inverted,
                         Dtype dtype = int32, StreamOrDevice s = {});

// a with its last two axes swapped (ndim >= 2).
array matrix_transpose(const array& a, StreamOrDevice s = {});

// src with update added to (multiplied into, maxed, minned with) the region
// [start, stop; strides): the accumulating forms of slice_update.
#define TESSERA_SLICE_UPDATE_REDUCE(NAME)                                                   \
  array NAME(const array& src, const array& update, Shape start, Shape stop, Shape strides, \
             StreamOrDevice s = {});                                                        \
  array NAME(const array& src, const array& update, Shape start, Shape stop, StreamOrDevice s = {});
TESSERA_SLICE_UPDATE_REDUCE(slice_update_add)
TESSERA_SLICE_UPDATE_REDUCE(slice_update_prod)
TESSERA_SLICE_UPDATE_REDUCE(slice_update_max)
TESSERA_SLICE_UPDATE_REDUCE(slice_update_min)
#undef TESSERA_SLICE_UPDATE_REDUCE

// The sorted unique elements of the flattened a, `size` of them: truncated to
// the smallest, or padded with fill_value (default: the first unique element).
// Returns {values} followed, as asked, by index (uint32, first occurrence in
// the flattened a; the first unique's for padding), inverse (uint32, a's shape,
// clamped to size - 1) and counts (int32, 0 for padding). The shape does not
// depend on the values, so a is not evaluated.
std::vector<array> unique(const array& a, int size, bool return_index = false,
                          bool return_inverse = false, bool return_counts = false,
                          const std::optional<array>& fill_value = std::nullopt,
                          StreamOrDevice s = {});

// Axis in [-ndim, ndim) -> [0, ndim); throws std::out_of_range
// "[prefix] axis 3 is out of bounds for an array with 2 dimensions".
int normalize_axis_index(int axis, int ndim, const std::string& prefix = "normalize_axis_index");

// The dtype of promoting the arrays' dtypes together.
Dtype result_type(const std::vector<array>& arrays);

}  // namespace tessera
