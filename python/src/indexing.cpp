// NumPy-style indexing: a[idx], a[idx] = v, and a.at[idx].add(v) etc.
// Basic indices (ints, slices with steps, None, Ellipsis) become a strided slice
// (a view), then squeeze / expand_dims. Writing is slice_update (or where, for
// a boolean mask). Integer-array indices need gather / scatter, which are not
// part of the library yet: they raise a ValueError that says so.
#include <sstream>

#include "convert.h"

namespace tessera::python {

namespace {

// A basic index resolved against an array's shape.
struct BasicIndex {
  Shape start, stop, strides;    // one entry per axis of the array
  std::vector<int> squeeze_axes;  // axes indexed by an int (in the sliced array)
  Shape result_shape;             // the shape of a[idx]
};

[[noreturn]] void advanced_index_error() {
  throw std::invalid_argument(
      "[index] integer-array and list indices need gather (take), which this build does not "
      "have yet; use ints, slices, None and Ellipsis");
}

bool is_int_index(nb::handle e) {
  if (PyBool_Check(e.ptr())) return false;
  if (PyLong_Check(e.ptr())) return true;
  // NumPy integer scalars (0-d) and other __index__ objects, not arrays.
  if (nb::isinstance<array>(e) || !PyIndex_Check(e.ptr())) return false;
  return !nb::hasattr(e, "ndim") || nb::cast<int>(e.attr("ndim")) == 0;
}

BasicIndex basic_index(const array& a, nb::handle idx) {
  std::vector<nb::handle> entries;
  if (PyTuple_Check(idx.ptr())) {
    for (nb::handle e : idx) entries.push_back(e);
  } else {
    entries.push_back(idx);
  }
  int nd = static_cast<int>(a.ndim());
  int real = 0, ellipses = 0;
  for (nb::handle e : entries) {
    if (e.is_none()) continue;
    if (e.ptr() == Py_Ellipsis) {
      ++ellipses;
    } else if (nb::isinstance<nb::slice>(e) || is_int_index(e)) {
      ++real;
    } else if (PyBool_Check(e.ptr())) {
      throw std::invalid_argument("[index] boolean indices are not supported for reading");
    } else if (nb::isinstance<array>(e) || PyList_Check(e.ptr()) || PyObject_CheckBuffer(e.ptr())) {
      advanced_index_error();
    } else {
      throw std::invalid_argument(std::string("[index] cannot index with an object of type ") +
                                  nb::type_name(e.type()).c_str());
    }
  }
  if (ellipses > 1) throw std::invalid_argument("[index] an index can only have a single ellipsis ('...')");
  if (real > nd) {
    std::ostringstream msg;
    msg << "[index] too many indices for an array with " << nd << " dimensions: " << real
        << " were given";
    throw std::invalid_argument(msg.str());
  }
  BasicIndex r;
  r.start.assign(nd, 0);
  r.stop = a.shape();
  r.strides.assign(nd, 1);
  int ax = 0;
  auto keep_axis = [&] { r.result_shape.push_back(a.shape()[ax]); ++ax; };
  for (nb::handle e : entries) {
    if (e.is_none()) {
      r.result_shape.push_back(1);
    } else if (e.ptr() == Py_Ellipsis) {
      for (int k = 0; k < nd - real; ++k) keep_axis();
    } else if (nb::isinstance<nb::slice>(e)) {
      Py_ssize_t b, s, st;
      if (PySlice_Unpack(e.ptr(), &b, &s, &st) < 0) throw nb::python_error();
      Py_ssize_t n = a.shape()[ax];
      Py_ssize_t len = PySlice_AdjustIndices(n, &b, &s, st);
      if (st > INT32_MAX || st < INT32_MIN) throw std::invalid_argument("[index] slice step must fit in int32");
      // With a negative step, -1 here means "before index 0"; slice() reads
      // negative values from the end, so pass it as -1 - n.
      r.start[ax] = static_cast<ShapeElem>(b < 0 ? b - n : b);
      r.stop[ax] = static_cast<ShapeElem>(s < 0 ? s - n : s);
      r.strides[ax] = static_cast<ShapeElem>(st);
      r.result_shape.push_back(static_cast<ShapeElem>(len));
      ++ax;
    } else {
      Py_ssize_t i = PyNumber_AsSsize_t(e.ptr(), PyExc_IndexError);
      if (i == -1 && PyErr_Occurred()) throw nb::python_error();
      Py_ssize_t n = a.shape()[ax];
      if (i < -n || i >= n) {
        std::ostringstream msg;
        msg << "[index] index " << i << " is out of bounds for axis " << ax << " with size " << n;
        throw std::out_of_range(msg.str());
      }
      if (i < 0) i += n;
      r.start[ax] = static_cast<ShapeElem>(i);
      r.stop[ax] = static_cast<ShapeElem>(i + 1);
      r.squeeze_axes.push_back(ax);
      ++ax;
    }
  }
  while (ax < nd) keep_axis();
  return r;
}

bool is_trivial(const array& a, const BasicIndex& ix) {
  return ix.squeeze_axes.empty() && ix.result_shape == a.shape() &&
         std::all_of(ix.strides.begin(), ix.strides.end(), [](int s) { return s == 1; }) &&
         ix.start == Shape(a.ndim(), 0) && ix.stop == a.shape();
}

array get_item(const array& a, nb::handle idx) {
  if (a.ndim() == 0 && !(PyTuple_Check(idx.ptr()) && nb::len(idx) == 0) &&
      idx.ptr() != Py_Ellipsis) {
    bool only_none = idx.is_none();
    if (PyTuple_Check(idx.ptr())) {
      only_none = true;
      for (nb::handle e : idx) only_none &= e.is_none() || e.ptr() == Py_Ellipsis;
    }
    if (!only_none) throw std::invalid_argument("[index] a 0-d array cannot be indexed");
  }
  BasicIndex ix = basic_index(a, idx);
  array r = a;
  if (!is_trivial(a, ix)) r = slice(a, ix.start, ix.stop, ix.strides);
  if (!ix.squeeze_axes.empty()) r = squeeze(r, ix.squeeze_axes);
  if (r.shape() != ix.result_shape) r = reshape(r, ix.result_shape);
  return r;
}

// The value written into a region of `a` that a[idx] would read, shaped like it.
array update_value(const array& a, nb::handle v, const Shape& shape) {
  array val = is_python_scalar(v) ? scalar_to_array(v, a.dtype()) : to_array(v);
  if (val.dtype() != a.dtype()) val = astype(val, a.dtype());
  while (val.ndim() > shape.size() && val.shape()[0] == 1) val = squeeze(val, 0);
  return broadcast_to(val, shape);
}

bool is_mask(nb::handle idx) {
  if (PyBool_Check(idx.ptr())) return true;
  if (nb::isinstance<array>(idx)) return nb::cast<const array&>(idx).dtype() == bool_;
  if (PyList_Check(idx.ptr()) || PyObject_CheckBuffer(idx.ptr())) {
    try {
      return to_array(idx).dtype() == bool_;
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

array set_item(const array& a, nb::handle idx, nb::handle v) {
  if (is_mask(idx)) {
    array mask = to_array(idx);
    if (mask.ndim() > a.ndim() ||
        !std::equal(mask.shape().begin(), mask.shape().end(), a.shape().begin())) {
      std::ostringstream msg;
      msg << "[index] a boolean mask of shape " << shape_str(mask.shape())
          << " must match the leading dimensions of an array of shape " << shape_str(a.shape());
      throw std::invalid_argument(msg.str());
    }
    Shape ms = mask.shape();
    ms.resize(a.ndim(), 1);
    array val = update_value(a, v, Shape(a.shape().begin() + mask.ndim(), a.shape().end()));
    return where(reshape(mask, ms), val, a);
  }
  BasicIndex ix = basic_index(a, idx);
  array val = update_value(a, v, ix.result_shape);
  Shape region(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) {
    int64_t n = a.shape()[i], b = ix.start[i], e = ix.stop[i], st = ix.strides[i];
    if (b < 0) b += n;
    if (e < 0) e += n;
    region[i] = static_cast<ShapeElem>(st > 0 ? (e > b ? (e - b + st - 1) / st : 0)
                                              : (b > e ? (b - e - st - 1) / (-st) : 0));
  }
  return slice_update(a, reshape(val, region), ix.start, ix.stop, ix.strides);
}

// a.at[idx]: functional updates. With basic indices every position occurs once,
// so applying the op to the indexed region equals the accumulating semantics.
struct ArrayAt {
  array a;
  std::optional<nb::object> idx;
  array apply(nb::handle v, array (*op)(const array&, const array&, StreamOrDevice)) const {
    if (!idx) throw std::invalid_argument("[at] index the helper first: a.at[idx].add(v)");
    array cur = get_item(a, *idx);
    array val = is_python_scalar(v) ? scalar_to_array(v, a.dtype()) : to_array(v);
    array upd = op(cur, val, {});
    return set_item(a, *idx, nb::cast(upd));
  }
};

}  // namespace

void init_indexing(nb::module_& m, ArrayClass& cls) {
  cls.def("__getitem__", &get_item, "index"_a.none())
      .def("__setitem__", [](array& a, nb::handle idx, nb::handle v) { a = set_item(a, idx, v); },
           "index"_a.none(), "value"_a);

  nb::class_<ArrayAt>(m, "ArrayAt", "Functional scatter updates: a.at[idx].add(v)")
      .def("__getitem__", [](const ArrayAt& at, nb::object idx) { return ArrayAt{at.a, idx}; },
           "index"_a.none())
      .def("add", [](const ArrayAt& at, nb::handle v) { return at.apply(v, add); }, "value"_a)
      .def("subtract", [](const ArrayAt& at, nb::handle v) { return at.apply(v, subtract); }, "value"_a)
      .def("multiply", [](const ArrayAt& at, nb::handle v) { return at.apply(v, multiply); }, "value"_a)
      .def("divide", [](const ArrayAt& at, nb::handle v) { return at.apply(v, divide); }, "value"_a)
      .def("maximum", [](const ArrayAt& at, nb::handle v) { return at.apply(v, maximum); }, "value"_a)
      .def("minimum", [](const ArrayAt& at, nb::handle v) { return at.apply(v, minimum); }, "value"_a);
  cls.def_prop_ro("at", [](const array& a) { return ArrayAt{a, std::nullopt}; });
}

}  // namespace tessera::python
