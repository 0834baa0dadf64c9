// Sorting and selection, and searchsorted.
#include "convert.h"
#include "tessera/ops/array_api.h"

namespace tessera::python {

namespace {

using Sort = array (*)(const array&, int, StreamOrDevice);
using Select = array (*)(const array&, int, int, StreamOrDevice);

// axis=None works on the flattened array.
array flat_or(const array& a, std::optional<int>& axis, StreamOrDevice s) {
  if (axis) return a;
  axis = 0;
  return reshape(a, {-1}, s);
}

}  // namespace

void init_sort(nb::module_& m, ArrayClass&) {
  std::vector<std::pair<const char*, Sort>> sorts = {
      {"sort", static_cast<Sort>(&tessera::sort)},
      {"argsort", static_cast<Sort>(&tessera::argsort)}};
  for (auto [name, f] : sorts) {
    def(m, name, [f](nb::handle a, std::optional<int> axis, StreamArg s) {
      array x = flat_or(to_array(a), axis, s);
      return f(x, *axis, s);
    }, "a"_a, pos_only(), "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none());
  }
  std::vector<std::pair<const char*, Select>> selections = {
      {"partition", static_cast<Select>(&tessera::partition)},
      {"argpartition", static_cast<Select>(&tessera::argpartition)}};
  for (auto [name, f] : selections) {
    def(m, name, [f](nb::handle a, int kth, std::optional<int> axis, StreamArg s) {
      array x = flat_or(to_array(a), axis, s);
      return f(x, kth, *axis, s);
    }, "a"_a, pos_only(), "kth"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none());
  }
  def(m, "topk", [](nb::handle a, int k, std::optional<int> axis, StreamArg s) {
    array x = flat_or(to_array(a), axis, s);
    return topk(x, k, *axis, s);
  }, "a"_a, pos_only(), "k"_a, "axis"_a.none() = -1, nb::kw_only(), "stream"_a = nb::none());
  def(m, "searchsorted", [](nb::handle sorted_sequence, nb::handle values, const std::string& side,
                           StreamArg s) {
    return searchsorted(to_array(sorted_sequence), to_array(values), side, s);
  }, "sorted_sequence"_a, "values"_a, pos_only(), "side"_a = "left", nb::kw_only(), "stream"_a = nb::none());
  def(m, "unique", [](nb::handle a, int size, bool return_index, bool return_inverse,
                      bool return_counts, nb::handle fill_value, StreamArg s) -> nb::object {
    std::optional<array> fill;
    if (!fill_value.is_none()) fill = to_array(fill_value);
    auto r = unique(to_array(a), size, return_index, return_inverse, return_counts, fill, s);
    if (r.size() == 1) return nb::cast(r[0]);
    nb::list out;
    for (auto& x : r) out.append(nb::cast(x));
    return nb::tuple(out);
  }, "a"_a, pos_only(), "size"_a, "return_index"_a = false, "return_inverse"_a = false,
        "return_counts"_a = false, "fill_value"_a = nb::none(), nb::kw_only(),
        "stream"_a = nb::none());
}

}  // namespace tessera::python
