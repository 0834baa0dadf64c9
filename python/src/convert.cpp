// Python values to arrays and back. See convert.h.
#include "convert.h"

#include <limits>

#include <nanobind/ndarray.h>
#include <nanobind/stl/complex.h>

#include <climits>
#include <cstring>
#include <algorithm>
#include <deque>
#include <unordered_set>
#include <limits>
#include <sstream>

namespace tessera::python {

namespace {

// Python ints in [lo, hi] (hi above INT64_MAX when `huge`, a uint64) for an
// integer dtype: OverflowError as NumPy gives when one is out of its range.
void check_int_range(long long lo, long long hi, bool huge, Dtype t) {
  if (!is_integer(t)) return;
  __int128 min = 0, max = 0;
  if (is_unsigned(t)) {
    max = (__int128(1) << (8 * t.size)) - 1;
  } else {
    max = (__int128(1) << (8 * t.size - 1)) - 1;
    min = -max - 1;
  }
  auto fail = [&](const std::string& value) {
    throw std::overflow_error("[array] the Python int " + value + " is out of bounds for " +
                              dtype_name(t));
  };
  if (lo < min) fail(std::to_string(lo));
  if (huge && !(t == uint64)) fail("above 2^63");
  if (hi > max) fail(std::to_string(hi));
}

// A Python int as a signed value, or as an unsigned one above INT64_MAX
// (`huge`); OverflowError beyond both.
long long read_int(nb::handle v, bool& huge) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  huge = false;
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      throw std::overflow_error("[array] the Python int is too large for any integer dtype");
    }
    huge = true;
    return static_cast<long long>(u);
  }
  if (overflow < 0) {
    throw std::overflow_error("[array] the Python int is too small for any integer dtype");
  }
  return x;
}

// How a Python scalar becomes an array: a new one, or for an operand of an op
// the cached constant (Note [Scalar operands] in core/array.h).
struct NewScalar {
  template <typename T>
  array operator()(T v, Dtype t) const {
    return array(v, t);
  }
};
struct OperandScalar {
  template <typename T>
  array operator()(T v, Dtype t) const {
    return scalar_operand(v, t);
  }
};

// Default dtype of a Python int: int32, or int64 outside int32's range.
template <typename Make = NewScalar>
array int_to_array(nb::handle v, std::optional<Dtype> dtype, Make make = {}) {
  bool huge;
  long long x = read_int(v, huge);
  if (huge) {
    if (dtype) check_int_range(0, LLONG_MAX, true, *dtype);
    return make(static_cast<uint64_t>(x), dtype.value_or(uint64));
  }
  if (dtype) check_int_range(x, x, false, *dtype);
  Dtype t = dtype.value_or(x >= INT32_MIN && x <= INT32_MAX ? int32 : int64);
  return make(static_cast<int64_t>(x), t);
}

template <typename Make = NewScalar>
array plain_scalar_to_array(nb::handle v, std::optional<Dtype> dtype, Make make = {}) {
  if (PyBool_Check(v.ptr())) return make(v.ptr() == Py_True, dtype.value_or(bool_));
  if (PyLong_Check(v.ptr())) return int_to_array(v, dtype, make);
  if (PyFloat_Check(v.ptr())) return make(PyFloat_AS_DOUBLE(v.ptr()), dtype.value_or(float32));
  Py_complex c = PyComplex_AsCComplex(v.ptr());
  return make(complex64_t(static_cast<float>(c.real), static_cast<float>(c.imag)),
              dtype.value_or(complex64));
}

// Nested lists / tuples: shape from the nesting, dtype from the widest leaf.
struct ListScan {
  Shape shape;
  int leaf_depth = -1;
  int kind = -1;  // 0 bool, 1 int, 2 float, 3 complex
  bool wide_int = false;
  // The range of the ints; `huge`: one is above INT64_MAX (read as uint64).
  long long lo = LLONG_MAX, hi = LLONG_MIN;
  bool huge = false;
};

// Nested lists deeper than this are refused (a list that contains itself
// would otherwise recurse without end); arrays of more dimensions come from
// reshape and friends.
constexpr int kMaxListDepth = 1000;

