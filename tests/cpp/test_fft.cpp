// The fft namespace against a direct O(n^2) DFT computed here in float64:
// every transform, axes, crop / pad lengths, norms, input dtypes and layouts,
// on every device; round trips; frequencies and shifts against their formulas;
// derivatives against finite differences and vmap against a loop; errors.
// stft against frames, windows and DFTs built here, istft against an
// overlap-add of inverse DFTs and as the inverse of stft.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"

using namespace tessera;
using fft::FFTNorm;
using cd = std::complex<double>;

namespace {

constexpr double kPi = std::numbers::pi;

std::vector<cd> random_complex(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<cd> v(n);
  for (auto& x : v) x = {static_cast<float>(dist(gen)), static_cast<float>(dist(gen))};
  return v;
}

array complex_array(const std::vector<cd>& v, const Shape& shape) {
  std::vector<complex64_t> c(v.size());
  for (size_t i = 0; i < v.size(); ++i) c[i] = {float(v[i].real()), float(v[i].imag())};
  return array(c.begin(), shape, complex64);
}

std::vector<cd> real_to_complex(const std::vector<double>& v) {
  return std::vector<cd>(v.begin(), v.end());
}

Strides strides_of(const Shape& shape) {
  Strides st(shape.size(), 1);
  for (int d = int(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

// The unnormalised DFT of x (row-major over shape) along one axis.
std::vector<cd> dft_axis(const std::vector<cd>& x, const Shape& shape, int axis, bool inverse) {
  const Strides st = strides_of(shape);
  const int64_t n = shape[axis], stride = st[axis];
  std::vector<cd> y(x.size());
  const double sign = inverse ? 1.0 : -1.0;
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t k = (int64_t(i) / stride) % n;
    int64_t base = int64_t(i) - k * stride;
    cd acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      acc += x[base + j * stride] * std::polar(1.0, sign * 2 * kPi * double(j * k % n) / n);
    }
    y[i] = acc;
  }
  return y;
}

// x cropped or zero-padded to `len` along `axis`.
std::vector<cd> resize_axis(const std::vector<cd>& x, Shape& shape, int axis, int len) {
  Shape out_shape = shape;
  out_shape[axis] = len;
  const Strides si = strides_of(shape), so = strides_of(out_shape);
  std::vector<cd> y(shape_size(out_shape));
  for (size_t i = 0; i < y.size(); ++i) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (size_t d = 0; d < out_shape.size(); ++d) {
      int64_t c = rem / so[d];
      rem %= so[d];
      if (c >= shape[d]) inside = false;
      src += c * si[d];
    }
    y[i] = inside ? x[src] : cd(0);
  }
  shape = out_shape;
  return y;
}

double scale_of(FFTNorm norm, bool inverse, double n) {
  if (norm == FFTNorm::Ortho) return 1 / std::sqrt(n);
  if (norm == FFTNorm::Backward) return inverse ? 1 / n : 1;
  return inverse ? 1 : 1 / n;
}

// The reference of fftn / ifftn: resize, transform each axis, scale.
std::vector<cd> ref_fftn(std::vector<cd> x, Shape shape, const std::vector<int>& axes,
                         const Shape& n, bool inverse, FFTNorm norm) {
  double total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    x = resize_axis(x, shape, axes[i], n[i]);
    total *= n[i];
  }
  for (int ax : axes) x = dft_axis(x, shape, ax, inverse);
  for (auto& v : x) v *= scale_of(norm, inverse, total);
  return x;
}

// The reference of irfftn: complex inverse over all axes but the last, then the
// Hermitian extension of the last (imaginary parts of bins 0 and n/2 ignored).
std::vector<double> ref_irfftn(std::vector<cd> x, Shape shape, const std::vector<int>& axes,
                               const Shape& n, FFTNorm norm) {
  double total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    int len = i + 1 == axes.size() ? n[i] / 2 + 1 : n[i];
    x = resize_axis(x, shape, axes[i], len);
    total *= n[i];
  }
  for (size_t i = 0; i + 1 < axes.size(); ++i) x = dft_axis(x, shape, axes[i], true);
  const int last = axes.back(), N = n.back(), m = N / 2 + 1;
  Shape full = shape;
  full[last] = N;
  const Strides sh = strides_of(shape), sf = strides_of(full);
  std::vector<cd> ext(shape_size(full));
  for (size_t i = 0; i < ext.size(); ++i) {
    int64_t k = (int64_t(i) / sf[last]) % N;
    int64_t base = int64_t(i) - k * sf[last];
    int64_t outer = base / sf[last] / N, inner = base % sf[last];
    auto at = [&](int64_t kk) { return x[outer * sh[last] * m + kk * sh[last] + inner]; };
    cd v = k < m ? at(k) : std::conj(at(N - k));
    if (k == 0 || (N % 2 == 0 && k == N / 2)) v = v.real();
    ext[i] = v;
  }
  ext = dft_axis(ext, full, last, true);
  std::vector<double> y(ext.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = ext[i].real() * scale_of(norm, true, total);
  return y;
}

