// Reductions, softmax and trace, as functions and methods.
#include "convert.h"
#include "tessera/ops/array_api.h"

namespace tessera::python {

namespace {

using Reduction = array (*)(const array&, const std::vector<int>&, bool, StreamOrDevice);
using Moment = array (*)(const array&, const std::vector<int>&, bool, int, StreamOrDevice);
using ArgReduction = array (*)(const array&, int, bool, StreamOrDevice);

std::vector<int> axes_of(const array& a, const Axes& axis) {
  return axis ? to_vec(*axis) : all_axes(static_cast<int>(a.ndim()));
}

}  // namespace

void init_reduce(nb::module_& m, ArrayClass& cls) {
  std::vector<std::pair<const char*, Reduction>> reductions = {
      {"sum", &tessera::sum},   {"prod", &tessera::prod}, {"max", &tessera::max},
      {"min", &tessera::min},   {"mean", &tessera::mean}, {"logsumexp", &tessera::logsumexp},
      {"all", &tessera::all},   {"any", &tessera::any}};
  for (auto [name, f] : reductions) {
    def(m, name, [f](nb::handle a, const Axes& axis, bool keepdims, StreamArg s) {
      array x = to_array(a);
      return f(x, axes_of(x, axis), keepdims, s);
    }, "a"_a, pos_only(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
          "stream"_a = nb::none());
    cls.def(name, [f](const array& a, const Axes& axis, bool keepdims, StreamArg s) {
      return f(a, axes_of(a, axis), keepdims, s);
    }, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(), "stream"_a = nb::none());
  }
  std::vector<std::pair<const char*, Moment>> moments = {{"var", &tessera::var}, {"std", &tessera::std}};
  for (auto [name, f] : moments) {
    def(m, name, [f](nb::handle a, const Axes& axis, bool keepdims, int ddof, StreamArg s) {
      array x = to_array(a);
      return f(x, axes_of(x, axis), keepdims, ddof, s);
    }, "a"_a, pos_only(), "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
          "stream"_a = nb::none());
    cls.def(name, [f](const array& a, const Axes& axis, bool keepdims, int ddof, StreamArg s) {
      return f(a, axes_of(a, axis), keepdims, ddof, s);
    }, "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
            "stream"_a = nb::none());
  }
  std::vector<std::pair<const char*, ArgReduction>> args = {
      {"argmax", static_cast<ArgReduction>(&tessera::argmax)},
      {"argmin", static_cast<ArgReduction>(&tessera::argmin)}};
  for (auto [name, f] : args) {
    auto call = [f](const array& x, std::optional<int> axis, bool keepdims, StreamArg s) {
      if (axis) return f(x, *axis, keepdims, s);
      array r = f(reshape(x, {-1}, s), 0, false, s);
      return keepdims ? reshape(r, Shape(x.ndim(), 1), s) : r;
    };
    def(m, name, [call](nb::handle a, std::optional<int> axis, bool keepdims, StreamArg s) {
      return call(to_array(a), axis, keepdims, s);
    }, "a"_a, pos_only(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(), "stream"_a = nb::none());
    cls.def(name, call, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
            "stream"_a = nb::none());
  }
  def(m, "count_nonzero", [](nb::handle a, const Axes& axis, bool keepdims, StreamArg s) {
    array x = to_array(a);
    return count_nonzero(x, axes_of(x, axis), keepdims, s);
  }, "a"_a, pos_only(), "axis"_a = nb::none(), nb::kw_only(), "keepdims"_a = false, "stream"_a = nb::none());
  def(m, "softmax", [](nb::handle a, const Axes& axis, bool precise, StreamArg s) {
    array x = to_array(a);
    return softmax(x, axes_of(x, axis), precise, s);
  }, "a"_a, pos_only(), "axis"_a = nb::none(), nb::kw_only(), "precise"_a = false, "stream"_a = nb::none());
  def(m, "trace", [](nb::handle a, int offset, int axis1, int axis2, std::optional<Dtype> dtype,
                    StreamArg s) {
    array x = to_array(a);
    return dtype ? trace(x, offset, axis1, axis2, *dtype, s) : trace(x, offset, axis1, axis2, s);
  }, "a"_a, pos_only(), "offset"_a = 0, "axis1"_a = 0, "axis2"_a = 1, "dtype"_a = nb::none(), nb::kw_only(),
        "stream"_a = nb::none());
  def(m, "median", [](nb::handle a, const Axes& axis, bool keepdims, StreamArg s) {
    array x = to_array(a);
    return median(x, axes_of(x, axis), keepdims, s);
  }, "a"_a, pos_only(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
        "stream"_a = nb::none());
  def(m, "minmax", [](nb::handle a, const Axes& axis, bool keepdims, StreamArg s) {
    array x = to_array(a);
    auto r = minmax(x, axes_of(x, axis), keepdims, s);
    return nb::make_tuple(r[0], r[1]);
  }, "a"_a, pos_only(), "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(),
        "stream"_a = nb::none());
}

}  // namespace tessera::python
