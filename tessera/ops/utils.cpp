#include "tessera/ops/utils.h"
#include "tessera/ops/array_api.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace tessera {

namespace {
template <typename V>
std::string seq_str(const V& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) os << ",";
    os << v[i];
  }
  if (v.size() == 1) os << ",";
  os << ")";
  return os.str();
}
}  // namespace

std::string shape_str(const Shape& shape) { return seq_str(shape); }
std::string ints_str(const std::vector<int>& v) { return seq_str(v); }

std::pair<std::vector<Shape>, std::vector<Dtype>> shapes_and_dtypes(
    const std::vector<array>& arrays) {
  std::pair<std::vector<Shape>, std::vector<Dtype>> r;
  for (const auto& a : arrays) {
    r.first.push_back(a.shape());
    r.second.push_back(a.dtype());
  }
  return r;
}

void throw_invalid(const char* op, const std::string& what) {
  throw std::invalid_argument("[" + std::string(op) + "] " + what);
}

void throw_out_of_range(const char* op, const std::string& what) {
  throw std::out_of_range("[" + std::string(op) + "] " + what);
}

void check_non_negative(const Shape& shape, const char* op) {
  for (auto d : shape) {
    if (d < 0) throw_invalid(op, "negative dimensions are not allowed, got " + shape_str(shape));
  }
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      throw_invalid(op, "shapes " + shape_str(a) + " and " + shape_str(b) +
                            " cannot be broadcast");
    }
  }
  return out;
}

Shape broadcast_shapes(const std::vector<Shape>& shapes, const char* op) {
  if (shapes.empty()) return {};
  Shape out = shapes[0];
  for (size_t i = 1; i < shapes.size(); ++i) out = broadcast_shapes(out, shapes[i], op);
  return out;
}

int normalize_axis(int axis, int ndim, const char* op) {
  if (axis < -ndim || axis >= ndim) {
    std::ostringstream msg;
    msg << "axis " << axis << " is out of bounds for an array with " << ndim << " dimensions";
    throw_out_of_range(op, msg.str());
  }
  return axis < 0 ? axis + ndim : axis;
}

int normalize_axis_index(int axis, int ndim, const std::string& prefix) {
  return normalize_axis(axis, ndim, prefix.c_str());
}

Dtype result_type(const std::vector<array>& arrays) {
  if (arrays.empty()) throw_invalid("result_type", "at least one array is needed");
  Dtype t = arrays[0].dtype();
  for (size_t i = 1; i < arrays.size(); ++i) t = promote_types(t, arrays[i].dtype());
  return t;
}

std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int a : axes) out.push_back(normalize_axis(a, ndim, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw_invalid(op, "repeated axis in " + ints_str(axes));
  }
  return out;
}

std::vector<int> all_axes(int ndim) {
  std::vector<int> v(ndim);
  for (int i = 0; i < ndim; ++i) v[i] = i;
  return v;
}

}  // namespace tessera
