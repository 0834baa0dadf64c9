// Matrix products (reference core.md §8.8).
#include "convert.h"

namespace tessera::python {

void init_linalg(nb::module_& m, ArrayClass&) {
  def(m, "matmul", [](nb::handle a, nb::handle b, StreamArg s) {
    return matmul(to_array(a), to_array(b), s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "addmm", [](nb::handle c, nb::handle a, nb::handle b, float alpha, float beta, StreamArg s) {
    return addmm(to_array(c), to_array(a), to_array(b), alpha, beta, s);
  }, "c"_a, "a"_a, "b"_a, pos_only(), "alpha"_a = 1.0f, "beta"_a = 1.0f, nb::kw_only(), "stream"_a = nb::none());
  def(m, "inner", [](nb::handle a, nb::handle b, StreamArg s) {
    return inner(to_array(a), to_array(b), s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "outer", [](nb::handle a, nb::handle b, StreamArg s) {
    return outer(to_array(a), to_array(b), s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "tensordot", [](nb::handle a, nb::handle b, nb::handle axes, StreamArg s) {
    array x = to_array(a), y = to_array(b);
    if (PyLong_Check(axes.ptr())) return tensordot(x, y, nb::cast<int>(axes), s);
    auto pair = nb::cast<std::vector<std::vector<int>>>(axes);
    if (pair.size() != 2) {
      throw std::invalid_argument("[tensordot] axes must be an int or a pair of axis lists");
    }
    return tensordot(x, y, pair[0], pair[1], s);
  }, "a"_a, "b"_a, pos_only(), "axes"_a = 2, nb::kw_only(), "stream"_a = nb::none());
}

}  // namespace tessera::python