// got (complex64) == want within tol relative to want's largest magnitude.
void expect_complex(const array& got, const std::vector<cd>& want, const std::string& ctx,
                    double tol = 2e-6) {
  EXPECT_EQ(got.dtype(), complex64) << ctx;
  auto g = harness::to_complex(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  double scale = 1e-30;
  for (auto& w : want) scale = std::max(scale, std::abs(w));
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 4; ++i) {
    if (std::abs(g[i] - want[i]) > tol * scale * 8) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

void expect_real(const array& got, const std::vector<double>& want, const std::string& ctx,
                 double tol = 2e-6) {
  EXPECT_EQ(got.dtype(), float32) << ctx;
  auto g = harness::to_doubles(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  double scale = 1e-30;
  for (auto& w : want) scale = std::max(scale, std::abs(w));
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 4; ++i) {
    if (std::abs(g[i] - want[i]) > tol * scale * 8) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

std::vector<FFTNorm> all_norms() { return {FFTNorm::Backward, FFTNorm::Ortho, FFTNorm::Forward}; }
const char* norm_name(FFTNorm n) {
  return n == FFTNorm::Backward ? "backward" : n == FFTNorm::Ortho ? "ortho" : "forward";
}

Shape lengths(const Shape& shape, const std::vector<int>& axes) {
  Shape n;
  for (int ax : axes) n.push_back(shape[ax]);
  return n;
}

}  // namespace

TEST(FFT, test_fft_and_ifft_match_the_dft_on_every_axis_norm_and_device) {
  const std::vector<Shape> shapes = {{1}, {8}, {7}, {3, 5}, {2, 3, 4}, {16, 6}};
  uint64_t seed = 1;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto& shape : shapes) {
      auto v = random_complex(shape_size(shape), seed++);
      array x = complex_array(v, shape);
      for (int ax = 0; ax < int(shape.size()); ++ax) {
        for (FFTNorm norm : all_norms()) {
          std::string c = shape_str(shape) + " axis " + std::to_string(ax) + " " + norm_name(norm);
          Shape n{shape[ax]};
          expect_complex(fft::fft(x, ax, norm), ref_fftn(v, shape, {ax}, n, false, norm),
                         "fft " + c);
          expect_complex(fft::ifft(x, ax - int(shape.size()), norm),
                         ref_fftn(v, shape, {ax}, n, true, norm), "ifft " + c);
        }
      }
    }
  }
}

TEST(FFT, test_fft_crops_and_pads_to_n) {
  auto v = random_complex(3 * 6, 11);
  Shape shape{3, 6};
  array x = complex_array(v, shape);
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int n : {1, 4, 6, 9, 16}) {
      array y = fft::fft(x, n, 1);
      EXPECT_EQ(y.shape(), (Shape{3, n}));
      expect_complex(y, ref_fftn(v, shape, {1}, {n}, false, FFTNorm::Backward),
                     "fft n=" + std::to_string(n));
      expect_complex(fft::ifft(x, n, 0, FFTNorm::Ortho),
                     ref_fftn(v, shape, {0}, {n}, true, FFTNorm::Ortho),
                     "ifft axis 0 n=" + std::to_string(n));
    }
  }
}

TEST(FFT, test_fftn_fft2_over_chosen_axes_with_s) {
  Shape shape{3, 4, 5};
  auto v = random_complex(shape_size(shape), 21);
  array x = complex_array(v, shape);
  struct Case {
    std::vector<int> axes;
    Shape n;
  };
  const std::vector<Case> cases = {
      {{0, 1, 2}, {3, 4, 5}}, {{2, 0}, {5, 3}}, {{1}, {4}}, {{0, 2}, {2, 8}}, {{-1, -2}, {6, 3}}};
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto& c : cases) {
      std::vector<int> axes = c.axes;
      for (auto& a : axes) a = a < 0 ? a + 3 : a;
      for (FFTNorm norm : all_norms()) {
        std::string ctxs = "axes " + ints_str(c.axes) + " s " + ints_str(c.n) + " " + norm_name(norm);
        expect_complex(fft::fftn(x, c.n, c.axes, norm), ref_fftn(v, shape, axes, c.n, false, norm),
                       "fftn " + ctxs, 4e-6);
        expect_complex(fft::ifftn(x, c.n, c.axes, norm), ref_fftn(v, shape, axes, c.n, true, norm),
                       "ifftn " + ctxs, 4e-6);
      }
    }
    // Defaults: all axes; the last two for fft2.
    expect_complex(fft::fftn(x), ref_fftn(v, shape, {0, 1, 2}, shape, false, FFTNorm::Backward),
                   "fftn all axes", 4e-6);
    expect_complex(fft::ifftn(x, {0, 2}),
                   ref_fftn(v, shape, {0, 2}, {3, 5}, true, FFTNorm::Backward), "ifftn axes", 4e-6);
    expect_complex(fft::fft2(x), ref_fftn(v, shape, {1, 2}, {4, 5}, false, FFTNorm::Backward),
                   "fft2", 4e-6);
    expect_complex(fft::ifft2(x, {2, 3}, {0, 1}, FFTNorm::Forward),
                   ref_fftn(v, shape, {0, 1}, {2, 3}, true, FFTNorm::Forward), "ifft2 s", 4e-6);
    expect_complex(fft::fft2(x, {1, 0}), ref_fftn(v, shape, {1, 0}, {4, 3}, false, FFTNorm::Backward),
                   "fft2 axes (1, 0)", 4e-6);
  }
}

