// take, take_along_axis and put_along_axis (reference core.md §8.6).
#include "convert.h"

namespace tessera::python {

void init_gather(nb::module_& m, ArrayClass&) {
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
}

}  // namespace tessera::python
