// NumPy-style indexing: a[idx], a[idx] = v, and a.at[idx].add(v) etc.; and
// take, take_along_axis and put_along_axis.
// Basic indices (ints, slices with steps, None, Ellipsis) become a strided slice
// (a view), then squeeze / expand_dims. Writing is slice_update (or where, for
// a boolean mask). Integer arrays, lists and boolean arrays (advanced indices)
// go through gather and scatter on the sliced region, with NumPy's placement of
// the broadcast index dimensions; a boolean array stands for the integer arrays
// of its True positions (so reading with one evaluates it).
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

// The entries of an index, read in place: a tuple's items, or the index itself.
class Entries {
 public:
  explicit Entries(nb::handle idx) : single_(idx.ptr()) {
    if (PyTuple_Check(single_)) {
      items_ = PySequence_Fast_ITEMS(single_);
      size_ = PyTuple_GET_SIZE(single_);
    }
  }
  Entries(const Entries&) = delete;
  Entries& operator=(const Entries&) = delete;
  PyObject* const* begin() const { return items_; }
  PyObject* const* end() const { return items_ + size_; }

 private:
  PyObject* single_;
  PyObject* const* items_ = &single_;
  Py_ssize_t size_ = 1;
};

bool is_int_index(nb::handle e) {
  if (PyBool_Check(e.ptr())) return false;
  if (PyLong_Check(e.ptr())) return true;
  // NumPy integer scalars (0-d) and other __index__ objects, not arrays.
  if (nb::isinstance<array>(e) || !PyIndex_Check(e.ptr())) return false;
  return !nb::hasattr(e, "ndim") || nb::cast<int>(e.attr("ndim")) == 0;
}

// The error for an index entry that neither parser takes.
[[noreturn]] void throw_unsupported_index(nb::handle e) {
  if (PyBool_Check(e.ptr())) {
    throw std::invalid_argument("[index] boolean indices are not supported for reading");
  }
  throw std::invalid_argument(std::string("[index] cannot index with an object of type ") +
                              nb::type_name(e.type()).c_str());
}

// At most one Ellipsis, and no more entries that index an axis than axes.
void check_index_counts(int ellipses, int real, int nd) {
  if (ellipses > 1) throw std::invalid_argument("[index] an index can only have a single ellipsis ('...')");
  if (real > nd) {
    std::ostringstream msg;
    msg << "[index] too many indices for an array with " << nd << " dimensions: " << real
        << " were given";
    throw std::invalid_argument(msg.str());
  }
}

BasicIndex basic_index(const array& a, nb::handle idx) {
  const Entries entries(idx);
  int nd = static_cast<int>(a.ndim());
  int real = 0, ellipses = 0;
  for (nb::handle e : entries) {
    if (e.is_none()) continue;
    if (e.ptr() == Py_Ellipsis) {
      ++ellipses;
    } else if (nb::isinstance<nb::slice>(e) || is_int_index(e)) {
      ++real;
    } else {
      throw_unsupported_index(e);
    }
  }
  check_index_counts(ellipses, real, nd);
  BasicIndex r;
  r.start.assign(nd, 0);
  r.stop = a.shape();
  r.strides.assign(nd, 1);
  r.result_shape.reserve(nd + (entries.end() - entries.begin()));
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
         std::all_of(ix.start.begin(), ix.start.end(), [](int b) { return b == 0; }) &&
         ix.stop == a.shape();
}

bool is_array_index(nb::handle e) {
  return nb::isinstance<array>(e) || PyList_Check(e.ptr()) ||
         (PyObject_CheckBuffer(e.ptr()) && !is_int_index(e));
}

bool contains(const std::vector<int>& axes, int d) {
  return std::find(axes.begin(), axes.end(), d) != axes.end();
}

