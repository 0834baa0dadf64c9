// eval_gpu of Convolution: cuDNN's engines where they take the case (Note
// [cuDNN] in cudnn.cpp); otherwise as matrix products (backend/common/conv_plan.h): the
// window matrices of a chunk of output rows are gathered from the input (any
// strides) into scratch memory (conv_windows.cu), then cuBLASLt multiplies
// each group's with the weight (gpu::gemm, one strided-batched call over the
// groups), straight into the output's rows.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "tessera/backend/common/conv_plan.h"
#include "tessera/backend/cuda/conv_windows.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/cudnn.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/matmul.h"
#include "tessera/ops/primitives/convolution.h"

namespace tessera {

namespace {

constexpr size_t kWindowBytes = size_t(256) << 20;

// a's device address, through a row-contiguous copy (kept in `dense`) where a
// is not row-contiguous.
const void* dense_ptr(const array& a, std::optional<array>& dense, const Stream& s) {
  if (a.flags().row_contiguous) return gpu::device_ptr(a, s);
  dense.emplace(a.shape(), a.dtype(), nullptr, std::vector<array>{});
  gpu::copy_gpu_to_row_contiguous(a, *dense, s, "Convolution");
  return gpu::device_ptr(*dense, s);
}

// cuDNN's convolution (Note [cuDNN] in cudnn.cpp) where it takes the case: a
// floating dtype it runs, no cropping (negative padding), and either no input
// dilation (a forward convolution) or stride 1 (the data gradient of the
// forward convolution found below). The case is settled before any copy is
// queued.
bool cudnn_convolution(const Convolution& c, const array& x, const array& w, const array& out,
                       const void* weight, void* y, const Stream& s) {
  if (!gpu::cudnn::available()) return false;
  const Dtype t = out.dtype();
  if (t != float32 && t != float16 && t != bfloat16) return false;
  const int n = static_cast<int>(x.ndim()) - 2;
  if (n < 1 || n > 3) return false;
  bool dilated = false;
  for (int i = 0; i < n; ++i) {
    if (c.padding_lo()[i] < 0 || c.padding_hi()[i] < 0) return false;
    dilated = dilated || c.input_dilation()[i] != 1;
  }
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (!aligned(weight) || !aligned(y)) return false;
  gpu::cudnn::Convolution cc;
  cc.dtype = t;
  cc.groups = c.groups();
  cc.dilation.assign(c.kernel_dilation().begin(), c.kernel_dilation().end());
  const int G = c.groups();
  const int64_t Og = w.shape(-1), Cg = w.shape(0) / G, O = x.shape(-1);
  if (!dilated) {
    cc.flip = c.flip();
    cc.stride.assign(c.stride().begin(), c.stride().end());
    cc.padding_lo.assign(c.padding_lo().begin(), c.padding_lo().end());
    cc.padding_hi.assign(c.padding_hi().begin(), c.padding_hi().end());
    cc.x_shape.assign(x.shape().begin(), x.shape().end());
    cc.w_shape.assign(w.shape().begin(), w.shape().end());
    cc.y_shape.assign(out.shape().begin(), out.shape().end());
  } else {
    // Input dilation e, stride 1: this is dx = dgrad(dy = x) of a forward
    // convolution of stride e, the same kernel dilation, pre-padding
    // span - 1 - lo, the opposite flip, and the weight w_f (O, K..., Cg) with
    // w_f[g Og + o, k, cg] = w[g Cg + cg, k, o] (w is (G Cg, K..., Og), as the
    // vjp of Convolution writes the input's gradient). Its post-padding is any
    // that gives x's length; the smallest that is not negative is taken.
    if (O != G * Og) return false;
    cc.flip = !c.flip();
    for (int i = 0; i < n; ++i) {
      if (c.stride()[i] != 1) return false;
      const int64_t e = c.input_dilation()[i], d = c.kernel_dilation()[i];
      const int64_t span = (w.shape(1 + i) - 1) * d + 1;
      const int64_t pre = span - 1 - c.padding_lo()[i];
      const int64_t base = (x.shape(1 + i) - 1) * e + span - out.shape(1 + i) - pre;
      const int64_t post = std::max<int64_t>(base, 0);
      if (pre < 0 || post > base + e - 1) return false;
      cc.stride.push_back(e);
      cc.padding_lo.push_back(pre);
      cc.padding_hi.push_back(post);
    }
    cc.x_shape.assign(out.shape().begin(), out.shape().end());
    cc.y_shape.assign(x.shape().begin(), x.shape().end());
    cc.w_shape = {O};
    for (int i = 0; i < n; ++i) cc.w_shape.push_back(w.shape(1 + i));
    cc.w_shape.push_back(Cg);
  }
  std::optional<array> dense_x;
  const void* in = dense_ptr(x, dense_x, s);
  if (!aligned(in)) return false;
  if (!dilated) return gpu::cudnn::convolution_forward(cc, in, weight, y, s, "Convolution");
  // w_f, copied from w viewed as (G, Og, K..., Cg).
  Shape view = {G, static_cast<ShapeElem>(Og)};
  for (int i = 0; i < n; ++i) view.push_back(w.shape(1 + i));
  view.push_back(static_cast<ShapeElem>(Cg));
  const Strides ws = row_major_strides(w.shape());
  Strides from = {Cg * ws[0], 1};
  for (int i = 0; i < n; ++i) from.push_back(ws[1 + i]);
  from.push_back(ws[0]);
  void* wf = gpu::scratch(w.nbytes(), s);
  gpu::copy_gpu(view, weight, t, from, wf, t, row_major_strides(view), s, "Convolution");
  return gpu::cudnn::convolution_backward_data(cc, in, wf, y, s, "Convolution");
}

// cuDNN's weight gradient where the convolution is one: its kernel covers
// more positions than its output, as in the weight's cotangent that the vjp
// of Convolution writes (ops/rules/convolution.cpp), which cuDNN's forward
// convolution runs slowly. Read that way, the node's input xt (Cg, S...,
// G N) is the forward convolution's input x[n, i, g Cg + c] = xt[c, i, g N + n],
// its weight gt (O, T..., N) the output's cotangent dy[n, t, o] = gt[o, t, n],
// and its output (Cg, K..., O) the weight's gradient dw (O, K..., Cg) read
// the other way; the forward convolution's stride is the node's kernel
// dilation and its kernel dilation the node's stride. No flip, no input
// dilation, no negative padding.
bool cudnn_weight_gradient(const Convolution& c, const array& xt, const array& gt,
                           const array& out, void* y, const Stream& s) {
  if (!gpu::cudnn::available()) return false;
  const Dtype t = out.dtype();
  if (t != float32 && t != float16 && t != bfloat16) return false;
  const int n = static_cast<int>(xt.ndim()) - 2;
  if (n < 1 || n > 3 || c.flip()) return false;
  int64_t taps = 1, positions = 1;
  for (int i = 0; i < n; ++i) {
    if (c.input_dilation()[i] != 1 || c.padding_lo()[i] < 0 || c.padding_hi()[i] < 0) {
      return false;
    }
    taps *= gt.shape(1 + i);
    positions *= out.shape(1 + i);
  }
  if (taps <= positions) return false;
  const int64_t G = c.groups(), Cg = xt.shape(0), O = gt.shape(0), N = gt.shape(-1);
  if (xt.shape(-1) != G * N || out.shape(-1) != O || O % G != 0) return false;
  gpu::cudnn::Convolution cc;
  cc.dtype = t;
  cc.groups = G;
  cc.x_shape = {N};
  cc.y_shape = {N};
  cc.w_shape = {O};
  for (int i = 0; i < n; ++i) {
    const int64_t S = xt.shape(1 + i), T = gt.shape(1 + i), K = out.shape(1 + i);
    const int64_t stride = c.kernel_dilation()[i], dilation = c.stride()[i];
    const int64_t lo = c.padding_lo()[i];
    const int64_t span = (K - 1) * dilation + 1;
    // The smallest post-padding that gives the forward convolution T outputs.
    const int64_t hi = std::max<int64_t>((T - 1) * stride + span - S - lo, 0);
    if ((S + lo + hi - span) / stride + 1 != T) return false;
    cc.stride.push_back(stride);
    cc.dilation.push_back(dilation);
    cc.padding_lo.push_back(lo);
    cc.padding_hi.push_back(hi);
    cc.x_shape.push_back(S);
    cc.y_shape.push_back(T);
    cc.w_shape.push_back(K);
  }
  cc.x_shape.push_back(G * Cg);
  cc.y_shape.push_back(O);
  cc.w_shape.push_back(Cg);
  const int64_t esize = out.itemsize();
  auto bytes = [&](const std::vector<int64_t>& shape) {
    int64_t count = esize;
    for (int64_t d : shape) count *= d;
    return static_cast<size_t>(count);
  };
  void* x = gpu::scratch(bytes(cc.x_shape), s);
  void* dy = gpu::scratch(bytes(cc.y_shape), s);
  void* dw = gpu::scratch(bytes(cc.w_shape), s);
  // x (N, S..., G, Cg) from xt (Cg, S..., G, N); dy (N, T..., O) from gt (O, T..., N).
  Shape x_view = {static_cast<ShapeElem>(N)}, dy_view = {static_cast<ShapeElem>(N)};
  Strides x_from = {xt.strides().back()}, dy_from = {gt.strides().back()};
  for (int i = 0; i < n; ++i) {
    x_view.push_back(xt.shape(1 + i));
    x_from.push_back(xt.strides()[1 + i]);
    dy_view.push_back(gt.shape(1 + i));
    dy_from.push_back(gt.strides()[1 + i]);
  }
  x_view.insert(x_view.end(), {static_cast<ShapeElem>(G), static_cast<ShapeElem>(Cg)});
  x_from.insert(x_from.end(), {N * xt.strides().back(), xt.strides()[0]});
  dy_view.push_back(static_cast<ShapeElem>(O));
  dy_from.push_back(gt.strides()[0]);
  gpu::copy_gpu(x_view, gpu::device_ptr(xt, s), xt.dtype(), x_from, x, t,
                row_major_strides(x_view), s, "Convolution");
  gpu::copy_gpu(dy_view, gpu::device_ptr(gt, s), gt.dtype(), dy_from, dy, t,
                row_major_strides(dy_view), s, "Convolution");
  if (!gpu::cudnn::convolution_backward_filter(cc, x, dy, dw, s, "Convolution")) return false;
  // out (Cg, K..., O) from dw (O, K..., Cg).
  const Shape w_shape(cc.w_shape.begin(), cc.w_shape.end());
  const Strides ws = row_major_strides(w_shape);
  Shape view = {static_cast<ShapeElem>(Cg)};
  Strides from = {1};
  for (int i = 0; i < n; ++i) {
    view.push_back(w_shape[1 + i]);
    from.push_back(ws[1 + i]);
  }
  view.push_back(static_cast<ShapeElem>(O));
  from.push_back(ws[0]);
  gpu::copy_gpu(view, dw, t, from, y, t, row_major_strides(view), s, "Convolution");
  return true;
}

}  // namespace

void Convolution::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Stream& s = stream();
  const array& x = inputs[0];
  const array& w = inputs[1];
  char* y = static_cast<char*>(gpu::allocate_output(out, s));
  if (out.size() == 0) return;
  const ConvPlan p = conv_plan(*this, x, w);
  if (p.cols == 0) {
    TESSERA_CUDA_CHECK(cudaMemsetAsync(y, 0, out.nbytes(), gpu::cuda_stream(s)));
    return;
  }
  if (cudnn_weight_gradient(*this, x, w, out, y, s)) return;
  std::optional<array> dense_w;
  const void* weight = dense_ptr(w, dense_w, s);
  if (cudnn_convolution(*this, x, w, out, weight, y, s)) return;
  const void* in = gpu::device_ptr(x, s);
  const int64_t esize = out.itemsize();
  const int64_t O = p.out_channels;
  const int64_t chunk = chunk_rows(p, esize, kWindowBytes);
  void* windows = gpu::scratch(p.groups * chunk * p.cols * esize, s);
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const int64_t count = std::min(chunk, p.rows - r0);
    gpu::gather_windows(p, in, r0, count, windows, esize, s);
    gpu::gemm({windows, {count * p.cols}, p.cols, 1}, {weight, {p.out_group * p.cols}, 1, p.cols},
              y + r0 * O * esize, O, {p.out_group}, out.dtype(),
              {static_cast<ShapeElem>(p.groups)}, count, p.out_group, p.cols, s, "Convolution");
  }
}

}  // namespace tessera