TEST(FFT, test_rfft_and_irfft_match_the_dft) {
  const std::vector<Shape> shapes = {{8}, {9}, {2}, {3, 6}, {2, 5, 4}};
  uint64_t seed = 31;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto& shape : shapes) {
      const int nd = int(shape.size());
      auto rv = harness::random_values(shape_size(shape), float32, -1, 1, seed++);
      array xr = harness::from_doubles(rv, shape, float32);
      auto cv = random_complex(shape_size(shape), seed++);
      array xc = complex_array(cv, shape);
      for (FFTNorm norm : all_norms()) {
        std::string c = shape_str(shape) + " " + norm_name(norm);
        for (int n : {shape.back(), shape.back() + 3, std::max(1, shape.back() - 1)}) {
          auto full = ref_fftn(real_to_complex(rv), shape, {nd - 1}, {n}, false, norm);
          Shape fs = shape;
          fs.back() = n;
          auto half = resize_axis(full, fs, nd - 1, n / 2 + 1);
          array y = fft::rfft(xr, n, -1, norm);
          EXPECT_EQ(y.shape(), fs) << c;
          expect_complex(y, half, "rfft n=" + std::to_string(n) + " " + c);
          // irfft reads n / 2 + 1 bins of a complex input (cropped or padded).
          array z = fft::irfft(xc, n, nd - 1, norm);
          Shape zs = shape;
          zs.back() = n;
          EXPECT_EQ(z.shape(), zs);
          expect_real(z, ref_irfftn(cv, shape, {nd - 1}, {n}, norm),
                      "irfft n=" + std::to_string(n) + " " + c);
        }
        // Default n: 2 (m - 1).
        array z = fft::irfft(xc, -1, norm);
        EXPECT_EQ(z.shape().back(), 2 * (shape.back() - 1));
        expect_real(z, ref_irfftn(cv, shape, {nd - 1}, {2 * (shape.back() - 1)}, norm),
                    "irfft default n " + c);
      }
    }
  }
}

TEST(FFT, test_rfftn_and_irfftn_over_axes) {
  Shape shape{4, 3, 6};
  auto rv = harness::random_values(shape_size(shape), float32, -1, 1, 41);
  array xr = harness::from_doubles(rv, shape, float32);
  auto cv = random_complex(shape_size(shape), 42);
  array xc = complex_array(cv, shape);
  struct Case {
    std::vector<int> axes;
    Shape n;
  };
  const std::vector<Case> cases = {{{0, 1, 2}, {4, 3, 6}}, {{2, 0}, {5, 4}}, {{0, 1}, {3, 5}},
                                   {{1}, {4}}};
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto& c : cases) {
      for (FFTNorm norm : all_norms()) {
        std::string ctxs = "axes " + ints_str(c.axes) + " s " + ints_str(c.n) + " " + norm_name(norm);
        auto full = ref_fftn(real_to_complex(rv), shape, c.axes, c.n, false, norm);
        Shape fs = shape;
        for (size_t i = 0; i < c.axes.size(); ++i) fs[c.axes[i]] = c.n[i];
        auto half = resize_axis(full, fs, c.axes.back(), c.n.back() / 2 + 1);
        expect_complex(fft::rfftn(xr, c.n, c.axes, norm), half, "rfftn " + ctxs, 4e-6);
        expect_real(fft::irfftn(xc, c.n, c.axes, norm), ref_irfftn(cv, shape, c.axes, c.n, norm),
                    "irfftn " + ctxs, 4e-6);
      }
    }
    auto full = ref_fftn(real_to_complex(rv), shape, {1, 2}, {3, 6}, false, FFTNorm::Backward);
    Shape fs = shape;
    expect_complex(fft::rfft2(xr), resize_axis(full, fs, 2, 4), "rfft2", 4e-6);
    expect_real(fft::irfft2(xc), ref_irfftn(cv, shape, {1, 2}, {3, 10}, FFTNorm::Backward),
                "irfft2", 4e-6);
    expect_real(fft::irfft2(xc, {4, 4}, {0, 2}),
                ref_irfftn(cv, shape, {0, 2}, {4, 4}, FFTNorm::Backward), "irfft2 s", 4e-6);
    full = ref_fftn(real_to_complex(rv), shape, {0, 1, 2}, shape, false, FFTNorm::Backward);
    fs = shape;
    expect_complex(fft::rfftn(xr), resize_axis(full, fs, 2, 4), "rfftn all axes", 4e-6);
  }
}

TEST(FFT, test_irfft_of_rfft_is_the_identity) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Shape shape : std::vector<Shape>{{16}, {15}, {4, 10}, {3, 4, 7}}) {
      auto rv = harness::random_values(shape_size(shape), float32, -2, 2, 51);
      array x = harness::from_doubles(rv, shape, float32);
      const int n = shape.back();
      expect_real(fft::irfft(fft::rfft(x), n, -1), rv, "irfft(rfft) " + shape_str(shape));
      expect_real(fft::irfftn(fft::rfftn(x), shape, all_axes(int(shape.size()))), rv,
                  "irfftn(rfftn) " + shape_str(shape), 4e-6);
      auto cv = random_complex(shape_size(shape), 52);
      expect_complex(fft::ifftn(fft::fftn(complex_array(cv, shape))), cv,
                     "ifftn(fftn) " + shape_str(shape), 4e-6);
    }
  }
}