void check_list_depth(int depth) {
  if (depth > kMaxListDepth) {
    throw std::invalid_argument("[array] the nested list is more than " +
                                std::to_string(kMaxListDepth) +
                                " levels deep (does it contain itself?)");
  }
}

void scan_list(nb::handle v, int depth, ListScan& s) {
  if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) {
    check_list_depth(depth);
    size_t n = nb::len(v);
    if (n > static_cast<size_t>(std::numeric_limits<ShapeElem>::max())) {
      throw std::invalid_argument("[array] a list of " + std::to_string(n) +
                                  " elements is longer than an array dimension can be");
    }
    if (static_cast<int>(s.shape.size()) == depth) {
      if (s.leaf_depth >= 0 && s.leaf_depth <= depth) {
        throw std::invalid_argument("[array] the nested list is not rectangular (inhomogeneous)");
      }
      s.shape.push_back(static_cast<ShapeElem>(n));
    } else if (s.shape[depth] != static_cast<ShapeElem>(n) || s.leaf_depth == depth) {
      throw std::invalid_argument("[array] the nested list is not rectangular (inhomogeneous)");
    }
    for (nb::handle e : v) scan_list(e, depth + 1, s);
    return;
  }
  if (s.leaf_depth < 0) s.leaf_depth = depth;
  if (s.leaf_depth != depth || static_cast<int>(s.shape.size()) != depth) {
    throw std::invalid_argument("[array] the nested list is not rectangular (inhomogeneous)");
  }
  int k;
  if (PyBool_Check(v.ptr())) {
    k = 0;
  } else if (PyLong_Check(v.ptr())) {
    k = 1;
    bool huge;
    long long x = read_int(v, huge);
    if (huge) {
      s.huge = true;
    } else {
      s.lo = std::min(s.lo, x);
      s.hi = std::max(s.hi, x);
    }
    if (huge || x < INT32_MIN || x > INT32_MAX) s.wide_int = true;
  } else if (PyFloat_Check(v.ptr())) {
    k = 2;
  } else if (PyComplex_Check(v.ptr())) {
    k = 3;
  } else {
    throw std::invalid_argument(std::string("[array] cannot convert a list element of type ") +
                                nb::type_name(v.type()).c_str());
  }
  s.kind = std::max(s.kind, k);
}

template <typename T>
void fill_list(nb::handle v, std::vector<T>& out) {
  if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) {
    for (nb::handle e : v) fill_list(e, out);
    return;
  }
  if constexpr (std::is_same_v<T, complex64_t>) {
    Py_complex c = PyComplex_AsCComplex(v.ptr());
    out.emplace_back(static_cast<float>(c.real), static_cast<float>(c.imag));
  } else if constexpr (std::is_same_v<T, double>) {
    out.push_back(PyFloat_AsDouble(v.ptr()));
  } else {
    bool huge;
    out.push_back(static_cast<T>(read_int(v, huge)));
  }
}

bool list_has_array(nb::handle v, int depth = 0) {
  check_list_depth(depth);
  for (nb::handle e : v) {
    if (nb::isinstance<array>(e)) return true;
    if ((PyList_Check(e.ptr()) || PyTuple_Check(e.ptr())) && list_has_array(e, depth + 1)) {
      return true;
    }
  }
  return false;
}

