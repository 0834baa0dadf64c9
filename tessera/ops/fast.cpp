// fast: validate, build each op's fallback of ordinary ops, and return its
// graph or the primitive's node (Note [Fast primitives] in ops/primitives/fast.h).
#include "tessera/ops/fast.h"

#include <memory>
#include <utility>
#include <vector>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/fast.h"

namespace tessera::fast {

namespace {

// Whether a ForceScope<F> is open on this thread.
bool& forced(Force f) {
  thread_local bool flags[2] = {false, false};
  return flags[static_cast<int>(f)];
}

// The node of p over inputs (one output of this shape and dtype), or the
// fallback's graph where no kernel covers the case.
array finish(std::shared_ptr<Custom> p, Shape shape, Dtype dtype, std::vector<array> inputs) {
  return node_or_fallback(std::move(p), {std::move(shape)}, {dtype}, std::move(inputs))[0];
}

// Half-precision inputs compute in float32; float64 stays float64.
Dtype compute_type(Dtype t) { return t == float64 ? float64 : float32; }

// a[..., lo:hi]
array last_axis(const array& a, int lo, int hi, const Stream& s) {
  Shape start(a.ndim(), 0), stop = a.shape();
  start.back() = lo;
  stop.back() = hi;
  return slice(a, std::move(start), std::move(stop), s);
}

void check_floating(const char* op, const char* what, const array& a) {
  if (!is_floating_point(a.dtype())) {
    throw_invalid(op, std::string(what) + " must have a floating dtype, got " +
                          dtype_name(a.dtype()));
  }
}

// x of at least one dimension and a floating dtype.
void check_normalised(const char* op, const array& x) {
  if (x.ndim() == 0) {
    throw_invalid(op, "x must have at least 1 dimension, got shape " + shape_str(x.shape()));
  }
  check_floating(op, "x", x);
}

// weight / bias: 1-D of the size of x's last axis.
void check_affine(const char* op, const std::optional<array>& w, const array& x,
                  const char* what) {
  if (w && (w->ndim() != 1 || w->shape(0) != x.shape(-1))) {
    throw_invalid(op, std::string(what) + " must be 1-D of size " + std::to_string(x.shape(-1)) +
                          " (the last axis of x), got shape " + shape_str(w->shape()));
  }
}

}  // namespace

std::vector<array> node_or_fallback(std::shared_ptr<Custom> p, std::vector<Shape> shapes,
                                    std::vector<Dtype> dtypes, std::vector<array> inputs) {
  if (forced(Force::fallback) || (!forced(Force::primitive) && p->use_fallback(inputs))) {
    return p->fallback()(std::move(inputs));
  }
  if (shapes.size() == 1) {
    return {array(std::move(shapes[0]), dtypes[0], std::move(p), std::move(inputs))};
  }
  return array::make_arrays(std::move(shapes), dtypes, p, inputs);
}

template <Force F>
ForceScope<F>::ForceScope() : previous_(forced(F)) {
  forced(F) = true;
}
template <Force F>
ForceScope<F>::~ForceScope() {
  forced(F) = previous_;
}
template class ForceScope<Force::primitive>;
template class ForceScope<Force::fallback>;

array rms_norm(const array& x, const std::optional<array>& weight, float eps, StreamOrDevice s) {
  check_normalised("rms_norm", x);
  check_affine("rms_norm", weight, x, "weight");
  Stream st = to_stream(s);
  auto fallback = [eps, st](std::vector<array> in) {
    const array& x = in[0];
    Dtype ct = compute_type(x.dtype());
    array xf = astype(x, ct, st);
    array inv = rsqrt(add(mean(square(xf, st), -1, true, st), array(eps, ct), st), st);
    array y = astype(multiply(xf, inv, st), x.dtype(), st);
    if (in.size() > 1) y = multiply(y, in[1], st);
    return std::vector<array>{y};
  };
  std::vector<array> inputs{x};
  if (weight) inputs.push_back(*weight);
  Dtype out = weight ? promote_types(x.dtype(), weight->dtype()) : x.dtype();
  auto p = std::make_shared<RMSNorm>(st, std::move(fallback), eps, weight.has_value(), false);
  return finish(std::move(p), x.shape(), out, std::move(inputs));
}

array layer_norm(const array& x, const std::optional<array>& weight,
                 const std::optional<array>& bias, float eps, StreamOrDevice s) {
  check_normalised("layer_norm", x);
  check_affine("layer_norm", weight, x, "weight");
  check_affine("layer_norm", bias, x, "bias");
  Stream st = to_stream(s);
  bool has_weight = weight.has_value(), has_bias = bias.has_value();
  auto fallback = [eps, has_weight, has_bias, st](std::vector<array> in) {
    const array& x = in[0];
    Dtype ct = compute_type(x.dtype());
    array xf = astype(x, ct, st);
    array centred = subtract(xf, mean(xf, -1, true, st), st);
    array inv = rsqrt(add(var(xf, -1, true, 0, st), array(eps, ct), st), st);
    array y = astype(multiply(centred, inv, st), x.dtype(), st);
    if (has_weight) y = multiply(y, in[1], st);
    if (has_bias) y = add(y, in[has_weight ? 2 : 1], st);
    return std::vector<array>{y};
  };
  std::vector<array> inputs{x};
  Dtype out = x.dtype();
  for (auto& a : {weight, bias}) {
    if (!a) continue;
    inputs.push_back(*a);
    out = promote_types(out, a->dtype());
  }
  return finish(
      std::make_shared<LayerNorm>(st, std::move(fallback), eps, has_weight, has_bias), x.shape(),
      out, std::move(inputs));
}

array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           int offset, const std::optional<array>& freqs, StreamOrDevice s) {
  return rope(x, dims, traditional, base, scale, array(offset, int32), freqs, s);
}

