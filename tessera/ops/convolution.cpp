// The convolution ops: validate, promote, create the Convolution node. A
// transposed convolution is a convolution of the input dilated by the stride,
// padded, with the kernel flipped (conv_transpose below); convolve is a
// flipped 1-D convolution.
#include "tessera/ops/convolution.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/convolution.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

constexpr int kMaxSpatialDims = 8;

// Checks the arrays of a convolution with n spatial dimensions (n = 0: as
// many as the weight has) and returns n.
int check_arrays(const char* op, const array& x, const array& w, int n, int groups) {
  const bool any = n == 0;
  if (any) n = static_cast<int>(w.ndim()) - 2;
  auto shapes = [&] { return shape_str(x.shape()) + " and " + shape_str(w.shape()); };
  if (any && n < 1) {
    throw_invalid(op, "expected an input and a weight of at least 3 dimensions (N, *spatial, C), "
                      "got shapes " + shapes());
  }
  if (static_cast<int>(x.ndim()) != n + 2 || static_cast<int>(w.ndim()) != n + 2) {
    throw_invalid(op, "expected an input and a weight of " + std::to_string(n + 2) +
                          " dimensions (N, *spatial, C), got shapes " + shapes());
  }
  if (n > kMaxSpatialDims) {
    throw_invalid(op, "at most " + std::to_string(kMaxSpatialDims) +
                          " spatial dimensions are supported, got " + std::to_string(n));
  }
  const int C = x.shape(-1), O = w.shape(0);
  if (groups < 1 || C % groups != 0 || O % groups != 0) {
    throw_invalid(op, "groups=" + std::to_string(groups) + " must divide the input channels (" +
                          std::to_string(C) + ") and the output channels (" + std::to_string(O) +
                          ")");
  }
  if (C != w.shape(-1) * groups) {
    throw_invalid(op, "the input has " + std::to_string(C) + " channels but the weight " +
                          shape_str(w.shape()) + " expects " +
                          std::to_string(w.shape(-1) * groups) + " (" + std::to_string(groups) +
                          " groups)");
  }
  for (int i = 1; i <= n; ++i) {
    if (w.shape(i) < 1) {
      throw_invalid(op, "the kernel sizes must be positive, got a weight of shape " +
                            shape_str(w.shape()));
    }
  }
  const Dtype t = promote_types(x.dtype(), w.dtype());
  if (!is_floating_point(t)) {
    throw_invalid(op, "an input and a weight of dtypes " + dtype_name(x.dtype()) + " and " +
                          dtype_name(w.dtype()) + " promote to " + dtype_name(t) +
                          ", not a real floating-point dtype");
  }
  return n;
}

// v with one value per spatial dimension: as given, or its one value repeated
// (empty: `fallback`).
std::vector<int> per_dim(const char* op, const std::string& name, std::vector<int> v, int n,
                         int fallback) {
  if (v.empty()) return std::vector<int>(n, fallback);
  if (v.size() == 1) return std::vector<int>(n, v[0]);
  if (static_cast<int>(v.size()) != n) {
    throw_invalid(op, name + " must be an int or " + std::to_string(n) + " ints, got " +
                          ints_str(v));
  }
  return v;
}

void check_at_least(const char* op, const std::string& name, const std::vector<int>& v,
                    int least) {
  for (int x : v) {
    if (x < least) {
      throw_invalid(op, name + " must be " + (least > 0 ? "positive" : "non-negative") +
                            ", got " + ints_str(v));
    }
  }
}

// The Convolution node of checked arrays and parameters (one per spatial dimension).
array convolution(const char* op, const array& x, const array& w, std::vector<int> stride,
                  std::vector<int> lo, std::vector<int> hi, std::vector<int> kernel_dilation,
                  std::vector<int> input_dilation, int groups, bool flip, StreamOrDevice s) {
  const int n = static_cast<int>(w.ndim()) - 2;
  Shape shape{x.shape(0)};
  for (int i = 0; i < n; ++i) {
    const int64_t size = x.shape(i + 1);
    const int64_t dilated = size == 0 ? 0 : (size - 1) * int64_t(input_dilation[i]) + 1;
    const int64_t padded = dilated + lo[i] + hi[i];
    const int64_t span = (w.shape(i + 1) - 1) * int64_t(kernel_dilation[i]) + 1;
    if (span > padded) {
      throw_invalid(op, "the kernel (span " + std::to_string(span) + " along spatial axis " +
                            std::to_string(i) + ") is larger than the padded input (" +
                            std::to_string(padded) + ")");
    }
    const int64_t out = (padded - span) / stride[i] + 1;
    if (out > INT32_MAX) {
      throw_invalid(op, "the output would have " + std::to_string(out) +
                            " positions along spatial axis " + std::to_string(i));
    }
    shape.push_back(static_cast<ShapeElem>(out));
  }
  shape.push_back(w.shape(0));
  const Dtype t = promote_types(x.dtype(), w.dtype());
  array in = x.dtype() == t ? x : astype(x, t, s);
  array wt = w.dtype() == t ? w : astype(w, t, s);
  return array(std::move(shape), t,
               std::make_shared<Convolution>(to_stream(s), std::move(stride), std::move(lo),
                                             std::move(hi), std::move(kernel_dilation),
                                             std::move(input_dilation), groups, flip),
               {in, wt});
}