// An index with integer or boolean arrays, resolved against a's shape:
// `basic` (ints and arrays replaced by full slices, None dropped) selects the
// region the gather or scatter works on; `indices` (broadcast) index its axes
// `axes`. The result of a[idx] is the gather's (index dims, remaining dims),
// moved and reshaped into `out_shape`.
struct AdvancedIndex {
  nb::tuple basic;
  std::vector<array> indices;
  std::vector<int> axes;
  Shape index_shape;
  int index_position = 0;  // where the index dims go among the output dims
  Shape out_shape;
};

// The integer arrays of a boolean mask's True positions (NumPy's nonzero).
std::vector<array> true_positions(const array& mask) {
  nb::object np = nb::module_::import_("numpy");
  nb::object nz = np.attr("nonzero")(to_numpy(mask));
  std::vector<array> out;
  for (nb::handle p : nz) out.push_back(to_array(p.attr("astype")("int32")));
  return out;
}

std::optional<AdvancedIndex> advanced_index(const array& a, nb::handle idx) {
  const Entries entries(idx);
  if (std::none_of(entries.begin(), entries.end(),
                   [](PyObject* e) { return is_array_index(e); })) {
    return std::nullopt;
  }
  // Each entry: 'N' (None), 'E' (Ellipsis), 'S' (slice), 'A' (int or array: advanced).
  struct Entry { char kind; nb::handle h; std::vector<array> arrays; bool mask = false; };
  std::vector<Entry> es;
  int real = 0, ellipses = 0;
  for (nb::handle e : entries) {
    if (e.is_none()) {
      es.push_back({'N', e, {}});
    } else if (e.ptr() == Py_Ellipsis) {
      es.push_back({'E', e, {}});
      ++ellipses;
    } else if (nb::isinstance<nb::slice>(e)) {
      es.push_back({'S', e, {}});
      ++real;
    } else if (is_int_index(e)) {
      Py_ssize_t i = PyNumber_AsSsize_t(e.ptr(), PyExc_IndexError);
      if (i == -1 && PyErr_Occurred()) throw nb::python_error();
      es.push_back({'A', e, {array(static_cast<int32_t>(i))}});
      ++real;
    } else if (is_array_index(e)) {
      array x = to_array(e);
      if (x.dtype() == bool_) {
        es.push_back({'A', e, true_positions(x), true});
        real += static_cast<int>(x.ndim());
      } else if (issubdtype(x.dtype(), integer)) {
        es.push_back({'A', e, {x}});
        ++real;
      } else {
        throw std::invalid_argument(
            "[index] arrays used as indices must be integer or boolean, got " +
            dtype_name(x.dtype()));
      }
    } else {
      throw_unsupported_index(e);
    }
  }
  int nd = static_cast<int>(a.ndim());
  check_index_counts(ellipses, real, nd);
  AdvancedIndex r;
  nb::list basic;
  std::vector<array> idx_arrays;
  std::vector<char> slots;  // output slots in order: 'N', 'S', 'A' (the group, once)
  int first_a = -1, last_a = -1, ax = 0;
  bool separated = false;
  Shape rest;  // sizes of the sliced axes, filled after slicing
  for (size_t k = 0; k < es.size(); ++k) {
    const Entry& e = es[k];
    if (e.kind == 'A') {
      if (first_a >= 0 && last_a != static_cast<int>(k) - 1) separated = true;
      if (first_a < 0) {
        first_a = static_cast<int>(k);
        slots.push_back('A');
      }
      last_a = static_cast<int>(k);
      if (is_int_index(e.h)) {
        Py_ssize_t i = PyNumber_AsSsize_t(e.h.ptr(), PyExc_IndexError);
        Py_ssize_t n = a.shape()[ax];
        if (i < -n || i >= n) {
          std::ostringstream msg;
          msg << "[index] index " << i << " is out of bounds for axis " << ax << " with size " << n;
          throw std::out_of_range(msg.str());
        }
      } else if (e.mask) {
        // A boolean mask: its shape must match the axes it indexes.
        array mask = to_array(e.h);
        if (!std::equal(mask.shape().begin(), mask.shape().end(), a.shape().begin() + ax)) {
          std::ostringstream msg;
          msg << "[index] a boolean index of shape " << shape_str(mask.shape())
              << " does not match axes " << ax << ".." << ax + mask.ndim() - 1
              << " of an array of shape " << shape_str(a.shape());
          throw std::out_of_range(msg.str());
        }
      }
      for (const array& x : e.arrays) {
        idx_arrays.push_back(x);
        r.axes.push_back(ax++);
        basic.append(nb::slice(nb::none(), nb::none(), nb::none()));
      }
    } else if (e.kind == 'N') {
      slots.push_back('N');
    } else if (e.kind == 'S') {
      basic.append(e.h);
      slots.push_back('S');
      ++ax;
    } else {
      for (int j = 0; j < nd - real; ++j) {
        basic.append(nb::slice(nb::none(), nb::none(), nb::none()));
        slots.push_back('S');
        ++ax;
      }
    }
  }
  while (ax < nd) {
    basic.append(nb::slice(nb::none(), nb::none(), nb::none()));
    slots.push_back('S');
    ++ax;
  }
  r.basic = nb::tuple(basic);
  r.indices = broadcast_arrays(idx_arrays);
  r.index_shape = r.indices[0].shape();
  if (separated) {
    slots.erase(std::find(slots.begin(), slots.end(), 'A'));
    slots.insert(slots.begin(), 'A');
  }
  // The sizes of the non-indexed axes of the sliced region.
  BasicIndex bi = basic_index(a, r.basic);
  for (int d = 0; d < nd; ++d) {
    if (!contains(r.axes, d)) rest.push_back(bi.result_shape[d]);
  }
  size_t next = 0;
  int s_before = 0;
  bool seen_a = false;
  for (char c : slots) {
    if (c == 'A') {
      seen_a = true;
      r.out_shape.insert(r.out_shape.end(), r.index_shape.begin(), r.index_shape.end());
    } else if (c == 'N') {
      r.out_shape.push_back(1);
    } else {
      r.out_shape.push_back(rest[next++]);
      if (!seen_a) ++s_before;
    }
  }
  r.index_position = s_before;
  return r;
}