array rope(const array& x, int dims, bool traditional, std::optional<float> base, float scale,
           const array& offset, const std::optional<array>& freqs, StreamOrDevice s) {
  if (x.ndim() < 3) {
    throw_invalid("rope", "expected an input of at least 3 dimensions (B, *, T, D), got shape " +
                              shape_str(x.shape()));
  }
  if (!is_floating_point(x.dtype())) {
    throw_invalid("rope", "expected a floating input, got " + dtype_name(x.dtype()));
  }
  if (dims <= 0 || dims % 2 || dims > x.shape(-1)) {
    throw_invalid("rope", "dims must be even, positive and at most " +
                              std::to_string(x.shape(-1)) + ", got " + std::to_string(dims));
  }
  if (base.has_value() == freqs.has_value()) {
    throw_invalid("rope", "exactly one of base and freqs must be given");
  }
  const int half = dims / 2;
  if (freqs && (freqs->shape() != Shape{half} || is_complex(freqs->dtype()))) {
    throw_invalid("rope", "freqs must be real of shape " + shape_str({half}) + ", got " +
                              dtype_name(freqs->dtype()) + " " + shape_str(freqs->shape()));
  }
  if (offset.ndim() > 1) {
    throw_invalid("rope", "offset must be a scalar or 1-D, got shape " +
                              shape_str(offset.shape()));
  }
  if (offset.ndim() == 1 && offset.shape(0) != x.shape(0)) {
    throw_invalid("rope", "an offset array has one entry per batch element (" +
                              std::to_string(x.shape(0)) + "), got shape " +
                              shape_str(offset.shape()));
  }
  if (is_complex(offset.dtype())) {
    throw_invalid("rope", "offset must be real, got " + dtype_name(offset.dtype()));
  }
  Stream st = to_stream(s);
  auto fallback = [dims, half, traditional, base, scale, st](std::vector<array> in) {
    const array& x = in[0];
    Dtype ct = compute_type(x.dtype());
    const int nd = static_cast<int>(x.ndim());
    array inv = in.size() > 2
                    ? divide(array(1.0, ct), astype(in[2], ct, st), st)
                    : power(array(*base, ct),
                            divide(negative(astype(arange(half, st), ct, st), st),
                                   array(static_cast<double>(half), ct), st),
                            st);
    array positions = astype(arange(x.shape(-2), st), ct, st);
    array off = astype(in[1], ct, st);
    if (off.ndim() == 1) {
      Shape per_batch(nd - 1, 1);
      per_batch[0] = x.shape(0);
      off = reshape(off, per_batch, st);
    }
    positions = add(positions, off, st);
    array theta = multiply(expand_dims(multiply(positions, array(scale, ct), st), -1, st), inv, st);
    array c = cos(theta, st), sn = sin(theta, st);
    array rot = astype(last_axis(x, 0, dims, st), ct, st);
    auto rotate = [&](const array& x1, const array& x2) {
      return std::pair{subtract(multiply(x1, c, st), multiply(x2, sn, st), st),
                       add(multiply(x1, sn, st), multiply(x2, c, st), st)};
    };
    array out = rot;
    if (traditional) {
      Shape pairs_shape(rot.shape().begin(), rot.shape().end() - 1);
      pairs_shape.push_back(half);
      pairs_shape.push_back(2);
      array pairs = reshape(rot, pairs_shape, st);
      auto [y1, y2] = rotate(squeeze(last_axis(pairs, 0, 1, st), -1, st),
                             squeeze(last_axis(pairs, 1, 2, st), -1, st));
      out = reshape(stack({y1, y2}, -1, st), rot.shape(), st);
    } else {
      auto [y1, y2] = rotate(last_axis(rot, 0, half, st), last_axis(rot, half, dims, st));
      out = concatenate({y1, y2}, -1, st);
    }
    out = astype(out, x.dtype(), st);
    if (dims < x.shape(-1)) {
      out = concatenate({out, last_axis(x, dims, x.shape(-1), st)}, -1, st);
    }
    return std::vector<array>{out};
  };
  std::vector<array> inputs{x, offset};
  if (freqs) inputs.push_back(*freqs);
  return finish(std::make_shared<RoPE>(st, std::move(fallback), dims, traditional, base, scale),
                x.shape(), x.dtype(), std::move(inputs));
}