TEST(FFT, test_every_input_dtype_and_layout) {
  Shape shape{4, 6};
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : harness::all_types()) {
      for (auto layout : harness::all_layouts()) {
        auto v = harness::rows_repeated(harness::random_values(24, t, -3, 3, 61), shape);
        array x = harness::with_layout(v, shape, t, layout);
        std::string c = dtype_name(t) + " " + harness::layout_name(layout);
        auto cv = real_to_complex(v);
        expect_complex(fft::fft(x), ref_fftn(cv, shape, {1}, {6}, false, FFTNorm::Backward),
                       "fft " + c);
        expect_complex(fft::fft2(x, {0, 1}), ref_fftn(cv, shape, {0, 1}, {4, 6}, false, FFTNorm::Backward),
                       "fft2 " + c);
        Shape hs = shape;
        auto half = resize_axis(ref_fftn(cv, shape, {0}, {4}, false, FFTNorm::Backward), hs, 0, 3);
        expect_complex(fft::rfft(x, 0), half, "rfft axis 0 " + c);
        // A real spectrum through irfft: the bins of x's last axis.
        expect_real(fft::irfft(x, 10, -1), ref_irfftn(cv, shape, {1}, {10}, FFTNorm::Backward),
                    "irfft " + c);
      }
    }
    // A complex view: transposed, and a stepped slice.
    auto cv = random_complex(6 * 8, 62);
    array base = complex_array(cv, {6, 8});
    array t = transpose(base);
    std::vector<cd> tv(48);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 6; ++j) tv[i * 6 + j] = cv[j * 8 + i];
    expect_complex(fft::fft(t), ref_fftn(tv, {8, 6}, {1}, {6}, false, FFTNorm::Backward),
                   "transposed complex");
    array sl = slice(base, {1, 7}, {6, 0}, {2, -3});  // rows 1,3,5; columns 7,4,1
    std::vector<cd> sv;
    for (int i : {1, 3, 5})
      for (int j : {7, 4, 1}) sv.push_back(cv[i * 8 + j]);
    expect_complex(fft::fftn(sl), ref_fftn(sv, {3, 3}, {0, 1}, {3, 3}, false, FFTNorm::Backward),
                   "negative-step slice");
  }
}

TEST(FFT, test_empty_batches_and_large_transforms) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array e = zeros({0, 8}, complex64);
    EXPECT_EQ(fft::fft(e).shape(), (Shape{0, 8}));
    EXPECT_EQ(fft::rfft(zeros({0, 8})).shape(), (Shape{0, 5}));
    EXPECT_EQ(fft::irfft(zeros({3, 0, 5}, complex64)).shape(), (Shape{3, 0, 8}));
    eval(fft::fft(e));
    // Large enough for the threaded paths; a sine of frequency 37 and a cosine.
    const int n = 1 << 17;
    array i = arange(0.0, double(n), 1.0, float64);
    array x = add(sin(multiply(i, array(2 * kPi * 37 / n, float64))),
                  multiply(array(0.5, float64), cos(multiply(i, array(2 * kPi * 1000 / n, float64)))));
    array y = fft::rfft(x);
    auto g = harness::to_complex(y);
    ASSERT_EQ(g.size(), size_t(n / 2 + 1));
    for (int k = 0; k <= n / 2; ++k) {
      cd want = k == 37 ? cd(0, -n / 2.0) : k == 1000 ? cd(n / 4.0, 0) : cd(0);
      if (std::abs(g[k] - want) > 2e-2) {
        ADD_FAILURE() << "bin " << k << " is " << g[k] << ", expected " << want;
        break;
      }
    }
    array c = astype(x, complex64);
    array batch = broadcast_to(reshape(c, {1, n}), {4, n});
    expect_real(real(fft::ifft(fft::fft(batch))),
                harness::to_doubles(broadcast_to(reshape(x, {1, n}), {4, n})),
                "ifft(fft) of a broadcast batch", 1e-5);
  }
}

TEST(FFT, test_fftfreq_rfftfreq_and_shifts_follow_their_formulas) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int n : {1, 2, 7, 8}) {
      for (double d : {1.0, 0.25}) {
        std::vector<double> want(n), rwant(n / 2 + 1);
        for (int i = 0; i < n; ++i) want[i] = (i < (n + 1) / 2 ? i : i - n) / (n * d);
        for (int i = 0; i <= n / 2; ++i) rwant[i] = i / (n * d);
        array f = fft::fftfreq(n, d), r = fft::rfftfreq(n, d);
        EXPECT_EQ(f.dtype(), float32);
        harness::expect_values(f, want, "fftfreq " + std::to_string(n));
        harness::expect_values(r, rwant, "rfftfreq " + std::to_string(n));
      }
    }
    // fftshift moves element i of an axis of length n to (i + n / 2) mod n.
    for (Shape shape : std::vector<Shape>{{7}, {8}, {3, 4}, {5, 2, 3}}) {
      std::vector<double> v(shape_size(shape));
      for (size_t i = 0; i < v.size(); ++i) v[i] = double(i);
      array x = harness::from_doubles(v, shape, int32);
      const Strides st = strides_of(shape);
      for (bool inverse : {false, true}) {
        std::vector<double> want(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          int64_t dst = 0;
          for (size_t d = 0; d < shape.size(); ++d) {
            int64_t c = (int64_t(i) / st[d]) % shape[d], len = shape[d];
            int64_t sh = inverse ? len - len / 2 : len / 2;
            dst += ((c + sh) % len) * st[d];
          }
          want[dst] = v[i];
        }
        array y = inverse ? fft::ifftshift(x) : fft::fftshift(x);
        harness::expect_values(y, want, std::string(inverse ? "ifftshift " : "fftshift ") + shape_str(shape));
        EXPECT_EQ(y.dtype(), int32);
      }
      harness::expect_values(fft::ifftshift(fft::fftshift(x)), v, "ifftshift(fftshift)");
    }
    // Chosen axes: only axis 1 of a (3, 4).
    array x = reshape(arange(12), {3, 4});
    harness::expect_values(fft::fftshift(x, {1}), {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9},
                           "fftshift axis 1");
    harness::expect_values(fft::ifftshift(x, {0}), {4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3},
                           "ifftshift axis 0");
  }
}