array conv_nd(const char* op, const array& x, const array& w, std::vector<int> stride,
              std::vector<int> padding, std::vector<int> dilation, int groups, StreamOrDevice s) {
  const int n = static_cast<int>(stride.size());
  check_arrays(op, x, w, n, groups);
  check_at_least(op, "stride", stride, 1);
  check_at_least(op, "padding", padding, 0);
  check_at_least(op, "dilation", dilation, 1);
  return convolution(op, x, w, std::move(stride), padding, padding, std::move(dilation),
                     std::vector<int>(n, 1), groups, false, s);
}

// y[i s + j d - p] += x[i] w[j] is the convolution of x dilated by s, padded
// by d (K - 1) - p (and output_padding more at the end), with w flipped.
array conv_transpose(const char* op, const array& x, const array& w, std::vector<int> stride,
                     const std::vector<int>& padding, std::vector<int> dilation,
                     const std::vector<int>& output_padding, int groups, StreamOrDevice s) {
  const int n = static_cast<int>(stride.size());
  check_arrays(op, x, w, n, groups);
  check_at_least(op, "stride", stride, 1);
  check_at_least(op, "dilation", dilation, 1);
  check_at_least(op, "padding", padding, 0);
  check_at_least(op, "output_padding", output_padding, 0);
  for (int i = 0; i < n; ++i) {
    if (output_padding[i] >= std::max(stride[i], dilation[i])) {
      throw_invalid(op, "output_padding " + std::to_string(output_padding[i]) +
                            " must be smaller than the stride (" + std::to_string(stride[i]) +
                            ") or the dilation (" + std::to_string(dilation[i]) + ")");
    }
  }
  std::vector<int> lo(n), hi(n);
  for (int i = 0; i < n; ++i) {
    lo[i] = dilation[i] * (w.shape(i + 1) - 1) - padding[i];
    hi[i] = lo[i] + output_padding[i];
  }
  return convolution(op, x, w, std::vector<int>(n, 1), std::move(lo), std::move(hi),
                     std::move(dilation), std::move(stride), groups, true, s);
}

array general(const array& x, const array& w, std::vector<int> stride, std::vector<int> lo,
              std::vector<int> hi, std::vector<int> kernel_dilation,
              std::vector<int> input_dilation, int groups, bool flip, const char* lo_name,
              const char* hi_name, StreamOrDevice s) {
  const char* op = "conv_general";
  const int n = check_arrays(op, x, w, 0, groups);
  stride = per_dim(op, "stride", std::move(stride), n, 1);
  lo = per_dim(op, lo_name, std::move(lo), n, 0);
  hi = per_dim(op, hi_name, std::move(hi), n, 0);
  kernel_dilation = per_dim(op, "kernel_dilation", std::move(kernel_dilation), n, 1);
  input_dilation = per_dim(op, "input_dilation", std::move(input_dilation), n, 1);
  check_at_least(op, "stride", stride, 1);
  check_at_least(op, "kernel_dilation", kernel_dilation, 1);
  check_at_least(op, "input_dilation", input_dilation, 1);
  return convolution(op, x, w, std::move(stride), std::move(lo), std::move(hi),
                     std::move(kernel_dilation), std::move(input_dilation), groups, flip, s);
}

void check_groups_one(const char* op, int groups) {
  if (groups != 1) {
    throw_invalid(op, "only groups=1 is supported, got groups=" + std::to_string(groups));
  }
}

std::vector<int> vec(const std::pair<int, int>& p) { return {p.first, p.second}; }
std::vector<int> vec(const std::tuple<int, int, int>& t) {
  return {std::get<0>(t), std::get<1>(t), std::get<2>(t)};
}

}  // namespace

array conv1d(const array& input, const array& weight, int stride, int padding, int dilation,
             int groups, StreamOrDevice s) {
  return conv_nd("conv1d", input, weight, {stride}, {padding}, {dilation}, groups, s);
}

array conv2d(const array& input, const array& weight, const std::pair<int, int>& stride,
             const std::pair<int, int>& padding, const std::pair<int, int>& dilation, int groups,
             StreamOrDevice s) {
  return conv_nd("conv2d", input, weight, vec(stride), vec(padding), vec(dilation), groups, s);
}

array conv3d(const array& input, const array& weight, const std::tuple<int, int, int>& stride,
             const std::tuple<int, int, int>& padding, const std::tuple<int, int, int>& dilation,
             int groups, StreamOrDevice s) {
  check_groups_one("conv3d", groups);
  return conv_nd("conv3d", input, weight, vec(stride), vec(padding), vec(dilation), groups, s);
}

