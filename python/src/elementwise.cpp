// Elementwise ops of one, two and three arrays (reference core.md §8.2, §8.3).
#include "convert.h"

namespace tessera::python {

namespace {

using Unary = array (*)(const array&, StreamOrDevice);
using Binary = array (*)(const array&, const array&, StreamOrDevice);

#define TESSERA_UNARY(X)                                                                    \
  X(abs) X(positive) X(negative) X(sign) X(square) X(sqrt) X(rsqrt) X(reciprocal) X(exp)    \
  X(expm1) X(log) X(log2) X(log10) X(log1p) X(sin) X(cos) X(tan) X(arcsin) X(arccos)        \
  X(arctan) X(sinh) X(cosh) X(tanh) X(arcsinh) X(arccosh) X(arctanh) X(degrees) X(radians)  \
  X(floor) X(ceil) X(trunc) X(sigmoid) X(erf) X(erfinv) X(stop_gradient) X(conjugate)        \
  X(real) X(imag) X(logical_not) X(bitwise_invert) X(isnan) X(isinf) X(isfinite)            \
  X(isposinf) X(isneginf)

#define TESSERA_BINARY(X)                                                                   \
  X(add) X(subtract) X(multiply) X(divide) X(floor_divide) X(remainder) X(power) X(maximum)  \
  X(minimum) X(logaddexp) X(arctan2) X(equal) X(not_equal) X(greater) X(greater_equal)       \
  X(less) X(less_equal) X(logical_and) X(logical_or) X(logical_xor) X(bitwise_and)           \
  X(bitwise_or) X(bitwise_xor) X(left_shift) X(right_shift)

// Methods of the array class that mirror functions (reference §4.3).
const char* unary_methods[] = {"abs",  "square", "sqrt",  "rsqrt", "reciprocal", "exp",
                               "log",  "log2",   "log10", "log1p", "sin",        "cos"};

}  // namespace

void init_elementwise(nb::module_& m, ArrayClass& cls) {
  std::vector<std::pair<const char*, Unary>> unary = {
#define X(name) {#name, static_cast<Unary>(&tessera::name)},
      TESSERA_UNARY(X)
#undef X
  };
  for (auto [name, f] : unary) {
    def(m, name, [f](nb::handle a, StreamArg s) { return f(to_array(a), s); }, "a"_a.none(),
          pos_only(), nb::kw_only(), "stream"_a = nb::none());
    for (const char* meth : unary_methods) {
      if (std::string(meth) == name) {
        cls.def(name, [f](const array& a, StreamArg s) { return f(a, s); }, nb::kw_only(),
                "stream"_a = nb::none());
      }
    }
  }
  def(m, "conj", [](nb::handle a, StreamArg s) { return conjugate(to_array(a), s); }, "a"_a, pos_only(),
        nb::kw_only(), "stream"_a = nb::none());
  cls.def("conj", [](const array& a, StreamArg s) { return conjugate(a, s); }, nb::kw_only(),
          "stream"_a = nb::none());
  def(m, "round", [](nb::handle a, int decimals, StreamArg s) { return round(to_array(a), decimals, s); },
        "a"_a, pos_only(), "decimals"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  cls.def("round", [](const array& a, int decimals, StreamArg s) { return round(a, decimals, s); },
          "decimals"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  def(m, "nan_to_num",
        [](nb::handle a, float nan, std::optional<float> posinf, std::optional<float> neginf,
           StreamArg s) { return nan_to_num(to_array(a), nan, posinf, neginf, s); },
        "a"_a, pos_only(), "nan"_a = 0.0f, "posinf"_a = nb::none(), "neginf"_a = nb::none(), nb::kw_only(),
        "stream"_a = nb::none());

  std::vector<std::pair<const char*, Binary>> binary = {
#define X(name) {#name, static_cast<Binary>(&tessera::name)},
      TESSERA_BINARY(X)
#undef X
  };
  for (auto [name, f] : binary) {
    def(m, name, [f](nb::handle a, nb::handle b, StreamArg s) {
      auto [x, y] = to_arrays(a, b);
      return f(x, y, s);
    }, "a"_a.none(), "b"_a.none(), pos_only(), nb::kw_only(), "stream"_a = nb::none());
  }
  def(m, "divmod", [](nb::handle a, nb::handle b, StreamArg s) {
    auto [x, y] = to_arrays(a, b);
    return divmod(x, y, s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());

  def(m, "where", [](nb::handle c, nb::handle x, nb::handle y, StreamArg s) {
    auto [a, b] = to_arrays(x, y);
    return where(to_array(c), a, b, s);
  }, "condition"_a, "x"_a, "y"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "clip", [](nb::handle a, nb::handle a_min, nb::handle a_max, StreamArg s) {
    array x = to_array(a);
    auto bound = [&](nb::handle b) -> std::optional<array> {
      if (b.is_none()) return std::nullopt;
      return is_python_scalar(b) ? scalar_to_array(b, x.dtype()) : to_array(b);
    };
    if (a_min.is_none() && a_max.is_none()) {
      throw std::invalid_argument("[clip] a_min and a_max cannot both be None");
    }
    return clip(x, bound(a_min), bound(a_max), s);
  }, "a"_a, pos_only(), "a_min"_a.none(), "a_max"_a.none(), nb::kw_only(), "stream"_a = nb::none());
  def(m, "isclose", [](nb::handle a, nb::handle b, double rtol, double atol, bool equal_nan,
                      StreamArg s) {
    auto [x, y] = to_arrays(a, b);
    return isclose(x, y, rtol, atol, equal_nan, s);
  }, "a"_a, "b"_a, pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(), "equal_nan"_a = false,
        "stream"_a = nb::none());
  def(m, "allclose", [](nb::handle a, nb::handle b, double rtol, double atol, bool equal_nan,
                       StreamArg s) {
    auto [x, y] = to_arrays(a, b);
    return allclose(x, y, rtol, atol, equal_nan, s);
  }, "a"_a, "b"_a, pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(), "equal_nan"_a = false,
        "stream"_a = nb::none());
  def(m, "array_equal", [](nb::handle a, nb::handle b, bool equal_nan, StreamArg s) {
    auto [x, y] = to_arrays(a, b);
    return array_equal(x, y, equal_nan, s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "equal_nan"_a = false, "stream"_a = nb::none());
}

}  // namespace tessera::python
