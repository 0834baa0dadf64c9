// The submodule tessera.core.fast: rms_norm,
// layer_norm, rope, cross_entropy, gated_delta_update and scaled_dot_product_attention; the
// stream is keyword-only but for gated_delta_update (as in MLX). Then the custom CUDA
// kernels: cuda_kernel, whose kernels take keyword arguments only, and
// precompiled_cuda_kernel (metal_kernel is in metal.cpp).
#include "convert.h"

namespace tessera::python {

namespace {

std::vector<Shape> shapes(nb::handle output_shapes, const char* op) {
  std::vector<Shape> out;
  for (nb::handle v : output_shapes) out.push_back(to_shape(v, op));
  return out;
}

// (name, bool | int | Dtype) pairs; bool is tested before int, which it subclasses.
std::vector<std::pair<std::string, fast::TemplateArg>> template_args(nb::handle pairs) {
  std::vector<std::pair<std::string, fast::TemplateArg>> out;
  if (pairs.is_none()) return out;
  for (nb::handle pair : pairs) {
    auto [name, value] = nb::cast<std::pair<std::string, nb::object>>(pair);
    if (nb::isinstance<nb::bool_>(value)) {
      out.emplace_back(name, nb::cast<bool>(value));
    } else if (nb::isinstance<nb::int_>(value)) {
      out.emplace_back(name, to_int32(value, "cuda_kernel", "template argument"));
    } else if (nb::isinstance<Dtype>(value)) {
      out.emplace_back(name, nb::cast<Dtype>(value));
    } else {
      throw std::invalid_argument(
          "[cuda_kernel] template argument '" + name + "' must be a Dtype, an int or a bool, "
          "got " + nb::cast<std::string>(nb::type_name(value.type())));
    }
  }
  return out;
}

std::vector<fast::ScalarArg> scalar_args(nb::handle scalars) {
  std::vector<fast::ScalarArg> out;
  for (nb::handle v : scalars) {
    if (nb::isinstance<nb::bool_>(v)) {
      out.emplace_back(nb::cast<bool>(v));
    } else if (nb::isinstance<nb::int_>(v)) {
      out.emplace_back(to_int32(v, "precompiled_cuda_kernel", "scalar"));
    } else if (nb::isinstance<nb::float_>(v)) {
      out.emplace_back(nb::cast<float>(v));
    } else {
      throw std::invalid_argument(
          "[precompiled_cuda_kernel] scalar " + std::to_string(out.size()) +
          " must be a bool, an int or a float, got " +
          nb::cast<std::string>(nb::type_name(v.type())));
    }
  }
  return out;
}

}  // namespace

void init_fast(nb::module_& parent) {
  nb::module_ m = parent.def_submodule(
      "fast", "Normalisations, rotary embeddings and attention, each one op (fused where a "
              "backend has the kernel)");
  auto kw = nb::kw_only();
  def_named(m, "rms_norm", [](nb::handle x, nb::handle weight, float eps, StreamArg s) {
    return fast::rms_norm(to_array(x), optional_array(weight), eps, s);
  }, "x"_a, "weight"_a.none(), "eps"_a, kw, "stream"_a = nb::none(),
        "x * rsqrt(mean(x**2, axis=-1) + eps) * weight; weight 1-D or None.");
  def_named(m, "layer_norm", [](nb::handle x, nb::handle weight, nb::handle bias, float eps,
                         StreamArg s) {
    return fast::layer_norm(to_array(x), optional_array(weight), optional_array(bias), eps, s);
  }, "x"_a, "weight"_a.none(), "bias"_a.none(), "eps"_a, kw, "stream"_a = nb::none(),
        "(x - mean) * rsqrt(var + eps) * weight + bias over the last axis; weight and bias "
        "1-D or None.");
  def_named(m, "rope", [](nb::handle a, int dims, bool traditional, std::optional<float> base,
                   float scale, nb::handle offset, nb::handle freqs, StreamArg s) {
    array x = to_array(a);
    auto f = optional_array(freqs);
    if (nb::isinstance<nb::int_>(offset)) {
      return fast::rope(x, dims, traditional, base, scale, nb::cast<int>(offset), f, s);
    }
    return fast::rope(x, dims, traditional, base, scale, to_array(offset), f, s);
  }, "a"_a, "dims"_a, kw, "traditional"_a, "base"_a.none(), "scale"_a, "offset"_a,
        "freqs"_a = nb::none(), "stream"_a = nb::none(),
        "Rotary position embedding of the first dims features of a (B, *, T, D); offset an "
        "int or an array (a scalar, or one per batch element); exactly one of base and freqs.");
  def_named(m, "cross_entropy", [](nb::handle logits, nb::handle targets, StreamArg s) {
    return fast::cross_entropy(to_array(logits), to_array(targets), s);
  }, "logits"_a, "targets"_a, kw, "stream"_a = nb::none(),
        "logsumexp(logits, axis=-1) - logits[..., targets] in float32, with the shape of "
        "targets (integer class indices).");
  def_named(m, "gated_delta_update", [](nb::handle q, nb::handle k, nb::handle v,
                                        nb::handle gamma, nb::handle beta,
                                        nb::handle initial_state, nb::handle mask, StreamArg s) {
    return fast::gated_delta_update(to_array(q), to_array(k), to_array(v), to_array(gamma),
                                    to_array(beta), optional_array(initial_state),
                                    optional_array(mask), s);
  }, "q"_a, "k"_a, "v"_a, "gamma"_a, "beta"_a, "initial_state"_a = nb::none(),
        "mask"_a = nb::none(), "stream"_a = nb::none(),
        "The gated delta rule over q, k (B, T, Hk, Dk), v (B, T, Hv, Dv), gamma (B, T, Hv) or "
        "(B, T, Hv, Dk) and beta (B, T, Hv), from initial_state (B, Hv, Dv, Dk; zeros if None); "
        "a false mask (B, T) step keeps the state and outputs zeros. Returns [y, final_state].");
  def_named(m, "scaled_dot_product_attention", [](nb::handle q, nb::handle k, nb::handle v, float scale,
                                           nb::handle mask, nb::handle sinks, bool force_fused,
                                           StreamArg s) {
    std::string mode;
    std::optional<array> mask_arr;
    if (nb::isinstance<nb::str>(mask)) {
      mode = nb::cast<std::string>(mask);
      if (mode != "causal") {
        throw std::invalid_argument(
            "[scaled_dot_product_attention] mask must be 'causal', an array or None, got '" +
            mode + "'");
      }
    } else if (!mask.is_none()) {
      mode = "array";
      mask_arr = to_array(mask);
    }
    return fast::scaled_dot_product_attention(to_array(q), to_array(k), to_array(v), scale, mode,
                                              std::move(mask_arr), optional_array(sinks),
                                              force_fused, s);
  }, "q"_a, "k"_a, "v"_a, kw, "scale"_a, "mask"_a = nb::none(), "sinks"_a = nb::none(),
        "force_fused"_a = false, "stream"_a = nb::none(),
        "softmax(scale * q @ k.T + mask) @ v over heads (B, N, T, D); N_q a multiple of N_kv; "
        "mask None, 'causal', or a boolean or additive array; sinks one logit per query head.");

  def_named(m, "cuda_kernel", [](const std::string& name, std::vector<std::string> input_names,
                                 std::vector<std::string> output_names, const std::string& source,
                                 const std::string& header, bool ensure_row_contiguous,
                                 int shared_memory) {
    auto kernel = fast::cuda_kernel(name, input_names, output_names, source, header,
                                    ensure_row_contiguous, shared_memory);
    return nb::cpp_function(
        named("cuda_kernel",
              [kernel](nb::handle inputs, nb::handle output_shapes,
                       std::vector<Dtype> output_dtypes, std::tuple<int, int, int> grid,
                       std::tuple<int, int, int> threadgroup, nb::handle template_pairs,
                       std::optional<float> init_value, bool verbose, StreamArg s) {
                return kernel(to_array_list(inputs), shapes(output_shapes, "cuda_kernel"),
                              output_dtypes, grid, threadgroup, template_args(template_pairs),
                              init_value, verbose, s);
              }),
        nb::name(name.c_str()), nb::kw_only(), "inputs"_a, "output_shapes"_a, "output_dtypes"_a,
        "grid"_a, "threadgroup"_a, "template"_a = nb::none(), "init_value"_a = nb::none(),
        "verbose"_a = false, "stream"_a = nb::none(),
        "Runs the kernel on inputs (arrays or scalars) to outputs of the given shapes and "
        "dtypes over grid threads in blocks of threadgroup; template: (name, bool | int | "
        "Dtype) pairs; init_value fills the outputs first; verbose prints the source.");
  }, "name"_a, "input_names"_a, "output_names"_a, "source"_a, "header"_a = "",
     "ensure_row_contiguous"_a = true, "shared_memory"_a = 0,
     "A CUDA kernel from the body `source` of a function over inputs and outputs of these "
     "names (the signature is generated; `header` goes before it). Returns a callable "
     "kernel(*, inputs, output_shapes, output_dtypes, grid, threadgroup, template=None, "
     "init_value=None, verbose=False, stream=None) -> list[array]; it runs on the GPU only.");
  def_named(m, "precompiled_cuda_kernel", [](const std::string& name, nb::bytes compiled_source,
                                             nb::handle inputs, nb::handle output_shapes,
                                             std::vector<Dtype> output_dtypes, nb::handle scalars,
                                             std::tuple<int, int, int> grid,
                                             std::tuple<int, int, int> threadgroup,
                                             int shared_memory, std::optional<float> init_value,
                                             bool ensure_row_contiguous, StreamArg s) {
    return fast::precompiled_cuda_kernel(
        name, std::string(compiled_source.c_str(), compiled_source.size()), to_array_list(inputs),
        shapes(output_shapes, "precompiled_cuda_kernel"), output_dtypes, scalar_args(scalars),
        grid, threadgroup, shared_memory, init_value, ensure_row_contiguous, s);
  }, kw, "name"_a, "compiled_source"_a, "inputs"_a, "output_shapes"_a, "output_dtypes"_a,
        "scalars"_a, "grid"_a, "threadgroup"_a, "shared_memory"_a = 0,
        "init_value"_a = nb::none(), "ensure_row_contiguous"_a = false, "stream"_a = nb::none(),
        "Runs the extern \"C\" kernel `name` of compiled_source (PTX or cubin bytes) on the "
        "GPU: its parameters are the inputs' and outputs' pointers, then the scalars by value "
        "(bool, int32, float32). The grid counts threads.");
}

}  // namespace tessera::python
