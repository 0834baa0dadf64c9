// The fast primitives' evaluation and transforms through the fallback, the
// kernels' coverage, and the fused derivatives of the norms and rope
// (Note [Fast primitives] in ops/primitives/fast.h).
#include "tessera/ops/primitives/fast.h"

#include <stdexcept>
#include <string>
#include <typeinfo>
#include <utility>
#include <variant>

#include "tessera/core/eval.h"
#include "tessera/core/gpu.h"
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/copy.h"
#include "tessera/ops/rules/composite.h"
#include "tessera/transforms/transforms.h"

namespace tessera::fast {

void Custom::eval_fallback(const std::vector<array>& inputs, std::vector<array>& outputs) {
  std::vector<array> results = fallback_(inputs);
  if (results.size() != outputs.size()) {
    throw std::logic_error(std::string("[") + name() + "] the fallback returned " +
                           std::to_string(results.size()) + " arrays for " +
                           std::to_string(outputs.size()) + " outputs (bug)");
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].shape() != outputs[i].shape() || results[i].dtype() != outputs[i].dtype()) {
      throw std::logic_error(std::string("[") + name() + "] the fallback's output " +
                             std::to_string(i) + " is " + dtype_name(results[i].dtype()) + " " +
                             shape_str(results[i].shape()) + ", the node's " +
                             dtype_name(outputs[i].dtype()) + " " +
                             shape_str(outputs[i].shape()) + " (bug)");
    }
  }
  eval(results);
  for (size_t i = 0; i < results.size(); ++i) outputs[i].copy_shared_buffer(results[i]);
}

void Custom::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_fallback(inputs, outputs);
}

void Custom::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  eval_fallback(inputs, outputs);
}

std::vector<array> Custom::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  return rules::composite_vjp(fallback_, primals, cotangents, argnums);
}

std::vector<array> Custom::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  return rules::composite_jvp(fallback_, primals, tangents, argnums, {});
}

std::pair<std::vector<array>, std::vector<int>> Custom::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto outs = tessera::vmap(fallback_, axes)(inputs);
  return {outs, std::vector<int>(outs.size(), 0)};
}

namespace {

// The gradients of p's primals picked by argnums, from its fused vjp node
// over {primals..., cotangent}; the fallback of that node is the vjp of p's
// fallback. A cotangent of another dtype than x's goes through p's fallback.
template <typename Vjp, typename... Args>
std::vector<array> fused_vjp(Custom& p, const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums, const std::vector<array>& outputs,
                             Args... args) {
  if (cotangents[0].dtype() != primals[0].dtype()) {
    return p.Custom::vjp(primals, cotangents, argnums, outputs);
  }
  auto forward = p.fallback();
  auto fallback = [forward](std::vector<array> in) {
    array cot = in.back();
    in.pop_back();
    return tessera::vjp(forward, in, {cot}).second;
  };
  auto [shapes, dtypes] = shapes_and_dtypes(primals);
  std::vector<array> inputs = primals;
  inputs.push_back(cotangents[0]);
  auto grads = node_or_fallback(std::make_shared<Vjp>(p.stream(), std::move(fallback), args...),
                                std::move(shapes), std::move(dtypes), std::move(inputs));
  std::vector<array> out;
  for (int i : argnums) out.push_back(grads[i]);
  return out;
}

}  // namespace

bool NormBase::use_fallback(const std::vector<array>& inputs) const {
  const array& x = inputs[0];
  if (!kernel_dtype(x.dtype()) || x.size() == 0) return true;
  for (auto& a : inputs) {
    if (a.dtype() != x.dtype()) return true;
  }
  return stream().device.type == Device::gpu && !gpu_norm_row_fits(x.shape(-1), x.itemsize());
}

bool NormBase::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const NormBase*>(&other);
  return o && typeid(*this) == typeid(other) && parameters() == o->parameters();
}

#define TESSERA_NORM_VJP(NAME)                                                                  \
  std::vector<array> NAME::vjp(const std::vector<array>& primals,                               \
                               const std::vector<array>& cotangents,                            \
                               const std::vector<int>& argnums,                                 \
                               const std::vector<array>& outputs) {                             \
    return fused_vjp<NAME##VJP>(*this, primals, cotangents, argnums, outputs, eps_, has_weight_, \
                                has_bias_);                                                     \
  }
TESSERA_NORM_VJP(RMSNorm)
TESSERA_NORM_VJP(LayerNorm)
#undef TESSERA_NORM_VJP

bool RoPE::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const RoPE*>(&other);
  return o && parameters() == o->parameters();
}

bool RoPE::use_fallback(const std::vector<array>& inputs) const {
  const array& x = inputs[0];
  const Dtype off = inputs[1].dtype();
  return !kernel_dtype(x.dtype()) || x.size() == 0 ||
         (off != int32 && off != int64 && off != float32) ||
         (inputs.size() > 2 && inputs[2].dtype() != float32);
}

// The rotation is orthogonal: x's cotangent is the cotangent rotated back,
// rope with the angle negated. Offsets and freqs go through the fallback.
std::vector<array> RoPE::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents,
                             const std::vector<int>& argnums, const std::vector<array>& outputs) {
  std::vector<array> out;
  for (int i : argnums) {
    if (i != 0) {
      out.push_back(Custom::vjp(primals, cotangents, {i}, outputs)[0]);
      continue;
    }
    std::optional<array> freqs;
    if (primals.size() > 2) freqs = primals[2];
    array back = fast::rope(cotangents[0], dims_, traditional_, base_, -scale_, primals[1], freqs,
                            stream());
    out.push_back(astype(back, primals[0].dtype(), stream()));
  }
  return out;
}

