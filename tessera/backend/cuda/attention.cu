// eval_gpu of ScaledDotProductAttention and ScaledDotProductAttentionVJP:
// cuDNN's fused attention where it takes the case (Note [cuDNN] in cudnn.cpp),
// else the flash attention kernels of attention.cuh, on the evaluated inputs. q, k, v
// and d_o are read through their strides where the last axis is dense and
// rows start on 16 bytes; otherwise (and for o, lse, d_lse unless
// row-contiguous) a row-contiguous copy is read. Cases the kernels do not
// cover never reach here (ScaledDotProductAttention::kernel_covers), except
// nodes forced by a PrimitiveScope, which take the fallback.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "tessera/backend/cuda/attention.cuh"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/cudnn.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/ops/primitives/fast.h"

namespace tessera::fast {

namespace {

namespace att = gpu::attention;
using Mask = ScaledDotProductAttention::Mask;

// An input as the kernels read it: a device address and the strides of axes
// 0..2 (the last axis dense); `held` keeps a copy alive until the launch.
struct Operand {
  const void* ptr = nullptr;
  int64_t strides[3] = {0, 0, 0};
  std::optional<array> held;
};

Operand operand(const array& a, const Stream& s, const char* op, bool row_contiguous = false) {
  const void* p = a.size() > 0 ? gpu::device_ptr(a, s) : nullptr;
  const Strides& st = a.strides();
  const int nd = static_cast<int>(a.ndim());
  bool ok = row_contiguous ? a.flags().row_contiguous
                           : (st[nd - 1] == 1 || a.shape(nd - 1) == 1) &&
                                 reinterpret_cast<uintptr_t>(p) % 16 == 0;
  if (ok && !row_contiguous) {
    for (int i = 0; i < nd - 1; ++i) ok = ok && (st[i] * a.itemsize()) % 16 == 0;
  }
  Operand o;
  o.ptr = p;
  if (!ok) {
    array dense(a.shape(), a.dtype(), nullptr, {});
    gpu::copy_gpu_to_row_contiguous(a, dense, s, op);
    o.ptr = gpu::device_ptr(dense, s);
    o.held = dense;
  }
  const Strides& fs = o.held ? o.held->strides() : st;
  for (int i = 0; i < nd - 1 && i < 3; ++i) o.strides[i] = fs[i];
  return o;
}

// q, k, v, mask and sinks of inputs into p (which keeps pointers only: the
// returned operands hold any copies).
std::vector<Operand> forward_params(const std::vector<array>& inputs, float scale, Mask mask,
                                   bool has_sinks, const Stream& s, const char* op,
                                   att::FwdParams& p) {
  const array &q = inputs[0], &k = inputs[1], &v = inputs[2];
  std::vector<Operand> held;
  held.push_back(operand(q, s, op));
  held.push_back(operand(k, s, op));
  held.push_back(operand(v, s, op));
  p = att::FwdParams{};
  p.q = held[0].ptr;
  p.k = held[1].ptr;
  p.v = held[2].ptr;
  for (int i = 0; i < 3; ++i) {
    p.qs[i] = held[0].strides[i];
    p.ks[i] = held[1].strides[i];
    p.vs[i] = held[2].strides[i];
  }
  p.b = q.shape(0);
  p.hq = q.shape(1);
  p.hkv = k.shape(1);
  p.tq = q.shape(2);
  p.tkv = k.shape(2);
  p.d = q.shape(3);
  p.scale = scale;
  p.scale_log2 = scale * att::kLog2e;
  p.mask_kind = att::kNone;
  size_t next = 3;
  if (mask == Mask::causal) {
    p.mask_kind = att::kCausal;
  } else if (mask == Mask::array) {
    const array& m = inputs[next++];
    p.mask_kind = m.dtype() == bool_ ? att::kBool : att::kAdditive;
    p.mask = m.size() > 0 ? gpu::device_ptr(m, s) : nullptr;
    // Right-aligned to (B, Hq, Tq, Tkv); broadcast axes read with stride 0.
    const int nd = static_cast<int>(m.ndim());
    for (int i = 0; i < 4; ++i) {
      const int a = i - (4 - nd);
      p.ms[i] = a < 0 || m.shape(a) == 1 ? 0 : m.strides()[a];
    }
  }
  if (has_sinks) {
    const array& sk = inputs[next];
    float* f = static_cast<float*>(gpu::scratch(sk.size() * sizeof(float), s));
    gpu::copy_gpu(sk.shape(), gpu::device_ptr(sk, s), sk.dtype(), sk.strides(), f, float32,
                  row_major_strides(sk.shape()), s, op);
    p.sinks = f;
  }
  return held;
}

// The case as cuDNN takes it (Note [cuDNN] in cudnn.cpp), or false where it
// cannot: sinks, boolean masks, more queries than keys under a causal mask,
// masks broadcast along queries or keys, and decoding (few queries, which the
// split kernel of attention.cuh reads at the memory's speed).
bool cudnn_case(const att::FwdParams& p, const array& q, bool has_sinks, Mask mask,
                gpu::cudnn::Attention& a) {
  using C = gpu::cudnn::Attention;
  if (!gpu::cudnn::available()) return false;
  if (has_sinks || att::use_decode(p) || p.mask_kind == att::kBool) return false;
  if (mask == Mask::causal && p.tq > p.tkv) return false;
  a.dtype = q.dtype();
  a.b = p.b, a.hq = p.hq, a.hkv = p.hkv, a.tq = p.tq, a.tkv = p.tkv, a.d = p.d;
  a.scale = p.scale;
  a.mask = mask == Mask::causal  ? C::Mask::causal
           : mask == Mask::array ? C::Mask::bias
                                 : C::Mask::none;
  for (int i = 0; i < 3; ++i) {
    a.q_strides[i] = p.qs[i];
    a.k_strides[i] = p.ks[i];
    a.v_strides[i] = p.vs[i];
  }
  a.q_strides[3] = a.k_strides[3] = a.v_strides[3] = 1;
  const int64_t o_strides[4] = {p.hq * p.tq * p.d, p.tq * p.d, p.d, 1};
  std::copy(o_strides, o_strides + 4, a.o_strides);
  if (a.mask == C::Mask::bias) {
    // Axes the mask broadcasts over (batch, heads) have length 1, with the
    // stride a dense array of that shape would have.
    const int64_t dims[4] = {p.b, p.hq, p.tq, p.tkv};
    for (int i = 3; i >= 0; --i) {
      a.bias_dims[i] = p.ms[i] == 0 && i < 2 ? 1 : dims[i];
      a.bias_strides[i] = a.bias_dims[i] == 1 && i < 3 ? a.bias_dims[i + 1] * a.bias_strides[i + 1]
                                                       : p.ms[i];
    }
    if (p.ms[3] != 1 || (p.ms[2] == 0 && p.tq > 1) || (p.ms[2] * q.itemsize()) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(p.mask) % 16 != 0) {
      return false;
    }
  }
  return true;
}

void check(cudaError_t e, const char* op) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("[") + op + "] kernel launch failed: " +
                             cudaGetErrorString(e));
  }
}

}  // namespace