// The gather's layout (index dims, then the sliced region's other axes with
// size-1 entries on the indexed axes) for a[idx]'s result, and back.
array region_of(const array& a, const AdvancedIndex& ix);

// True when the index selects nothing; throws when it indexes an empty axis.
bool selects_nothing(const array& region, const AdvancedIndex& ix) {
  bool empty = std::any_of(ix.index_shape.begin(), ix.index_shape.end(),
                           [](ShapeElem n) { return n == 0; });
  for (int d : ix.axes) {
    if (region.shape()[d] == 0 && !empty) {
      std::ostringstream msg;
      msg << "[index] index 0 is out of bounds for axis " << d << " with size 0";
      throw std::out_of_range(msg.str());
    }
  }
  return empty;
}

array advanced_get(const array& a, const AdvancedIndex& ix) {
  array region = region_of(a, ix);
  if (selects_nothing(region, ix)) return zeros(ix.out_shape, a.dtype());
  Shape sizes = region.shape();
  for (int d : ix.axes) sizes[d] = 1;
  array g = gather(region, ix.indices, ix.axes, sizes);
  // (index dims, region dims with 1s) -> (index dims, remaining dims)
  Shape squeezed(ix.index_shape);
  for (int d = 0; d < static_cast<int>(region.ndim()); ++d) {
    if (!contains(ix.axes, d)) squeezed.push_back(sizes[d]);
  }
  g = reshape(g, squeezed);
  int nb_ = static_cast<int>(ix.index_shape.size());
  if (ix.index_position > 0 && nb_ > 0) {
    std::vector<int> perm;
    int nrest = static_cast<int>(squeezed.size()) - nb_;
    for (int i = 0; i < ix.index_position; ++i) perm.push_back(nb_ + i);
    for (int i = 0; i < nb_; ++i) perm.push_back(i);
    for (int i = ix.index_position; i < nrest; ++i) perm.push_back(nb_ + i);
    g = transpose(g, perm);
  }
  return reshape(g, ix.out_shape);
}

