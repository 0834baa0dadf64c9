// eval_gpu of RMSNorm, LayerNorm, their vjp, and RoPE through the kernels of
// fast.cuh (Note [Fused norms and rope] there); a case the kernels do not
// cover runs the fallback (Note [Fast primitives] in ops/primitives/fast.h).
// Also the pairs of an Add and its norm, and of two rotations (Note [Fused
// pairs] in core/grouped.h).
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/fast.cuh"
#include "tessera/backend/cuda/pairs.h"
#include "tessera/core/grouped.h"
#include "tessera/ops/primitives/fast.h"

namespace tessera::fast {

namespace {

using namespace gpu::fast_kernels;

// f(TypeTag<T>{}) for the device type T of a kernel dtype (fast::dispatch_kernel).
template <typename F>
void dispatch_device_kernel(Dtype t, const char* op, F&& f) {
  dispatch_kernel(t, op, [&](auto tag) {
    f(TypeTag<gpu::device_t<typename decltype(tag)::type>>{});
  });
}

// Whether the kernels read a as it is: row-contiguous from a 16-byte aligned address.
bool is_dense(const array& a, const Stream& s) {
  return a.flags().row_contiguous && gpu::aligned(gpu::device_ptr(a, s), 16);
}

// a itself when is_dense, else a dense copy.
array dense(const array& a, const Stream& s, const char* op) {
  if (is_dense(a, s)) return a;
  array d(a.shape(), a.dtype(), nullptr, {});
  gpu::copy_gpu_to_row_contiguous(a, d, s, op);
  return d;
}

// The place of the bias among a norm's inputs {x, weight?, bias?}, or -1.
int bias_place(bool has_weight, bool has_bias) { return has_bias ? (has_weight ? 2 : 1) : -1; }

// The arguments of a norm kernel over dense x (and weight, bias where given:
// their places among inputs).
struct Norm {
  array x;
  std::optional<array> w, b;
  NormArgs args{};
  NormLaunch launch;
};

Norm prepare(const array& x, const std::vector<array>& inputs, int weight, int bias, bool rms,
             float eps, const Stream& s, const char* op) {
  Norm n{x, std::optional<array>(), std::optional<array>(), {}, {}};
  if (weight >= 0) n.w = dense(inputs[weight], s, op);
  if (bias >= 0) n.b = dense(inputs[bias], s, op);
  const int d = static_cast<int>(n.x.shape(-1));
  n.args.x = gpu::device_ptr(n.x, s);
  n.args.w = n.w ? gpu::device_ptr(*n.w, s) : nullptr;
  n.args.b = n.b ? gpu::device_ptr(*n.b, s) : nullptr;
  n.args.rows = static_cast<int64_t>(n.x.size()) / d;
  n.args.d = d;
  n.args.eps = eps;
  n.args.rms = rms;
  n.launch = norm_launch(d, static_cast<int>(16 / n.x.itemsize()), true);
  if (n.launch.tpr == 0) {
    throw std::logic_error(std::string("[") + op + "] no launch for rows of " +
                           std::to_string(d) + " elements (bug)");
  }
  return n;
}

void forward(const std::vector<array>& inputs, int weight, int bias, bool rms, float eps,
             array& out, const Stream& s, const char* op) {
  Norm n = prepare(dense(inputs[0], s, op), inputs, weight, bias, rms, eps, s, op);
  n.args.out = gpu::allocate_output(out, s);
  dispatch_device_kernel(n.x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    TESSERA_CUDA_CHECK(norm_forward<T>(n.args, n.launch, gpu::cuda_stream(s)));
  });
}

// inputs {x, weight?, bias?, cotangent}, outputs {dx, dweight?, dbias?}.
void backward(const std::vector<array>& inputs, std::vector<array>& outputs, bool has_weight,
              bool has_bias, bool rms, float eps, const Stream& s, const char* op) {
  Norm n = prepare(dense(inputs[0], s, op), inputs, has_weight ? 1 : -1,
                   bias_place(has_weight, has_bias), rms, eps, s, op);
  array cot = dense(inputs.back(), s, op);
  n.args.cot = gpu::device_ptr(cot, s);
  n.args.out = gpu::allocate_output(outputs[0], s);
  dispatch_device_kernel(n.x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const NormPlan plan = norm_backward_plan<T>(n.args, n.launch, gpu::properties());
    const size_t part = static_cast<size_t>(plan.blocks) * n.args.d;
    const int sums = (has_weight ? 1 : 0) + (has_bias ? 1 : 0);
    float* scratch = sums ? static_cast<float*>(gpu::scratch(sizeof(float) * sums * part, s))
                          : nullptr;
    T* dw = nullptr;
    T* db = nullptr;
    if (has_weight) {
      n.args.part_w = scratch;
      dw = static_cast<T*>(gpu::allocate_output(outputs[1], s));
    }
    if (has_bias) {
      n.args.part_b = scratch + (has_weight ? part : 0);
      db = static_cast<T*>(gpu::allocate_output(outputs[has_weight ? 2 : 1], s));
    }
    TESSERA_CUDA_CHECK(norm_backward<T>(n.args, n.launch, plan, dw, db, gpu::cuda_stream(s)));
  });
}

}  // namespace

