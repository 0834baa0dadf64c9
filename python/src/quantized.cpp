// Quantization.
#include "convert.h"

namespace tessera::python {

void init_quantized(nb::module_& m) {
  def(m, "quantize", [](nb::handle w, std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode, nb::handle global_scale,
                       StreamArg s) {
    auto out = quantize(to_array(w), group_size, bits, mode, optional_array(global_scale), s);
    nb::list items;
    for (auto& a : out) items.append(nb::cast(a));
    return nb::tuple(items);
  }, "w"_a, pos_only(), "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "affine",
        nb::kw_only(), "global_scale"_a = nb::none(), "stream"_a = nb::none(),
        "Quantizes the rows of w in groups: (w_q, scales, biases) in mode 'affine', (w_q, scales) "
        "in modes 'mxfp4', 'mxfp8' and 'nvfp4'.");
  def(m, "dequantize", [](nb::handle w, nb::handle scales, nb::handle biases,
                         std::optional<int> group_size, std::optional<int> bits,
                         const std::string& mode, nb::handle global_scale,
                         std::optional<Dtype> dtype, StreamArg s) {
    return dequantize(to_array(w), to_array(scales), optional_array(biases), group_size, bits,
                      mode, optional_array(global_scale), dtype, s);
  }, "w"_a, pos_only(), "scales"_a, "biases"_a = nb::none(), "group_size"_a = nb::none(),
        "bits"_a = nb::none(), "mode"_a = "affine", "global_scale"_a = nb::none(),
        "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
        "The matrix that quantize packed: scales * q + biases per group.");
  def(m, "quantized_matmul", [](nb::handle x, nb::handle w, nb::handle scales,
                               nb::handle biases, bool transpose,
                               std::optional<int> group_size, std::optional<int> bits,
                               const std::string& mode, StreamArg s) {
    return quantized_matmul(to_array(x), to_array(w), to_array(scales), optional_array(biases),
                            transpose, group_size, bits, mode, s);
  }, "x"_a, "w"_a, pos_only(), "scales"_a, "biases"_a = nb::none(), "transpose"_a = true,
        "group_size"_a = nb::none(), "bits"_a = nb::none(), "mode"_a = "affine", nb::kw_only(),
        "stream"_a = nb::none(),
        "x @ dequantize(w).T (or x @ dequantize(w) when transpose is False).");
  def(m, "gather_qmm", [](nb::handle x, nb::handle w, nb::handle scales, nb::handle biases,
                         nb::handle lhs, nb::handle rhs, bool transpose,
                         std::optional<int> group_size, std::optional<int> bits,
                         const std::string& mode, bool sorted_indices, StreamArg s) {
    return gather_qmm(to_array(x), to_array(w), to_array(scales), optional_array(biases),
                      optional_array(lhs), optional_array(rhs), transpose, group_size, bits,
                      mode, sorted_indices, s);
  }, "x"_a, "w"_a, pos_only(), "scales"_a, "biases"_a = nb::none(), "lhs_indices"_a = nb::none(),
        "rhs_indices"_a = nb::none(), "transpose"_a = true, "group_size"_a = nb::none(),
        "bits"_a = nb::none(), "mode"_a = "affine", nb::kw_only(), "sorted_indices"_a = false,
        "stream"_a = nb::none(),
        "quantized_matmul after choosing matrices by flat batch index (as gather_mm).");
  def(m, "qqmm", [](nb::handle x, nb::handle w, nb::handle scales,
                   std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                   nb::handle global_scale_x, nb::handle global_scale_w, StreamArg s) {
    return qqmm(to_array(x), to_array(w), optional_array(scales), group_size, bits, mode,
                optional_array(global_scale_x), optional_array(global_scale_w), s);
  }, "x"_a, "w"_a, pos_only(), "scales"_a = nb::none(), "group_size"_a = nb::none(),
        "bits"_a = nb::none(), "mode"_a = "nvfp4", "global_scale_x"_a = nb::none(),
        "global_scale_w"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none(),
        "x @ w.T with x (and w unless already quantized) quantized on the fly.");
  def(m, "gather_qqmm", [](nb::handle x, nb::handle w, nb::handle scales, nb::handle lhs,
                          nb::handle rhs, std::optional<int> group_size, std::optional<int> bits,
                          const std::string& mode, nb::handle global_scale_x,
                          nb::handle global_scale_w, bool sorted_indices, StreamArg s) {
    return gather_qqmm(to_array(x), to_array(w), optional_array(scales), optional_array(lhs),
                       optional_array(rhs), group_size, bits, mode,
                       optional_array(global_scale_x), optional_array(global_scale_w),
                       sorted_indices, s);
  }, "x"_a, "w"_a, pos_only(), "scales"_a = nb::none(), "lhs_indices"_a = nb::none(),
        "rhs_indices"_a = nb::none(), "group_size"_a = nb::none(), "bits"_a = nb::none(),
        "mode"_a = "nvfp4", "global_scale_x"_a = nb::none(), "global_scale_w"_a = nb::none(),
        nb::kw_only(), "sorted_indices"_a = false, "stream"_a = nb::none(),
        "qqmm after choosing matrices by flat batch index (as gather_mm).");
  def(m, "to_fp8", [](nb::handle x, StreamArg s) { return to_fp8(to_array(x), s); },
      "x"_a, pos_only(), nb::kw_only(), "stream"_a = nb::none(),
      "Encodes floats as fp8 e4m3 codes (uint8): nearest value, ties to even, saturating at 448.");
  def(m, "from_fp8", [](nb::handle x, Dtype dtype, StreamArg s) {
    return from_fp8(to_array(x), dtype, s);
  }, "x"_a, pos_only(), "dtype"_a = bfloat16, nb::kw_only(), "stream"_a = nb::none(),
      "Decodes fp8 e4m3 codes (uint8) into `dtype`.");
}

}  // namespace tessera::python