// An update shaped like a[idx] (out_shape) in the scatter's layout.
array scatter_updates(const array& region, const AdvancedIndex& ix, const array& val) {
  int nb_ = static_cast<int>(ix.index_shape.size());
  Shape moved;  // out_shape without the None axes, index dims in place
  Shape rest;
  for (int d = 0; d < static_cast<int>(region.ndim()); ++d) {
    if (!contains(ix.axes, d)) rest.push_back(region.shape()[d]);
  }
  for (int i = 0; i < ix.index_position; ++i) moved.push_back(rest[i]);
  moved.insert(moved.end(), ix.index_shape.begin(), ix.index_shape.end());
  for (size_t i = ix.index_position; i < rest.size(); ++i) moved.push_back(rest[i]);
  array u = reshape(val, moved);
  if (ix.index_position > 0 && nb_ > 0) {
    std::vector<int> perm;
    for (int i = 0; i < nb_; ++i) perm.push_back(ix.index_position + i);
    for (int i = 0; i < ix.index_position; ++i) perm.push_back(i);
    for (int i = ix.index_position + nb_; i < static_cast<int>(moved.size()); ++i) {
      perm.push_back(i);
    }
    u = transpose(u, perm);
  }
  Shape full(ix.index_shape);
  for (int d = 0; d < static_cast<int>(region.ndim()); ++d) {
    full.push_back(contains(ix.axes, d) ? 1 : region.shape()[d]);
  }
  return reshape(u, full);
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
  if (auto adv = advanced_index(a, idx)) return advanced_get(a, *adv);
  BasicIndex ix = basic_index(a, idx);
  array r = a;
  if (!is_trivial(a, ix)) r = slice(a, std::move(ix.start), std::move(ix.stop), std::move(ix.strides));
  if (!ix.squeeze_axes.empty()) r = squeeze(r, ix.squeeze_axes);
  if (r.shape() != ix.result_shape) r = reshape(r, ix.result_shape);
  return r;
}

array region_of(const array& a, const AdvancedIndex& ix) { return get_item(a, ix.basic); }

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
    std::optional<array> val;
    try {
      val = update_value(a, v, Shape(a.shape().begin() + mask.ndim(), a.shape().end()));
    } catch (const std::invalid_argument&) {
      // Not one value for every selected position: one row per True entry,
      // written through the positions of the mask (below).
    }
    if (val) return where(reshape(mask, ms), *val, a);
  }
  if (auto adv = advanced_index(a, idx)) {
    array region = region_of(a, *adv);
    array val = update_value(a, v, adv->out_shape);
    if (selects_nothing(region, *adv)) return a;
    array updated = scatter(region, adv->indices, scatter_updates(region, *adv, val), adv->axes);
    return set_item(a, adv->basic, nb::cast(updated));
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
  return slice_update(a, reshape(val, std::move(region)), std::move(ix.start), std::move(ix.stop),
                      std::move(ix.strides));
}

// a.at[idx]: functional updates. With basic indices every position occurs once,
// so applying the op to the indexed region equals the accumulating semantics;
// with advanced indices a scatter combines every occurrence of every index.
enum class AtOp { Add, Subtract, Multiply, Divide, Maximum, Minimum };

struct ArrayAt {
  array a;
  std::optional<nb::object> idx;
  array apply(nb::handle v, array (*op)(const array&, const array&, StreamOrDevice),
              AtOp kind) const {
    if (!idx) throw std::invalid_argument("[at] index the helper first: a.at[idx].add(v)");
    if (auto adv = advanced_index(a, *idx)) {
      array region = region_of(a, *adv);
      array upd = update_value(a, v, adv->out_shape);
      if (selects_nothing(region, *adv)) return a;
      upd = scatter_updates(region, *adv, upd);
      array r = region;
      switch (kind) {
        case AtOp::Add: r = scatter_add(region, adv->indices, upd, adv->axes); break;
        case AtOp::Subtract: r = scatter_add(region, adv->indices, negative(upd), adv->axes); break;
        case AtOp::Multiply: r = scatter_prod(region, adv->indices, upd, adv->axes); break;
        case AtOp::Divide: {
          // Divide by the product of every update of a position.
          array den = scatter_prod(ones_like(region), adv->indices, upd, adv->axes);
          r = astype(divide(region, den), a.dtype());
          break;
        }
        case AtOp::Maximum: r = scatter_max(region, adv->indices, upd, adv->axes); break;
        case AtOp::Minimum: r = scatter_min(region, adv->indices, upd, adv->axes); break;
      }
      return set_item(a, adv->basic, nb::cast(r));
    }
    array cur = get_item(a, *idx);
    array val = is_python_scalar(v) ? scalar_to_array(v, a.dtype()) : to_array(v);
    array upd = op(cur, val, {});
    return set_item(a, *idx, nb::cast(upd));
  }
};

}  // namespace

