// Quantization ops: validate, pick the dtypes and shapes, create the nodes.
#include "tessera/ops/quantized.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/primitives/quantized.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/sort.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

struct QuantParams {
  int group_size, bits;
};

// The affine group size and bits, with the mode's defaults; other modes are refused.
QuantParams affine_params(const char* op, const std::string& mode, std::optional<int> group_size,
                          std::optional<int> bits) {
  if (mode == "mxfp4" || mode == "mxfp8" || mode == "nvfp4") {
    throw_invalid(op, "mode '" + mode + "' is not implemented (only 'affine' is)");
  }
  if (mode != "affine") {
    throw_invalid(op, "unknown mode '" + mode + "' (expected 'affine', 'mxfp4', 'mxfp8' or 'nvfp4')");
  }
  QuantParams p{group_size.value_or(64), bits.value_or(4)};
  if (p.group_size != 32 && p.group_size != 64 && p.group_size != 128) {
    throw_invalid(op, "group_size " + std::to_string(p.group_size) +
                          " is not supported in mode 'affine' (32, 64 or 128)");
  }
  if (p.bits < 2 || p.bits > 8 || p.bits == 7) {
    throw_invalid(op, "bits " + std::to_string(p.bits) +
                          " is not supported in mode 'affine' (2, 3, 4, 5, 6 or 8)");
  }
  return p;
}

void check_no_global_scale(const char* op, const std::optional<array>& global_scale) {
  if (global_scale) throw_invalid(op, "global_scale is only used by mode 'nvfp4'");
}

void check_floating(const char* op, const char* what, const array& a) {
  if (!is_floating_point(a.dtype())) {
    throw_invalid(op, std::string(what) + " must be floating point, got " + dtype_name(a.dtype()));
  }
}

// Checks packed weights and their scales and biases; returns the number of
// values per row of w.
int64_t check_packed(const char* op, const array& w, const array& scales,
                     const std::optional<array>& biases, QuantParams p) {
  if (w.dtype() != uint32) {
    throw_invalid(op, "w must be uint32 (packed by quantize), got " + dtype_name(w.dtype()));
  }
  if (w.ndim() < 2) {
    throw_invalid(op, "w of shape " + shape_str(w.shape()) + " must have at least 2 dimensions");
  }
  if (!biases) throw_invalid(op, "mode 'affine' needs biases");
  const int64_t words = w.shape(-1);
  const int64_t values = words * 32 / p.bits;
  if ((words * 32) % p.bits != 0 || values % p.group_size != 0) {
    throw_invalid(op, "the last dimension of w (" + std::to_string(words) +
                          " words) does not hold whole groups of " +
                          std::to_string(p.group_size) + " " + std::to_string(p.bits) +
                          "-bit values");
  }
  Shape want = w.shape();
  want.back() = values / p.group_size;
  if (scales.shape() != want || biases->shape() != want) {
    throw_invalid(op, "scales of shape " + shape_str(scales.shape()) + " and biases of shape " +
                          shape_str(biases->shape()) + " do not match w of shape " +
                          shape_str(w.shape()) + ": expected " + shape_str(want) +
                          " for group_size " + std::to_string(p.group_size) + " and bits " +
                          std::to_string(p.bits));
  }
  check_floating(op, "scales", scales);
  check_floating(op, "biases", *biases);
  return values;
}

Shape with_last2(Shape batch, int64_t a, int64_t b) {
  batch.push_back(a);
  batch.push_back(b);
  return batch;
}

}  // namespace

std::vector<array> quantize(const array& w, std::optional<int> group_size,
                            std::optional<int> bits, const std::string& mode,
                            const std::optional<array>& global_scale, StreamOrDevice s) {
  const char* op = "quantize";
  QuantParams p = affine_params(op, mode, group_size, bits);
  check_no_global_scale(op, global_scale);
  if (w.ndim() < 2) {
    throw_invalid(op, "w of shape " + shape_str(w.shape()) + " must have at least 2 dimensions");
  }
  check_floating(op, "w", w);
  const int64_t K = w.shape(-1);
  if (K % p.group_size != 0) {
    throw_invalid(op, "the last dimension of w (" + std::to_string(K) +
                          ") must be divisible by group_size " + std::to_string(p.group_size));
  }
  Shape packed = w.shape(), groups = w.shape();
  packed.back() = static_cast<int>(K * p.bits / 32);
  groups.back() = static_cast<int>(K / p.group_size);
  return array::make_arrays({packed, groups, groups}, {uint32, w.dtype(), w.dtype()},
                            std::make_shared<Quantize>(to_stream(s), p.group_size, p.bits), {w});
}

