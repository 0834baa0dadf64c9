// Shape manipulation, joining and splitting, as
// functions and the array methods of the same names.
#include "convert.h"
#include "tessera/ops/array_api.h"

namespace tessera::python {

namespace {

// reshape(*shape) / transpose(*axes): one sequence or separate ints.
std::vector<int> varargs_ints(const nb::args& args, const char* op) {
  bool one_sequence = args.size() == 1 && !PyLong_Check(args[0].ptr());
  Shape s = to_shape(one_sequence ? nb::handle(args[0]) : nb::handle(args), op);
  return std::vector<int>(s.begin(), s.end());
}

std::vector<array> split_impl(const array& a, nb::handle ios, int axis, StreamArg s) {
  if (PyLong_Check(ios.ptr())) return split(a, nb::cast<int>(ios), axis, s);
  return split(a, to_shape(ios, "split"), axis, s);
}

array squeeze_impl(const array& a, const Axes& axis, StreamArg s) {
  return axis ? squeeze(a, to_vec(*axis), s) : squeeze(a, s);
}

array flatten_impl(const array& a, int start, int end, StreamArg s) {
  return flatten(a, start, end, s);
}

nb::object atleast(nb::args arys, StreamArg s, array (*f)(const array&, StreamOrDevice)) {
  if (arys.size() == 1) return nb::cast(f(to_array(arys[0]), s));
  nb::list out;
  for (nb::handle a : arys) out.append(f(to_array(a), s));
  return out;
}

}  // namespace

void init_shape(nb::module_& m, ArrayClass& cls) {
  auto kw = nb::kw_only();
  def(m, "reshape", [](nb::handle a, nb::handle shape, StreamArg s) {
    return reshape(to_array(a), to_shape(shape, "reshape"), s);
  }, "a"_a, pos_only(), "shape"_a, kw, "stream"_a = nb::none());
  cls.def("reshape", [](const array& a, nb::args shape, StreamArg s) {
    auto v = varargs_ints(shape, "reshape");
    return reshape(a, Shape(v.begin(), v.end()), s);
  }, "shape"_a, "stream"_a = nb::none());
  def(m, "flatten", [](nb::handle a, int start, int end, StreamArg s) {
    return flatten_impl(to_array(a), start, end, s);
  }, "a"_a, pos_only(), "start_axis"_a = 0, "end_axis"_a = -1, kw, "stream"_a = nb::none());
  cls.def("flatten", &flatten_impl, "start_axis"_a = 0, "end_axis"_a = -1, kw, "stream"_a = nb::none());
  def(m, "unflatten", [](nb::handle a, int axis, nb::handle shape, StreamArg s) {
    return unflatten(to_array(a), axis, to_shape(shape, "unflatten"), s);
  }, "a"_a, pos_only(), "axis"_a, "shape"_a, kw, "stream"_a = nb::none());
  def(m, "squeeze", [](nb::handle a, const Axes& axis, StreamArg s) {
    return squeeze_impl(to_array(a), axis, s);
  }, "a"_a, pos_only(), "axis"_a = nb::none(), kw, "stream"_a = nb::none());
  cls.def("squeeze", &squeeze_impl, "axis"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "expand_dims", [](nb::handle a, const IntOrVec& axis, StreamArg s) {
    return expand_dims(to_array(a), to_vec(axis), s);
  }, "a"_a, pos_only(), "axis"_a, kw, "stream"_a = nb::none());
  auto transpose_fn = [](nb::handle a, std::optional<std::vector<int>> axes, StreamArg s) {
    array x = to_array(a);
    return axes ? transpose(x, *axes, s) : transpose(x, s);
  };
  def(m, "transpose", transpose_fn, "a"_a, pos_only(), "axes"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "permute_dims", transpose_fn, "a"_a, pos_only(), "axes"_a = nb::none(), kw, "stream"_a = nb::none());
  cls.def("transpose", [](const array& a, nb::args axes, StreamArg s) {
    if (axes.size() == 0) return transpose(a, s);
    return transpose(a, varargs_ints(axes, "transpose"), s);
  }, "axes"_a, "stream"_a = nb::none());
  def(m, "swapaxes", [](nb::handle a, int a1, int a2, StreamArg s) { return swapaxes(to_array(a), a1, a2, s); },
        "a"_a, pos_only(), "axis1"_a, "axis2"_a, kw, "stream"_a = nb::none());
  cls.def("swapaxes", [](const array& a, int a1, int a2, StreamArg s) { return swapaxes(a, a1, a2, s); },
          "axis1"_a, "axis2"_a, kw, "stream"_a = nb::none());
  def(m, "matrix_transpose", [](nb::handle a, StreamArg s) { return matrix_transpose(to_array(a), s); },
        "a"_a, pos_only(), kw, "stream"_a = nb::none());
  cls.def_prop_ro("mT", [](const array& a) { return matrix_transpose(a); });
  def(m, "moveaxis", [](nb::handle a, int src, int dst, StreamArg s) { return moveaxis(to_array(a), src, dst, s); },
        "a"_a, pos_only(), "source"_a, "destination"_a, kw, "stream"_a = nb::none());
  cls.def("moveaxis", [](const array& a, int src, int dst, StreamArg s) { return moveaxis(a, src, dst, s); },
          "source"_a, "destination"_a, kw, "stream"_a = nb::none());
  def(m, "broadcast_to", [](nb::handle a, nb::handle shape, StreamArg s) {
    return broadcast_to(to_array(a), to_shape(shape, "broadcast_to"), s);
  }, "a"_a, pos_only(), "shape"_a, kw, "stream"_a = nb::none());
  def_named(m, "broadcast_arrays", [](nb::args arrays, StreamArg s) {
    auto r = broadcast_arrays(to_array_list(arrays), s);
    nb::list l;
    for (auto& a : r) l.append(a);
    return nb::tuple(l);
  }, "arrays"_a, "stream"_a = nb::none());
  def_named(m, "broadcast_shapes", [](nb::args shapes) {
    if (shapes.size() == 0) throw std::invalid_argument("[broadcast_shapes] needs at least one shape");
    std::vector<Shape> v;
    for (nb::handle s : shapes) v.push_back(to_shape(s, "broadcast_shapes"));
    Shape r = broadcast_shapes(v);
    nb::list l;
    for (auto d : r) l.append(d);
    return nb::tuple(l);
  });
  auto concat_fn = [](nb::handle arrays, std::optional<int> axis, StreamArg s) {
    auto v = to_array_list(arrays);
    return axis ? concatenate(v, *axis, s) : concatenate(v, s);
  };
  def(m, "concatenate", concat_fn, "arrays"_a, pos_only(), "axis"_a.none() = 0, kw, "stream"_a = nb::none());
  def(m, "concat", concat_fn, "arrays"_a, pos_only(), "axis"_a.none() = 0, kw, "stream"_a = nb::none());
  def(m, "stack", [](nb::handle arrays, int axis, StreamArg s) { return stack(to_array_list(arrays), axis, s); },
        "arrays"_a, pos_only(), "axis"_a = 0, kw, "stream"_a = nb::none());
  def(m, "split", [](nb::handle a, nb::handle ios, int axis, StreamArg s) {
    return split_impl(to_array(a), ios, axis, s);
  }, "a"_a, pos_only(), "indices_or_sections"_a, "axis"_a = 0, kw, "stream"_a = nb::none());
  cls.def("split", &split_impl, "indices_or_sections"_a, "axis"_a = 0, kw, "stream"_a = nb::none());
  def(m, "unstack", [](nb::handle a, int axis, StreamArg s) { return unstack(to_array(a), axis, s); },
        "x"_a, pos_only(), kw, "axis"_a = 0, "stream"_a = nb::none());
  def(m, "repeat", [](nb::handle a, int repeats, std::optional<int> axis, StreamArg s) {
    array x = to_array(a);
    return axis ? repeat(x, repeats, *axis, s) : repeat(x, repeats, s);
  }, "array"_a, pos_only(), "repeats"_a, "axis"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "tile", [](nb::handle a, const IntOrVec& reps, StreamArg s) { return tile(to_array(a), to_vec(reps), s); },
        "a"_a, "reps"_a, pos_only(), kw, "stream"_a = nb::none());
  def(m, "pad", [](nb::handle a, nb::handle pad_width, const std::string& mode, nb::handle value,
                  StreamArg s) {
    array x = to_array(a);
    array v = is_python_scalar(value) ? scalar_to_array(value, x.dtype()) : to_array(value);
    int nd = static_cast<int>(x.ndim());
    std::vector<std::pair<int, int>> widths;
    if (PyLong_Check(pad_width.ptr())) {
      int w = to_shape_elem(pad_width, "pad");
      widths.assign(nd, {w, w});
    } else {
      std::vector<Shape> rows;
      auto seq = nb::cast<nb::sequence>(pad_width);
      bool nested = nb::len(seq) > 0 && !PyLong_Check(seq[0].ptr());
      if (nested) {
        for (nb::handle r : seq) rows.push_back(to_shape(r, "pad"));
      } else {
        rows.push_back(to_shape(pad_width, "pad"));
      }
      for (auto& r : rows) {
        if (r.size() == 1) r.push_back(r[0]);
        if (r.size() != 2) throw std::invalid_argument("[pad] each pad width must be (before, after)");
      }
      if (rows.size() == 1) rows.assign(nd, rows[0]);
      if (static_cast<int>(rows.size()) != nd) {
        throw std::invalid_argument("[pad] pad_width needs one (before, after) pair per axis, got " +
                                    std::to_string(rows.size()) + " for " + std::to_string(nd) + " axes");
      }
      for (auto& r : rows) widths.push_back({r[0], r[1]});
    }
    return pad(x, widths, v, mode, s);
  }, "a"_a, pos_only(), "pad_width"_a, "mode"_a = "constant", "constant_values"_a = 0, kw, "stream"_a = nb::none());
  def(m, "flip", [](nb::handle a, const Axes& axis, StreamArg s) {
    array x = to_array(a);
    return axis ? flip(x, to_vec(*axis), s) : flip(x, s);
  }, "a"_a, pos_only(), "axis"_a = nb::none(), kw, "stream"_a = nb::none());
  def(m, "roll", [](nb::handle a, const IntOrVec& shift, const Axes& axis, StreamArg s) {
    array x = to_array(a);
    auto sv = to_vec(shift);
    Shape sh(sv.begin(), sv.end());
    if (!axis) return roll(x, sh, s);
    return roll(x, sh, to_vec(*axis), s);
  }, "a"_a, pos_only(), "shift"_a, "axis"_a = nb::none(), kw, "stream"_a = nb::none());
  def_named(m, "atleast_1d", [](nb::args a, StreamArg s) {
    return atleast(a, s, &atleast_1d);
  }, "arys"_a, "stream"_a = nb::none());
  def_named(m, "atleast_2d", [](nb::args a, StreamArg s) {
    return atleast(a, s, &atleast_2d);
  }, "arys"_a, "stream"_a = nb::none());
  def_named(m, "atleast_3d", [](nb::args a, StreamArg s) {
    return atleast(a, s, &atleast_3d);
  }, "arys"_a, "stream"_a = nb::none());
  def_named(m, "diagonal", [](nb::handle a, int offset, int axis1, int axis2, StreamArg s) {
    return diagonal(to_array(a), offset, axis1, axis2, s);
  }, "a"_a, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "stream"_a = nb::none());
  cls.def("diagonal", [](const array& a, int offset, int axis1, int axis2, StreamArg s) {
    return diagonal(a, offset, axis1, axis2, s);
  }, "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "stream"_a = nb::none());
  def(m, "diag", [](nb::handle a, int k, StreamArg s) { return diag(to_array(a), k, s); },
        "a"_a, pos_only(), "k"_a = 0, kw, "stream"_a = nb::none());
  cls.def("diag", [](const array& a, int k, StreamArg s) { return diag(a, k, s); }, "k"_a = 0, kw,
          "stream"_a = nb::none());
  def(m, "contiguous", [](nb::handle a, bool allow_col_major, StreamArg s) {
    return contiguous(to_array(a), allow_col_major, s);
  }, "a"_a, pos_only(), "allow_col_major"_a = false, kw, "stream"_a = nb::none());
  def(m, "view", [](nb::handle a, Dtype t, StreamArg s) { return view(to_array(a), t, s); }, "a"_a, pos_only(),
        "dtype"_a, kw, "stream"_a = nb::none());
  cls.def("view", [](const array& a, Dtype t, StreamArg s) { return view(a, t, s); }, "dtype"_a, kw,
          "stream"_a = nb::none());
  def(m, "astype", [](nb::handle a, Dtype t, StreamArg s) { return astype(to_array(a), t, s); }, "a"_a, pos_only(),
        "dtype"_a, kw, "stream"_a = nb::none());
  def_named(m, "copy", [](nb::handle a, StreamArg s) { return copy(to_array(a), s); }, "a"_a, kw,
        "stream"_a = nb::none());
  def(m, "as_strided", [](nb::handle a, std::optional<Shape> shape, std::optional<Strides> strides,
                         size_t offset, StreamArg s) {
    array x = to_array(a);
    Shape sh = shape.value_or(x.shape());
    Strides st = strides.value_or(row_major_strides(sh));
    return as_strided(x, sh, st, offset, s);
  }, "a"_a, pos_only(), "shape"_a = nb::none(), "strides"_a = nb::none(), "offset"_a = 0, kw, "stream"_a = nb::none());
  def(m, "slice", [](nb::handle a, nb::handle start, std::vector<int> axes, nb::handle size, StreamArg s) {
    return slice(to_array(a), to_array(start), axes, to_shape(size, "slice"), s);
  }, "a"_a, pos_only(), "start_indices"_a, "axes"_a, "slice_size"_a, kw, "stream"_a = nb::none());
  def(m, "slice_update", [](nb::handle a, nb::handle update, nb::handle start, std::vector<int> axes,
                           StreamArg s) {
    return slice_update(to_array(a), to_array(update), to_array(start), axes, s);
  }, "a"_a, pos_only(), "update"_a, "start_indices"_a, "axes"_a, kw, "stream"_a = nb::none());
}

}  // namespace tessera::python
