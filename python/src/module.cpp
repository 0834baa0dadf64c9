// The native module tessera.core. Each family registers itself from its own file.
#include "convert.h"

NB_MODULE(core, m) {
  using namespace tessera::python;
  m.doc() = "Tessera's arrays, ops, devices, streams and transforms (MLX's mlx.core)";
  // Arrays and functions that live in module globals or in graphs still
  // referenced at exit are released by the OS; nanobind would list them.
  nb::set_leak_warnings(false);
  init_dtypes(m);
  init_devices(m);
  ArrayClass cls = init_array(m);
  init_indexing(m, cls);
  init_creation(m, cls);
  init_elementwise(m, cls);
  init_reduce(m, cls);
  init_shape(m, cls);
  init_matmul(m, cls);
  init_scan(m, cls);
  init_sort(m, cls);
  init_linalg(m);
  init_random(m);
  init_fft(m);
  init_fast(m);
  init_distributed(m);
  init_convolution(m);
  init_quantized(m);
  init_transforms(m);
  init_memory(m);
  init_metal(m);
  // MLX's aliases of functions bound above.
  const std::pair<const char*, const char*> aliases[] = {
      {"empty", "zeros"}, {"empty_like", "zeros_like"}, {"cumulative_sum", "cumsum"},
      {"cumulative_prod", "cumprod"}};
  for (auto [alias, name] : aliases) m.attr(alias) = m.attr(name);
  m.attr("matrix_norm") = m.attr("linalg").attr("norm");
  init_io(m);
  init_export(m);
}