array list_to_array(nb::handle v, std::optional<Dtype> dtype) {
  if (list_has_array(v)) {
    std::vector<array> parts;
    for (nb::handle e : v) parts.push_back(to_array(e));
    if (parts.empty()) return zeros({0}, dtype.value_or(float32));
    array r = stack(parts);
    return dtype ? astype(r, *dtype) : r;
  }
  ListScan s;
  scan_list(v, 0, s);
  if (s.kind < 0) return array(static_cast<float*>(nullptr), s.shape, dtype.value_or(float32));
  switch (s.kind) {
    case 0: {
      std::vector<uint8_t> d;
      fill_list(v, d);
      std::vector<bool> b(d.begin(), d.end());
      return array(b.begin(), s.shape, dtype.value_or(bool_));
    }
    case 1: {
      if (s.huge && s.lo < 0) {
        throw std::overflow_error("[array] the list mixes negative ints with ints above 2^63: "
                                  "no integer dtype holds both");
      }
      if (dtype) check_int_range(s.lo, s.hi, s.huge, *dtype);
      if (s.huge) {
        std::vector<uint64_t> d;
        fill_list(v, d);
        return array(d.begin(), s.shape, dtype.value_or(uint64));
      }
      std::vector<int64_t> d;
      fill_list(v, d);
      return array(d.begin(), s.shape, dtype.value_or(s.wide_int ? int64 : int32));
    }
    case 2: {
      std::vector<double> d;
      fill_list(v, d);
      return array(d.begin(), s.shape, dtype.value_or(float32));
    }
    default: {
      std::vector<complex64_t> d;
      fill_list(v, d);
      return array(d.begin(), s.shape, dtype.value_or(complex64));
    }
  }
}

}  // namespace

std::optional<Dtype> dlpack_dtype(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  switch (static_cast<C>(t.code)) {
    case C::Bool: return bool_;
    case C::Int:
      switch (t.bits) { case 8: return int8; case 16: return int16; case 32: return int32; case 64: return int64; }
      break;
    case C::UInt:
      switch (t.bits) { case 8: return uint8; case 16: return uint16; case 32: return uint32; case 64: return uint64; }
      break;
    case C::Float:
      switch (t.bits) { case 16: return float16; case 32: return float32; case 64: return float64; }
      break;
    case C::Bfloat:
      if (t.bits == 16) return bfloat16;
      break;
    case C::Complex:
      if (t.bits == 64) return complex64;
      break;
    default: break;
  }
  return std::nullopt;
}

nb::dlpack::dtype to_dlpack_dtype(Dtype t) {
  using C = nb::dlpack::dtype_code;
  C code;
  if (t == bool_) code = C::Bool;
  else if (is_unsigned(t)) code = C::UInt;
  else if (is_signed_integer(t)) code = C::Int;
  else if (t == bfloat16) code = C::Bfloat;
  else if (is_complex(t)) code = C::Complex;
  else code = C::Float;
  return {static_cast<uint8_t>(code), static_cast<uint8_t>(t.size * 8), 1};
}

// Copies a strided block of elements to a row-contiguous destination.
void strided_copy(const char* src, char* dst, const int64_t* shape, const int64_t* strides,
                  int ndim, size_t itemsize) {
  if (ndim == 0) {
    std::memcpy(dst, src, itemsize);
    return;
  }
  std::vector<int64_t> idx(ndim, 0);
  int64_t total = 1;
  for (int i = 0; i < ndim; ++i) total *= shape[i];
  for (int64_t n = 0; n < total; ++n) {
    int64_t off = 0;
    for (int i = 0; i < ndim; ++i) off += idx[i] * strides[i];
    std::memcpy(dst + n * itemsize, src + off * static_cast<int64_t>(itemsize), itemsize);
    for (int i = ndim - 1; i >= 0; --i) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
}

bool is_python_scalar(nb::handle v) {
  return PyBool_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr()) ||
         PyComplex_Check(v.ptr());
}