array scaled_dot_product_attention(const array& q, const array& k, const array& v,
                                   const float scale, const std::string& mask_mode,
                                   std::optional<array> mask_arr,
                                   const std::optional<array>& sinks, bool force_fused,
                                   StreamOrDevice s) {
  using Mask = ScaledDotProductAttention::Mask;
  const char* op = "scaled_dot_product_attention";
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4) {
    throw_invalid(op, "q, k and v must be (B, N, T, D), got shapes " + shape_str(q.shape()) +
                          ", " + shape_str(k.shape()) + " and " + shape_str(v.shape()));
  }
  check_floating(op, "q", q);
  check_floating(op, "k", k);
  check_floating(op, "v", v);
  const int b = q.shape(0), n_q = q.shape(1), t_q = q.shape(2), d = q.shape(3);
  const int n_kv = k.shape(1), t_kv = k.shape(2);
  if (n_kv == 0 || n_q % n_kv || k.shape(0) != b || v.shape(0) != b || v.shape(1) != n_kv ||
      v.shape(2) != t_kv || k.shape(3) != d) {
    throw_invalid(op, "shapes q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) +
                          " and v " + shape_str(v.shape()) +
                          " do not match (N_q must be a multiple of N_kv)");
  }
  Mask mask = Mask::none;
  if (mask_mode == "causal") {
    mask = Mask::causal;
  } else if (mask_mode == "array") {
    mask = Mask::array;
  } else if (!mask_mode.empty()) {
    throw_invalid(op, "mask_mode must be '', 'causal' or 'array', got '" + mask_mode + "'");
  }
  if (mask_arr.has_value() != (mask == Mask::array)) {
    throw_invalid(op, mask_arr ? "a mask array needs mask_mode 'array', got '" + mask_mode + "'"
                               : std::string("mask_mode 'array' needs a mask array"));
  }
  const Shape full{b, n_q, t_q, t_kv};
  if (mask_arr) {
    const Shape& m = mask_arr->shape();
    bool fits = m.size() <= full.size();
    for (size_t i = 0; fits && i < m.size(); ++i) {
      int want = full[full.size() - m.size() + i];
      fits = m[i] == 1 || m[i] == want;
    }
    if (!fits) {
      throw_invalid(op, "a mask of shape " + shape_str(m) +
                            " does not broadcast to the scores' shape " + shape_str(full));
    }
    if (mask_arr->dtype() != bool_ && promote_types(q.dtype(), mask_arr->dtype()) != q.dtype()) {
      throw_invalid(op, "an additive mask of dtype " + dtype_name(mask_arr->dtype()) +
                            " does not promote to the inputs' dtype " + dtype_name(q.dtype()));
    }
  }
  if (sinks && (sinks->shape() != Shape{n_q} || is_complex(sinks->dtype()))) {
    throw_invalid(op, "sinks must be real of shape " + shape_str({n_q}) + ", got " +
                          dtype_name(sinks->dtype()) + " " + shape_str(sinks->shape()));
  }
  Stream st = to_stream(s);
  bool has_sinks = sinks.has_value();
  auto fallback = [scale, mask, has_sinks, st](std::vector<array> in) {
    const array &q = in[0], &k = in[1], &v = in[2];
    const int b = q.shape(0), n_q = q.shape(1), t_q = q.shape(2), d = q.shape(3);
    const int n_kv = k.shape(1), t_kv = k.shape(2), rep = n_q / n_kv;
    Dtype ct = compute_type(promote_types(q.dtype(), k.dtype()));
    // Heads grouped as (B, N_kv, rep, T, D): each group of rep query heads
    // meets its k and v head by broadcasting, without copies.
    array qg = reshape(multiply(astype(q, ct, st), array(scale, ct), st), {b, n_kv, rep, t_q, d},
                       st);
    array kg = expand_dims(astype(k, ct, st), 2, st);
    array scores = matmul(qg, swapaxes(kg, -1, -2, st), st);  // (B, N_kv, rep, T_q, T_kv)
    array lowest(finfo(ct).min, ct);
    size_t next = 3;
    if (mask == Mask::causal) {
      array rows = add(expand_dims(arange(t_q, st), -1, st), array(t_kv - t_q), st);
      scores = where(greater_equal(rows, arange(t_kv, st), st), scores, lowest, st);
    } else if (mask == Mask::array) {
      const array& m = in[next++];
      array grouped = reshape(broadcast_to(m, {b, n_q, t_q, t_kv}, st), {b, n_kv, rep, t_q, t_kv},
                              st);
      scores = m.dtype() == bool_ ? where(grouped, scores, lowest, st)
                                  : add(scores, astype(grouped, ct, st), st);
    }
    if (has_sinks) {
      // The sink is one more column of the softmax that contributes no value.
      array column = broadcast_to(reshape(astype(in[next], ct, st), {1, n_kv, rep, 1, 1}, st),
                                  {b, n_kv, rep, t_q, 1}, st);
      scores = concatenate({scores, column}, -1, st);
    }
    array probs = softmax(scores, -1, false, st);
    if (has_sinks) probs = last_axis(probs, 0, t_kv, st);
    array out = matmul(astype(probs, v.dtype(), st), expand_dims(v, 2, st), st);
    return std::vector<array>{reshape(out, {b, n_q, t_q, v.shape(3)}, st),
                              reshape(logsumexp(scores, -1, false, st), {b, n_q, t_q}, st)};
  };
  std::vector<array> inputs{q, k, v};
  if (mask_arr) inputs.push_back(std::move(*mask_arr));
  if (sinks) inputs.push_back(*sinks);
  auto p = std::make_shared<ScaledDotProductAttention>(st, std::move(fallback), scale, mask,
                                                       has_sinks);
  if (force_fused && p->use_fallback(inputs)) {
    throw_invalid(op, "no fused kernel covers this case, so force_fused cannot be met");
  }
  Dtype lse_type = compute_type(promote_types(q.dtype(), k.dtype()));
  // The fallback's results are {o, lse} too: o either way.
  return node_or_fallback(std::move(p), {{b, n_q, t_q, v.shape(3)}, {b, n_q, t_q}},
                          {v.dtype(), lse_type}, std::move(inputs))[0];
}

