// The submodule tessera.core.linalg: norms,
// decompositions, inverses and solvers. The stream is keyword-only.
#include "convert.h"

namespace tessera::python {

namespace {

nb::tuple pair_of(std::pair<array, array> p) { return nb::make_tuple(p.first, p.second); }

nb::tuple tuple_of(const std::vector<array>& v) {
  nb::list out;
  for (const array& a : v) out.append(a);
  return nb::tuple(out);
}

array norm_impl(nb::handle a, nb::handle ord, const Axes& axis, bool keepdims, StreamArg s) {
  array x = to_array(a);
  std::optional<std::vector<int>> axes;
  if (axis) axes = to_vec(*axis);
  if (ord.is_none()) return linalg::norm(x, axes, keepdims, s);
  if (PyUnicode_Check(ord.ptr())) {
    return linalg::norm(x, nb::cast<std::string>(ord), axes, keepdims, s);
  }
  if (PyBool_Check(ord.ptr()) || !(PyLong_Check(ord.ptr()) || PyFloat_Check(ord.ptr()))) {
    throw nb::type_error(("[linalg::norm] ord must be None, a number or a string, got " +
                          nb::cast<std::string>(nb::repr(ord))).c_str());
  }
  return linalg::norm(x, nb::cast<double>(ord), axes, keepdims, s);
}

}  // namespace

void init_linalg(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("linalg", "Linear algebra: norms, decompositions, solvers");
  auto kw = nb::kw_only();
  def_named(m, "norm", &norm_impl, "a"_a, "ord"_a = nb::none(), "axis"_a = nb::none(),
        "keepdims"_a = false, kw, "stream"_a = nb::none());
  def_named(m, "qr", [](nb::handle a, StreamArg s) { return pair_of(linalg::qr(to_array(a), s)); },
        "a"_a, kw, "stream"_a = nb::none());
  def_named(m, "svd", [](nb::handle a, bool compute_uv, StreamArg s) -> nb::object {
    auto r = linalg::svd(to_array(a), compute_uv, s);
    if (!compute_uv) return nb::cast(r.at(0));
    return tuple_of(r);
  }, "a"_a, "compute_uv"_a = true, kw, "stream"_a = nb::none());
  def_named(m, "inv", [](nb::handle a, StreamArg s) { return linalg::inv(to_array(a), s); }, "a"_a, kw,
        "stream"_a = nb::none());
  def_named(m, "tri_inv", [](nb::handle a, bool upper, StreamArg s) {
    return linalg::tri_inv(to_array(a), upper, s);
  }, "a"_a, "upper"_a = false, kw, "stream"_a = nb::none());
  def_named(m, "pinv", [](nb::handle a, StreamArg s) { return linalg::pinv(to_array(a), s); }, "a"_a,
        kw, "stream"_a = nb::none());
  def_named(m, "cholesky", [](nb::handle a, bool upper, StreamArg s) {
    return linalg::cholesky(to_array(a), upper, s);
  }, "a"_a, "upper"_a = false, kw, "stream"_a = nb::none());
  def_named(m, "cholesky_inv", [](nb::handle L, bool upper, StreamArg s) {
    return linalg::cholesky_inv(to_array(L), upper, s);
  }, "L"_a, "upper"_a = false, kw, "stream"_a = nb::none());
  def_named(m, "cross", [](nb::handle a, nb::handle b, int axis, StreamArg s) {
    return linalg::cross(to_array(a), to_array(b), axis, s);
  }, "a"_a, "b"_a, "axis"_a = -1, kw, "stream"_a = nb::none());
  def_named(m, "eigvals", [](nb::handle a, StreamArg s) { return linalg::eigvals(to_array(a), s); },
        "a"_a, kw, "stream"_a = nb::none());
  def_named(m, "eig", [](nb::handle a, StreamArg s) { return pair_of(linalg::eig(to_array(a), s)); },
        "a"_a, kw, "stream"_a = nb::none());
  def_named(m, "eigvalsh", [](nb::handle a, const std::string& UPLO, StreamArg s) {
    return linalg::eigvalsh(to_array(a), UPLO, s);
  }, "a"_a, "UPLO"_a = "L", kw, "stream"_a = nb::none());
  def_named(m, "eigh", [](nb::handle a, const std::string& UPLO, StreamArg s) {
    return pair_of(linalg::eigh(to_array(a), UPLO, s));
  }, "a"_a, "UPLO"_a = "L", kw, "stream"_a = nb::none());
  def_named(m, "lu", [](nb::handle a, StreamArg s) { return tuple_of(linalg::lu(to_array(a), s)); },
        "a"_a, kw, "stream"_a = nb::none());
  def_named(m, "lu_factor", [](nb::handle a, StreamArg s) {
    return pair_of(linalg::lu_factor(to_array(a), s));
  }, "a"_a, kw, "stream"_a = nb::none());
  def_named(m, "solve", [](nb::handle a, nb::handle b, StreamArg s) {
    return linalg::solve(to_array(a), to_array(b), s);
  }, "a"_a, "b"_a, kw, "stream"_a = nb::none());
  def_named(m, "solve_triangular", [](nb::handle a, nb::handle b, bool upper, StreamArg s) {
    return linalg::solve_triangular(to_array(a), to_array(b), upper, s);
  }, "a"_a, "b"_a, kw, "upper"_a = false, "stream"_a = nb::none());
  def_named(m, "det", [](nb::handle a, StreamArg s) { return linalg::det(to_array(a), s); }, "a"_a, kw,
        "stream"_a = nb::none());
  def_named(m, "slogdet", [](nb::handle a, StreamArg s) {
    return pair_of(linalg::slogdet(to_array(a), s));
  }, "a"_a, kw, "stream"_a = nb::none());
}

}  // namespace tessera::python
