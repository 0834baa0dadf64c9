// fft namespace: validate n / s and axes, crop or pad, cast, create the FFT node;
// stft and istft composed of pad, take, the transforms and scatter_add_axis.
#include "tessera/ops/fft.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tessera/ops/binary.h"
#include "tessera/ops/creation.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/primitives/fft.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/unary.h"
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

// ---- short-time transforms ---------------------------------------------------

namespace {

void check_positive(const char* op, const char* what, int v) {
  if (v <= 0) throw_invalid(op, std::string(what) + " must be positive, got " + std::to_string(v));
}

// The analysis / synthesis window: `window` (default ones(win_length), its
// length n_fft by default), float32 or complex64, zero-padded on both sides to
// n_fft with the extra sample on the right.
array padded_window(const std::optional<array>& window, const std::optional<int>& win_length,
                    int n_fft, const char* op, StreamOrDevice s) {
  if (!window && win_length && *win_length < 0) {
    throw_invalid(op, "win_length must be non-negative, got " + std::to_string(*win_length));
  }
  array w = window ? *window : ones({win_length.value_or(n_fft)}, float32, s);
  if (w.ndim() != 1) {
    throw_invalid(op, "the window must be one-dimensional, got shape " + shape_str(w.shape()));
  }
  const int len = w.shape(0);
  if (len > n_fft) {
    throw_invalid(op, "the window length " + std::to_string(len) + " must not exceed n_fft " +
                          std::to_string(n_fft));
  }
  w = astype(w, is_complex(w.dtype()) ? complex64 : float32, s);
  if (len == n_fft) return w;
  const int left = (n_fft - len) / 2;
  return pad(w, {0}, {left}, {n_fft - len - left}, array(0, w.dtype()), "constant", s);
}

// The (n_frames, n_fft) sample indices f * hop + k of each frame's samples.
array frame_indices(int n_frames, int n_fft, int hop, StreamOrDevice s) {
  return add(expand_dims(arange(0, n_frames * hop, hop, s), 1, s),
             expand_dims(arange(0, n_fft, s), 0, s), s);
}

}  // namespace

array stft(const array& x, int n_fft, const std::optional<int>& hop_length,
           const std::optional<int>& win_length, const std::optional<array>& window,
           bool center, const std::string& pad_mode, FFTNorm norm,
           const std::optional<bool>& onesided, StreamOrDevice s) {
  const char* op = "stft";
  if (x.ndim() < 1) {
    throw_invalid(op, "the input must have at least one dimension, got a 0-d array");
  }
  check_positive(op, "n_fft", n_fft);
  const int hop = hop_length.value_or(n_fft / 4);
  check_positive(op, "hop_length", hop);
  array w = padded_window(window, win_length, n_fft, op, s);
  if (x.shape(-1) == 0) {
    throw_invalid(op, "the input's last axis is empty (shape " + shape_str(x.shape()) + ")");
  }
  const bool complex_input = is_complex(x.dtype());
  array signal = astype(x, complex_input ? complex64 : float32, s);
  if (center) {
    if (pad_mode != "reflect" && pad_mode != "constant" && pad_mode != "edge" &&
        pad_mode != "symmetric") {
      throw_invalid(op, "pad_mode must be 'reflect', 'constant', 'edge' or 'symmetric', got '" +
                            pad_mode + "'");
    }
    const int p = n_fft / 2;
    signal = pad(signal, {-1}, {p}, {p}, array(0, signal.dtype()), pad_mode, s);
  }
  const int len = signal.shape(-1);
  if (len < n_fft) {
    throw_invalid(op, "the input of length " + std::to_string(x.shape(-1)) +
                          (center ? " (" + std::to_string(len) + " once centred)" : "") +
                          " is shorter than n_fft " + std::to_string(n_fft));
  }
  const int n_frames = 1 + (len - n_fft) / hop;
  array frames = multiply(take(signal, frame_indices(n_frames, n_fft, hop, s), -1, s), w, s);
  array spectrum = onesided.value_or(!complex_input) ? rfft(frames, n_fft, -1, norm, s)
                                                     : fft(frames, n_fft, -1, norm, s);
  return swapaxes(spectrum, -1, -2, s);
}

array istft(const array& stft_matrix, const std::optional<int>& n_fft_in,
            const std::optional<int>& hop_length, const std::optional<int>& win_length,
            const std::optional<array>& window, bool center, FFTNorm norm,
            const std::optional<bool>& onesided_in, const std::optional<int>& length,
            StreamOrDevice s) {
  const char* op = "istft";
  if (stft_matrix.ndim() < 2) {
    throw_invalid(op, "the input must have at least two dimensions (..., n_freq, n_frames), "
                      "got shape " + shape_str(stft_matrix.shape()));
  }
  const bool onesided = onesided_in.value_or(true);
  const int n_freq = stft_matrix.shape(-2), n_frames = stft_matrix.shape(-1);
  const int n_fft = n_fft_in.value_or(onesided ? 2 * (n_freq - 1) : n_freq);
  check_positive(op, "n_fft", n_fft);
  const int hop = hop_length.value_or(n_fft / 4);
  check_positive(op, "hop_length", hop);
  array w = padded_window(window, win_length, n_fft, op, s);
  if (n_frames == 0) {
    throw_invalid(op, "the input has no frames (shape " + shape_str(stft_matrix.shape()) + ")");
  }

  array spectrum = swapaxes(stft_matrix, -1, -2, s);
  array frames = onesided ? irfft(spectrum, n_fft, -1, norm, s)
                          : real(fft::ifft(spectrum, n_fft, -1, norm, s), s);
  frames = multiply(frames, w, s);

  // Overlap-add the frames and the squared window at the same sample indices.
  const int full = (n_frames - 1) * hop + n_fft;
  Shape batch(frames.shape().begin(), frames.shape().end() - 2);
  Shape flat_shape = batch, out_shape = batch, index_shape(batch.size(), 1);
  flat_shape.push_back(n_frames * n_fft);
  out_shape.push_back(full);
  index_shape.push_back(n_frames * n_fft);
  array indices = reshape(frame_indices(n_frames, n_fft, hop, s), {n_frames * n_fft}, s);
  array y = scatter_add_axis(zeros(out_shape, frames.dtype(), s), reshape(indices, index_shape, s),
                             reshape(frames, flat_shape, s), -1, s);
  array w2 = broadcast_to(square(w, s), {n_frames, n_fft}, s);
  array envelope = scatter_add_axis(zeros({full}, w.dtype(), s), indices,
                                    reshape(w2, {n_frames * n_fft}, s), 0, s);
  y = divide(y, maximum(envelope, array(1e-8f, w.dtype()), s), s);

  const int start = center ? n_fft / 2 : 0;
  const int stop = length ? start + std::max(*length, 0) : full - start;
  Shape lo(y.ndim(), 0), hi = y.shape();
  lo.back() = start;
  hi.back() = std::min(stop, full);
  y = slice(y, lo, hi, s);
  if (stop > full) y = pad(y, {-1}, {0}, {stop - full}, array(0, y.dtype()), "constant", s);
  return y;
}

}  // namespace tessera::fft

namespace tessera {

std::vector<Shape> FFT::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  if (real_) shape[axes_.back()] = inverse_ ? real_n_ : real_n_ / 2 + 1;
  return {shape};
}

}  // namespace tessera