array cross_entropy(const array& logits, const array& targets, StreamOrDevice s) {
  const char* op = "cross_entropy";
  if (logits.ndim() == 0) {
    throw_invalid(op, "logits must have at least 1 dimension, got shape " +
                          shape_str(logits.shape()));
  }
  check_floating(op, "logits", logits);
  if (!is_integer(targets.dtype())) {
    throw_invalid(op, "targets must be integer class indices, got " +
                          dtype_name(targets.dtype()));
  }
  Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != expected) {
    throw_invalid(op, "targets of shape " + shape_str(targets.shape()) +
                          " must have the shape of logits " + shape_str(logits.shape()) +
                          " without its last axis, " + shape_str(expected));
  }
  if (logits.size() == 0) {
    throw_invalid(op, "logits must not be empty, got shape " + shape_str(logits.shape()));
  }
  Stream st = to_stream(s);
  array l = astype(logits, float32, st);
  array picked = take_along_axis(l, expand_dims(targets, -1, st), -1, st);
  return subtract(logsumexp(l, -1, false, st), squeeze(picked, -1, st), st);
}

std::vector<array> gated_delta_update(const array& q, const array& k, const array& v,
                                      const array& gamma, const array& beta,
                                      const std::optional<array>& initial_state,
                                      const std::optional<array>& mask, StreamOrDevice s) {
  const char* op = "gated_delta_update";
  for (auto [what, a] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"gamma", &gamma},
                         {"beta", &beta}}) {
    check_floating(op, what, *a);
  }
  if (q.ndim() != 4 || k.shape() != q.shape()) {
    throw_invalid(op, "q and k must have one shape (B, T, Hk, Dk), got " + shape_str(q.shape()) +
                          " and " + shape_str(k.shape()));
  }
  const int B = q.shape(0), T = q.shape(1), Hk = q.shape(2), Dk = q.shape(3);
  if (v.ndim() != 4 || v.shape(0) != B || v.shape(1) != T || Hk == 0 || v.shape(2) % Hk != 0) {
    throw_invalid(op, "v must be (B, T, Hv, Dv) with Hv a multiple of Hk for q of shape " +
                          shape_str(q.shape()) + ", got " + shape_str(v.shape()));
  }
  const int Hv = v.shape(2), Dv = v.shape(3);
  const Shape heads{B, T, Hv};
  Shape vector_gate{B, T, Hv, Dk};
  if (gamma.shape() != heads && gamma.shape() != vector_gate) {
    throw_invalid(op, "gamma must have shape " + shape_str(heads) + " or " +
                          shape_str(vector_gate) + ", got " + shape_str(gamma.shape()));
  }
  if (beta.shape() != heads) {
    throw_invalid(op, "beta must have shape " + shape_str(heads) + ", got " +
                          shape_str(beta.shape()));
  }
  const Shape state_shape{B, Hv, Dv, Dk};
  if (initial_state) {
    check_floating(op, "initial_state", *initial_state);
    if (initial_state->shape() != state_shape) {
      throw_invalid(op, "initial_state must have shape " + shape_str(state_shape) + ", got " +
                            shape_str(initial_state->shape()));
    }
  }
  if (mask && (mask->dtype() != bool_ || mask->shape() != Shape{B, T})) {
    throw_invalid(op, "mask must be bool of shape " + shape_str(Shape{B, T}) + ", got " +
                          dtype_name(mask->dtype()) + " " + shape_str(mask->shape()));
  }
  Stream st = to_stream(s);
  array qr = q, kr = k;
  if (Hv > Hk) {
    qr = repeat(q, Hv / Hk, 2, st);
    kr = repeat(k, Hv / Hk, 2, st);
  }
  array state = initial_state ? *initial_state : zeros(state_shape, float32, st);
  // x[:, t], dropping the time axis.
  auto at = [&](const array& x, int t) {
    Shape start(x.ndim(), 0), stop = x.shape();
    start[1] = t;
    stop[1] = t + 1;
    return squeeze(slice(x, std::move(start), std::move(stop), st), 1, st);
  };
  std::vector<array> ys;
  ys.reserve(T);
  for (int t = 0; t < T; ++t) {
    array qt = expand_dims(at(qr, t), -2, st), kt = expand_dims(at(kr, t), -2, st);  // (B, Hv, 1, Dk)
    array g = at(gamma, t);
    // (B, Hv, 1, 1) for a gate per head, (B, Hv, 1, Dk) for one per key feature.
    g = g.ndim() == 2 ? expand_dims(g, {-1, -2}, st) : expand_dims(g, -2, st);
    const array before = state;
    state = multiply(state, g, st);
    array kv_mem = sum(multiply(state, kt, st), -1, false, st);  // (B, Hv, Dv)
    array delta = multiply(subtract(at(v, t), kv_mem, st), expand_dims(at(beta, t), -1, st), st);
    state = add(state, multiply(kt, expand_dims(delta, -1, st), st), st);
    array y = astype(sum(multiply(state, qt, st), -1, false, st), q.dtype(), st);
    if (mask) {
      array m = at(*mask, t);  // (B)
      y = where(expand_dims(m, {1, 2}, st), y, zeros_like(y, st), st);
      state = where(expand_dims(m, {1, 2, 3}, st), state, before, st);
    }
    ys.push_back(std::move(y));
  }
  array y = T > 0 ? stack(ys, 1, st) : zeros({B, 0, Hv, Dv}, q.dtype(), st);
  return {std::move(y), std::move(state)};
}

}  // namespace tessera::fast