TEST(FFT, test_errors_name_the_op_and_values) {
  array x = zeros({4, 6}, complex64);
  EXPECT_THROW(fft::fft(array(1.f)), std::out_of_range);
  EXPECT_THROW(fft::fft(x, 2), std::out_of_range);
  EXPECT_THROW(fft::fft(x, -3), std::out_of_range);
  EXPECT_THROW(fft::fft(x, 0, 1), std::invalid_argument);
  EXPECT_THROW(fft::fft(x, -2, 1), std::invalid_argument);
  EXPECT_THROW(fft::fftn(x, {4}, {0, 1}), std::invalid_argument);
  EXPECT_THROW(fft::fftn(x, {0, 0}), std::invalid_argument);
  EXPECT_THROW(fft::rfft2(x, {1, -1}), std::invalid_argument);
  EXPECT_THROW(fft::irfft(zeros({3, 1}, complex64)), std::invalid_argument);  // default n = 0
  EXPECT_THROW(fft::fftfreq(0), std::invalid_argument);
  EXPECT_THROW(fft::rfftfreq(-2), std::invalid_argument);
  EXPECT_THROW(fft::fftshift(x, {2}), std::out_of_range);
  try {
    fft::fft(x, 5);
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("[fft]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("5"), std::string::npos) << e.what();
  }
}

// ---- transforms ----------------------------------------------------------------

namespace {

using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;

// re + i im from two float64 primals.
array make_complex(const array& re, const array& im) {
  return add(astype(re, complex64), multiply(astype(im, complex64), array(complex64_t(0, 1))));
}

// The real and imaginary parts of a complex result, stacked (real outputs for
// the float64 checks).
array parts(const array& z) { return stack({real(z), imag(z)}); }

// FFTs are linear: finite differences with a step of 1 are exact up to
// rounding, so float32 results check to 1e-5.
void check_linear(const std::string& name, const VecFn& f, const std::vector<array>& primals) {
  grad_check::on_each_device([&] { check_derivatives(name, f, primals, 1e-5, 1.0); });
}

}  // namespace

TEST(FFT, test_derivatives_of_complex_transforms) {
  Shape shape{3, 8};
  auto re = random_f64(shape, 71), im = random_f64(shape, 72);
  for (FFTNorm norm : all_norms()) {
    std::string c = norm_name(norm);
    check_linear("fft " + c, [&](const std::vector<array>& x) {
      return std::vector<array>{parts(fft::fft(make_complex(x[0], x[1]), -1, norm))};
    }, {re, im});
    check_linear("ifft n=5 axis 0 " + c, [&](const std::vector<array>& x) {
      return std::vector<array>{parts(fft::ifft(make_complex(x[0], x[1]), 5, 0, norm))};
    }, {re, im});
    check_linear("fft2 " + c, [&](const std::vector<array>& x) {
      return std::vector<array>{parts(fft::fft2(make_complex(x[0], x[1]), {4, 6}, {0, 1}, norm))};
    }, {re, im});
  }
  check_linear("fft of a real input", [](const std::vector<array>& x) {
    return std::vector<array>{parts(fft::fft(x[0]))};
  }, {re});
}

TEST(FFT, test_derivatives_of_real_transforms) {
  for (Shape shape : std::vector<Shape>{{2, 8}, {2, 7}, {3, 4, 6}}) {
    const int nd = int(shape.size());
    auto x0 = random_f64(shape, 81), y0 = random_f64(shape, 82);
    for (FFTNorm norm : all_norms()) {
      std::string c = shape_str(shape) + " " + norm_name(norm);
      check_linear("rfft " + c, [&](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::rfft(x[0], -1, norm))};
      }, {x0});
      check_linear("rfftn " + c, [&](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::rfftn(x[0], all_axes(nd), norm))};
      }, {x0});
      for (int n : {shape.back(), 2 * (shape.back() - 1), 2 * shape.back() - 1}) {
        check_linear("irfft n=" + std::to_string(n) + " " + c, [&](const std::vector<array>& x) {
          return std::vector<array>{fft::irfft(make_complex(x[0], x[1]), n, -1, norm)};
        }, {x0, y0});
      }
      check_linear("irfftn " + c, [&](const std::vector<array>& x) {
        Shape s(shape.begin(), shape.end());
        return std::vector<array>{fft::irfftn(make_complex(x[0], x[1]), s, all_axes(nd), norm)};
      }, {x0, y0});
    }
  }
}

TEST(FFT, test_vmap_matches_a_loop) {
  // Lengths 2 and 4 with small integers: every twiddle is exact, so the batched
  // and looped transforms agree exactly on every device.
  auto ints = grad_check::integers_f64({3, 4, 2}, 91);
  auto im = grad_check::integers_f64({3, 4, 2}, 92);
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int in_axis : {0, 1, 2}) {
      array xb = moveaxis(ints, 0, in_axis), yb = moveaxis(im, 0, in_axis);
      std::string c = "batch axis " + std::to_string(in_axis);
      check_vmap("fft " + c, [](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::fft(make_complex(x[0], x[1]), 0))};
      }, {xb, yb}, {in_axis, in_axis});
      check_vmap("fftn ortho " + c, [](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::fftn(astype(x[0], complex64), FFTNorm::Ortho))};
      }, {xb}, {in_axis});
      check_vmap("rfft2 " + c, [](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::rfft2(x[0], {1, 0}))};
      }, {xb}, {in_axis});
      check_vmap("irfft " + c, [](const std::vector<array>& x) {
        return std::vector<array>{fft::irfft(make_complex(x[0], x[1]), 4, 0)};
      }, {xb, yb}, {in_axis, in_axis});
      check_vmap("ifft with an unbatched operand " + c, [](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::ifft(make_complex(x[0], x[1]), 1))};
      }, {xb, grad_check::integers_f64({4, 2}, 93)}, {in_axis, -1});
    }
  }
}

