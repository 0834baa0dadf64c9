// fft namespace: validate n / s and axes, crop or pad, cast, create the FFT node.
#include "tessera/ops/fft.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/fft.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera::fft {

namespace {

enum class Kind { c2c, r2c, c2r };

double norm_scale(FFTNorm norm, bool inverse, double n) {
  switch (norm) {
    case FFTNorm::Backward: return inverse ? 1.0 / n : 1.0;
    case FFTNorm::Forward: return inverse ? 1.0 : 1.0 / n;
    case FFTNorm::Ortho: return 1.0 / std::sqrt(n);
  }
  return 1.0;
}

// The transform of `a` over `axes` with output lengths `n` (for c2r, n is the
// real output's; for the others, the input's after cropping / padding).
array fft_impl(const array& a, Shape n, std::vector<int> axes, Kind kind, bool inverse,
               FFTNorm norm, const char* op, StreamOrDevice s) {
  const int nd = static_cast<int>(a.ndim());
  if (nd < 1) {
    throw_invalid(op, "the input must have at least one dimension, got a 0-d array");
  }
  if (n.size() != axes.size()) {
    throw_invalid(op, "the lengths " + ints_str(n) + " and the axes " + ints_str(axes) +
                          " must have the same number of entries");
  }
  for (auto& ax : axes) {
    int norm_ax = ax < 0 ? ax + nd : ax;
    if (norm_ax < 0 || norm_ax >= nd) {
      throw_out_of_range(op, "axis " + std::to_string(ax) + " is out of bounds for an array with " +
                            std::to_string(nd) + " dimensions");
    }
    ax = norm_ax;
  }
  {
    auto sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      throw_invalid(op, "the axes " + ints_str(axes) + " repeat an axis");
    }
  }
  for (int len : n) {
    if (len <= 0) {
      throw_invalid(op, "invalid transform lengths " + ints_str(n) + ": each must be positive");
    }
  }
  Dtype in_dtype = kind == Kind::r2c ? float32 : complex64;
  array x = astype(a, in_dtype, s);
  if (axes.empty()) return kind == Kind::c2r ? astype(x, float32, s) : x;

  // Crop, then zero-pad, the input to the lengths the transform reads.
  Shape in_len = n;
  if (kind == Kind::c2r) in_len.back() = n.back() / 2 + 1;
  Shape stop = x.shape();
  bool crop = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (x.shape(axes[i]) > in_len[i]) {
      stop[axes[i]] = in_len[i];
      crop = true;
    }
  }
  if (crop) x = slice(x, Shape(nd, 0), stop, s);
  std::vector<int> pad_axes;
  Shape low, high;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (x.shape(axes[i]) < in_len[i]) {
      pad_axes.push_back(axes[i]);
      low.push_back(0);
      high.push_back(in_len[i] - x.shape(axes[i]));
    }
  }
  if (!pad_axes.empty()) x = pad(x, pad_axes, low, high, array(0, in_dtype), "constant", s);

  double total = 1;
  for (int len : n) total *= len;
  Shape out_shape = x.shape();
  Dtype out_dtype = complex64;
  if (kind == Kind::r2c) out_shape[axes.back()] = n.back() / 2 + 1;
  if (kind == Kind::c2r) {
    out_shape[axes.back()] = n.back();
    out_dtype = float32;
  }
  const int real_n = kind == Kind::c2c ? 0 : n.back();
  return array(std::move(out_shape), out_dtype,
               std::make_shared<FFT>(to_stream(s), std::move(axes), inverse, kind != Kind::c2c,
                                     real_n, norm_scale(norm, inverse, total)),
               {x});
}

// The default lengths: the input's along the axes (for c2r, 2 (m - 1) on the last).
Shape default_lengths(const array& a, const std::vector<int>& axes, Kind kind, const char* op) {
  const int nd = static_cast<int>(a.ndim());
  Shape n;
  for (int ax : axes) n.push_back(a.shape(normalize_axis(ax, nd, op)));
  if (kind == Kind::c2r && !n.empty()) n.back() = 2 * (n.back() - 1);
  return n;
}

// axes = None: the last len(s) axes, or all of them without s.
std::vector<int> default_axes(const array& a, size_t count) {
  std::vector<int> axes;
  for (int i = static_cast<int>(a.ndim() - count); i < static_cast<int>(a.ndim()); ++i) {
    axes.push_back(i);
  }
  return axes;
}

}  // namespace