bool ScaledDotProductAttention::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScaledDotProductAttention*>(&other);
  return o && parameters() == o->parameters();
}

bool ScaledDotProductAttentionVJP::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScaledDotProductAttentionVJP*>(&other);
  return o && parameters() == o->parameters();
}

namespace {

// Whether GPU 0 runs the attention kernels (mma.sync of bfloat16: sm_80 on).
bool gpu_has_attention_kernels() {
  static const bool yes = [] {
    if (gpu::device_count() == 0) return false;
    auto arch = std::get<std::string>(gpu::device_info(0).at("architecture"));  // "sm_XY"
    return arch.size() >= 5 && std::stoi(arch.substr(3)) >= 80;
  }();
  return yes;
}

// Whether a is known to be zeros without evaluating it: zeros_like's graph (a
// copy of a broadcast of a constant 0), as the transforms give an output that
// has no cotangent.
bool known_zeros(array a) {
  while (a.has_primitive()) {
    const Primitive& p = a.primitive();
    if (!dynamic_cast<const Copy*>(&p) && !dynamic_cast<const Broadcast*>(&p) &&
        !dynamic_cast<const AsType*>(&p)) {
      return false;
    }
    a = a.inputs()[0];
  }
  if (!a.is_available() || a.size() != 1 || !issubdtype(a.dtype(), floating)) return false;
  return a.item<float>() == 0.0f;
}

}  // namespace

// The cases of backend/cuda/attention.cu: a GPU stream of sm_80 or later; q, k
// and v of one dtype, bfloat16 or float16; one head dim (of v too), a multiple
// of 8 up to 256 (128 for the backward pass); keys; a boolean mask or an
// additive one of the inputs' dtype; sinks of any real dtype.
bool ScaledDotProductAttention::kernel_covers(const Stream& s, Mask mask,
                                              const std::vector<array>& inputs, bool backward) {
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  if (s.device != Device::gpu || !gpu_has_attention_kernels()) return false;
  if ((q.dtype() != bfloat16 && q.dtype() != float16) || k.dtype() != q.dtype() ||
      v.dtype() != q.dtype()) {
    return false;
  }
  const int d = q.shape(3);
  if (v.shape(3) != d || d % 8 != 0 || d > (backward ? 128 : 256) || k.shape(2) == 0) return false;
  if (mask == Mask::array && inputs[3].dtype() != bool_ && inputs[3].dtype() != q.dtype()) {
    return false;
  }
  return true;
}

bool ScaledDotProductAttention::use_fallback(const std::vector<array>& inputs) const {
  return !kernel_covers(stream(), mask_, inputs, false);
}

// With the backward kernel: dq, dk, dv from one ScaledDotProductAttentionVJP
// node; the gradient of sinks from the saved lse (d sink_h = -sum over rows of
// exp(sink_h - lse) (rowsum(d_o o) - d_lse)); that of an additive mask through
// the fallback.
std::vector<array> ScaledDotProductAttention::vjp(const std::vector<array>& primals,
                                                  const std::vector<array>& cotangents,
                                                  const std::vector<int>& argnums,
                                                  const std::vector<array>& outputs) {
  if (!kernel_covers(stream(), mask_, primals, true)) return Custom::vjp(primals, cotangents, argnums, outputs);
  const Stream& st = stream();
  const size_t n = primals.size();
  const array &q = primals[0], &k = primals[1], &v = primals[2];
  // The VJP node takes d_lse only where it may be nonzero (lse is used only
  // by gradients, so mostly it is not): without it, cuDNN's backward can run.
  std::vector<array> in = primals;
  in.insert(in.end(), {outputs[0], outputs[1], cotangents[0]});
  if (!known_zeros(cotangents[1])) in.push_back(cotangents[1]);
  Fallback forward = fallback();
  auto grads_fallback = [forward, n](std::vector<array> in) {
    std::vector<array> prim(in.begin(), in.begin() + n);
    array d_lse = in.size() > n + 3 ? in[n + 3] : zeros_like(in[n + 1]);
    auto grads = tessera::vjp(forward, prim, {in[n + 2], d_lse}).second;
    return std::vector<array>{grads[0], grads[1], grads[2]};
  };
  std::vector<array> qkv;
  bool need_qkv = false;
  for (int i : argnums) need_qkv = need_qkv || i < 3;
  if (need_qkv) {
    qkv = array::make_arrays(
        {q.shape(), k.shape(), v.shape()}, {q.dtype(), k.dtype(), v.dtype()},
        std::make_shared<ScaledDotProductAttentionVJP>(st, grads_fallback, scale_, mask_, has_sinks_),
        in);
  }
  std::vector<array> out;
  const int sinks_at = has_sinks_ ? static_cast<int>(n) - 1 : -1;
  for (int i : argnums) {
    if (i < 3) {
      out.push_back(qkv[i]);
    } else if (i == sinks_at) {
      const array& sinks = primals[i];
      array delta = subtract(
          sum(multiply(astype(cotangents[0], float32, st), astype(outputs[0], float32, st), st), -1,
              false, st),
          cotangents[1], st);
      array p_sink = exp(subtract(reshape(astype(sinks, float32, st), {1, q.shape(1), 1}, st),
                                  outputs[1], st),
                         st);
      out.push_back(astype(negative(sum(multiply(p_sink, delta, st), {0, 2}, false, st), st),
                           sinks.dtype(), st));
    } else {
      out.push_back(Custom::vjp(primals, cotangents, {i}, outputs)[0]);
    }
  }
  return out;
}

}  // namespace tessera::fast
