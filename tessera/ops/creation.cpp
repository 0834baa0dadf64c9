// arange, linspace, full and its forms, eye / tri / tril / triu, meshgrid,
// view, as_strided. (astype, copy, contiguous live in copy.cpp.)
#include "tessera/ops/creation.h"

#include <climits>
#include <cmath>
#include <sstream>

#include "tessera/ops/primitives/creation.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

void check_shape(const Shape& shape, const char* op) { check_non_negative(shape, op); }

void check_matrix_dims(int n, int m, const char* op) {
  if (n < 0 || m < 0) {
    throw_invalid(op, "n and m must be non-negative, got " + std::to_string(n) + " and " +
                          std::to_string(m));
  }
}

// x with elements outside lo <= j - i <= hi of its last two axes zeroed.
array band(const array& x, int64_t lo, int64_t hi, StreamOrDevice s) {
  return array(x.shape(), x.dtype(), std::make_shared<Band>(to_stream(s), lo, hi), {x});
}

// A broadcast (n, m) view of a single one of dtype t.
array ones_view(int n, int m, Dtype t, StreamOrDevice s) {
  return broadcast_to(array(1, t), {n, m}, s);
}

}  // namespace

// ---- arange / linspace ------------------------------------------------------

array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s) {
  if (dtype == bool_) throw_invalid("arange", "bool is not supported");
  if (step == 0) throw_invalid("arange", "step must be nonzero");
  double real_size = std::ceil((stop - start) / step);
  if (std::isnan(real_size) || std::isinf(start) || std::isinf(stop)) {
    std::ostringstream msg;
    msg << "cannot compute the length of [" << start << ", " << stop << ") with step " << step;
    throw_invalid("arange", msg.str());
  }
  if (real_size > INT_MAX) {
    std::ostringstream msg;
    msg << "[" << start << ", " << stop << ") with step " << step << " has " << real_size
        << " elements, more than the maximum " << INT_MAX;
    throw_invalid("arange", msg.str());
  }
  int size = real_size > 0 ? static_cast<int>(real_size) : 0;
  return array({size}, dtype, std::make_shared<Arange>(to_stream(s), start, step), {});
}
array arange(double start, double stop, double step, StreamOrDevice s) {
  return arange(start, stop, step, float32, s);
}
array arange(double start, double stop, Dtype dtype, StreamOrDevice s) {
  return arange(start, stop, 1.0, dtype, s);
}
array arange(double start, double stop, StreamOrDevice s) {
  return arange(start, stop, 1.0, float32, s);
}
array arange(double stop, Dtype dtype, StreamOrDevice s) {
  return arange(0.0, stop, 1.0, dtype, s);
}
array arange(double stop, StreamOrDevice s) { return arange(0.0, stop, 1.0, float32, s); }
array arange(int start, int stop, int step, StreamOrDevice s) {
  return arange(static_cast<double>(start), static_cast<double>(stop), static_cast<double>(step),
                int32, s);
}
array arange(int start, int stop, StreamOrDevice s) { return arange(start, stop, 1, s); }
array arange(int stop, StreamOrDevice s) { return arange(0, stop, 1, s); }

array linspace(double start, double stop, int num, bool endpoint, Dtype dtype, StreamOrDevice s) {
  if (num < 0) throw_invalid("linspace", "num must be non-negative, got " + std::to_string(num));
  if (dtype == bool_) throw_invalid("linspace", "bool is not supported");
  return array({num}, dtype, std::make_shared<Linspace>(to_stream(s), start, stop, endpoint), {});
}
array linspace(double start, double stop, int num, Dtype dtype, StreamOrDevice s) {
  return linspace(start, stop, num, true, dtype, s);
}

// ---- full and its forms -----------------------------------------------------

array full(Shape shape, array vals, Dtype dtype, StreamOrDevice s) {
  check_shape(shape, "full");
  if (broadcast_shapes(vals.shape(), shape, "full") != shape) {
    throw_invalid("full", "cannot broadcast vals of shape " + shape_str(vals.shape()) +
                              " to shape " + shape_str(shape));
  }
  return copy(broadcast_to(astype(std::move(vals), dtype, s), shape, s), s);
}
array full(Shape shape, array vals, StreamOrDevice s) {
  Dtype t = vals.dtype();
  return full(std::move(shape), std::move(vals), t, s);
}
array zeros(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(0, dtype), dtype, s);
}
array zeros(const Shape& shape, StreamOrDevice s) { return zeros(shape, float32, s); }
array ones(const Shape& shape, Dtype dtype, StreamOrDevice s) {
  return full(shape, array(1, dtype), dtype, s);
}
array ones(const Shape& shape, StreamOrDevice s) { return ones(shape, float32, s); }
array zeros_like(const array& a, Dtype dtype, StreamOrDevice s) {
  return zeros(a.shape(), dtype, s);
}
array zeros_like(const array& a, StreamOrDevice s) { return zeros(a.shape(), a.dtype(), s); }
array ones_like(const array& a, Dtype dtype, StreamOrDevice s) {
  return ones(a.shape(), dtype, s);
}
array ones_like(const array& a, StreamOrDevice s) { return ones(a.shape(), a.dtype(), s); }
array full_like(const array& a, array vals, Dtype dtype, StreamOrDevice s) {
  return full(a.shape(), std::move(vals), dtype, s);
}
array full_like(const array& a, array vals, StreamOrDevice s) {
  return full(a.shape(), std::move(vals), a.dtype(), s);
}

