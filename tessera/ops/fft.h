// Discrete Fourier transforms (namespace fft), with NumPy's `n` / `s`, `axes`
// and normalisation semantics.
//
//   auto X = fft::fft(x);                      // complex64, last axis
//   auto R = fft::rfft2(img, {-2, -1});        // real input, last axis halved
//   auto y = fft::irfftn(R, {64, 64}, {0, 1}); // float32 of shape (64, 64)
//
// Complex transforms cast their input to complex64; rfft* cast it to float32
// (a complex input loses its imaginary part) and give complex64; irfft* give
// float32. `n` / `s` crop or zero-pad the input along the transformed axes
// (for irfft*, the last axis to n // 2 + 1 elements). Norm: Backward scales
// the inverse by 1/N, Forward the forward transform, Ortho both by 1/sqrt(N),
// N being the product of the transformed lengths.
//
//   auto S = fft::stft(x, 512, 128);             // (..., 257, n_frames) complex64
//   auto y = fft::istft(S, 512, 128);            // x again, float32
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera::fft {

enum class FFTNorm { Backward, Ortho, Forward };

array fftn(const array& a, const Shape& n, const std::vector<int>& axes,
           FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array fftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
           StreamOrDevice s = {});
array fftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifftn(const array& a, const Shape& n, const std::vector<int>& axes,
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
            StreamOrDevice s = {});
array ifftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfftn(const array& a, const Shape& n, const std::vector<int>& axes,
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
            StreamOrDevice s = {});
array rfftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
// n: the lengths of the real output (default: 2 (m - 1) on the last axis).
array irfftn(const array& a, const Shape& n, const std::vector<int>& axes,
             FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array irfftn(const array& a, const std::vector<int>& axes, FFTNorm norm = FFTNorm::Backward,
             StreamOrDevice s = {});
array irfftn(const array& a, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

array fft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
          StreamOrDevice s = {});
array fft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
           StreamOrDevice s = {});
array ifft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
           StreamOrDevice s = {});
array rfft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
           StreamOrDevice s = {});
array rfft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
           StreamOrDevice s = {});
array irfft(const array& a, int n, int axis, FFTNorm norm = FFTNorm::Backward,
            StreamOrDevice s = {});
array irfft(const array& a, int axis = -1, FFTNorm norm = FFTNorm::Backward,
            StreamOrDevice s = {});

array fft2(const array& a, const Shape& n, const std::vector<int>& axes,
           FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array fft2(const array& a, const std::vector<int>& axes = {-2, -1},
           FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifft2(const array& a, const Shape& n, const std::vector<int>& axes,
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array ifft2(const array& a, const std::vector<int>& axes = {-2, -1},
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfft2(const array& a, const Shape& n, const std::vector<int>& axes,
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array rfft2(const array& a, const std::vector<int>& axes = {-2, -1},
            FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array irfft2(const array& a, const Shape& n, const std::vector<int>& axes,
             FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});
array irfft2(const array& a, const std::vector<int>& axes = {-2, -1},
             FFTNorm norm = FFTNorm::Backward, StreamOrDevice s = {});

// Sample frequencies [0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (n d), float32.
array fftfreq(int n, double d = 1.0, StreamOrDevice s = {});
// [0, 1, ..., n / 2] / (n d), float32.
array rfftfreq(int n, double d = 1.0, StreamOrDevice s = {});
// Rolls the zero frequency to the centre of the axes (all axes by default).
array fftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array fftshift(const array& a, StreamOrDevice s = {});
// The inverse of fftshift (they differ for odd lengths).
array ifftshift(const array& a, const std::vector<int>& axes, StreamOrDevice s = {});
array ifftshift(const array& a, StreamOrDevice s = {});

// Short-time Fourier transform of the last axis: frames of n_fft samples every
// hop_length (default n_fft / 4), times the window (default ones(win_length),
// win_length defaulting to n_fft; a window overrides win_length) zero-padded
// on both sides to n_fft, then rfft (onesided, the default for a real x) or
// fft. center pads n_fft / 2 samples at each end with pad's mode pad_mode
// ("reflect", "constant", "edge" or "symmetric"). Gives complex64 of shape
// (..., n_freq, n_frames).
array stft(const array& x, int n_fft = 2048, const std::optional<int>& hop_length = std::nullopt,
           const std::optional<int>& win_length = std::nullopt,
           const std::optional<array>& window = std::nullopt, bool center = true,
           const std::string& pad_mode = "reflect", FFTNorm norm = FFTNorm::Backward,
           const std::optional<bool>& onesided = std::nullopt, StreamOrDevice s = {});
// The inverse of stft: irfft (onesided, the default) or the real part of ifft
// of each frame at n_fft (default 2 (n_freq - 1), or n_freq when not onesided),
// times the window, overlap-added and divided by the overlap-added w * w
// (at least 1e-8, by the ordering of maximum for a complex window). center
// drops n_fft / 2 samples at each end; length crops or zero-pads the result.
// float32 (complex64 for a complex window) of shape (..., n_samples).
array istft(const array& stft_matrix, const std::optional<int>& n_fft = std::nullopt,
            const std::optional<int>& hop_length = std::nullopt,
            const std::optional<int>& win_length = std::nullopt,
            const std::optional<array>& window = std::nullopt, bool center = true,
            FFTNorm norm = FFTNorm::Backward, const std::optional<bool>& onesided = std::nullopt,
            const std::optional<int>& length = std::nullopt, StreamOrDevice s = {});

}  // namespace tessera::fft
