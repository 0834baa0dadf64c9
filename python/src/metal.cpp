// Apple's Metal, which Tessera never has: the submodule tessera.core.metal
// (MLX's deprecated memory aliases, is_available, device_info, captures) and
// fast.metal_kernel, whose kernels raise when called (as MLX's do without a
// Metal back-end), so that programs defining them at import still load.
#include <deque>

#include "convert.h"

namespace tessera::python {

namespace {

constexpr const char* kNoMetal = "Metal is not available (Tessera runs on CPUs and CUDA GPUs)";

// mx.metal.<name>: MLX's deprecated alias of mx.<name> (target, whose
// signature it shows), with its warning.
void deprecated_alias(nb::module_& metal, const char* name, nb::object target) {
  static std::deque<std::string> signatures;  // nb::sig keeps a pointer
  std::string doc = nb::cast<std::string>(target.attr("__doc__"));
  signatures.push_back("def " + doc.substr(0, doc.find('\n')));
  std::string msg = std::string("mx.metal.") + name + " is deprecated: use mx." + name;
  metal.def(name, [target, msg](nb::args args, nb::kwargs kwargs) {
    if (PyErr_WarnEx(PyExc_DeprecationWarning, msg.c_str(), 1) < 0) throw nb::python_error();
    return target(*args, **kwargs);
  }, nb::sig(signatures.back().c_str()));
}

}  // namespace

void init_metal(nb::module_& m) {
  nb::module_ metal = m.def_submodule("metal", "Apple's Metal GPU: not available in Tessera");
  metal.def("is_available", [] { return false; });
  for (const char* name : {"get_active_memory", "get_peak_memory", "reset_peak_memory",
                           "get_cache_memory", "set_memory_limit", "set_cache_limit",
                           "set_wired_limit", "clear_cache"}) {
    deprecated_alias(metal, name, m.attr(name));
  }
  // MLX's mx.metal.device_info describes the Metal device: none here.
  deprecated_alias(metal, "device_info",
                   nb::cpp_function([] { return nb::dict(); }, nb::name("device_info"),
                                    nb::sig("def device_info() -> dict[str, str | int]")));
  metal.def("start_capture", [](const std::string& path) -> void {
    throw std::runtime_error("[metal.start_capture] cannot capture to '" + path + "': " +
                             kNoMetal);
  }, "path"_a);
  metal.def("stop_capture", []() -> void {
    throw std::runtime_error(std::string("[metal.stop_capture] ") + kNoMetal);
  });

  nb::module_ fast = nb::borrow<nb::module_>(m.attr("fast"));
  fast.def("metal_kernel", [](const std::string& name, std::vector<std::string> input_names,
                              std::vector<std::string> output_names, const std::string& source,
                              const std::string& header, bool ensure_row_contiguous,
                              bool atomic_outputs, nb::handle) {
    fast::CustomKernelFunction kernel =
        fast::metal_kernel(name, input_names, output_names, source, header,
                           ensure_row_contiguous, atomic_outputs);
    return nb::cpp_function([kernel](nb::args, nb::kwargs) -> void {
      kernel({}, {}, {}, {}, {}, {}, std::nullopt, false, {});
    });
  }, "name"_a, "input_names"_a, "output_names"_a, "source"_a, "header"_a = "",
     "ensure_row_contiguous"_a = true, "atomic_outputs"_a = false,
     "compile_options"_a = nb::none(),
     "A custom Metal kernel: made, but raising RuntimeError when called (no Metal here).");
}

}  // namespace tessera::python