// ---- short-time transforms -------------------------------------------------------

namespace {

// x[i] of the centred signal: position j of x padded by p at each end.
cd padded_sample(const std::vector<cd>& x, int j, int p, const std::string& mode) {
  const int n = int(x.size());
  int i = j - p;
  if (i >= 0 && i < n) return x[i];
  if (mode == "constant") return 0;
  if (mode == "edge") return x[i < 0 ? 0 : n - 1];
  // Mirror about the end samples ("reflect") or the ends ("symmetric") until inside.
  const int shift = mode == "symmetric" ? 1 : 0;
  if (n == 1) return x[0];
  while (i < 0 || i >= n) {
    if (i < 0) i = -i - shift;
    if (i >= n) i = 2 * (n - 1) + shift - i;
  }
  return x[i];
}

struct StftCase {
  int n_fft;
  std::optional<int> hop, win_length;
  bool center;
  std::string mode;
  bool onesided;
  bool hann;  // a Hann window of win_length (else the default rectangle)
};

std::vector<double> hann(int m) {
  std::vector<double> w(m);
  for (int i = 0; i < m; ++i) w[i] = 0.5 - 0.5 * std::cos(2 * kPi * i / std::max(m - 1, 1));
  return w;
}

// The window zero-padded on both sides to n_fft (the extra zero on the right).
std::vector<double> centred(const std::vector<double>& w, int n_fft) {
  std::vector<double> out(n_fft, 0.0);
  const int left = (n_fft - int(w.size())) / 2;
  for (size_t i = 0; i < w.size(); ++i) out[left + i] = w[i];
  return out;
}

// (batch, n_freq, n_frames) of each row of x (batch, len): frame, window, DFT.
std::vector<cd> ref_stft(const std::vector<cd>& x, int batch, int len, int n_fft, int hop,
                         const std::vector<double>& w, bool center, const std::string& mode,
                         bool onesided, FFTNorm norm, int& n_frames) {
  const int p = center ? n_fft / 2 : 0, padded = len + 2 * p;
  n_frames = 1 + (padded - n_fft) / hop;
  const int n_freq = onesided ? n_fft / 2 + 1 : n_fft;
  std::vector<cd> out(size_t(batch) * n_freq * n_frames);
  for (int b = 0; b < batch; ++b) {
    std::vector<cd> row(x.begin() + size_t(b) * len, x.begin() + size_t(b + 1) * len);
    std::vector<cd> frames(size_t(n_frames) * n_fft);
    for (int f = 0; f < n_frames; ++f) {
      for (int k = 0; k < n_fft; ++k) {
        cd v = padded_sample(row, f * hop + k, p, mode) * w[k];
        frames[size_t(f) * n_fft + k] = onesided ? cd(v.real()) : v;
      }
    }
    auto spec = ref_fftn(frames, {n_frames, n_fft}, {1}, {n_fft}, false, norm);
    for (int q = 0; q < n_freq; ++q) {
      for (int f = 0; f < n_frames; ++f) {
        out[(size_t(b) * n_freq + q) * n_frames + f] = spec[size_t(f) * n_fft + q];
      }
    }
  }
  return out;
}

}  // namespace

TEST(FFT, test_stft_matches_framed_dfts_on_every_device) {
  const std::vector<StftCase> cases = {
      {8, {}, {}, true, "reflect", true, false},
      {8, 3, {}, false, "reflect", true, true},
      {9, 2, 5, true, "constant", true, true},
      {16, {}, 7, true, "edge", false, true},
      {16, 5, {}, true, "reflect", true, true},  // reflection wider than the signal
      {6, 1, 6, true, "symmetric", true, false},
  };
  uint64_t seed = 300;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (const auto& c : cases) {
      for (int len : {11, 37}) {
        if (!c.center && len < c.n_fft) continue;
        for (FFTNorm norm : all_norms()) {
          const int batch = 2, hop = c.hop.value_or(c.n_fft / 4);
          const int wl = c.win_length.value_or(c.n_fft);
          std::vector<double> w = c.hann ? hann(wl) : std::vector<double>(wl, 1.0);
          std::optional<array> window;
          if (c.hann) window = array(std::vector<float>(w.begin(), w.end()).begin(), {wl}, float32);
          auto re = random_complex(size_t(batch) * len, seed++);
          for (auto& v : re) v = v.real();
          array x = astype(complex_array(re, {batch, len}), float32);
          std::string ctx_s = "n_fft " + std::to_string(c.n_fft) + " hop " + std::to_string(hop) +
                              " len " + std::to_string(len) + " " + c.mode + " " + norm_name(norm);
          int n_frames = 0;
          auto want = ref_stft(re, batch, len, c.n_fft, hop, centred(w, c.n_fft), c.center,
                               c.mode, c.onesided, norm, n_frames);
          array got = fft::stft(x, c.n_fft, c.hop, c.win_length, window, c.center, c.mode, norm,
                                c.onesided);
          const int n_freq = c.onesided ? c.n_fft / 2 + 1 : c.n_fft;
          EXPECT_EQ(got.shape(), Shape({batch, n_freq, n_frames})) << ctx_s;
          expect_complex(got, want, "stft " + ctx_s);
        }
      }
    }
  }
}

