// Transform rules of Quantize, Dequantize and QuantizedMatmul.
//
// The packed weights are integers: no derivative flows to them (asking for one
// is an error, as in MLX), nor through Quantize. Dequantize is linear in its
// scales and biases (W = scales * q + biases per group), and QuantizedMatmul in
// x and in W, so their derivatives are written with dequantize and
// quantized_matmul themselves: the cotangent of x is the product with the
// other orientation of w, and that of scales / biases the group sums of
// dW * q and of dW.
#include <optional>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/copy.h"
#include "tessera/ops/primitives/quantized.h"

namespace tessera {

namespace {

[[noreturn]] void no_gradient_of_w(const char* op) {
  throw_invalid(op, "cannot compute the gradient with respect to w (packed integers)");
}

// Sums of a (..., G * group_size) over its groups: (..., G).
array group_sum(const array& a, int group_size, Stream s) {
  Shape shape = a.shape();
  shape.back() /= group_size;
  shape.push_back(group_size);
  return sum(reshape(a, shape, s), -1, false, s);
}

// The quantized values q of w as floats of dtype t (scales 1, biases 0).
array levels(const array& w, const array& scales, int group_size, int bits, Dtype t, Stream s) {
  return dequantize(w, ones_like(scales, t, s), zeros_like(scales, t, s), group_size, bits,
                    "affine", std::nullopt, t, s);
}

// Cotangents of (scales, biases) at argnums 1 and 2 given dW, the cotangent of
// W = dequantize(w, scales, biases) (of W's shape).
void scale_bias_vjp(const array& w, const array& scales, const array& dW,
                    const std::vector<int>& argnums, int scales_arg, int group_size, int bits,
                    std::vector<array>& grads, Stream s) {
  for (int arg : argnums) {
    if (arg == scales_arg) {
      array q = levels(w, scales, group_size, bits, dW.dtype(), s);
      grads.push_back(group_sum(multiply(dW, q, s), group_size, s));
    } else if (arg == scales_arg + 1) {
      grads.push_back(group_sum(dW, group_size, s));
    }
  }
}

// Moves a batched input's axis to the front; an unbatched one gets a new axis
// of size 1 there (broadcast) or, with n > 0, broadcast to n.
array batch_front(const array& a, int axis, int n, Stream s) {
  if (axis >= 0) return moveaxis(a, axis, 0, s);
  array e = expand_dims(a, 0, s);
  if (n <= 0) return e;
  Shape shape = e.shape();
  shape[0] = n;
  return broadcast_to(e, shape, s);
}

int batch_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  return 1;
}

// Inserts `count` axes of size 1 after axis 0.
array pad_after_front(const array& a, int count, Stream s) {
  if (count <= 0) return a;
  std::vector<int> axes;
  for (int i = 0; i < count; ++i) axes.push_back(1 + i);
  return expand_dims(a, axes, s);
}

}  // namespace

// ---- Quantize

std::vector<array> Quantize::vjp(const std::vector<array>&, const std::vector<array>&,
                                 const std::vector<int>&, const std::vector<array>&) {
  throw_invalid("quantize", "is not differentiable");
}

std::vector<array> Quantize::jvp(const std::vector<array>&, const std::vector<array>&,
                                 const std::vector<int>&) {
  throw_invalid("quantize", "is not differentiable");
}

std::pair<std::vector<array>, std::vector<int>> Quantize::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  auto s = stream();
  array w = batch_front(inputs[0], axes[0], 0, s);
  return {quantize(w, group_size_, bits_, "affine", std::nullopt, s), {0, 0, 0}};
}

// ---- Dequantize: W = scales * q(w) + biases

std::vector<array> Dequantize::vjp(const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>& argnums, const std::vector<array>&) {
  for (int arg : argnums) {
    if (arg == 0) no_gradient_of_w("dequantize");
  }
  std::vector<array> grads;
  scale_bias_vjp(primals[0], primals[1], cotangents[0], argnums, 1, group_size_, bits_, grads,
                 stream());
  return grads;
}

std::vector<array> Dequantize::jvp(const std::vector<array>& primals,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>& argnums) {
  auto s = stream();
  std::optional<array> ts, tb;
  for (size_t i = 0; i < argnums.size(); ++i) {
    if (argnums[i] == 0) no_gradient_of_w("dequantize");
    (argnums[i] == 1 ? ts : tb) = tangents[i];
  }
  const array& scales = primals[1];
  return {dequantize(primals[0], ts ? *ts : zeros_like(scales, s), tb ? *tb : zeros_like(scales, s),
                     group_size_, bits_, "affine", std::nullopt, scales.dtype(), s)};
}

std::pair<std::vector<array>, std::vector<int>> Dequantize::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  auto s = stream();
  int n = batch_size(inputs, axes);
  array w = batch_front(inputs[0], axes[0], n, s);
  array scales = batch_front(inputs[1], axes[1], n, s);
  array biases = batch_front(inputs[2], axes[2], n, s);
  return {{dequantize(w, scales, biases, group_size_, bits_, "affine", std::nullopt,
                      scales.dtype(), s)},
          {0}};
}