std::optional<array> from_buffer(nb::handle v) {
  if (!PyObject_CheckBuffer(v.ptr()) && !nb::hasattr(v, "__dlpack__")) return std::nullopt;
  nb::ndarray<nb::ro> nd;
  if (!nb::try_cast(v, nd, false)) {
    PyErr_Clear();
    nb::object d = nb::getattr(v, "dtype", nb::none());
    // A NumPy array of swapped byte order: its values in native order.
    if (!d.is_none() && nb::hasattr(d, "byteorder") && nb::hasattr(v, "astype") &&
        nb::cast<std::string>(nb::str(d.attr("byteorder"))) == ">") {
      return from_buffer(v.attr("astype")(d.attr("newbyteorder")("=")));
    }
    std::string what = d.is_none() ? std::string("of an unknown kind") : nb::cast<std::string>(nb::str(d));
    throw std::invalid_argument("[array] cannot import an array of element type " + what);
  }
  if (nd.device_type() != nb::device::cpu::value) {
    throw std::invalid_argument(
        "[array] only host (CPU) memory can be imported; copy the tensor to the host first");
  }
  auto dtype = dlpack_dtype(nd.dtype());
  if (!dtype) {
    std::ostringstream msg;
    msg << "[array] unsupported element type (DLPack code " << int(nd.dtype().code) << ", "
        << int(nd.dtype().bits) << " bits)";
    throw std::invalid_argument(msg.str());
  }
  Shape shape;
  Strides strides;
  for (size_t i = 0; i < nd.ndim(); ++i) {
    if (nd.shape(i) > INT32_MAX) throw std::invalid_argument("[array] dimension exceeds int32");
    shape.push_back(static_cast<ShapeElem>(nd.shape(i)));
    strides.push_back(nd.stride(i));
  }
  auto* keep = new nb::ndarray<nb::ro>(nd);
  return copy_of(const_cast<void*>(nd.data()), shape, strides, *dtype, Device::cpu,
                 [keep] { release_with_gil([keep] { delete keep; }); });
}

bool host_view_read_only(const array& x) {
  for (size_t i = 0; i < x.ndim(); ++i) {
    if (x.strides()[i] == 0 && x.shape()[i] > 1) return true;
  }
  auto* s = x.has_data() ? x.buffer().storage() : nullptr;
  return s && s->device_borrowed;
}

bool is_array_like(nb::handle v) {
  return nb::isinstance<array>(v) || is_python_scalar(v) || PyList_Check(v.ptr()) ||
         PyTuple_Check(v.ptr()) || PyObject_CheckBuffer(v.ptr()) ||
         nb::hasattr(v, "__dlpack__") || nb::hasattr(v, "__mlx_array__") ||
         nb::hasattr(v, "__tessera_array__");
}

std::vector<array> to_array_list(nb::handle seq) {
  std::vector<array> out;
  for (nb::handle e : seq) out.push_back(to_array(e));
  return out;
}

array to_array(nb::handle v, std::optional<Dtype> dtype) {
  if (nb::isinstance<array>(v)) {
    const array& a = nb::cast<const array&>(v);
    return dtype && *dtype != a.dtype() ? astype(a, *dtype) : a;
  }
  if (is_python_scalar(v)) return plain_scalar_to_array(v, dtype);
  if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) return list_to_array(v, dtype);
  if (auto a = import_dlpack(v, /*copy=*/true, "array")) return dtype ? astype(*a, *dtype) : *a;
  if (auto a = from_buffer(v)) return dtype ? astype(*a, *dtype) : *a;
  for (const char* hook : {"__tessera_array__", "__mlx_array__"}) {
    if (nb::hasattr(v, hook)) return to_array(v.attr(hook)(), dtype);
  }
  // NumPy scalars and other objects NumPy understands.
  if (nb::hasattr(v, "__array__")) return to_array(v.attr("__array__")(), dtype);
  throw std::invalid_argument(std::string("[array] cannot convert an object of type ") +
                              nb::type_name(v.type()).c_str() + " to an array");
}

namespace {
template <typename Make>
array scalar_with_hint(nb::handle v, Dtype hint, Make make) {
  if (PyBool_Check(v.ptr())) return make(v.ptr() == Py_True, hint);
  if (PyLong_Check(v.ptr())) {
    if (hint == bool_) return int_to_array(v, int32, make);
    if (is_integer(hint) && hint.size < 8) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
      iinfo info(hint);
      if (overflow || x < info.min || (x > 0 && static_cast<uint64_t>(x) > info.max)) {
        std::ostringstream msg;
        msg << "[array] the Python int " << nb::str(v).c_str() << " does not fit in "
            << dtype_name(hint) << " (overflow)";
        throw std::invalid_argument(msg.str());
      }
      return make(static_cast<int64_t>(x), hint);
    }
    return int_to_array(v, hint, make);
  }
  if (PyFloat_Check(v.ptr())) {
    return make(PyFloat_AS_DOUBLE(v.ptr()), is_floating_point(hint) ? hint : float32);
  }
  return plain_scalar_to_array(v, complex64, make);
}

