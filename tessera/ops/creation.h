// Creating arrays, and converting them.
//
//   auto a = arange(0, 10, 2);           // int32 [0, 2, 4, 6, 8]
//   auto z = zeros({2, 3}, float16);
//   auto f = astype(a, float32);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

// [start, stop) with increment step. The integer forms give int32.
array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, double step, StreamOrDevice s = {});
array arange(double start, double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double start, double stop, StreamOrDevice s = {});
array arange(double stop, Dtype dtype, StreamOrDevice s = {});
array arange(double stop, StreamOrDevice s = {});
array arange(int start, int stop, int step, StreamOrDevice s = {});
array arange(int start, int stop, StreamOrDevice s = {});
array arange(int stop, StreamOrDevice s = {});

// num evenly spaced samples over [start, stop] (or [start, stop) without endpoint).
array linspace(double start, double stop, int num, bool endpoint, Dtype dtype = float32,
               StreamOrDevice s = {});
array linspace(double start, double stop, int num = 50, Dtype dtype = float32,
               StreamOrDevice s = {});

// Arrays filled with a value (broadcast to shape), cast to dtype.
array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s = {});
array full(Shape shape, array vals, StreamOrDevice s = {});
template <typename T>
array full(Shape shape, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val, dtype), s);
}
template <typename T>
array full(Shape shape, T val, StreamOrDevice s = {}) {
  return full(std::move(shape), array(val), s);
}
array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s = {});
array zeros(const Shape& shape, StreamOrDevice s = {});
array ones(const Shape& shape, Dtype dtype, StreamOrDevice s = {});
array ones(const Shape& shape, StreamOrDevice s = {});
array zeros_like(const array& a, Dtype dtype, StreamOrDevice s = {});
array zeros_like(const array& a, StreamOrDevice s = {});
array ones_like(const array& a, Dtype dtype, StreamOrDevice s = {});
array ones_like(const array& a, StreamOrDevice s = {});
array full_like(const array& a, array vals, Dtype dtype, StreamOrDevice s = {});
array full_like(const array& a, array vals, StreamOrDevice s = {});
template <typename T>
array full_like(const array& a, T val, Dtype dtype, StreamOrDevice s = {}) {
  return full_like(a, array(val, dtype), dtype, s);
}
template <typename T>
array full_like(const array& a, T val, StreamOrDevice s = {}) {
  return full_like(a, array(val, a.dtype()), s);
}

// n x m with ones on diagonal k.
array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s = {});
array eye(int n, Dtype dtype, StreamOrDevice s = {});
array eye(int n, int m, StreamOrDevice s = {});
array eye(int n, int m, int k, StreamOrDevice s = {});
array eye(int n, StreamOrDevice s = {});
array identity(int n, Dtype dtype, StreamOrDevice s = {});
array identity(int n, StreamOrDevice s = {});
// n x m with ones at and below diagonal k.
array tri(int n, int m, int k, Dtype dtype, StreamOrDevice s = {});
array tri(int n, Dtype dtype, StreamOrDevice s = {});
// Zero the elements above (tril) / below (triu) diagonal k of the last two axes.
array tril(array x, int k = 0, StreamOrDevice s = {});
array triu(array x, int k = 0, StreamOrDevice s = {});

// Coordinate grids; indexing "xy" (Cartesian) or "ij" (matrix).
std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse = false,
                            const std::string& indexing = "xy", StreamOrDevice s = {});

// Conversions.
array astype(array a, Dtype dtype, StreamOrDevice s = {});
array copy(array a, StreamOrDevice s = {});
// Reinterpret the bits as dtype; the last axis is rescaled when sizes differ.
array view(const array& a, const Dtype& dtype, StreamOrDevice s = {});
// A view with the given shape and strides (elements) over the row-contiguous
// data of a, starting `offset` elements in. Unsafe when out of bounds.
array as_strided(array a, Shape shape, Strides strides, size_t offset, StreamOrDevice s = {});
// Row-contiguous (or column-contiguous when allowed) data, copying if needed.
array contiguous(const array& a, bool allow_col_major = false, StreamOrDevice s = {});

}  // namespace tessera
