// Quantization ops: validate, pick the dtypes and shapes, create the nodes.
#include "tessera/ops/quantized.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/matmul.h"
#include "tessera/ops/products.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/primitives/quantized.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/sort.h"
#include "tessera/ops/unary.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

enum class QuantMode { affine, mxfp4, mxfp8, nvfp4 };

struct QuantParams {
  QuantMode mode;
  int group_size, bits;
  const char* name;
};

// The group size and bits of a mode, with the mode's defaults, checked.
QuantParams quant_params(const char* op, const std::string& mode, std::optional<int> group_size,
                         std::optional<int> bits) {
  if (mode == "affine") {
    QuantParams p{QuantMode::affine, group_size.value_or(64), bits.value_or(4), "affine"};
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
  QuantParams p;
  if (mode == "mxfp4") {
    p = {QuantMode::mxfp4, 32, 4, "mxfp4"};
  } else if (mode == "mxfp8") {
    p = {QuantMode::mxfp8, 32, 8, "mxfp8"};
  } else if (mode == "nvfp4") {
    p = {QuantMode::nvfp4, 16, 4, "nvfp4"};
  } else {
    throw_invalid(op, "unknown mode '" + mode + "' (expected 'affine', 'mxfp4', 'mxfp8' or 'nvfp4')");
  }
  if (group_size && *group_size != p.group_size) {
    throw_invalid(op, "group_size " + std::to_string(*group_size) + " is not supported in mode '" +
                          mode + "' (" + std::to_string(p.group_size) + ")");
  }
  if (bits && *bits != p.bits) {
    throw_invalid(op, "bits " + std::to_string(*bits) + " is not supported in mode '" + mode +
                          "' (" + std::to_string(p.bits) + ")");
  }
  return p;
}

// A global scale is a float32 scalar (or one-element array), of mode 'nvfp4' only.
void check_global_scale(const char* op, const char* name, QuantParams p,
                        const std::optional<array>& global_scale) {
  if (!global_scale) return;
  if (p.mode != QuantMode::nvfp4) {
    throw_invalid(op, std::string(name) + " is only used by mode 'nvfp4'");
  }
  if (global_scale->dtype() != float32 || global_scale->size() != 1) {
    throw_invalid(op, std::string(name) + " must be a float32 scalar, got shape " +
                          shape_str(global_scale->shape()) + " and dtype " +
                          dtype_name(global_scale->dtype()));
  }
}

// w is a matrix, or a stack of them.
void check_matrix(const char* op, const array& w) {
  if (w.ndim() < 2) {
    throw_invalid(op, "w of shape " + shape_str(w.shape()) + " must have at least 2 dimensions");
  }
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
  check_matrix(op, w);
  const bool affine = p.mode == QuantMode::affine;
  if (affine && !biases) throw_invalid(op, "mode 'affine' needs biases");
  if (!affine && biases) throw_invalid(op, "biases are only used by mode 'affine'");
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
  if (scales.shape() != want || (biases && biases->shape() != want)) {
    throw_invalid(op, "scales of shape " + shape_str(scales.shape()) +
                          (biases ? " and biases of shape " + shape_str(biases->shape()) : "") +
                          " do not match w of shape " + shape_str(w.shape()) + ": expected " +
                          shape_str(want) + " for group_size " + std::to_string(p.group_size) +
                          " and bits " + std::to_string(p.bits));
  }
  if (affine) {
    check_floating(op, "scales", scales);
    check_floating(op, "biases", *biases);
  } else if (scales.dtype() != uint8) {
    throw_invalid(op, std::string("scales must be uint8 in mode '") + p.name + "', got " +
                          dtype_name(scales.dtype()));
  }
  return values;
}

Shape with_last2(Shape batch, int64_t a, int64_t b) {
  batch.push_back(a);
  batch.push_back(b);
  return batch;
}

// ---- floating-point modes ---------------------------------------------------------
//
// Note [Floating-point quantization]
// Modes mxfp4, mxfp8 and nvfp4 cut each row into groups of 32, 32 and 16
// values. A group's scale is its largest magnitude over the largest value of
// the element format (6 for e2m1, 448 for e4m3), rounded to w's dtype; then,
// as in MLX,
//   mxfp4, mxfp8: 2^n with n = ceil(log2(scale)) (n = 0 for a zero scale),
//     stored as the e8m0 code n + 127 taken modulo 256 (0xff for a scale that
//     is not finite); code c reads back as 2^(c - 127), code 0 as 2^-127;
//   nvfp4: the e4m3 code of the scale (of scale * 448 * 6 / global_scale when
//     a global scale is given), read back as its value (times
//     global_scale / (448 * 6)).
// Each element is divided by the group's power of two, or (in w's dtype) by
// the e4m3 value and then by global_scale / (448 * 6); a zero scale gives 0.
// The quotient is encoded: e2m1 to the nearest value with ties toward
// zero, the sign kept only on a non-zero code; e4m3 as to_fp8 does (ties to
// even, saturating at 448, the sign always kept). 4-bit codes are packed eight
// to a uint32 word, 8-bit codes four, the first in the lowest bits.
// Dequantizing multiplies each code's value by its group's read-back scale in
// float32. All of it is composed of existing ops, so it runs on every device
// and vmaps.

constexpr float kE2M1Max = 6.0f, kE4M3Max = 448.0f;
const float kE2M1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

array u32(uint32_t v) { return array(v, uint32); }

// (..., K) -> (..., K / g, g).
array grouped(const array& a, int g, StreamOrDevice s) {
  Shape shape = a.shape();
  shape.back() /= g;
  shape.push_back(g);
  return reshape(a, std::move(shape), s);
}

// (..., K / g, g) -> (..., K).
array ungrouped(const array& a, StreamOrDevice s) {
  Shape shape(a.shape().begin(), a.shape().end() - 1);
  shape.back() *= a.shape(-1);
  return reshape(a, std::move(shape), s);
}

// 2^n as float32 for int32 n in [-149, 127], built from its bits (exact).
array exact_pow2(const array& n, StreamOrDevice s) {
  array normal = left_shift(astype(add(n, array(127), s), uint32, s), u32(23), s);
  array shift = clip(add(n, array(149), s), array(0), array(31), s);
  array subnormal = left_shift(u32(1), astype(shift, uint32, s), s);
  return view(where(greater_equal(n, array(-126), s), normal, subnormal, s), float32, s);
}

// The e8m0 exponent n = ceil(log2(scale)) of finite scales >= 0 (0 for 0):
// round(log2) is exact near integers, and a power of two below the scale
// moves n up by one.
array e8m0_exponent(const array& scale, StreamOrDevice s) {
  array usable = logical_and(isfinite(scale, s), greater(scale, array(0.0f), s), s);
  array safe = where(usable, scale, array(1.0f), s);
  array n = astype(round(log2(safe, s), s), int32, s);
  return where(less(exact_pow2(n, s), safe, s), add(n, array(1), s), n, s);
}

// The scale that the e8m0 or e4m3 code of each group stands for, float32.
array fp_scale_values(const array& codes, QuantParams p, const std::optional<array>& global_scale,
                      StreamOrDevice s) {
  if (p.mode == QuantMode::nvfp4) {
    array d = from_fp8(codes, float32, s);
    if (!global_scale) return d;
    array g = reshape(*global_scale, {}, s);
    return multiply(d, divide(g, array(kE4M3Max * kE2M1Max), s), s);
  }
  array c = astype(codes, uint32, s);
  array bits = where(equal(c, u32(0), s), u32(0x400000), left_shift(c, u32(23), s), s);
  return view(bits, float32, s);
}

// The e2m1 codes (uint32) of y: the number of midpoints between consecutive
// values below |y| (so a tie goes toward zero), and the sign bit 8 on a
// negative y of non-zero code.
array e2m1_encode(const array& y, StreamOrDevice s) {
  std::vector<float> mids(7);
  for (int i = 0; i < 7; ++i) mids[i] = (kE2M1Values[i] + kE2M1Values[i + 1]) / 2;
  array code = searchsorted(array(mids.begin(), Shape{7}, float32), abs(y, s), "left", s);
  array negative = logical_and(less(y, array(0.0f), s), not_equal(code, u32(0), s), s);
  return where(negative, bitwise_or(code, u32(8), s), code, s);
}

// The value of each e2m1 (4-bit) or e4m3 (8-bit) code, float32.
array fp_code_values(const array& codes, int bits, StreamOrDevice s) {
  if (bits == 8) return from_fp8(astype(codes, uint8, s), float32, s);
  std::vector<float> table(16);
  for (int c = 0; c < 16; ++c) table[c] = c < 8 ? kE2M1Values[c] : -kE2M1Values[c - 8];
  return take(array(table.begin(), Shape{16}, float32), codes, 0, s);
}

// The shifts of the codes that share a word: 0, bits, 2 bits, ...
array code_shifts(int bits) {
  std::vector<uint32_t> v(32 / bits);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint32_t>(i * bits);
  return array(v.begin(), Shape{static_cast<int>(v.size())}, uint32);
}

// Codes (uint32, (..., K)) -> words (uint32, (..., K * bits / 32)).
array pack_codes(const array& codes, int bits, StreamOrDevice s) {
  array shifted = left_shift(grouped(codes, 32 / bits, s), code_shifts(bits), s);
  return astype(sum(shifted, -1, false, s), uint32, s);
}

// Words (uint32, (..., W)) -> codes (uint32, (..., W * 32 / bits)).
array unpack_codes(const array& words, int bits, StreamOrDevice s) {
  array codes = right_shift(expand_dims(words, -1, s), code_shifts(bits), s);
  return ungrouped(bitwise_and(codes, u32((1u << bits) - 1), s), s);
}

// {w_q, scales} of a floating w (Note [Floating-point quantization]).
std::vector<array> fp_quantize(const array& w, QuantParams p,
                               const std::optional<array>& global_scale, StreamOrDevice s) {
  const Dtype t = w.dtype();
  array wg = grouped(w, p.group_size, s);
  array scale = divide(max(abs(wg, s), -1, true, s),
                       array(p.bits == 8 ? kE4M3Max : kE2M1Max, t), s);
  auto [codes, y] = [&]() -> std::pair<array, array> {
    if (p.mode == QuantMode::nvfp4) {
      std::optional<array> factor;
      if (global_scale) {
        factor = divide(reshape(*global_scale, {}, s), array(kE4M3Max * kE2M1Max), s);
      }
      array c = to_fp8(factor ? divide(scale, *factor, s) : scale, s);
      array d = from_fp8(c, t, s);
      array y = where(equal(d, array(0.0f, t), s), array(0.0f, t), divide(wg, d, s), s);
      return {c, factor ? divide(y, *factor, s) : y};
    }
    array sf = astype(scale, float32, s);
    array n = e8m0_exponent(sf, s);
    array c = bitwise_and(add(n, array(127), s), array(255), s);
    c = astype(where(isfinite(sf, s), c, array(255), s), uint8, s);
    return {c, divide(astype(wg, float32, s), exact_pow2(n, s), s)};
  }();
  array q = p.bits == 8 ? astype(to_fp8(y, s), uint32, s) : e2m1_encode(astype(y, float32, s), s);
  Shape scales_shape = w.shape();
  scales_shape.back() /= p.group_size;
  return {pack_codes(ungrouped(q, s), p.bits, s), reshape(codes, std::move(scales_shape), s)};
}

// The float32 matrix of packed codes and their scales.
array fp_dequantize(const array& w, const array& scales, QuantParams p,
                    const std::optional<array>& global_scale, StreamOrDevice s) {
  array values = grouped(fp_code_values(unpack_codes(w, p.bits, s), p.bits, s), p.group_size, s);
  array step = expand_dims(fp_scale_values(scales, p, global_scale, s), -1, s);
  return ungrouped(multiply(values, step, s), s);
}

}  // namespace