void init_indexing(nb::module_& m, ArrayClass& cls) {
  def(m, "take", [](nb::handle a, nb::handle indices, std::optional<int> axis, StreamArg s) {
    array x = to_array(a);
    if (PyLong_Check(indices.ptr()) && !PyBool_Check(indices.ptr())) {
      int i = nb::cast<int>(indices);
      return axis ? take(x, i, *axis, s) : take(x, i, s);
    }
    array idx = to_array(indices);
    return axis ? take(x, idx, *axis, s) : take(x, idx, s);
  }, "a"_a, pos_only(), "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "take_along_axis", [](nb::handle a, nb::handle indices, std::optional<int> axis,
                              StreamArg s) {
    array x = to_array(a), idx = to_array(indices);
    if (axis) return take_along_axis(x, idx, *axis, s);
    return take_along_axis(reshape(x, {-1}, s), reshape(idx, {-1}, s), 0, s);
  }, "a"_a, pos_only(), "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "put_along_axis", [](nb::handle a, nb::handle indices, nb::handle values,
                             std::optional<int> axis, StreamArg s) {
    array x = to_array(a), idx = to_array(indices);
    array v = is_python_scalar(values) ? scalar_to_array(values, x.dtype()) : to_array(values);
    if (axis) return put_along_axis(x, idx, v, *axis, s);
    array flat = put_along_axis(reshape(x, {-1}, s), reshape(idx, {-1}, s),
                                v.ndim() == 0 ? v : reshape(v, {-1}, s), 0, s);
    return reshape(flat, x.shape(), s);
  }, "a"_a, pos_only(), "indices"_a, "values"_a, "axis"_a.none(), nb::kw_only(), "stream"_a = nb::none());
  cls.def("__getitem__", &get_item, "index"_a.none())
      .def("__setitem__", [](array& a, nb::handle idx, nb::handle v) { a = set_item(a, idx, v); },
           "index"_a.none(), "value"_a);

  nb::class_<ArrayAt>(m, "ArrayAt", "Functional scatter updates: a.at[idx].add(v)")
      .def("__getitem__", [](const ArrayAt& at, nb::object idx) { return ArrayAt{at.a, idx}; },
           "index"_a.none())
      .def("add", [](const ArrayAt& at, nb::handle v) { return at.apply(v, add, AtOp::Add); }, "value"_a)
      .def("subtract", [](const ArrayAt& at, nb::handle v) { return at.apply(v, subtract, AtOp::Subtract); }, "value"_a)
      .def("multiply", [](const ArrayAt& at, nb::handle v) { return at.apply(v, multiply, AtOp::Multiply); }, "value"_a)
      .def("divide", [](const ArrayAt& at, nb::handle v) { return at.apply(v, divide, AtOp::Divide); }, "value"_a)
      .def("maximum", [](const ArrayAt& at, nb::handle v) { return at.apply(v, maximum, AtOp::Maximum); }, "value"_a)
      .def("minimum", [](const ArrayAt& at, nb::handle v) { return at.apply(v, minimum, AtOp::Minimum); }, "value"_a);
  cls.def_prop_ro("at", [](const array& a) { return ArrayAt{a, std::nullopt}; });
}

}  // namespace tessera::python