void RMSNorm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_gpu(inputs, outputs);
  forward(inputs, has_weight_ ? 1 : -1, -1, true, eps_, outputs[0], stream(), "RMSNorm");
}

void LayerNorm::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_gpu(inputs, outputs);
  forward(inputs, has_weight_ ? 1 : -1, bias_place(has_weight_, has_bias_), false, eps_,
          outputs[0], stream(), "LayerNorm");
}

void RMSNormVJP::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_gpu(inputs, outputs);
  backward(inputs, outputs, has_weight_, false, true, eps_, stream(), "RMSNormVJP");
}

void LayerNormVJP::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_gpu(inputs, outputs);
  backward(inputs, outputs, has_weight_, has_bias_, false, eps_, stream(), "LayerNormVJP");
}

namespace {

// A rotation's kernel arguments, with the dense copies they point into.
struct Rope {
  array x;
  std::optional<array> freqs, offset;
  RopeArgs a{};
  bool vector_ok = false;
};

Rope prepare_rope(const RoPE& r, const std::vector<array>& inputs, array& out, const Stream& s) {
  Rope l{dense(inputs[0], s, "RoPE"), {}, {}, {}, false};
  if (inputs.size() > 2) l.freqs = dense(inputs[2], s, "RoPE");
  RopeArgs& a = l.a;
  a.x = gpu::device_ptr(l.x, s);
  a.out = gpu::allocate_output(out, s);
  // A scalar offset on the host (an int of the caller's, the position of a
  // decode step) goes by value, as binary's scalar operands do (Note [Scalar
  // operands on the GPU] in binary.cu): no upload per call.
  const array& offset = inputs[1];
  alignas(8) unsigned char value[8];
  if (offset.ndim() == 0 && gpu::host_scalar(offset, value)) {
    int32_t i32;
    int64_t i64;
    float f32;
    a.offset_kind = 3;
    if (offset.dtype() == int32) {
      std::memcpy(&i32, value, sizeof i32);
      a.offset_value = static_cast<float>(i32);
    } else if (offset.dtype() == int64) {
      std::memcpy(&i64, value, sizeof i64);
      a.offset_value = static_cast<float>(i64);
    } else {
      std::memcpy(&f32, value, sizeof f32);
      a.offset_value = f32;
    }
  } else {
    l.offset = dense(offset, s, "RoPE");
    a.offset = gpu::device_ptr(*l.offset, s);
    a.offset_kind = offset.dtype() == int32 ? 0 : offset.dtype() == int64 ? 1 : 2;
    a.offset_per_batch = offset.ndim() == 1;
  }
  a.freqs = l.freqs ? static_cast<const float*>(gpu::device_ptr(*l.freqs, s)) : nullptr;
  a.base = r.base().value_or(0.0f);
  a.scale = r.scale();
  a.B = static_cast<int>(l.x.shape(0));
  a.T = static_cast<int>(l.x.shape(-2));
  a.D = static_cast<int>(l.x.shape(-1));
  a.M = static_cast<int>(l.x.size() / (static_cast<size_t>(a.B) * a.T * a.D));
  a.dims = r.dims();
  l.vector_ok = rope_vector_ok(a, static_cast<int>(16 / l.x.itemsize()), r.traditional(), true);
  return l;
}

}  // namespace