// ---- QuantizedMatmul: y = x @ W^T (transpose) or x @ W, W = dequantize(w, scales, biases)

std::vector<array> QuantizedMatmul::vjp(const std::vector<array>& primals,
                                        const std::vector<array>& cotangents,
                                        const std::vector<int>& argnums,
                                        const std::vector<array>&) {
  auto s = stream();
  const array &x = primals[0], &w = primals[1], &scales = primals[2], &biases = primals[3];
  const array& c = cotangents[0];
  std::vector<array> grads;
  std::optional<array> dW;
  for (int arg : argnums) {
    if (arg == 1) no_gradient_of_w("quantized_matmul");
    if (arg == 0) {
      grads.push_back(quantized_matmul(c, w, scales, biases, !transpose_, group_size_, bits_,
                                       "affine", s));
      continue;
    }
    if (!dW) {
      // dW = c^T x (transpose) or x^T c, over every row of x (and per batch
      // element when w has batch axes).
      array xm = x, cm = c;
      if (w.ndim() == 2) {
        xm = reshape(x, {-1, x.shape(-1)}, s);
        cm = reshape(c, {-1, c.shape(-1)}, s);
      } else if (x.ndim() == 1) {
        xm = expand_dims(x, 0, s);
        cm = expand_dims(c, 0, s);
      }
      dW = transpose_ ? matmul(swapaxes(cm, -1, -2, s), xm, s)
                      : matmul(swapaxes(xm, -1, -2, s), cm, s);
    }
    scale_bias_vjp(w, scales, *dW, {arg}, 2, group_size_, bits_, grads, s);
  }
  return grads;
}

std::vector<array> QuantizedMatmul::jvp(const std::vector<array>& primals,
                                        const std::vector<array>& tangents,
                                        const std::vector<int>& argnums) {
  auto s = stream();
  const array &x = primals[0], &w = primals[1], &scales = primals[2], &biases = primals[3];
  std::optional<array> out, ts, tb;
  for (size_t i = 0; i < argnums.size(); ++i) {
    switch (argnums[i]) {
      case 0:
        out = quantized_matmul(tangents[i], w, scales, biases, transpose_, group_size_, bits_,
                               "affine", s);
        break;
      case 1: no_gradient_of_w("quantized_matmul");
      case 2: ts = tangents[i]; break;
      default: tb = tangents[i]; break;
    }
  }
  if (ts || tb) {
    array dW = dequantize(w, ts ? *ts : zeros_like(scales, s), tb ? *tb : zeros_like(scales, s),
                          group_size_, bits_, "affine", std::nullopt, scales.dtype(), s);
    array term = matmul(x, transpose_ ? swapaxes(dW, -1, -2, s) : dW, s);
    out = out ? add(*out, term, s) : term;
  }
  return {out ? *out : zeros_like(quantized_matmul(x, w, scales, biases, transpose_, group_size_,
                                                   bits_, "affine", s),
                                  s)};
}

// The batch axis goes in front of every input (size 1 where unbatched) and the
// batch axes of x and of w are aligned after it, so that broadcasting pairs
// each batch element of x with its own weights.
std::pair<std::vector<array>, std::vector<int>> QuantizedMatmul::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  const bool w_batched = axes[1] >= 0 || axes[2] >= 0 || axes[3] >= 0;
  array x = batch_front(inputs[0], axes[0], 0, s);
  if (!w_batched) {
    if (axes[0] < 0) x = squeeze(x, 0, s);
    return {{quantized_matmul(x, inputs[1], inputs[2], inputs[3], transpose_, group_size_, bits_,
                              "affine", s)},
            {axes[0] < 0 ? -1 : 0}};
  }
  array w = batch_front(inputs[1], axes[1], 0, s);
  array scales = batch_front(inputs[2], axes[2], 0, s);
  array biases = batch_front(inputs[3], axes[3], 0, s);
  // Each batch element of w, scales and biases must be complete (they
  // broadcast against each other only through the batch axis).
  int n = batch_size(inputs, axes);
  auto full = [&](const array& a) {
    Shape shape = a.shape();
    shape[0] = n;
    return broadcast_to(a, shape, s);
  };
  w = full(w);
  scales = full(scales);
  biases = full(biases);
  const bool vector = x.ndim() == 2;  // each element of x is a vector
  if (vector) x = expand_dims(x, 1, s);
  const int xb = static_cast<int>(x.ndim()) - 3, wb = static_cast<int>(w.ndim()) - 3;
  x = pad_after_front(x, wb - xb, s);
  w = pad_after_front(w, xb - wb, s);
  scales = pad_after_front(scales, xb - wb, s);
  biases = pad_after_front(biases, xb - wb, s);
  array out = quantized_matmul(x, w, scales, biases, transpose_, group_size_, bits_, "affine", s);
  if (vector) out = squeeze(out, -2, s);
  return {{out}, {0}};
}

}  // namespace tessera
