// Matrix products, and diff and hadamard_transform.
#include "convert.h"

namespace tessera::python {

void init_matmul(nb::module_& m, ArrayClass&) {
  def(m, "matmul", [](nb::handle a, nb::handle b, StreamArg s) {
    return matmul(to_array(a), to_array(b), s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "addmm", [](nb::handle c, nb::handle a, nb::handle b, float alpha, float beta, StreamArg s) {
    return addmm(to_array(c), to_array(a), to_array(b), alpha, beta, s);
  }, "c"_a, "a"_a, "b"_a, pos_only(), "alpha"_a = 1.0f, "beta"_a = 1.0f, nb::kw_only(), "stream"_a = nb::none());
  def(m, "vecdot", [](nb::handle a, nb::handle b, int axis, StreamArg s) {
    return vecdot(to_array(a), to_array(b), axis, s);
  }, "a"_a, "b"_a, pos_only(), "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none());
  def(m, "gather_mm", [](nb::handle a, nb::handle b, nb::handle lhs, nb::handle rhs,
                         bool sorted_indices, StreamArg s) {
    return gather_mm(to_array(a), to_array(b), optional_array(lhs), optional_array(rhs),
                     sorted_indices, s);
  }, "a"_a, "b"_a, pos_only(), "lhs_indices"_a = nb::none(), "rhs_indices"_a = nb::none(),
     nb::kw_only(), "sorted_indices"_a = false, "stream"_a = nb::none());
  def(m, "segmented_mm", [](nb::handle a, nb::handle b, nb::handle segments, StreamArg s) {
    return segmented_mm(to_array(a), to_array(b), to_array(segments), s);
  }, "a"_a, "b"_a, pos_only(), "segments"_a, nb::kw_only(), "stream"_a = nb::none());
  def(m, "block_masked_mm", [](nb::handle a, nb::handle b, int block_size, nb::handle mask_out,
                               nb::handle mask_lhs, nb::handle mask_rhs, StreamArg s) {
    return block_masked_mm(to_array(a), to_array(b), block_size, optional_array(mask_out),
                           optional_array(mask_lhs), optional_array(mask_rhs), s);
  }, "a"_a, "b"_a, pos_only(), "block_size"_a = 64, "mask_out"_a = nb::none(),
     "mask_lhs"_a = nb::none(), "mask_rhs"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "hadamard_transform", [](nb::handle a, std::optional<float> scale, StreamArg s) {
    return hadamard_transform(to_array(a), scale, s);
  }, "a"_a, pos_only(), "scale"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "diff", [](nb::handle a, int n, int axis, StreamArg s) {
    return diff(to_array(a), n, axis, s);
  }, "a"_a, pos_only(), "n"_a = 1, "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none());
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
