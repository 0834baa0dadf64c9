// Memory statistics and limits.
#include "convert.h"

namespace tessera::python {

void init_memory(nb::module_& m) {
  m.def("get_active_memory", &get_active_memory);
  m.def("get_peak_memory", &get_peak_memory);
  m.def("reset_peak_memory", &reset_peak_memory);
  m.def("get_cache_memory", &get_cache_memory);
  m.def("get_memory_limit", &get_memory_limit);
  m.def("set_memory_limit", [](nb::int_ limit) { return set_memory_limit(to_uint64(limit, "set_memory_limit", "limit")); },
        "limit"_a);
  m.def("set_cache_limit", [](nb::int_ limit) { return set_cache_limit(to_uint64(limit, "set_cache_limit", "limit")); },
        "limit"_a);
  m.def("set_wired_limit", [](nb::int_ limit) { return set_wired_limit(to_uint64(limit, "set_wired_limit", "limit")); },
        "limit"_a);
  m.def("clear_cache", &clear_cache);
}

}  // namespace tessera::python
