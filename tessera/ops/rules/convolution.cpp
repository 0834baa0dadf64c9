// Transform rules of Convolution, in the terms of Note [Convolution geometry]
// (ops/primitives/convolution.h). Along each spatial axis, D = (S - 1) e + 1 is
// the dilated input, Y = (out - 1) s + 1 the output dilated by the stride, and
// span = (K - 1) d + 1 the kernel's reach; output o with tap k reads input i
// where o s + k' d = lo + i e.
//   x's cotangent  a convolution of the cotangent dilated by s (input
//                  dilation s) with the weight group-transposed ((O, K, C/g)
//                  -> (C, K, O/g)) and flipped the other way (!flip): stride
//                  e, kernel dilation d, padding (span - 1 - lo, D - Y + lo),
//                  which gives exactly S outputs.
//   w's cotangent  a convolution of the input with the cotangent as its kernel,
//                  batch and channels exchanged: the input as (C/g, S, g N),
//                  the cotangent as (O, out, N), so that group g pairs input
//                  block g with cotangent block g and contracts over N: stride
//                  d, kernel dilation s, input dilation e, padding (lo,
//                  span - 1 + Y - D - lo), no flip, which gives exactly K
//                  outputs; its spatial axes reversed when flip; then
//                  (C/g, K, O) -> (O, K, C/g).
//   jvp            bilinear: conv(tx, w) + conv(x, tw).
//   vmap           a batched input folds into N; a batched weight into the
//                  output channels, group-major so that each group keeps its
//                  block; both batched, into the groups (B g groups).
#include <optional>

#include "tessera/ops/ops.h"
#include "tessera/ops/convolution.h"
#include "tessera/ops/primitives/convolution.h"

namespace tessera {

namespace {

array same_conv(const Convolution& p, const array& x, const array& w, int groups, Stream s) {
  return conv_general(x, w, p.stride(), p.padding_lo(), p.padding_hi(), p.kernel_dilation(),
                      p.input_dilation(), groups, p.flip(), s);
}

Shape spatial(const array& a) { return Shape(a.shape().begin() + 1, a.shape().end() - 1); }

// shape with `inner` put between its first element and the rest.
Shape with(std::initializer_list<int> front, const Shape& inner, std::initializer_list<int> back) {
  Shape out(front);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), back);
  return out;
}

}  // namespace

std::vector<array> Convolution::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream s = stream();
  const array &x = primals[0], &w = primals[1], &g = cotangents[0];
  const int n = static_cast<int>(x.ndim()) - 2;
  const int G = groups_, N = x.shape(0), O = w.shape(0), Cg = w.shape(-1), Og = O / G;
  const Shape kernel = spatial(w), in_size = spatial(x), out_size = spatial(g);
  std::vector<int> dilated(n), grown(n), span(n);
  for (int i = 0; i < n; ++i) {
    dilated[i] = (in_size[i] - 1) * input_dilation_[i] + 1;
    grown[i] = (out_size[i] - 1) * stride_[i] + 1;
    span[i] = (kernel[i] - 1) * kernel_dilation_[i] + 1;
  }
  const bool empty = x.size() == 0 || w.size() == 0 || g.size() == 0;
  std::vector<array> grads;
  for (int arg : argnums) {
    const array& primal = arg == 0 ? x : w;
    if (empty) {
      grads.push_back(zeros_like(primal, s));
      continue;
    }
    array grad = primal;
    if (arg == 0) {
      std::vector<int> perm{0, n + 2};
      for (int i = 0; i < n; ++i) perm.push_back(i + 2);
      perm.push_back(1);
      array wt = reshape(transpose(reshape(w, with({G, Og}, kernel, {Cg}), s), perm, s),
                         with({G * Cg}, kernel, {Og}), s);
      std::vector<int> lo(n), hi(n);
      for (int i = 0; i < n; ++i) {
        lo[i] = span[i] - 1 - padding_lo_[i];
        hi[i] = dilated[i] - grown[i] + padding_lo_[i];
      }
      grad = conv_general(g, wt, input_dilation_, lo, hi, kernel_dilation_, stride_, G, !flip_,
                          s);
    } else {
      std::vector<int> perm{n + 2};
      for (int i = 0; i < n; ++i) perm.push_back(i + 1);
      perm.insert(perm.end(), {n + 1, 0});
      array xt = reshape(transpose(reshape(x, with({N}, in_size, {G, Cg}), s), perm, s),
                         with({Cg}, in_size, {G * N}), s);
      std::vector<int> hi(n);
      for (int i = 0; i < n; ++i) hi[i] = span[i] - 1 + grown[i] - dilated[i] - padding_lo_[i];
      grad = conv_general(xt, swapaxes(g, 0, -1, s), kernel_dilation_, padding_lo_, hi, stride_,
                          input_dilation_, G, false, s);
      if (flip_) {
        std::vector<int> axes(n);
        for (int i = 0; i < n; ++i) axes[i] = i + 1;
        grad = tessera::flip(grad, axes, s);
      }
      grad = swapaxes(grad, 0, -1, s);
    }
    grads.push_back(grad.dtype() == primal.dtype() ? grad : astype(grad, primal.dtype(), s));
  }
  return grads;
}

