// Primitives of the fast ops: each carries its composition of ordinary ops.
//
// Note [Fast primitives]
// fast::rms_norm, layer_norm, rope and scaled_dot_product_attention are each
// one primitive derived from fast::Custom, which holds the op's fallback: a
// function of the primitive's inputs, built of ordinary ops on the op's stream
// (MLX's fast::Custom).
//   - The op function validates, builds the fallback and the primitive, then
//     asks use_fallback(inputs) whether a kernel of the stream's backend covers
//     the case. If none does, it returns fallback(inputs): the plain graph,
//     which every backend runs and every transform sees through, with no fast
//     node in it (a FallbackScope asks for it in every case).
//   - Otherwise the op creates the node. Custom::eval_cpu and eval_gpu run the
//     fallback on the evaluated inputs (a nested evaluation on the same stream,
//     Note [Nested evaluation] in core/eval.cpp) and take over its results'
//     buffers, so a node is correct on every backend before any kernel exists.
//     RMSNorm, LayerNorm and RoPE have fused kernels on both backends
//     (backend/cpu/fast.cpp, backend/cuda/fast.cu) for float32, float16 and
//     bfloat16 inputs of one dtype, rows of any length on the CPU and of up to
//     gpu_norm_row_fits on the GPU; their vjp is fused too (RMSNormVJP and
//     LayerNormVJP, whose fallback is the vjp of the forward fallback; the vjp
//     of rope with respect to x is rope with the angle negated).
//   - vjp, jvp and vmap of a node are those of its fallback (tessera::vjp, jvp
//     and vmap applied to it, as for a custom function without rules), so
//     derivatives are ordinary lazy graphs.
// A fused kernel plugs in per primitive: declare eval_gpu in its class below
// with TESSERA_EVAL_GPU_MULTI (a build without CUDA then keeps Custom's), define
// it in backend/cuda/fast.cu (attention: backend/cuda/attention.cu), and
// override use_fallback to return false
// for exactly the cases it covers (dtype, sizes, mask kinds, stream().device),
// so that every other case still takes the fallback; the kernel calls
// Custom::eval_gpu for a case it does not cover (a PrimitiveScope makes nodes
// of every case). A fused backward pass overrides vjp the same way.
// force_fused (attention) asks use_fallback too.
//
// A PrimitiveScope makes the ops create their node even where use_fallback
// says otherwise, so that the node's evaluation and transforms are tested
// against the plain graph before any kernel exists. A FallbackScope does the
// reverse: the ops return the plain graph even where a kernel covers the case,
// the reference that each kernel is tested and measured against.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "tessera/core/dispatch.h"
#include "tessera/core/primitive.h"

namespace tessera::fast {

class Custom : public Primitive {
 public:
  using Fallback = std::function<std::vector<array>(std::vector<array>)>;
  Custom(Stream s, Fallback fallback) : Primitive(s), fallback_(std::move(fallback)) {}

  // Whether no kernel of this stream's backend covers these inputs.
  virtual bool use_fallback(const std::vector<array>& inputs) const { return true; }
  const Fallback& fallback() const { return fallback_; }

  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_TRANSFORM_RULES

 private:
  void eval_fallback(const std::vector<array>& inputs, std::vector<array>& outputs);
  Fallback fallback_;
};

// The dtypes of the fused norm and rope kernels on every backend.
inline bool kernel_dtype(Dtype t) { return t == float32 || t == float16 || t == bfloat16; }

// Calls f(TypeTag<T>{}) for the host element type T of a kernel dtype (a
// backend maps it to its own storage type); another dtype here is a bug.
template <typename F>
void dispatch_kernel(Dtype t, const char* op, F&& f) {
  if (!kernel_dtype(t)) {
    throw std::logic_error(std::string("[") + op + "] no kernel for " + dtype_name(t) + " (bug)");
  }
  dispatch_all(t, [&](auto tag) {
    if constexpr (sizeof(typename decltype(tag)::type) <= 4 &&
                  is_float_v<typename decltype(tag)::type>) {
      f(tag);
    }
  });
}

// Whether the GPU's norm kernels take rows of d elements of `itemsize` bytes:
// up to 16384 elements when rows are whole 16-byte vectors, else up to 8192
// (the most a block keeps in registers, backend/cuda/fast.cuh).
inline bool gpu_norm_row_fits(int64_t d, size_t itemsize) {
  return d >= 1 && d <= (d % static_cast<int64_t>(16 / itemsize) == 0 ? 16384 : 8192);
}

// rms_norm and layer_norm, and their vjp: one class per pass, with the
// kernels' coverage (inputs of one kernel dtype, rows that fit).
class NormBase : public Custom {
 public:
  NormBase(Stream s, Fallback fallback, float eps, bool has_weight, bool has_bias)
      : Custom(s, std::move(fallback)), eps_(eps), has_weight_(has_weight), has_bias_(has_bias) {}
  bool use_fallback(const std::vector<array>& inputs) const override;
  // Same class, eps, weight and bias.
  bool is_equivalent(const Primitive& other) const override;
  // What is_equivalent compares and export writes (each class below alike).
  auto parameters() const { return std::tie(eps_, has_weight_, has_bias_); }
  float eps() const { return eps_; }
  bool has_weight() const { return has_weight_; }
  bool has_bias() const { return has_bias_; }

