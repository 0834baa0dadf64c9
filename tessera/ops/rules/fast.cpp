// The fast primitives without a kernel of their own: evaluation and transforms
// through the fallback (Note [Fast primitives] in ops/primitives/fast.h).
#include "tessera/ops/primitives/fast.h"

#include <stdexcept>
#include <string>

#include "tessera/core/eval.h"
#include "tessera/ops/ops.h"
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
  auto all = tessera::vjp(fallback_, primals, cotangents).second;
  std::vector<array> out;
  for (int i : argnums) out.push_back(all[i]);
  return out;
}

std::vector<array> Custom::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  std::vector<array> full;
  for (auto& p : primals) full.push_back(zeros_like(p));
  for (size_t k = 0; k < argnums.size(); ++k) full[argnums[k]] = tangents[k];
  return tessera::jvp(fallback_, primals, full).second;
}

std::pair<std::vector<array>, std::vector<int>> Custom::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto outs = tessera::vmap(fallback_, axes)(inputs);
  return {outs, std::vector<int>(outs.size(), 0)};
}

bool RMSNorm::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const RMSNorm*>(&other);
  return o && eps_ == o->eps_;
}

bool LayerNorm::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const LayerNorm*>(&other);
  return o && eps_ == o->eps_ && has_weight_ == o->has_weight_ && has_bias_ == o->has_bias_;
}

bool RoPE::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const RoPE*>(&other);
  return o && dims_ == o->dims_ && traditional_ == o->traditional_ && base_ == o->base_ &&
         scale_ == o->scale_;
}

bool ScaledDotProductAttention::is_equivalent(const Primitive& other) const {
  auto* o = dynamic_cast<const ScaledDotProductAttention*>(&other);
  return o && scale_ == o->scale_ && mask_ == o->mask_ && has_sinks_ == o->has_sinks_;
}

}  // namespace tessera::fast
