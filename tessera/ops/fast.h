// Composite ops with fused kernels where a backend has them (namespace fast),
// after MLX's mlx/fast.h.
//
//   auto y = fast::rms_norm(x, w, 1e-5f);                       // over the last axis
//   auto r = fast::rope(q, 64, false, 10000.0f, 1.0f, offset);  // (B, *, T, D)
//   auto o = fast::scaled_dot_product_attention(q, k, v, 0.125f, "causal");
//   auto loss = fast::cross_entropy(logits, labels);           // float32, labels' shape
//
// Each op but cross_entropy and gated_delta_update is one primitive that carries its composition of ordinary ops (Note
// [Fast primitives] in ops/primitives/fast.h): results are those of the
// formulas below on every device. Normalisations, rotations and the attention
// softmax compute in float32 (float64 for float64 input) and return the
// input's dtype.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera::fast {

// x * rsqrt(mean(x^2, -1) + eps) * weight; weight 1-D of size x.shape(-1), or none.
array rms_norm(const array& x, const std::optional<array>& weight, float eps,
               StreamOrDevice s = {});

// (x - mean) * rsqrt(var + eps) * weight + bias over the last axis; weight and
// bias 1-D of size x.shape(-1), or none.
array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps, StreamOrDevice s = {});

// Rotary position embedding of the first `dims` features (even, at most
// x.shape(-1)) of x shaped (B, *, T, D). Row t sits at position
// (t + offset) * scale; the frequencies are base^(-i / (dims / 2)), or 1 / freqs
// (shape (dims / 2)) when freqs is given: exactly one of base and freqs.
// traditional rotates the pairs (x[2i], x[2i+1]), else (x[i], x[i + dims/2]).
// An offset array is a scalar or has one entry per batch element.
array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           int offset, const std::optional<array>& freqs = std::nullopt, StreamOrDevice s = {});
array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           const array& offset, const std::optional<array>& freqs = std::nullopt,
           StreamOrDevice s = {});

// softmax(scale * q @ k^T + mask) @ v over q (B, N_q, T_q, D), k (B, N_kv, T_kv, D),
// v (B, N_kv, T_kv, D_v); N_q a multiple of N_kv (grouped-query heads, k and v
// are not repeated). mask_mode: "" (none), "causal" (query i sees key j iff
// j <= i + T_kv - T_q) or "array": mask_arr, boolean (true: attend) or additive
// (promoting to q's dtype), broadcasts to (B, N_q, T_q, T_kv). sinks (N_q):
// one logit per query head in the softmax's normaliser. The result has v's
// dtype; force_fused refuses a case no fused kernel covers.
array scaled_dot_product_attention(const array& q, const array& k, const array& v,
                                   const float scale, const std::string& mask_mode = "",
                                   std::optional<array> mask_arr = {},
                                   const std::optional<array>& sinks = {},
                                   bool force_fused = false, StreamOrDevice s = {});

// logsumexp(logits, -1) - logits[..., targets] in float32, of the shape of
// targets (integer class indices in [0, logits.shape(-1))). A composition of
// ordinary ops, with no primitive of its own.
array cross_entropy(const array& logits, const array& targets, StreamOrDevice s = {});

// The gated delta rule (Qwen3-Next's linear attention) over q, k (B, T, Hk, Dk),
// v (B, T, Hv, Dv) with Hv a multiple of Hk, gamma (B, T, Hv) or (B, T, Hv, Dk)
// and beta (B, T, Hv), from initial_state (B, Hv, Dv, Dk; zeros in float32 when
// none). Step t, per head (q and k repeated over the Hv / Hk heads they serve):
//   S = S * gamma_t;  delta = (v_t - S k_t) * beta_t;  S = S + delta k_t^T;  y_t = S q_t
// A step whose mask (B, T; bool) is false leaves S as it was and outputs zeros.
// Returns {y (B, T, Hv, Dv) in q's dtype, the final state (S's dtype)}. A
// composition of ordinary ops, one step after another.
std::vector<array> gated_delta_update(const array& q, const array& k, const array& v,
                                      const array& gamma, const array& beta,
                                      const std::optional<array>& initial_state = {},
                                      const std::optional<array>& mask = {},
                                      StreamOrDevice s = {});

}  // namespace tessera::fast