array conv_transpose1d(const array& input, const array& weight, int stride, int padding,
                       int dilation, int output_padding, int groups, StreamOrDevice s) {
  return conv_transpose("conv_transpose1d", input, weight, {stride}, {padding}, {dilation},
                        {output_padding}, groups, s);
}

array conv_transpose2d(const array& input, const array& weight,
                       const std::pair<int, int>& stride, const std::pair<int, int>& padding,
                       const std::pair<int, int>& dilation,
                       const std::pair<int, int>& output_padding, int groups, StreamOrDevice s) {
  return conv_transpose("conv_transpose2d", input, weight, vec(stride), vec(padding),
                        vec(dilation), vec(output_padding), groups, s);
}

array conv_transpose3d(const array& input, const array& weight,
                       const std::tuple<int, int, int>& stride,
                       const std::tuple<int, int, int>& padding,
                       const std::tuple<int, int, int>& dilation,
                       const std::tuple<int, int, int>& output_padding, int groups,
                       StreamOrDevice s) {
  check_groups_one("conv_transpose3d", groups);
  return conv_transpose("conv_transpose3d", input, weight, vec(stride), vec(padding),
                        vec(dilation), vec(output_padding), groups, s);
}

array conv_general(array input, array weight, std::vector<int> stride,
                   std::vector<int> padding_lo, std::vector<int> padding_hi,
                   std::vector<int> kernel_dilation, std::vector<int> input_dilation, int groups,
                   bool flip, StreamOrDevice s) {
  return general(input, weight, std::move(stride), std::move(padding_lo), std::move(padding_hi),
                 std::move(kernel_dilation), std::move(input_dilation), groups, flip,
                 "padding_lo", "padding_hi", s);
}

array conv_general(const array& input, const array& weight, std::vector<int> stride,
                   std::vector<int> padding, std::vector<int> kernel_dilation,
                   std::vector<int> input_dilation, int groups, bool flip, StreamOrDevice s) {
  return general(input, weight, std::move(stride), padding, padding, std::move(kernel_dilation),
                 std::move(input_dilation), groups, flip, "padding", "padding", s);
}

array convolve(const array& a, const array& v, const std::string& mode, StreamOrDevice s) {
  const char* op = "convolve";
  if (a.ndim() != 1 || v.ndim() != 1) {
    throw_invalid(op, "inputs must be 1-D, got shapes " + shape_str(a.shape()) + " and " +
                          shape_str(v.shape()));
  }
  if (a.size() == 0 || v.size() == 0) throw_invalid(op, "inputs cannot be empty");
  if (mode != "full" && mode != "valid" && mode != "same") {
    throw_invalid(op, "mode must be 'full', 'valid' or 'same', got '" + mode + "'");
  }
  const Dtype out = promote_types(a.dtype(), v.dtype());
  if (is_complex(out)) throw_invalid(op, "complex input (complex64) is not supported");
  const bool swap = v.size() > a.size();
  const array& signal = swap ? v : a;
  const array& kernel = swap ? a : v;
  const int k = kernel.shape(0);
  int low = 0, high = 0;
  if (mode == "full") {
    low = high = k - 1;
  } else if (mode == "same") {
    // numpy's 'same': the full result from (k - 1) / 2 on, as long as the signal.
    low = k - 1 - (k - 1) / 2;
    high = (k - 1) / 2;
  }
  const Dtype t = is_inexact(out) ? out : float64;
  array x = reshape(astype(signal, t, s), {1, signal.shape(0), 1}, s);
  array w = reshape(astype(kernel, t, s), {1, k, 1}, s);
  array y = reshape(convolution(op, x, w, {1}, {low}, {high}, {1}, {1}, 1, true, s), {-1}, s);
  return y.dtype() == out ? y : astype(y, out, s);
}

// ---- the primitive's shape rule and identity

std::vector<Shape> Convolution::output_shapes(const std::vector<array>& inputs) {
  const array &x = inputs[0], &w = inputs[1];
  Shape shape{x.shape(0)};
  for (size_t i = 0; i + 2 < x.ndim(); ++i) {
    const int64_t size = x.shape(i + 1);
    const int64_t dilated = size == 0 ? 0 : (size - 1) * int64_t(input_dilation_[i]) + 1;
    const int64_t span = (w.shape(i + 1) - 1) * int64_t(kernel_dilation_[i]) + 1;
    shape.push_back(static_cast<ShapeElem>(
        (dilated + padding_lo_[i] + padding_hi_[i] - span) / stride_[i] + 1));
  }
  shape.push_back(w.shape(0));
  return {shape};
}

void Convolution::print(std::ostream& os) const {
  os << "Convolution(stride=" << ints_str(stride_) << ", padding=" << ints_str(padding_lo_)
     << "/" << ints_str(padding_hi_) << ", kernel_dilation=" << ints_str(kernel_dilation_)
     << ", input_dilation=" << ints_str(input_dilation_) << ", groups=" << groups_
     << ", flip=" << (flip_ ? "true" : "false") << ")";
}

}  // namespace tessera