// A Python scalar operand of a binary op beside an array of dtype hint.
array scalar_operand_with(nb::handle v, Dtype hint) {
  return scalar_with_hint(v, hint, OperandScalar{});
}
}  // namespace

array scalar_to_array(nb::handle v, Dtype hint) { return scalar_with_hint(v, hint, NewScalar{}); }

std::pair<array, array> to_arrays(nb::handle a, nb::handle b) {
  bool a_arr = nb::isinstance<array>(a), b_arr = nb::isinstance<array>(b);
  if (a_arr && b_arr) return {nb::cast<const array&>(a), nb::cast<const array&>(b)};
  if (a_arr && is_python_scalar(b)) {
    const array& x = nb::cast<const array&>(a);
    return {x, scalar_operand_with(b, x.dtype())};
  }
  if (b_arr && is_python_scalar(a)) {
    const array& y = nb::cast<const array&>(b);
    return {scalar_operand_with(a, y.dtype()), y};
  }
  return {to_array(a), to_array(b)};
}

array operand_with(const array& a, nb::handle b) {
  if (nb::isinstance<array>(b)) return nb::cast<const array&>(b);
  if (is_python_scalar(b)) return scalar_operand_with(b, a.dtype());
  return to_array(b);
}

std::vector<int> to_vec(const IntOrVec& v) {
  if (auto* i = std::get_if<int>(&v)) return {*i};
  return std::get<std::vector<int>>(v);
}

namespace {

template <typename T>
nb::object scalar_object(const void* p) {
  T x = *static_cast<const T*>(p);
  if constexpr (std::is_same_v<T, bool>) {
    return nb::bool_(x);
  } else if constexpr (std::is_same_v<T, complex64_t>) {
    return nb::cast(std::complex<double>(x.real(), x.imag()));
  } else if constexpr (std::is_integral_v<T>) {
    return nb::int_(x);
  } else {
    return nb::float_(static_cast<double>(static_cast<float>(x)));
  }
}

nb::object element(const char* p, Dtype t) {
  switch (t.val) {
    case Dtype::Val::bool_: return nb::bool_(*reinterpret_cast<const uint8_t*>(p) != 0);
    case Dtype::Val::uint8: return scalar_object<uint8_t>(p);
    case Dtype::Val::uint16: return scalar_object<uint16_t>(p);
    case Dtype::Val::uint32: return scalar_object<uint32_t>(p);
    case Dtype::Val::uint64: return scalar_object<uint64_t>(p);
    case Dtype::Val::int8: return scalar_object<int8_t>(p);
    case Dtype::Val::int16: return scalar_object<int16_t>(p);
    case Dtype::Val::int32: return scalar_object<int32_t>(p);
    case Dtype::Val::int64: return scalar_object<int64_t>(p);
    case Dtype::Val::float16: return scalar_object<float16_t>(p);
    case Dtype::Val::bfloat16: return scalar_object<bfloat16_t>(p);
    case Dtype::Val::float32: return scalar_object<float>(p);
    case Dtype::Val::float64: return nb::float_(*reinterpret_cast<const double*>(p));
    case Dtype::Val::complex64: return scalar_object<complex64_t>(p);
  }
  throw std::logic_error("[item] unknown dtype (bug)");
}

// Groups `items` (the entries of dimensions [0, depth) of a's shape, in
// row-major order) into nested lists, innermost level first: arrays of any
// number of dimensions convert without recursion.
nb::object nest(std::vector<nb::object> items, const array& a, size_t depth) {
  for (size_t d = depth; d-- > 0;) {
    const size_t n = static_cast<size_t>(a.shape()[d]);
    std::vector<nb::object> up(items.size() / n);
    for (size_t j = 0; j < up.size(); ++j) {
      nb::list l;
      for (size_t k = 0; k < n; ++k) l.append(std::move(items[j * n + k]));
      up[j] = std::move(l);
    }
    items = std::move(up);
  }
  return std::move(items.front());
}

}  // namespace

