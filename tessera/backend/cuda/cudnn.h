// cuDNN's fused attention and convolutions, through its frontend's graph API
// (cudnn.cpp). See
// Note [cuDNN] there: the library is loaded at run time, and every call that
// cuDNN cannot take returns false, leaving the case to the caller's own kernel.
// Included by backend/cuda sources only; needs no cuDNN header.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/device.h"
#include "tessera/core/dtype.h"

namespace tessera::gpu::cudnn {

// Whether cuDNN is enabled (not TESSERA_CUDNN=0), found and loaded; decided once
// per process.
bool available();

// One attention call's shapes and layouts. Strides are in elements, for axes
// (batch, head, sequence, feature); the last is 1.
struct Attention {
  enum class Mask { none, causal, bias };
  Dtype dtype = bfloat16;  // of q, k, v, o (and bias): bfloat16 or float16
  int64_t b = 0, hq = 0, hkv = 0, tq = 0, tkv = 0, d = 0;
  float scale = 1.0f;
  Mask mask = Mask::none;
  int64_t q_strides[4] = {}, k_strides[4] = {}, v_strides[4] = {}, o_strides[4] = {};
  // An additive bias of the inputs' dtype: dims (b or 1, hq or 1, tq, tkv).
  int64_t bias_dims[4] = {}, bias_strides[4] = {};
  // Backward only: the strides of d_o (dq, dk, dv are row-contiguous).
  int64_t do_strides[4] = {};
};

struct AttentionPointers {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *bias = nullptr;
  void* o = nullptr;     // written by the forward pass, read by the backward
  float* lse = nullptr;  // (b, hq, tq), natural log: written forward, read backward
  const void* d_o = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
};

// Queue the pass on s and return true, or return false (nothing queued) where
// cuDNN is not available or has no engine for the case. Errors in running a
// built plan leave the call to the caller too, with a word on stderr.
bool attention_forward(const Attention& a, const AttentionPointers& p, const Stream& s,
                       const char* op);
bool attention_backward(const Attention& a, const AttentionPointers& p, const Stream& s,
                        const char* op);

// A convolution in Tessera's layout (Note [Convolution geometry]): x (N,
// S..., C), w (O, K..., C / groups), y (N, out..., O), all row-contiguous,
// with no input dilation and no negative padding; 1 to 3 spatial axes.
struct Convolution {
  Dtype dtype = float32;  // float32, float16 or bfloat16
  std::vector<int64_t> x_shape, w_shape, y_shape;
  std::vector<int64_t> stride, padding_lo, padding_hi, dilation;
  int64_t groups = 1;
  bool flip = false;
};

// Queue y = conv(x, w) on s and return true, or return false (nothing
// queued) where cuDNN is not available or has no engine for the case.
bool convolution_forward(const Convolution& c, const void* x, const void* w, void* y,
                         const Stream& s, const char* op);
// The gradient dx (of c.x_shape) of the forward convolution c from dy (of
// c.y_shape) and c's weight w; true, or false with nothing queued.
bool convolution_backward_data(const Convolution& c, const void* dy, const void* w, void* dx,
                               const Stream& s, const char* op);
// The gradient dw (of c.w_shape) of the forward convolution c from its input x
// (of c.x_shape) and dy (of c.y_shape); true, or false with nothing queued.
bool convolution_backward_filter(const Convolution& c, const void* x, const void* dy, void* dw,
                                 const Stream& s, const char* op);

}  // namespace tessera::gpu::cudnn