void RoPE::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  if (use_fallback(inputs)) return Custom::eval_gpu(inputs, outputs);
  const Stream& s = stream();
  Rope l = prepare_rope(*this, inputs, outputs[0], s);
  dispatch_device_kernel(l.x.dtype(), "RoPE", [&](auto tag) {
    using T = typename decltype(tag)::type;
    TESSERA_CUDA_CHECK(rope<T>(l.a, traditional_, l.vector_ok, gpu::cuda_stream(s)));
  });
}

}  // namespace tessera::fast

namespace tessera::gpu {

using namespace fast_kernels;

// inputs {a, b, weight?, bias?}, outputs {a + b, its norm}: a, b and the sum
// of one shape and kernel dtype, a and b dense (fast::is_dense).
bool add_norm(const FusedPair& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
  const auto& norm = static_cast<const fast::NormBase&>(p.second());
  const array &a = inputs[0], &b = inputs[1];
  array& sum = outputs[0];
  const Stream& s = p.stream();
  std::vector<array> norm_inputs = p.second_inputs(inputs, outputs);
  if (norm.use_fallback(norm_inputs) || a.dtype() != sum.dtype() || b.dtype() != sum.dtype() ||
      a.shape() != sum.shape() || b.shape() != sum.shape() || !fast::is_dense(a, s) ||
      !fast::is_dense(b, s)) {
    return false;
  }
  // The norm's rows are a's: a is read as x, b as the residual.
  fast::Norm n = fast::prepare(a, norm_inputs, norm.has_weight() ? 1 : -1,
                               fast::bias_place(norm.has_weight(), norm.has_bias()),
                               std::strcmp(norm.name(), "RMSNorm") == 0, norm.eps(), s, p.name());
  n.args.res = device_ptr(b, s);
  n.args.sum = allocate_output(sum, s);
  n.args.out = allocate_output(outputs[1], s);
  fast::dispatch_device_kernel(sum.dtype(), p.name(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    TESSERA_CUDA_CHECK(norm_forward<T>(n.args, n.launch, cuda_stream(s)));
  });
  return true;
}

bool rope_pair(const FusedPair& p, const std::vector<array>& inputs, std::vector<array>& outputs) {
  const auto& first = static_cast<const fast::RoPE&>(p.first());
  const auto& second = static_cast<const fast::RoPE&>(p.second());
  const std::vector<array> in0 = p.first_inputs(inputs), in1 = p.second_inputs(inputs, outputs);
  if (first.use_fallback(in0) || second.use_fallback(in1) || in0[0].dtype() != in1[0].dtype()) {
    return false;
  }
  const Stream& s = p.stream();
  fast::Rope r0 = fast::prepare_rope(first, in0, outputs[0], s);
  fast::Rope r1 = fast::prepare_rope(second, in1, outputs[1], s);
  const bool vector_ok = r0.vector_ok && r1.vector_ok;
  fast::dispatch_device_kernel(r0.x.dtype(), "RoPE", [&](auto tag) {
    using T = typename decltype(tag)::type;
    TESSERA_CUDA_CHECK(
        fast_kernels::rope_pair<T>(r0.a, r1.a, first.traditional(), vector_ok, cuda_stream(s)));
  });
  return true;
}

}  // namespace tessera::gpu