nb::object item(const array& a) {
  array x = a;
  {
    nb::gil_scoped_release nogil;
    x.eval();
  }
  if (x.size() != 1) {
    std::ostringstream msg;
    msg << "[item] the array must have exactly one element, it has " << x.size();
    throw std::invalid_argument(msg.str());
  }
  return element(static_cast<const char*>(x.raw_data()), x.dtype());
}

nb::object tolist(const array& a) {
  array x = a;
  {
    nb::gil_scoped_release nogil;
    x.eval();
  }
  if (x.size() == 0) {
    // Empty: nested lists down to the first empty dimension, then empty lists.
    size_t depth = 0, count = 1;
    while (x.shape()[depth] != 0) count *= static_cast<size_t>(x.shape()[depth++]);
    std::vector<nb::object> items(count);
    for (auto& i : items) i = nb::list();
    return nest(std::move(items), x, depth);
  }
  // The elements in row-major order, whatever the strides.
  const char* base = static_cast<const char*>(x.raw_data());
  const int64_t itemsize = static_cast<int64_t>(x.itemsize());
  const size_t nd = x.ndim();
  std::vector<nb::object> items(x.size());
  std::vector<ShapeElem> idx(nd, 0);
  int64_t off = 0;
  for (size_t n = 0; n < items.size(); ++n) {
    items[n] = element(base + off * itemsize, x.dtype());
    for (size_t d = nd; d-- > 0;) {
      off += x.strides()[d];
      if (++idx[d] < x.shape()[d]) break;
      off -= x.strides()[d] * x.shape()[d];
      idx[d] = 0;
    }
  }
  return nest(std::move(items), x, nd);
}

nb::object to_numpy(const array& a, std::optional<nb::handle> dtype) {
  array x = a.dtype() == bfloat16 ? astype(a, float32) : a;
  {
    nb::gil_scoped_release nogil;
    x.eval();
  }
  bool negative = false;
  for (auto st : x.strides()) negative |= st < 0;
  if (negative) {
    x = contiguous(x);
    nb::gil_scoped_release nogil;
    x.eval();
  }
  std::vector<size_t> shape(x.shape().begin(), x.shape().end());
  auto* keep = new array(x);
  nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<array*>(p); });
  const bool read_only = host_view_read_only(x);
  void* data = x.size() == 0 ? nullptr : (read_only ? x.raw_data() : keep->mutable_data());
  nb::object out;
  if (read_only) {
    out = nb::ndarray<nb::numpy, nb::ro>(data, x.ndim(), shape.data(), owner,
                                         x.strides().data(), to_dlpack_dtype(x.dtype()))
              .cast();
  } else {
    out = nb::ndarray<nb::numpy>(data, x.ndim(), shape.data(), owner, x.strides().data(),
                                 to_dlpack_dtype(x.dtype()))
              .cast();
  }
  if (dtype && !dtype->is_none()) out = out.attr("astype")(*dtype);
  return out;
}

}  // namespace tessera::python

namespace tessera::python {

// A dimension from a Python int; one outside ShapeElem's range raises
// OverflowError naming the op and the value, as MLX does.
ShapeElem to_shape_elem(nb::handle v, const char* op) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow == 0 && x == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow || x < std::numeric_limits<ShapeElem>::min() ||
      x > std::numeric_limits<ShapeElem>::max()) {
    std::string msg = std::string("[") + op + "] shape entry " + nb::str(v).c_str() +
                      " is out of range: dimensions must be below 2^31";
    PyErr_SetString(PyExc_OverflowError, msg.c_str());
    throw nb::python_error();
  }
  return static_cast<ShapeElem>(x);
}

uint64_t to_uint64(nb::handle v, const char* op, const char* name) {
  unsigned long long x = PyLong_AsUnsignedLongLong(v.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw std::invalid_argument(std::string("[") + op + "] " + name + " must be in [0, 2^64), got " +
                                nb::str(v).c_str());
  }
  return x;
}