TEST(FFT, test_stft_of_a_complex_signal_defaults_to_both_sides) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    auto v = random_complex(20, 311);
    array x = complex_array(v, {20});
    int n_frames = 0;
    std::vector<double> ones8(8, 1.0);
    auto both = ref_stft(v, 1, 20, 8, 2, ones8, true, "reflect", false, FFTNorm::Backward,
                         n_frames);
    array got = fft::stft(x, 8);
    EXPECT_EQ(got.shape(), Shape({8, n_frames}));
    expect_complex(got, both, "complex stft");
    // onesided on a complex signal transforms the real part of each windowed frame.
    auto one = ref_stft(v, 1, 20, 8, 2, ones8, true, "reflect", true, FFTNorm::Backward, n_frames);
    expect_complex(fft::stft(x, 8, {}, {}, {}, true, "reflect", FFTNorm::Backward, true), one,
                   "complex stft onesided");
  }
}

TEST(FFT, test_istft_matches_overlap_added_inverse_dfts) {
  // A spectrum that no signal has: the windowed overlap-add is all that
  // istft promises.
  const int n_fft = 8, hop = 3, n_frames = 5, n_freq = n_fft / 2 + 1;
  array window = array(std::vector<float>({0.0f, 0.25f, 0.75f, 1.0f, 0.75f, 0.25f, 0.0f}).begin(),
                       {7}, float32);
  const std::vector<double> w7 = {0.0, 0.25, 0.75, 1.0, 0.75, 0.25, 0.0};
  const std::vector<double> wc = centred(w7, n_fft);
  auto spec = random_complex(size_t(n_freq) * n_frames, 321);
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array S = complex_array(spec, {n_freq, n_frames});
    for (FFTNorm norm : all_norms()) {
      for (bool center : {false, true}) {
        for (std::optional<int> length : std::vector<std::optional<int>>{{}, 7, 30}) {
          // (n_frames, n_freq) rows, inverse-transformed to (n_frames, n_fft).
          std::vector<cd> rows(spec.size());
          for (int q = 0; q < n_freq; ++q) {
            for (int f = 0; f < n_frames; ++f) rows[f * n_freq + q] = spec[q * n_frames + f];
          }
          auto frames = ref_irfftn(rows, {n_frames, n_freq}, {1}, {n_fft}, norm);
          const int full = (n_frames - 1) * hop + n_fft;
          std::vector<double> y(full, 0.0), env(full, 0.0);
          for (int f = 0; f < n_frames; ++f) {
            for (int k = 0; k < n_fft; ++k) {
              y[f * hop + k] += frames[f * n_fft + k] * wc[k];
              env[f * hop + k] += wc[k] * wc[k];
            }
          }
          const int start = center ? n_fft / 2 : 0;
          const int stop = length ? start + *length : full - start;
          std::vector<double> want;
          for (int i = start; i < stop; ++i) {
            want.push_back(i < full ? y[i] / std::max(env[i], 1e-8) : 0.0);
          }
          std::string c = std::string(norm_name(norm)) + (center ? " centred" : "") +
                          (length ? " length " + std::to_string(*length) : "");
          array got = fft::istft(S, n_fft, hop, {}, window, center, norm, {}, length);
          EXPECT_EQ(got.shape(), Shape({int(want.size())})) << c;
          // Samples where the envelope is tiny are divided by 1e-8: compare
          // them relative to their own size.
          auto g = harness::to_doubles(got);
          ASSERT_EQ(g.size(), want.size()) << c;
          for (size_t i = 0; i < g.size(); ++i) {
            EXPECT_NEAR(g[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << c << " " << i;
          }
        }
      }
    }
  }
}

TEST(FFT, test_istft_inverts_stft) {
  struct Case { int n_fft, hop; std::optional<int> win_length; bool center; bool onesided; };
  const std::vector<Case> cases = {
      {8, 2, {}, true, true}, {9, 3, 7, true, true}, {16, 4, 12, true, true},
      {16, 4, {}, false, true},
      {8, 1, {}, true, false}, {6, 2, 6, false, false}};
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (const auto& c : cases) {
      for (FFTNorm norm : all_norms()) {
        const int len = 40;
        auto v = random_complex(3 * len, 331);
        std::vector<double> re(v.size());
        for (size_t i = 0; i < v.size(); ++i) re[i] = v[i].real();
        array x = array(std::vector<float>(re.begin(), re.end()).begin(), {3, len}, float32);
        std::optional<array> window;
        if (c.win_length) {
          auto h = hann(*c.win_length + 2);  // no zero ends: every sample is covered
          std::vector<float> w(h.begin() + 1, h.end() - 1);
          window = array(w.begin(), {*c.win_length}, float32);
        }
        array S = fft::stft(x, c.n_fft, c.hop, {}, window, c.center, "reflect", norm, c.onesided);
        array y = fft::istft(S, c.n_fft, c.hop, {}, window, c.center, norm, c.onesided, len);
        std::string ctx_s = "n_fft " + std::to_string(c.n_fft) + " " + norm_name(norm);
        EXPECT_EQ(y.shape(), Shape({3, len})) << ctx_s;
        // Without centring the samples after the last full frame are not covered.
        const int covered = c.center ? len : ((len - c.n_fft) / c.hop) * c.hop + c.n_fft;
        auto g = harness::to_doubles(y);
        int failures = 0;
        for (int b = 0; b < 3; ++b) {
          for (int i = 0; i < covered && failures < 4; ++i) {
            if (std::abs(g[b * len + i] - re[b * len + i]) > 1e-5) {
              ADD_FAILURE() << ctx_s << ": sample " << b << "," << i << " is " << g[b * len + i]
                            << ", expected " << re[b * len + i];
              ++failures;
            }
          }
        }
      }
    }
  }
}