std::vector<array> quantize(const array& w, std::optional<int> group_size,
                            std::optional<int> bits, const std::string& mode,
                            const std::optional<array>& global_scale, StreamOrDevice s) {
  const char* op = "quantize";
  QuantParams p = quant_params(op, mode, group_size, bits);
  check_global_scale(op, "global_scale", p, global_scale);
  check_matrix(op, w);
  check_floating(op, "w", w);
  const int64_t K = w.shape(-1);
  if (K % p.group_size != 0) {
    throw_invalid(op, "the last dimension of w (" + std::to_string(K) +
                          ") must be divisible by group_size " + std::to_string(p.group_size));
  }
  if (p.mode != QuantMode::affine) return fp_quantize(w, p, global_scale, s);
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
  QuantParams p = quant_params(op, mode, group_size, bits);
  check_global_scale(op, "global_scale", p, global_scale);
  const int64_t values = check_packed(op, w, scales, biases, p);
  // Without biases (the floating-point modes) the default is bfloat16; a
  // global scale (float32) promotes it.
  Dtype out_dtype = dtype                            ? *dtype
                    : p.mode == QuantMode::affine ? promote_types(scales.dtype(), biases->dtype())
                                                   : bfloat16;
  if (!is_floating_point(out_dtype)) {
    throw_invalid(op, "dtype must be floating point, got " + dtype_name(out_dtype));
  }
  if (p.mode != QuantMode::affine) {
    if (global_scale) out_dtype = promote_types(out_dtype, float32);
    return astype(fp_dequantize(w, scales, p, global_scale, s), out_dtype, s);
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
  QuantParams p = quant_params(op, mode, group_size, bits);
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
  if (p.mode != QuantMode::affine) {
    // The product in x's dtype with the dequantized matrix.
    array wd = astype(fp_dequantize(w, scales, p, std::nullopt, s), x.dtype(), s);
    return matmul(x, transpose ? swapaxes(wd, -1, -2, s) : wd, s);
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

// ---- qqmm ---------------------------------------------------------------------

namespace {

// a quantized and dequantized in its own dtype (Note [Floating-point
// quantization]); the gradient passes straight through to a.
array fake_quantize(const array& a, QuantParams p, const std::optional<array>& global_scale,
                    StreamOrDevice s) {
  auto q = fp_quantize(a, p, global_scale, s);
  array dq = astype(fp_dequantize(q[0], q[1], p, global_scale, s), a.dtype(), s);
  return add(stop_gradient(dq, s), subtract(a, stop_gradient(a, s), s), s);
}

void check_qq_input(const char* op, const char* what, const array& a, QuantParams p) {
  const Dtype t = a.dtype();
  if (t != float32 && t != float16 && t != bfloat16) {
    throw_invalid(op, std::string(what) + " must be float32, float16 or bfloat16, got " +
                          dtype_name(t));
  }
  if (a.ndim() < 1 || a.shape(-1) % p.group_size != 0) {
    throw_invalid(op, std::string(what) + " of shape " + shape_str(a.shape()) +
                          " must have a last dimension divisible by group_size " +
                          std::to_string(p.group_size));
  }
}

// The operands of x @ w.T with x, and w unless it is packed, rounded through
// the mode's format: {x_hat, w_hat.T}.
std::pair<array, array> qq_operands(const char* op, const array& x, const array& w,
                                    const std::optional<array>& scales,
                                    std::optional<int> group_size, std::optional<int> bits,
                                    const std::string& mode,
                                    const std::optional<array>& global_scale_x,
                                    const std::optional<array>& global_scale_w,
                                    StreamOrDevice s) {
  QuantParams p = quant_params(op, mode, group_size, bits);
  if (p.mode == QuantMode::affine) {
    throw_invalid(op, "mode 'affine' is not supported (expected 'mxfp4', 'mxfp8' or 'nvfp4')");
  }
  check_global_scale(op, "global_scale_x", p, global_scale_x);
  check_global_scale(op, "global_scale_w", p, global_scale_w);
  check_qq_input(op, "x", x, p);
  array x_hat = fake_quantize(x, p, global_scale_x, s);
  std::optional<array> w_hat;
  int64_t K;
  if (w.dtype() == uint32) {
    if (!scales) throw_invalid(op, "a quantized (uint32) w needs its scales");
    K = check_packed(op, w, *scales, std::nullopt, p);
    w_hat = astype(fp_dequantize(w, *scales, p, global_scale_w, s), x.dtype(), s);
  } else {
    if (scales) throw_invalid(op, "scales are only used with a quantized (uint32) w");
    check_qq_input(op, "w", w, p);
    check_matrix(op, w);
    K = w.shape(-1);
    w_hat = fake_quantize(w, p, global_scale_w, s);
  }
  if (x.shape(-1) != K) {
    throw_invalid(op, "the last dimension of x " + shape_str(x.shape()) +
                          " must match the inner dimension " + std::to_string(K) + " of w " +
                          shape_str(w.shape()));
  }
  return {x_hat, swapaxes(*w_hat, -1, -2, s)};
}

}  // namespace

array qqmm(const array& x, const array& w, const std::optional<array>& scales,
           std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
           const std::optional<array>& global_scale_x, const std::optional<array>& global_scale_w,
           StreamOrDevice s) {
  auto [a, b] = qq_operands("qqmm", x, w, scales, group_size, bits, mode, global_scale_x,
                            global_scale_w, s);
  return matmul(a, b, s);
}

array gather_qqmm(const array& x, const array& w, const std::optional<array>& scales,
                  std::optional<array> lhs_indices, std::optional<array> rhs_indices,
                  std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                  const std::optional<array>& global_scale_x,
                  const std::optional<array>& global_scale_w, bool sorted_indices,
                  StreamOrDevice s) {
  auto [a, b] = qq_operands("gather_qqmm", x, w, scales, group_size, bits, mode, global_scale_x,
                            global_scale_w, s);
  return gather_mm(a, b, std::move(lhs_indices), std::move(rhs_indices), sorted_indices, s);
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
