// Memory statistics and limits, and the submodule tessera.core.metal (MLX's
// Apple-GPU helpers: Metal is never available here).
#include "convert.h"

namespace tessera::python {

namespace {

// mx.metal.<name>: MLX's deprecated alias of mx.<name> (target), with its warning.
void deprecated_alias(nb::module_& metal, const char* name, nb::object target) {
  std::string msg = std::string("mx.metal.") + name + " is deprecated: use mx." + name;
  metal.def(name, [target, msg](nb::args args, nb::kwargs kwargs) {
    if (PyErr_WarnEx(PyExc_DeprecationWarning, msg.c_str(), 1) < 0) throw nb::python_error();
    return target(*args, **kwargs);
  });
}

}  // namespace

void init_memory(nb::module_& m) {
  m.def("get_active_memory", &get_active_memory);
  m.def("get_peak_memory", &get_peak_memory);
  m.def("reset_peak_memory", &reset_peak_memory);
  m.def("get_cache_memory", &get_cache_memory);
  m.def("get_memory_limit", &get_memory_limit);
  m.def("set_memory_limit", &set_memory_limit, "limit"_a);
  m.def("set_cache_limit", &set_cache_limit, "limit"_a);
  m.def("set_wired_limit", &set_wired_limit, "limit"_a);
  m.def("clear_cache", &clear_cache);

  nb::module_ metal = m.def_submodule("metal", "Apple's Metal GPU: not available in Tessera");
  metal.def("is_available", [] { return false; });
  for (const char* name : {"get_active_memory", "get_peak_memory", "reset_peak_memory",
                           "get_cache_memory", "set_memory_limit", "set_cache_limit",
                           "set_wired_limit", "clear_cache"}) {
    deprecated_alias(metal, name, m.attr(name));
  }
  // MLX's mx.metal.device_info describes the Metal device: none here.
  deprecated_alias(metal, "device_info", nb::cpp_function([] { return nb::dict(); }));
  metal.def("start_capture", [](const std::string& path) -> void {
    throw std::runtime_error("[metal.start_capture] cannot capture to '" + path +
                             "': Metal is not available (Tessera runs on CPUs and CUDA GPUs)");
  }, "path"_a);
  metal.def("stop_capture", []() -> void {
    throw std::runtime_error(
        "[metal.stop_capture] Metal is not available (Tessera runs on CPUs and CUDA GPUs)");
  });
}

}  // namespace tessera::python