// ---- eye, tri, tril, triu ---------------------------------------------------

array eye(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  check_matrix_dims(n, m, "eye");
  return band(ones_view(n, m, dtype, s), k, k, s);
}
array eye(int n, Dtype dtype, StreamOrDevice s) { return eye(n, n, 0, dtype, s); }
array eye(int n, int m, StreamOrDevice s) { return eye(n, m, 0, float32, s); }
array eye(int n, int m, int k, StreamOrDevice s) { return eye(n, m, k, float32, s); }
array eye(int n, StreamOrDevice s) { return eye(n, n, 0, float32, s); }
array identity(int n, Dtype dtype, StreamOrDevice s) { return eye(n, n, 0, dtype, s); }
array identity(int n, StreamOrDevice s) { return eye(n, n, 0, float32, s); }

array tri(int n, int m, int k, Dtype dtype, StreamOrDevice s) {
  check_matrix_dims(n, m, "tri");
  return band(ones_view(n, m, dtype, s), -Band::unbounded, k, s);
}
array tri(int n, Dtype dtype, StreamOrDevice s) { return tri(n, n, 0, dtype, s); }

array tril(array x, int k, StreamOrDevice s) {
  if (x.ndim() < 2) {
    throw_invalid("tril", "the array must have at least 2 dimensions, got shape " +
                              shape_str(x.shape()));
  }
  return band(x, -Band::unbounded, k, s);
}
array triu(array x, int k, StreamOrDevice s) {
  if (x.ndim() < 2) {
    throw_invalid("triu", "the array must have at least 2 dimensions, got shape " +
                              shape_str(x.shape()));
  }
  return band(x, k, Band::unbounded, s);
}

// ---- meshgrid ---------------------------------------------------------------

std::vector<array> meshgrid(const std::vector<array>& arrays, bool sparse,
                            const std::string& indexing, StreamOrDevice s) {
  if (indexing != "xy" && indexing != "ij") {
    throw_invalid("meshgrid", "indexing must be \"xy\" or \"ij\", got \"" + indexing + "\"");
  }
  const int n = static_cast<int>(arrays.size());
  std::vector<array> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    // Cartesian indexing puts the first array along axis 1 and the second along axis 0.
    int axis = i;
    if (indexing == "xy" && n >= 2 && i < 2) axis = 1 - i;
    Shape shape(n, 1);
    shape[axis] = static_cast<ShapeElem>(arrays[i].size());
    out.push_back(reshape(arrays[i], shape, s));
  }
  if (sparse) return out;
  return broadcast_arrays(out, s);
}

// ---- view, as_strided -------------------------------------------------------

array view(const array& a, const Dtype& dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  // A bool holds 0 or 1, which kernels rely on: other bytes read as True.
  if (dtype == bool_) return astype(view(a, uint8, s), bool_, s);
  Shape shape = a.shape();
  if (a.itemsize() != dtype.size) {
    if (a.ndim() == 0) {
      throw_invalid("view", "a 0-d array can only be viewed as a dtype of the same size, got " +
                                dtype_name(a.dtype()) + " (" + std::to_string(a.itemsize()) +
                                " bytes) and " + dtype_name(dtype) + " (" +
                                std::to_string(dtype.size) + " bytes)");
    }
    int64_t bytes = int64_t(shape.back()) * a.itemsize();
    if (bytes % dtype.size != 0) {
      throw_invalid("view", "the last axis of an array of shape " + shape_str(shape) + " and dtype " +
                                dtype_name(a.dtype()) + " (" + std::to_string(bytes) +
                                " bytes) is not a multiple of the size of " + dtype_name(dtype) +
                                " (" + std::to_string(dtype.size) + " bytes)");
    }
    shape.back() = static_cast<ShapeElem>(bytes / dtype.size);
  }
  return array(std::move(shape), dtype, std::make_shared<View>(to_stream(s), dtype), {a});
}

array as_strided(array a, Shape shape, Strides strides, size_t offset, StreamOrDevice s) {
  check_shape(shape, "as_strided");
  if (shape.size() != strides.size()) {
    throw_invalid("as_strided", "shape " + shape_str(shape) + " and strides (" +
                                    std::to_string(strides.size()) +
                                    " entries) must have the same length");
  }
  // The view must stay inside a's elements.
  if (shape_size(shape) > 0) {
    int64_t lo = static_cast<int64_t>(offset), hi = lo;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t span = int64_t(shape[i] - 1) * strides[i];
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= static_cast<int64_t>(a.size())) {
      std::ostringstream msg;
      msg << "shape " << shape_str(shape) << " with offset " << offset
          << " reaches elements [" << lo << ", " << hi << "] outside an array of "
          << a.size() << " elements";
      throw_invalid("as_strided", msg.str());
    }
  }
  array dense = contiguous(a, false, s);
  Shape out_shape = shape;
  return array(std::move(out_shape), a.dtype(),
               std::make_shared<AsStrided>(to_stream(s), std::move(shape), std::move(strides),
                                           static_cast<int64_t>(offset)),
               {dense});
}

// ---- primitive equivalence --------------------------------------------------

}  // namespace tessera