array dequantize(const array& w, const array& scales, const std::optional<array>& biases,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 const std::optional<array>& global_scale, std::optional<Dtype> dtype,
                 StreamOrDevice s) {
  const char* op = "dequantize";
  QuantParams p = affine_params(op, mode, group_size, bits);
  check_no_global_scale(op, global_scale);
  const int64_t values = check_packed(op, w, scales, biases, p);
  Dtype out_dtype = dtype ? *dtype : promote_types(scales.dtype(), biases->dtype());
  if (!is_floating_point(out_dtype)) {
    throw_invalid(op, "dtype must be floating point, got " + dtype_name(out_dtype));
  }
  Shape shape = w.shape();
  shape.back() = static_cast<int>(values);
  return array(std::move(shape), out_dtype,
               std::make_shared<Dequantize>(to_stream(s), p.group_size, p.bits),
               {w, astype(scales, out_dtype, s), astype(*biases, out_dtype, s)});
}

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose,
                       std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode, StreamOrDevice s) {
  const char* op = "quantized_matmul";
  QuantParams p = affine_params(op, mode, group_size, bits);
  const int64_t values = check_packed(op, w, scales, biases, p);
  if (x.ndim() < 1) throw_invalid(op, "x must have at least 1 dimension, got a scalar");
  check_floating(op, "x", x);
  // w holds the matrix (N, K) when transposed, else (K, N).
  const int64_t K = transpose ? values : w.shape(-2);
  const int64_t N = transpose ? w.shape(-2) : values;
  if (x.shape(-1) != K) {
    throw_invalid(op, "the last dimension of x " + shape_str(x.shape()) +
                          " must match the inner dimension " + std::to_string(K) + " of w " +
                          shape_str(w.shape()) + " (bits " + std::to_string(p.bits) +
                          ", transpose " + (transpose ? "true" : "false") + ")");
  }
  Dtype dtype = promote_types(promote_types(x.dtype(), scales.dtype()), biases->dtype());
  auto stream = to_stream(s);
  auto prim = std::make_shared<QuantizedMatmul>(stream, p.group_size, p.bits, transpose);
  array xc = astype(x, dtype, s), sc = astype(scales, dtype, s), bc = astype(*biases, dtype, s);
  if (w.ndim() == 2) {
    Shape shape = x.shape();
    shape.back() = static_cast<int>(N);
    return array(std::move(shape), dtype, prim, {xc, w, sc, bc});
  }
  // Batched weights: x (at least a matrix) and w broadcast to one batch shape.
  const bool vector = x.ndim() == 1;
  if (vector) xc = expand_dims(xc, 0, s);
  Shape xb(xc.shape().begin(), xc.shape().end() - 2), wb(w.shape().begin(), w.shape().end() - 2);
  Shape batch = broadcast_shapes(xb, wb, op);
  const int64_t M = xc.shape(-2);
  xc = broadcast_to(xc, with_last2(batch, M, K), s);
  array wc = broadcast_to(w, with_last2(batch, w.shape(-2), w.shape(-1)), s);
  sc = broadcast_to(sc, with_last2(batch, scales.shape(-2), scales.shape(-1)), s);
  bc = broadcast_to(bc, with_last2(batch, scales.shape(-2), scales.shape(-1)), s);
  array out(with_last2(batch, M, N), dtype, prim, {xc, wc, sc, bc});
  return vector ? squeeze(out, -2, s) : out;
}

// ---- fp8 e4m3 -----------------------------------------------------------------

namespace {

// The value of the e4m3 code c (sign bit clear): exponent bias 7, subnormals
// m / 8 * 2^-6; 0x7f is NaN.
float e4m3_value(int c) {
  const int e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  return e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
}

}  // namespace

// Composed of existing ops, so it runs on every device and vmaps: the code of
// |x| is the number of midpoints between consecutive finite values below it
// (searchsorted), a tie (|x| on a midpoint) goes to the even code, NaN becomes
// 0x7f, and the sign bit is set for negative values and -0.0.
array to_fp8(const array& x, StreamOrDevice s) {
  if (!is_floating_point(x.dtype())) {
    throw std::invalid_argument("[to_fp8] expects a floating-point array, got dtype " +
                                dtype_name(x.dtype()));
  }
  std::vector<float> mids(126);
  for (int c = 0; c < 126; ++c) mids[c] = (e4m3_value(c) + e4m3_value(c + 1)) / 2;
  array m(mids.begin(), Shape{126}, float32);
  array xf = astype(x, float32, s);
  array a = abs(xf, s);
  array lo = searchsorted(m, a, "left", s), hi = searchsorted(m, a, "right", s);
  // On a midpoint lo + 1 == hi: take whichever is even.
  array one(uint32_t(1), uint32);
  array code = where(equal(bitwise_and(lo, one, s), array(uint32_t(0), uint32), s), lo, hi, s);
  code = where(isnan(a, s), array(uint32_t(0x7f), uint32), code, s);
  array negative = not_equal(right_shift(view(xf, uint32, s), array(uint32_t(31), uint32), s),
                             array(uint32_t(0), uint32), s);
  code = where(negative, bitwise_or(code, array(uint32_t(0x80), uint32), s), code, s);
  return astype(code, uint8, s);
}

array from_fp8(const array& x, Dtype dtype, StreamOrDevice s) {
  if (x.dtype() != uint8) {
    throw std::invalid_argument("[from_fp8] expects uint8 codes, got dtype " +
                                dtype_name(x.dtype()));
  }
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument("[from_fp8] the result dtype must be floating-point, got " +
                                dtype_name(dtype));
  }
  std::vector<float> values(256);
  for (int c = 0; c < 256; ++c) {
    values[c] = std::copysign(e4m3_value(c & 0x7f), c & 0x80 ? -1.0f : 1.0f);  // also NaN's sign
  }
  array table(values.begin(), Shape{256}, float32);
  return astype(take(table, astype(x, int32, s), 0, s), dtype, s);
}

}  // namespace tessera
