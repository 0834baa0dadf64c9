// Elementwise ops of one, two and three arrays.
#include "convert.h"

namespace tessera::python {

namespace {

using Unary = array (*)(const array&, StreamOrDevice);
using Binary = array (*)(const array&, const array&, StreamOrDevice);

// Methods of the array class that mirror functions.
const char* unary_methods[] = {"abs",  "square", "sqrt",  "rsqrt", "reciprocal", "exp",
                               "log",  "log2",   "log10", "log1p", "sin",        "cos"};

}  // namespace

void init_elementwise(nb::module_& m, ArrayClass& cls) {
  // The rows of TESSERA_UNARY_OPS and TESSERA_BINARY_OPS (Note [Elementwise tables]).
  std::vector<std::pair<const char*, Unary>> unary = {
#define X(NAME, FN, RULE) {#FN, static_cast<Unary>(&tessera::FN)},
      TESSERA_UNARY_OPS(X)
#undef X
      {"positive", &tessera::positive},
      {"stop_gradient", &tessera::stop_gradient},
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
#define X(NAME, FN, RULE) {#FN, static_cast<Binary>(&tessera::FN)},
      TESSERA_BINARY_OPS(X)
#undef X
      {"equal", &tessera::equal},
  };
  for (auto [name, f] : binary) {
    def(m, name, [f](nb::handle a, nb::handle b, StreamArg s) {
      auto [x, y] = to_arrays(a, b);
      return f(x, y, s);
    }, "a"_a.none(), "b"_a.none(), pos_only(), nb::kw_only(), "stream"_a = nb::none());
  }
  // The array API's names, which MLX has too.
  const std::pair<const char*, const char*> aliases[] = {
      {"acos", "arccos"},   {"acosh", "arccosh"}, {"asin", "arcsin"},
      {"asinh", "arcsinh"}, {"atan", "arctan"},   {"atanh", "arctanh"},
      {"atan2", "arctan2"}, {"pow", "power"},     {"bitwise_left_shift", "left_shift"},
      {"bitwise_right_shift", "right_shift"}};
  for (auto [alias, name] : aliases) m.attr(alias) = m.attr(name);
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
  // isclose and allclose: one signature.
  using Close = array (*)(const array&, const array&, double, double, bool, StreamOrDevice);
  for (auto [name, close] : {std::pair<const char*, Close>{"isclose", &isclose},
                             std::pair<const char*, Close>{"allclose", &allclose}}) {
    def(m, name, [close](nb::handle a, nb::handle b, double rtol, double atol, bool equal_nan,
                         StreamArg s) {
      auto [x, y] = to_arrays(a, b);
      return close(x, y, rtol, atol, equal_nan, s);
    }, "a"_a, "b"_a, pos_only(), "rtol"_a = 1e-5, "atol"_a = 1e-8, nb::kw_only(),
          "equal_nan"_a = false, "stream"_a = nb::none());
  }
  def(m, "array_equal", [](nb::handle a, nb::handle b, bool equal_nan, StreamArg s) {
    auto [x, y] = to_arrays(a, b);
    return array_equal(x, y, equal_nan, s);
  }, "a"_a, "b"_a, pos_only(), nb::kw_only(), "equal_nan"_a = false, "stream"_a = nb::none());
}

}  // namespace tessera::python
