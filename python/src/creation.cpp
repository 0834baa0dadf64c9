// Creating arrays.
#include <cmath>

#include "convert.h"

namespace tessera::python {

namespace {

bool is_float(nb::handle v) { return v && !v.is_none() && PyFloat_Check(v.ptr()); }

double as_double(nb::handle v, const char* what) {
  if (!PyLong_Check(v.ptr()) && !PyFloat_Check(v.ptr())) {
    throw nb::type_error((std::string("[arange] ") + what + " must be an int or a float").c_str());
  }
  return nb::cast<double>(v);
}

}  // namespace

void init_creation(nb::module_& m, ArrayClass&) {
  auto kw = nb::kw_only();
  def_named(m, "arange", [](nb::handle start, nb::handle stop, nb::handle step, std::optional<Dtype> dtype,
                     StreamArg s) {
    nb::handle b = start, e = stop;
    if (stop.is_none()) {
      b = nb::handle();
      e = start;
    }
    double lo = b ? as_double(b, "start") : 0.0;
    double hi = as_double(e, "stop");
    double st = step.is_none() ? 1.0 : as_double(step, "step");
    if (st == 0) throw std::invalid_argument("[arange] step cannot be 0");
    bool any_float = is_float(b) || is_float(e) || is_float(step);
    Dtype t = dtype.value_or(any_float ? float32
                             : (std::max(std::fabs(lo), std::fabs(hi)) > INT32_MAX ? int64 : int32));
    return arange(lo, hi, st, t, s);
  }, "start"_a, "stop"_a = nb::none(), "step"_a = nb::none(), "dtype"_a = nb::none(), kw,
        "stream"_a = nb::none());
  def_named(m, "linspace", [](double start, double stop, nb::int_ num, bool endpoint, Dtype dtype, StreamArg s) {
    return linspace(start, stop, to_int32(num, "linspace", "num"), endpoint, dtype, s);
  }, "start"_a, "stop"_a, "num"_a = 50, "endpoint"_a = true, "dtype"_a = float32, "stream"_a = nb::none());
  def_named(m, "zeros", [](nb::handle shape, Dtype dtype, StreamArg s) { return zeros(to_shape(shape, "zeros"), dtype, s); },
        "shape"_a, "dtype"_a = float32, kw, "stream"_a = nb::none());
  def_named(m, "ones", [](nb::handle shape, Dtype dtype, StreamArg s) { return ones(to_shape(shape, "ones"), dtype, s); },
        "shape"_a, "dtype"_a = float32, kw, "stream"_a = nb::none());
  def_named(m, "full", [](nb::handle shape, nb::handle vals, std::optional<Dtype> dtype, StreamArg s) {
    array v = to_array(vals);
    return full(to_shape(shape, "full"), v, dtype.value_or(v.dtype()), s);
  }, "shape"_a, "vals"_a, "dtype"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "zeros_like", [](nb::handle a, std::optional<Dtype> dtype, StreamArg s) {
    array x = to_array(a);
    return zeros_like(x, dtype.value_or(x.dtype()), s);
  }, "a"_a, pos_only(), "dtype"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "ones_like", [](nb::handle a, std::optional<Dtype> dtype, StreamArg s) {
    array x = to_array(a);
    return ones_like(x, dtype.value_or(x.dtype()), s);
  }, "a"_a, pos_only(), "dtype"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "full_like", [](nb::handle a, nb::handle vals, std::optional<Dtype> dtype, StreamArg s) {
    array x = to_array(a);
    Dtype t = dtype.value_or(x.dtype());
    array v = is_python_scalar(vals) ? scalar_to_array(vals, t) : to_array(vals);
    return full_like(x, v, t, s);
  }, "a"_a, pos_only(), "vals"_a, "dtype"_a = nb::none(), kw, "stream"_a = nb::none());
  def_named(m, "eye", [](int n, std::optional<int> mm, int k, Dtype dtype, StreamArg s) {
    return eye(n, mm.value_or(n), k, dtype, s);
  }, "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a = float32, kw, "stream"_a = nb::none());
  def_named(m, "identity", [](int n, Dtype dtype, StreamArg s) { return identity(n, dtype, s); }, "n"_a,
        "dtype"_a = float32, kw, "stream"_a = nb::none());
  def_named(m, "tri", [](int n, std::optional<int> mm, int k, Dtype dtype, StreamArg s) {
    return tri(n, mm.value_or(n), k, dtype, s);
  }, "n"_a, "m"_a = nb::none(), "k"_a = 0, "dtype"_a = float32, kw, "stream"_a = nb::none());
  def_named(m, "tril", [](nb::handle x, int k, StreamArg s) { return tril(to_array(x), k, s); }, "x"_a,
        "k"_a = 0, kw, "stream"_a = nb::none());
  def_named(m, "triu", [](nb::handle x, int k, StreamArg s) { return triu(to_array(x), k, s); }, "x"_a,
        "k"_a = 0, kw, "stream"_a = nb::none());
  def_named(m, "meshgrid", [](nb::args arrays, bool sparse, const std::string& indexing, StreamArg s) {
    auto r = meshgrid(to_array_list(arrays), sparse, indexing, s);
    nb::list l;
    for (auto& a : r) l.append(a);
    return nb::tuple(l);
  }, "arrays"_a, "sparse"_a = false, "indexing"_a = "xy", "stream"_a = nb::none());
}

}  // namespace tessera::python
