// Cumulative (scan) ops, as functions and methods.
#include "convert.h"

namespace tessera::python {

namespace {

using ScanWithDtype = array (*)(const array&, int, bool, bool, std::optional<Dtype>,
                                StreamOrDevice);
using Scan = array (*)(const array&, int, bool, bool, StreamOrDevice);

// axis=None scans the flattened array.
array flat_or(const array& a, std::optional<int>& axis, StreamOrDevice s) {
  if (axis) return a;
  axis = 0;
  return reshape(a, {-1}, s);
}

}  // namespace

void init_scan(nb::module_& m, ArrayClass& cls) {
  std::vector<std::pair<const char*, ScanWithDtype>> with_dtype = {
      {"cumsum", static_cast<ScanWithDtype>(&tessera::cumsum)},
      {"cumprod", static_cast<ScanWithDtype>(&tessera::cumprod)}};
  for (auto [name, f] : with_dtype) {
    def(m, name, [f](nb::handle a, std::optional<int> axis, bool reverse, bool inclusive,
                    std::optional<Dtype> dtype, StreamArg s) {
      array x = flat_or(to_array(a), axis, s);
      return f(x, *axis, reverse, inclusive, dtype, s);
    }, "a"_a, pos_only(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false,
          "inclusive"_a = true, "dtype"_a = nb::none(), "stream"_a = nb::none());
    cls.def(name, [f](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
                      StreamArg s) {
      array x = flat_or(a, axis, s);
      return f(x, *axis, reverse, inclusive, std::nullopt, s);
    }, "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
            "stream"_a = nb::none());
  }
  std::vector<std::pair<const char*, Scan>> scans = {
      {"cummax", static_cast<Scan>(&tessera::cummax)},
      {"cummin", static_cast<Scan>(&tessera::cummin)},
      {"logcumsumexp", static_cast<Scan>(&tessera::logcumsumexp)}};
  for (auto [name, f] : scans) {
    auto call = [f](const array& a, std::optional<int> axis, bool reverse, bool inclusive,
                    StreamArg s) {
      array x = flat_or(a, axis, s);
      return f(x, *axis, reverse, inclusive, s);
    };
    def(m, name, [call](nb::handle a, std::optional<int> axis, bool reverse, bool inclusive,
                       StreamArg s) {
      return call(to_array(a), axis, reverse, inclusive, s);
    }, "a"_a, pos_only(), "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false,
          "inclusive"_a = true, "stream"_a = nb::none());
    cls.def(name, call, "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false,
            "inclusive"_a = true, "stream"_a = nb::none());
  }
}

}  // namespace tessera::python