void ScaledDotProductAttention::eval_gpu(const std::vector<array>& inputs,
                                         std::vector<array>& outputs) {
  if (!kernel_covers(stream(), mask_, inputs, false)) return Custom::eval_gpu(inputs, outputs);
  const char* op = "ScaledDotProductAttention";
  const Stream& s = stream();
  void* o = gpu::allocate_output(outputs[0], s);
  float* lse = static_cast<float*>(gpu::allocate_output(outputs[1], s));
  if (outputs[0].size() == 0) return;
  att::FwdParams p;
  auto held = forward_params(inputs, scale_, mask_, has_sinks_, s, op, p);
  p.o = o;
  p.lse = lse;
  cudaStream_t cs = gpu::cuda_stream(s);
  const bool bf16 = inputs[0].dtype() == bfloat16;
  gpu::cudnn::Attention a;
  if (cudnn_case(p, inputs[0], has_sinks_, mask_, a)) {
    gpu::cudnn::AttentionPointers ptrs;
    ptrs.q = p.q, ptrs.k = p.k, ptrs.v = p.v, ptrs.bias = p.mask, ptrs.o = o, ptrs.lse = lse;
    if (gpu::cudnn::attention_forward(a, ptrs, s, op)) return;
  }
  if (att::use_decode(p)) {
    att::DecodeSplit sp = att::decode_split(p, gpu::properties().multiProcessorCount);
    float* scratch =
        static_cast<float*>(gpu::scratch(att::decode_scratch_floats(p, sp) * sizeof(float), s));
    unsigned* counters = att::decode_combines_in_place(p, sp)
                             ? gpu::zeroed_counters(s, static_cast<int64_t>(p.b) * p.hkv)
                             : nullptr;
    check(bf16 ? att::decode<__nv_bfloat16>(p, sp, scratch, counters, cs)
               : att::decode<__half>(p, sp, scratch, counters, cs),
          op);
  } else {
    check(bf16 ? att::forward<__nv_bfloat16>(p, cs) : att::forward<__half>(p, cs), op);
  }
}