// The overloads over several axes (fftn, fft2): with lengths, and without
// (the input's, or for irfft those of default_lengths).
#define TESSERA_FFT_AXES(NAME, KIND, INVERSE)                                                 \
  array NAME(const array& a, const Shape& n, const std::vector<int>& axes, FFTNorm norm,      \
             StreamOrDevice s) {                                                              \
    return fft_impl(a, n, axes, KIND, INVERSE, norm, #NAME, s);                               \
  }                                                                                           \
  array NAME(const array& a, const std::vector<int>& axes, FFTNorm norm, StreamOrDevice s) {  \
    return fft_impl(a, default_lengths(a, axes, KIND, #NAME), axes, KIND, INVERSE, norm,      \
                    #NAME, s);                                                                \
  }

#define TESSERA_FFT_FAMILY(NAME, NAME2, NAMEN, KIND, INVERSE)                                \
  TESSERA_FFT_AXES(NAMEN, KIND, INVERSE)                                                     \
  TESSERA_FFT_AXES(NAME2, KIND, INVERSE)                                                     \
  array NAMEN(const array& a, FFTNorm norm, StreamOrDevice s) {                              \
    return NAMEN(a, default_axes(a, a.ndim()), norm, s);                                     \
  }                                                                                          \
  array NAME(const array& a, int n, int axis, FFTNorm norm, StreamOrDevice s) {              \
    return fft_impl(a, {n}, {axis}, KIND, INVERSE, norm, #NAME, s);                          \
  }                                                                                          \
  array NAME(const array& a, int axis, FFTNorm norm, StreamOrDevice s) {                     \
    return fft_impl(a, default_lengths(a, {axis}, KIND, #NAME), {axis}, KIND, INVERSE, norm, \
                    #NAME, s);                                                               \
  }

TESSERA_FFT_FAMILY(fft, fft2, fftn, Kind::c2c, false)
TESSERA_FFT_FAMILY(ifft, ifft2, ifftn, Kind::c2c, true)
TESSERA_FFT_FAMILY(rfft, rfft2, rfftn, Kind::r2c, false)
TESSERA_FFT_FAMILY(irfft, irfft2, irfftn, Kind::c2r, true)
#undef TESSERA_FFT_FAMILY
#undef TESSERA_FFT_AXES

// ---- frequencies and shifts --------------------------------------------------

array fftfreq(int n, double d, StreamOrDevice s) {
  if (n <= 0) throw_invalid("fftfreq", "n must be positive, got " + std::to_string(n));
  if (d == 0) throw_invalid("fftfreq", "the sample spacing d must be non-zero");
  array i = arange(0, n, s);
  array k = where(less(i, array((n + 1) / 2), s), i, subtract(i, array(n), s), s);
  return astype(divide(astype(k, float64, s), array(n * d, float64), s), float32, s);
}

array rfftfreq(int n, double d, StreamOrDevice s) {
  if (n <= 0) throw_invalid("rfftfreq", "n must be positive, got " + std::to_string(n));
  if (d == 0) throw_invalid("rfftfreq", "the sample spacing d must be non-zero");
  array k = arange(0, n / 2 + 1, s);
  return astype(divide(astype(k, float64, s), array(n * d, float64), s), float32, s);
}

namespace {

array shift_impl(const array& a, const std::vector<int>& axes, bool inverse, const char* op,
                 StreamOrDevice s) {
  if (axes.empty()) return a;
  auto ax = normalize_axes(axes, static_cast<int>(a.ndim()), op);
  Shape shifts;
  for (int d : ax) {
    int len = a.shape(d);
    shifts.push_back(inverse ? -(len / 2) : len / 2);
  }
  return roll(a, shifts, ax, s);
}

}  // namespace

array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift_impl(a, axes, false, "fftshift", s);
}
array fftshift(const array& a, StreamOrDevice s) {
  return shift_impl(a, all_axes(static_cast<int>(a.ndim())), false, "fftshift", s);
}
array ifftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s) {
  return shift_impl(a, axes, true, "ifftshift", s);
}
array ifftshift(const array& a, StreamOrDevice s) {
  return shift_impl(a, all_axes(static_cast<int>(a.ndim())), true, "ifftshift", s);
}

}  // namespace tessera::fft

namespace tessera {

std::vector<Shape> FFT::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  if (real_) shape[axes_.back()] = inverse_ ? real_n_ : real_n_ / 2 + 1;
  return {shape};
}

}  // namespace tessera
