// Helpers shared by the op functions: argument checks and their messages.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessera/core/array.h"

namespace tessera {

// "(2,3)"
std::string shape_str(const Shape& shape);
// "(2,3)" for a list of ints
std::string ints_str(const std::vector<int>& v);

// NumPy broadcasting of two / several shapes; throws std::invalid_argument
// "[op] shapes (2,3) and (4,) cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");
Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op = "broadcast_shapes");

// Each array's shape and dtype, as array::make_arrays takes them.
std::pair<std::vector<Shape>, std::vector<Dtype>> shapes_and_dtypes(
    const std::vector<array>& arrays);

// Axis in [-ndim, ndim) -> [0, ndim); throws std::out_of_range (IndexError, as in MLX)
// "[op] axis 3 is out of bounds for an array with 2 dimensions".
int normalize_axis(int axis, int ndim, const char* op);
// Normalizes, checks for duplicates, and sorts.
std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op);
// [0, 1, ..., ndim - 1]
std::vector<int> all_axes(int ndim);

// Throws std::invalid_argument "[op] <what>" with the op name in brackets.
[[noreturn]] void throw_invalid(const char* op, const std::string& what);

// Throws std::out_of_range "[op] <what>": an axis or an index outside its range.
[[noreturn]] void throw_out_of_range(const char* op, const std::string& what);

// Throws std::invalid_argument "[op] negative dimensions are not allowed, got (2,-1)".
void check_non_negative(const Shape& shape, const char* op);

}  // namespace tessera