 protected:
  float eps_;
  bool has_weight_, has_bias_;
};

// A norm's forward NAME (inputs {x, weight?, bias?}; RMSNorm has no bias) and
// backward NAME##VJP (inputs {x, weight?, bias?, cotangent}; outputs {dx,
// dweight?, dbias?}).
#define TESSERA_NORM(NAME)                                                                    \
  class NAME : public NormBase {                                                              \
   public:                                                                                    \
    using NormBase::NormBase;                                                                 \
    TESSERA_PRIMITIVE_NAME(NAME)                                                              \
    void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;    \
    TESSERA_EVAL_GPU_MULTI                                                                    \
    std::vector<array> vjp(const std::vector<array>& primals,                                 \
                           const std::vector<array>& cotangents,                              \
                           const std::vector<int>& argnums,                                   \
                           const std::vector<array>& outputs) override;                       \
  };                                                                                          \
  class NAME##VJP : public NormBase {                                                         \
   public:                                                                                    \
    using NormBase::NormBase;                                                                 \
    TESSERA_PRIMITIVE_NAME(NAME##VJP)                                                         \
    void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;    \
    TESSERA_EVAL_GPU_MULTI                                                                    \
  };
TESSERA_NORM(RMSNorm)
TESSERA_NORM(LayerNorm)
#undef TESSERA_NORM

// Inputs {x, offset (0-d or (B,)), freqs?}; base is unset when freqs is given.
// The kernels take x of a kernel dtype, offsets of int32, int64 or float32 and
// float32 freqs.
class RoPE : public Custom {
 public:
  RoPE(Stream s, Fallback fallback, int dims, bool traditional, std::optional<float> base,
       float scale)
      : Custom(s, std::move(fallback)), dims_(dims), traditional_(traditional), base_(base),
        scale_(scale) {}
  TESSERA_PRIMITIVE_NAME(RoPE)
  bool is_equivalent(const Primitive& other) const override;
  auto parameters() const { return std::tie(dims_, traditional_, base_, scale_); }
  int dims() const { return dims_; }
  bool traditional() const { return traditional_; }
  const std::optional<float>& base() const { return base_; }
  float scale() const { return scale_; }
  bool use_fallback(const std::vector<array>& inputs) const override;
  void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) override;
  TESSERA_EVAL_GPU_MULTI
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;

 private:
  int dims_;
  bool traditional_;
  std::optional<float> base_;
  float scale_;
};

// Inputs {q, k, v, mask? (mask_mode array), sinks?}; outputs {o, lse}: lse
// (B, N_q, T_q) is the log-sum-exp of each row of scores (sinks included), in
// the compute dtype, which the fused backward pass reads (Note [Flash attention
// kernels] in backend/cuda/attention.cuh). The op returns o alone.
class ScaledDotProductAttention : public Custom {
 public:
  enum class Mask { none, causal, array };
  ScaledDotProductAttention(Stream s, Fallback fallback, float scale, Mask mask, bool has_sinks)
      : Custom(s, std::move(fallback)), scale_(scale), mask_(mask), has_sinks_(has_sinks) {}
  TESSERA_PRIMITIVE_NAME(ScaledDotProductAttention)
  bool is_equivalent(const Primitive& other) const override;
  auto parameters() const { return std::tie(scale_, mask_, has_sinks_); }
  bool use_fallback(const std::vector<array>& inputs) const override;
  TESSERA_EVAL_GPU_MULTI
  std::vector<array> vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                         const std::vector<int>& argnums,
                         const std::vector<array>& outputs) override;

  // Whether a fused kernel covers these inputs on stream s: the forward pass,
  // or the backward pass too.
  static bool kernel_covers(const Stream& s, Mask mask, const std::vector<array>& inputs,
                            bool backward);

 private:
  float scale_;
  Mask mask_;
  bool has_sinks_;
};

// The outputs of p's node over inputs (of these shapes and dtypes), or the
// results of p's fallback where no kernel covers the case or a FallbackScope
// is open (see Note [Fast primitives]).
std::vector<array> node_or_fallback(std::shared_ptr<Custom> p, std::vector<Shape> shapes,
                                    std::vector<Dtype> dtypes, std::vector<array> inputs);

// The gradients {dq, dk, dv} of attention, from inputs {q, k, v, mask?,
// sinks?, o, lse, d_o, d_lse?} (no d_lse where lse's cotangent is zero); its
// fallback differentiates the forward fallback's graph.
class ScaledDotProductAttentionVJP : public Custom {
 public:
  ScaledDotProductAttentionVJP(Stream s, Fallback fallback, float scale,
                               ScaledDotProductAttention::Mask mask, bool has_sinks)
      : Custom(s, std::move(fallback)), scale_(scale), mask_(mask), has_sinks_(has_sinks) {}
  TESSERA_PRIMITIVE_NAME(ScaledDotProductAttentionVJP)
  bool is_equivalent(const Primitive& other) const override;
  auto parameters() const { return std::tie(scale_, mask_, has_sinks_); }
  TESSERA_EVAL_GPU_MULTI

 private:
  float scale_;
  ScaledDotProductAttention::Mask mask_;
  bool has_sinks_;
};

// Within its scope, the fast ops of the calling thread create their primitive
// (Force::primitive) or return their fallback's graph (Force::fallback),
// whatever use_fallback says (see Note [Fast primitives]).
enum class Force { primitive, fallback };
template <Force F>
class ForceScope {
 public:
  ForceScope();
  ~ForceScope();
  ForceScope(const ForceScope&) = delete;
  ForceScope& operator=(const ForceScope&) = delete;

 private:
  bool previous_;
};
using PrimitiveScope = ForceScope<Force::primitive>;
using FallbackScope = ForceScope<Force::fallback>;

}  // namespace tessera::fast