int to_int32(nb::handle v, const char* op, const char* name) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow || x < INT32_MIN || x > INT32_MAX) {
    throw std::invalid_argument(std::string("[") + op + "] " + name + " " + nb::str(v).c_str() +
                                " is out of range: it must be below 2^31 in magnitude");
  }
  return static_cast<int>(x);
}

Shape to_shape(nb::handle v, const char* op) {
  if (PyLong_Check(v.ptr())) return {to_shape_elem(v, op)};
  if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) {
    Shape s;
    for (nb::handle e : v) {
      if (!PyLong_Check(e.ptr()) || PyBool_Check(e.ptr())) {
        throw nb::type_error((std::string("[") + op + "] shape entries must be ints").c_str());
      }
      s.push_back(to_shape_elem(e, op));
    }
    return s;
  }
  throw nb::type_error((std::string("[") + op + "] a shape must be an int or a sequence of ints").c_str());
}

}  // namespace tessera::python

namespace tessera::python {

void for_each_leaf(nb::handle tree, const char* op, const std::function<void(nb::handle)>& f) {
  // (node, leaving): a container is pushed again below its children to leave
  // the current path once they are done.
  std::vector<std::pair<nb::handle, bool>> stack{{tree, false}};
  std::unordered_set<PyObject*> path;
  while (!stack.empty()) {
    auto [node, leaving] = stack.back();
    stack.pop_back();
    PyObject* o = node.ptr();
    if (leaving) {
      path.erase(o);
      continue;
    }
    bool sequence = PyList_Check(o) || PyTuple_Check(o);
    if (!sequence && !PyDict_Check(o)) {
      f(node);
      continue;
    }
    if (!path.insert(o).second) {
      throw std::invalid_argument(std::string("[") + op + "] the argument contains itself (a " +
                                  Py_TYPE(o)->tp_name + " that holds itself)");
    }
    stack.push_back({node, true});
    size_t first = stack.size();
    if (sequence) {
      for (nb::handle e : node) stack.push_back({e, false});
    } else {
      for (auto [k, v] : nb::borrow<nb::dict>(node)) stack.push_back({v, false});
    }
    std::reverse(stack.begin() + first, stack.end());
  }
}

void rethrow_named(const char* name) {
  // See Note [Errors name the function called].
  auto renamed = [name](const std::exception& e) {
    std::string what = e.what();
    const std::string conversion = "[array] ";
    return what.rfind(conversion, 0) == 0 && std::strcmp(name, "array") != 0
               ? "[" + std::string(name) + "] " + what.substr(conversion.size())
               : std::optional<std::string>();
  };
  try {
    throw;
  } catch (const std::invalid_argument& e) {
    if (auto what = renamed(e)) throw std::invalid_argument(*what);
    throw;
  } catch (const std::overflow_error& e) {
    if (auto what = renamed(e)) throw std::overflow_error(*what);
    throw;
  }
}

const char* positional_only_signature(const std::string& doc, size_t n) {
  static std::deque<std::string> signatures;
  std::string line = doc.substr(0, doc.find('\n'));
  // After the n-th top-level comma of the parameter list, or before its ')'.
  size_t i = line.find('('), depth = 0, params = 0;
  for (++i; i < line.size(); ++i) {
    char c = line[i];
    if (c == '[' || c == '(') ++depth;
    if ((c == ']' || c == ')') && depth > 0) {
      --depth;
      continue;
    }
    if (depth == 0 && (c == ',' || c == ')') && ++params == n) break;
  }
  if (i >= line.size()) throw std::logic_error("[def] cannot place '/' in " + line + " (bug)");
  signatures.push_back("def " + line.substr(0, i) + ", /" + line.substr(i));
  return signatures.back().c_str();
}

std::optional<std::string> as_path(nb::handle file) {
  if (!nb::isinstance<nb::str>(file) && !nb::isinstance<nb::bytes>(file) &&
      !nb::hasattr(file, "__fspath__")) {
    return std::nullopt;
  }
  nb::bytes b = nb::cast<nb::bytes>(nb::module_::import_("os").attr("fsencode")(file));
  return std::string(b.c_str(), b.size());
}

std::optional<array> optional_array(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  return to_array(v);
}

}  // namespace tessera::python
