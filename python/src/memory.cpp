// Memory statistics and limits.
#include <unordered_set>

#include "convert.h"

namespace tessera::python {

namespace {

// The buffers of the arrays among the leaves of a tree (lists, tuples, dicts).
void collect_buffers(nb::handle tree, std::unordered_set<const void*>& seen, size_t& total) {
  for_each_leaf(tree, "get_array_buffer_size", [&](nb::handle leaf) {
    if (!nb::isinstance<array>(leaf)) return;
    const array& a = nb::cast<const array&>(leaf);
    if (!a.is_available()) {
      throw std::invalid_argument(
          "[get_array_buffer_size] arrays must be evaluated before their buffers are measured");
    }
    const void* key = a.buffer().storage();
    if (key && seen.insert(key).second) total += a.buffer().size();
  });
}

}  // namespace

void init_memory(nb::module_& m) {
  def_named(m, "get_active_memory", &get_active_memory);
  def_named(m, "get_peak_memory", &get_peak_memory);
  def_named(m, "reset_peak_memory", &reset_peak_memory);
  def_named(m, "get_cache_memory", &get_cache_memory);
  def_named(m, "get_memory_limit", &get_memory_limit);
  def_named(m, "set_memory_limit", [](nb::int_ limit) { return set_memory_limit(to_uint64(limit, "set_memory_limit", "limit")); },
        "limit"_a);
  def_named(m, "set_cache_limit", [](nb::int_ limit) { return set_cache_limit(to_uint64(limit, "set_cache_limit", "limit")); },
        "limit"_a);
  def_named(m, "set_wired_limit", [](nb::int_ limit) { return set_wired_limit(to_uint64(limit, "set_wired_limit", "limit")); },
        "limit"_a);
  def_named(m, "clear_cache", &clear_cache);
  def_named(m, "get_array_buffer_size", [](nb::args args) {
    std::unordered_set<const void*> seen;
    size_t total = 0;
    for (nb::handle a : args) collect_buffers(a, seen, total);
    return total;
  });
}

}  // namespace tessera::python
