// The fft namespace against a direct O(n^2) DFT computed here in float64:
// every transform, axes, crop / pad lengths, norms, input dtypes and layouts,
// on every device; round trips; frequencies and shifts against their formulas;
// derivatives against finite differences and vmap against a loop; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <random>
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