std::vector<array> Convolution::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  const Stream s = stream();
  std::optional<array> out;
  for (size_t i = 0; i < argnums.size(); ++i) {
    array term = argnums[i] == 0 ? same_conv(*this, tangents[i], primals[1], groups_, s)
                                 : same_conv(*this, primals[0], tangents[i], groups_, s);
    out = out ? add(*out, term, s) : term;
  }
  return {*out};
}

std::pair<std::vector<array>, std::vector<int>> Convolution::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const Stream s = stream();
  const int bx = axes[0], bw = axes[1];
  array x = bx >= 0 ? moveaxis(inputs[0], bx, 0, s) : inputs[0];
  array w = bw >= 0 ? moveaxis(inputs[1], bw, 0, s) : inputs[1];
  if (bw < 0) {
    // (B, N, S..., C) -> (B N, S..., C)
    const int B = x.shape(0), N = x.shape(1);
    array y = same_conv(*this, flatten(x, 0, 1, s), w, groups_, s);
    return {{reshape(y, with({B, N}, spatial(y), {y.shape(-1)}), s)}, {0}};
  }
  const int B = w.shape(0), O = w.shape(1), G = groups_, Og = O / G;
  const Shape kernel(w.shape().begin() + 2, w.shape().end() - 1);
  const int Cg = w.shape(-1);
  if (bx < 0) {
    // (B, O, K..., Cg) -> (G, B, O/G, K..., Cg) -> (G B O/G, K..., Cg)
    array wf = reshape(swapaxes(reshape(w, with({B, G, Og}, kernel, {Cg}), s), 0, 1, s),
                       with({G * B * Og}, kernel, {Cg}), s);
    array y = same_conv(*this, x, wf, G, s);  // (N, out..., G, B, O/G) in its last axis
    const Shape out = spatial(y);
    y = reshape(y, with({x.shape(0)}, out, {G, B, Og}), s);
    y = moveaxis(y, static_cast<int>(out.size()) + 2, 0, s);
    return {{reshape(y, with({B, x.shape(0)}, out, {O}), s)}, {0}};
  }
  if (B == 0) {
    // No groups to fold into: the shape of one example's output, for none.
    Shape shape = output_shapes({zeros(Shape(x.shape().begin() + 1, x.shape().end()), x.dtype(), s),
                                 zeros(Shape(w.shape().begin() + 1, w.shape().end()), w.dtype(), s)})[0];
    shape.insert(shape.begin(), 0);
    return {{zeros(shape, w.dtype(), s)}, {0}};
  }
  // (B, N, S..., C) -> (N, S..., B C) with B G groups; (B, O, K..., Cg) -> (B O, K..., Cg).
  array xf = moveaxis(x, 0, -2, s);
  xf = flatten(xf, -2, -1, s);
  array y = same_conv(*this, xf, flatten(w, 0, 1, s), B * G, s);
  const Shape out = spatial(y);
  return {{reshape(y, with({x.shape(1)}, out, {B, O}), s)}, {static_cast<int>(out.size()) + 1}};
}

}  // namespace tessera