void ScaledDotProductAttentionVJP::eval_gpu(const std::vector<array>& inputs,
                                            std::vector<array>& outputs) {
  const char* op = "ScaledDotProductAttentionVJP";
  const Stream& s = stream();
  const size_t n = 3 + (mask_ == Mask::array) + has_sinks_;  // q, k, v, mask?, sinks?
  const bool has_d_lse = inputs.size() > n + 3;
  if (!ScaledDotProductAttention::kernel_covers(
          s, mask_, std::vector<array>(inputs.begin(), inputs.begin() + n), true)) {
    return Custom::eval_gpu(inputs, outputs);
  }
  void* dq = gpu::allocate_output(outputs[0], s);
  void* dk = gpu::allocate_output(outputs[1], s);
  void* dv = gpu::allocate_output(outputs[2], s);
  const array& q = inputs[0];
  const int64_t rows = q.shape(0) * int64_t(q.shape(1)) * q.shape(2);
  if (outputs[1].size() == 0) return;
  cudaStream_t cs = gpu::cuda_stream(s);
  if (rows == 0) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dk, 0, outputs[1].nbytes(), cs));
    TESSERA_CUDA_CHECK(cudaMemsetAsync(dv, 0, outputs[2].nbytes(), cs));
    return;
  }
  att::BwdParams bp{};
  auto held = forward_params(inputs, scale_, mask_, has_sinks_, s, op, bp.f);
  Operand o = operand(inputs[n], s, op, true), lse = operand(inputs[n + 1], s, op, true);
  Operand d_o = operand(inputs[n + 2], s, op);
  gpu::cudnn::Attention a;
  if (!has_d_lse && cudnn_case(bp.f, q, has_sinks_, mask_, a)) {
    for (int i = 0; i < 3; ++i) a.do_strides[i] = d_o.strides[i];
    a.do_strides[3] = 1;
    gpu::cudnn::AttentionPointers ptrs;
    ptrs.q = bp.f.q, ptrs.k = bp.f.k, ptrs.v = bp.f.v, ptrs.bias = bp.f.mask;
    ptrs.o = const_cast<void*>(o.ptr);
    ptrs.lse = static_cast<float*>(const_cast<void*>(lse.ptr));
    ptrs.d_o = d_o.ptr, ptrs.dq = dq, ptrs.dk = dk, ptrs.dv = dv;
    if (gpu::cudnn::attention_backward(a, ptrs, s, op)) return;
  }
  std::optional<Operand> d_lse;
  if (has_d_lse) d_lse = operand(inputs[n + 3], s, op, true);
  bp.f.o = const_cast<void*>(o.ptr);
  bp.f.lse = static_cast<float*>(const_cast<void*>(lse.ptr));
  bp.dout = d_o.ptr;
  for (int i = 0; i < 3; ++i) bp.dos[i] = d_o.strides[i];
  bp.dlse = d_lse ? static_cast<const float*>(d_lse->ptr) : nullptr;
  bp.delta = static_cast<float*>(gpu::scratch(rows * sizeof(float), s));
  bp.dq_acc = static_cast<float*>(gpu::scratch(rows * q.shape(3) * sizeof(float), s));
  bp.dq = dq;
  bp.dk = dk;
  bp.dv = dv;
  check(q.dtype() == bfloat16 ? att::backward<__nv_bfloat16>(bp, cs)
                              : att::backward<__half>(bp, cs),
        op);
}

}  // namespace tessera::fast
