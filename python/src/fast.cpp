// The submodule tessera.core.fast: rms_norm,
// layer_norm, rope, cross_entropy, gated_delta_update and scaled_dot_product_attention; the
// stream is keyword-only but for gated_delta_update (as in MLX).
#include "convert.h"

namespace tessera::python {

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
}

}  // namespace tessera::python