TEST(FFT, test_istft_default_lengths) {
  array S = zeros({5, 3}, complex64);
  EXPECT_EQ(fft::istft(S).shape(), Shape({4}));          // n_fft 8, hop 2: 12 - 8 samples
  EXPECT_EQ(fft::istft(S, {}, {}, {}, {}, false).shape(), Shape({12}));
  EXPECT_EQ(fft::istft(S, {}, {}, {}, {}, true, FFTNorm::Backward, false).shape(),
            Shape({3}));                                 // n_fft 5, hop 1: 7 - 4 samples
  EXPECT_EQ(fft::istft(zeros({2, 5, 3}, complex64), 8, 2, {}, {}, true, FFTNorm::Backward, {}, 9)
                .shape(),
            Shape({2, 9}));
  EXPECT_EQ(fft::istft(S, 8, 2, {}, {}, true, FFTNorm::Backward, {}, 0).shape(), Shape({0}));
  EXPECT_EQ(fft::istft(S, 8, 2, {}, {}, true, FFTNorm::Backward, {}, -3).shape(), Shape({0}));
  EXPECT_EQ(fft::istft(S).dtype(), float32);
  EXPECT_EQ(fft::istft(zeros({5, 3}, float16)).dtype(), float32);
}

TEST(FFT, test_stft_and_istft_errors_name_the_op_and_values) {
  array x = zeros({20});
  EXPECT_THROW(fft::stft(array(1.f), 4), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 0), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 3), std::invalid_argument);  // hop 3 / 4 = 0
  EXPECT_THROW(fft::stft(x, 8, 0), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 8, 2, 9), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 8, 2, -1), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 8, 2, {}, ones({2, 4})), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 8, 2, {}, ones({9})), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 8, 2, {}, {}, true, "wrap"), std::invalid_argument);
  EXPECT_THROW(fft::stft(x, 21, 2, {}, {}, false), std::invalid_argument);
  EXPECT_THROW(fft::stft(zeros({3, 0}), 4), std::invalid_argument);
  EXPECT_NO_THROW(fft::stft(x, 8, 2, {}, {}, false, "wrap"));  // pad_mode unused
  EXPECT_EQ(fft::stft(x, 8, 2, 9, ones({8})).shape(), Shape({5, 11}));  // the window wins
  EXPECT_EQ(fft::stft(zeros({0, 20}), 4).shape(), Shape({0, 3, 21}));
  array S = zeros({5, 3}, complex64);
  EXPECT_THROW(fft::istft(zeros({5}, complex64)), std::invalid_argument);
  EXPECT_THROW(fft::istft(zeros({1, 3}, complex64)), std::invalid_argument);  // n_fft 0
  EXPECT_THROW(fft::istft(S, 8, 0), std::invalid_argument);
  EXPECT_THROW(fft::istft(S, 8, 2, 9), std::invalid_argument);
  EXPECT_THROW(fft::istft(S, 8, 2, {}, ones({9})), std::invalid_argument);
  EXPECT_THROW(fft::istft(zeros({5, 0}, complex64)), std::invalid_argument);
  try {
    fft::stft(x, 8, 2, {}, ones({11}));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[stft]"), std::string::npos) << m;
    EXPECT_NE(m.find("11"), std::string::npos) << m;
    EXPECT_NE(m.find("8"), std::string::npos) << m;
  }
  try {
    fft::stft(x, 21, 2, {}, {}, false);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[stft]"), std::string::npos) << m;
    EXPECT_NE(m.find("21"), std::string::npos) << m;
  }
}

TEST(FFT, test_derivatives_of_stft_and_istft) {
  auto x0 = random_f64({2, 19}, 341);
  array w = array(std::vector<double>({0.5, 1.0, 0.75, 0.25}).begin(), {4}, float64);
  for (FFTNorm norm : all_norms()) {
    std::string c = norm_name(norm);
    for (std::string mode : {"reflect", "constant", "edge"}) {
      check_linear("stft " + mode + " " + c, [&](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::stft(x[0], 8, 3, {}, {}, true, mode, norm))};
      }, {x0});
    }
    check_linear("stft of the window " + c, [&](const std::vector<array>& x) {
      return std::vector<array>{parts(fft::stft(x[1], 8, 2, {}, x[0], false, "reflect", norm,
                                                false))};
    }, {w, x0});
    auto re = random_f64({2, 5, 6}, 342), im = random_f64({2, 5, 6}, 343);
    check_linear("istft " + c, [&](const std::vector<array>& x) {
      return std::vector<array>{fft::istft(make_complex(x[0], x[1]), 8, 3, {}, ones({6}), true,
                                           norm, {}, 17)};
    }, {re, im});
  }
}

TEST(FFT, test_stft_and_istft_vmap_match_a_loop) {
  // n_fft 4 on small integers: every twiddle and every sum is exact.
  auto ints = grad_check::integers_f64({3, 2, 9}, 351);
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int in_axis : {0, 1}) {
      array xb = moveaxis(ints, 0, in_axis);
      std::string c = "batch axis " + std::to_string(in_axis);
      check_vmap("stft " + c, [](const std::vector<array>& x) {
        return std::vector<array>{parts(fft::stft(x[0], 4, 2))};
      }, {xb}, {in_axis});
      check_vmap("istft " + c, [](const std::vector<array>& x) {
        return std::vector<array>{fft::istft(astype(x[0], complex64), 4, 2, {}, {}, false)};
      }, {moveaxis(grad_check::integers_f64({3, 3, 5}, 352), 0, in_axis)}, {in_axis});
    }
  }
}
