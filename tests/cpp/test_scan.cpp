// Scans: cumsum, cumprod, cummax, cummin, logcumsumexp against float64
// references computed here, on every dtype, layout, axis, direction and
// device; their derivatives against finite differences and vmap against a loop.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using harness::Layout;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

using Combine = std::function<double(double, double)>;

// The scan of v (row-major over shape) along axis, in float64.
std::vector<double> ref_scan(const std::vector<double>& v, const Shape& shape, int axis,
                             bool reverse, bool inclusive, double init, const Combine& f) {
  std::vector<double> out(v.size());
  int64_t n = shape[axis], inner = 1, outer = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double acc = init;
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = reverse ? n - 1 - k : k;
        int64_t at = (o * n + i) * inner + j;
        if (inclusive) {
          acc = f(acc, v[at]);
          out[at] = acc;
        } else {
          out[at] = acc;
          acc = f(acc, v[at]);
        }
      }
    }
  }
  return out;
}

double lae(double a, double x) {
  if (std::isnan(a) || std::isnan(x)) return kNaN;
  if (a == -kInf) return x;
  if (x == -kInf) return a;
  double m = std::max(a, x);
  return m + std::log(std::exp(a - m) + std::exp(x - m));
}
double nan_max(double a, double x) { return std::isnan(a) || std::isnan(x) ? kNaN : std::max(a, x); }
double nan_min(double a, double x) { return std::isnan(a) || std::isnan(x) ? kNaN : std::min(a, x); }

using ScanFn = std::function<array(const array&, int, bool, bool)>;

struct ScanCase {
  const char* name;
  ScanFn f;
  Combine combine;
  std::function<double(Dtype)> init;
  std::function<Dtype(Dtype)> result;
  std::vector<Dtype> dtypes;
  double lo, hi;
};

double lowest(Dtype t) {
  if (is_inexact(t)) return -kInf;
  if (t == bool_) return 0;
  if (is_unsigned(t)) return 0;
  return -std::ldexp(1.0, 8 * t.size - 1);
}
double highest(Dtype t) {
  if (is_inexact(t)) return kInf;
  if (t == bool_) return 1;
  return std::ldexp(1.0, 8 * t.size - (is_unsigned(t) ? 0 : 1)) - 1;
}

std::vector<ScanCase> scan_cases() {
  auto real = harness::real_types();
  return {
      {"cumsum", [](auto& a, int ax, bool r, bool i) { return cumsum(a, ax, r, i); },
       [](double a, double x) { return a + x; }, [](Dtype) { return 0.0; },
       [](Dtype t) { return t == bool_ ? int32 : t; }, real, -3, 3},
      {"cumprod", [](auto& a, int ax, bool r, bool i) { return cumprod(a, ax, r, i); },
       [](double a, double x) { return a * x; }, [](Dtype) { return 1.0; },
       [](Dtype t) { return t; }, real, -2, 2},
      {"cummax", [](auto& a, int ax, bool r, bool i) { return cummax(a, ax, r, i); }, nan_max,
       lowest, [](Dtype t) { return t; }, real, -5, 5},
      {"cummin", [](auto& a, int ax, bool r, bool i) { return cummin(a, ax, r, i); }, nan_min,
       highest, [](Dtype t) { return t; }, real, -5, 5},
      {"logcumsumexp", [](auto& a, int ax, bool r, bool i) { return logcumsumexp(a, ax, r, i); },
       lae, [](Dtype) { return -kInf; }, [](Dtype t) { return inexact_type(t); }, real, -3, 3},
  };
}

array layout_input(const std::vector<double>& v, const Shape& shape, Dtype t, Layout layout) {
  if (layout == Layout::broadcast && !shape.empty() && shape[0] == 0) {
    return harness::from_doubles(v, shape, t);
  }
  return harness::with_layout(v, shape, t, layout);
}

}  // namespace

TEST(Scan, EveryScanEveryDtypeLayoutAxisAndDirection) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto& c : scan_cases()) {
      for (Dtype t : c.dtypes) {
        for (const Shape& shape : harness::sweep_shapes()) {
          const int nd = static_cast<int>(shape.size());
          if (nd == 0) continue;  // 0-d: see ScalarsAndFlattened
          auto values = harness::rows_repeated(
              harness::random_values(shape_size(shape), t, c.lo, c.hi, 11), shape);
          for (Layout layout : harness::all_layouts()) {
            array x = layout_input(values, shape, t, layout);
            Dtype rt = c.result(t);
            for (int axis = -nd; axis < nd; ++axis) {
              for (int flags = 0; flags < 4; ++flags) {
                bool reverse = flags & 1, inclusive = flags & 2;
                std::string what = std::string(c.name) + " " + dtype_name(t) + " " +
                                   shape_str(shape) + " " + harness::layout_name(layout) +
                                   " axis=" + std::to_string(axis) +
                                   " reverse=" + std::to_string(reverse) +
                                   " inclusive=" + std::to_string(inclusive) +
                                   (dev == Device::cpu ? " cpu" : " gpu");
                array y = c.f(x, axis, reverse, inclusive);
                EXPECT_EQ(y.dtype(), rt) << what;
                EXPECT_EQ(y.shape(), shape) << what;
                auto want = ref_scan(values, shape, axis < 0 ? axis + nd : axis, reverse,
                                     inclusive, c.init(rt), c.combine);
                bool wraps = std::string(c.name) == "cumsum" || std::string(c.name) == "cumprod";
                for (auto& w : want) w = wraps ? harness::wrap_int(w, rt) : w;
                double tol = harness::rtol_for(rt) * 8;
                harness::expect_values(y, want, what, tol, tol * 3 * shape_size(shape));
              }
            }
          }
        }
      }
    }
  }
}

TEST(Scan, ScalarsAndFlattened) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array x({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
    harness::expect_values(cumsum(x), {1, 3, 6, 10, 15, 21}, "cumsum flattened");
    harness::expect_values(cumsum(transpose(x)), {1, 5, 7, 12, 15, 21}, "cumsum flattened view");
    harness::expect_values(cumprod(x, true, false), {720, 360, 120, 30, 6, 1},
                           "cumprod reverse exclusive");
    harness::expect_values(cummax(array({3, 1, 4, 1, 5}), false, false),
                           {-2147483648.0, 3, 3, 4, 4}, "cummax exclusive int32");
    harness::expect_values(cummin(array({3.f, 1.f, 4.f}), true, true), {1, 1, 4}, "cummin reverse");
    array s(2.5f);
    array y = cumsum(s);
    EXPECT_EQ(y.shape(), Shape({1}));
    harness::expect_values(y, {2.5}, "cumsum of a scalar");
    EXPECT_THROW(cumsum(s, 0), std::out_of_range);
    EXPECT_THROW(cumsum(x, 2), std::out_of_range);
    EXPECT_THROW(cummax(x, -3), std::out_of_range);
  }
}

TEST(Scan, ResultDtypes) {
  array b = array({true, false, true});
  EXPECT_EQ(cumsum(b).dtype(), int32);
  harness::expect_values(cumsum(b), {1, 1, 2}, "cumsum bool");
  EXPECT_EQ(cumprod(b).dtype(), bool_);
  EXPECT_EQ(cumsum(astype(b, int8)).dtype(), int8);
  EXPECT_EQ(cumsum(astype(b, uint16)).dtype(), uint16);
  EXPECT_EQ(cumsum(b, false, true, float32).dtype(), float32);
  EXPECT_EQ(cumprod(array({2, 3}), 0, false, true, float64).dtype(), float64);
  EXPECT_EQ(logcumsumexp(array({1, 2})).dtype(), float32);
  EXPECT_EQ(cummax(astype(b, uint8)).dtype(), uint8);
  // int8 wraps as the reference keeps the input dtype: 100 + 100 = -56.
  harness::expect_values(cumsum(astype(array({100, 100}), int8)), {100, -56}, "int8 wraps");
}

TEST(Scan, ComplexSumAndProd) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    std::vector<complex64_t> v = {{1, 2}, {3, -1}, {0, 1}};
    array x(v.begin(), {3}, complex64);
    auto s = harness::to_complex(cumsum(x));
    auto p = harness::to_complex(cumprod(x));
    std::complex<double> acc = 0, pr = 1;
    for (int i = 0; i < 3; ++i) {
      acc += std::complex<double>(v[i].real(), v[i].imag());
      pr *= std::complex<double>(v[i].real(), v[i].imag());
      EXPECT_NEAR(std::abs(s[i] - acc), 0, 1e-5) << i;
      EXPECT_NEAR(std::abs(p[i] - pr), 0, 1e-5) << i;
    }
    EXPECT_THROW(cummax(x), std::invalid_argument);
    EXPECT_THROW(cummin(x), std::invalid_argument);
    // logcumsumexp: the principal log of the running sums of exp (MLX's).
    auto l = harness::to_complex(logcumsumexp(x));
    std::complex<double> e = 0;
    for (int i = 0; i < 3; ++i) {
      e += std::exp(std::complex<double>(v[i].real(), v[i].imag()));
      EXPECT_NEAR(std::abs(l[i] - std::log(e)), 0, 1e-5) << i;
    }
  }
}

TEST(Scan, NaNAndInfinities) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array x({1.f, NAN, 3.f, 0.f});
    harness::expect_values(cummax(x), {1, kNaN, kNaN, kNaN}, "cummax NaN propagates");
    harness::expect_values(cummin(x, true), {kNaN, kNaN, 0, 0}, "cummin reverse NaN");
    harness::expect_values(cumsum(x), {1, kNaN, kNaN, kNaN}, "cumsum NaN");
    array inf({-INFINITY, -INFINITY, 0.f, INFINITY});
    harness::expect_values(logcumsumexp(inf), {-kInf, -kInf, 0, kInf}, "logcumsumexp infinities");
    harness::expect_values(logcumsumexp(inf, false, false), {-kInf, -kInf, -kInf, 0},
                           "logcumsumexp exclusive");
  }
}

TEST(Scan, LongRowsAndColumns) {
  // One row long enough to split across threads, and a scan over axis 0 of a
  // wide matrix (the column sweep); integer values keep float sums exact.
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    const int n = 300000;
    array x = astype(remainder(arange(0, n, int32), array(7)), float32);
    for (bool reverse : {false, true}) {
      for (bool inclusive : {false, true}) {
        std::vector<double> v(n);
        for (int i = 0; i < n; ++i) v[i] = i % 7;
        auto want = ref_scan(v, {n}, 0, reverse, inclusive, 0, [](double a, double b) { return a + b; });
        harness::expect_values(cumsum(x, 0, reverse, inclusive), want, "long row", 0, 0);
      }
    }
    array m = reshape(astype(remainder(arange(0, 600 * 700, int32), array(5)), float64), {600, 700});
    std::vector<double> v(600 * 700);
    for (size_t i = 0; i < v.size(); ++i) v[i] = i % 5;
    auto want = ref_scan(v, {600, 700}, 0, true, true, 0, [](double a, double b) { return a + b; });
    harness::expect_values(cumsum(m, 0, true), want, "columns", 0, 0);
    auto wmax = ref_scan(v, {600, 700}, 0, false, true, -kInf, nan_max);
    harness::expect_values(cummax(m, 0), wmax, "columns max", 0, 0);
  }
}

// ---- derivatives and vmap

using grad_check::check_derivatives;
using grad_check::check_on_devices;
using grad_check::check_vmap_axes;
using grad_check::random_f64;

TEST(ScanGrad, CumsumCumprodEveryDirection) {
  array x = random_f64({3, 5}, 3);
  for (int axis : {0, 1}) {
    for (int flags = 0; flags < 4; ++flags) {
      bool reverse = flags & 1, inclusive = flags & 2;
      std::string tag = " axis=" + std::to_string(axis) + " flags=" + std::to_string(flags);
      check_on_devices("cumsum" + tag, [=](const array& a) { return cumsum(a, axis, reverse, inclusive); }, x);
      check_on_devices("cumprod" + tag, [=](const array& a) { return cumprod(a, axis, reverse, inclusive); }, x);
    }
  }
}

TEST(ScanGrad, CumprodWithZeros) {
  // Rows with no zero, one zero, two zeros, a zero first and a zero last.
  array x = array({0.5, -1.5, 2.0, 0.7, 1.3,
                   0.5, 0.0, 2.0, -0.7, 1.3,
                   0.0, 1.5, 0.0, 0.7, 1.3,
                   1.1, 0.9, -1.2, 0.8, 0.0}, {4, 5});
  for (int flags = 0; flags < 4; ++flags) {
    bool reverse = flags & 1, inclusive = flags & 2;
    check_on_devices("cumprod zeros flags=" + std::to_string(flags),
                     [=](const array& a) { return cumprod(a, 1, reverse, inclusive); }, x);
  }
  // The gradient at a zero, by hand: d/dx1 of sum(cumprod([2, 0, 3])) = 2 + 2*3 = 8.
  auto g = grad([](const array& a) { return sum(cumprod(a)); })(array({2.0, 0.0, 3.0}));
  harness::expect_values(g, {1, 8, 0}, "grad of cumprod at a zero");
}

TEST(ScanGrad, CummaxCumminLogcumsumexp) {
  array x = random_f64({3, 6}, 5);
  for (int axis : {0, 1}) {
    for (int flags = 0; flags < 4; ++flags) {
      bool reverse = flags & 1, inclusive = flags & 2;
      std::string tag = " axis=" + std::to_string(axis) + " flags=" + std::to_string(flags);
      // An exclusive scan starts at the infinite identity: compare the finite part.
      auto finite = [](const array& y) { return where(isinf(y), zeros_like(y), y); };
      check_on_devices("cummax" + tag, [=](const array& a) { return finite(cummax(a, axis, reverse, inclusive)); }, x);
      check_on_devices("cummin" + tag, [=](const array& a) { return finite(cummin(a, axis, reverse, inclusive)); }, x);
      check_on_devices("logcumsumexp" + tag,
                       [=](const array& a) { return finite(logcumsumexp(a, axis, reverse, inclusive)); }, x);
    }
  }
  // The gradient of cummax goes to the positions of the running max, by hand.
  auto g = grad([](const array& a) { return sum(cummax(a)); })(array({1.0, 3.0, 2.0, 5.0, 4.0}));
  harness::expect_values(g, {1, 2, 0, 2, 0}, "grad of cummax");
}

TEST(ScanGrad, Vmap) {
  array b = grad_check::integers_f64({3, 4, 5}, 9);
  check_vmap_axes("cumsum", [](const array& a) { return cumsum(a, 1, true, false); }, b, 2);
  check_vmap_axes("cumprod", [](const array& a) { return cumprod(a, 0); }, b, 1);
  check_vmap_axes("cummax", [](const array& a) { return cummax(a, 1); }, b, 1);
  check_vmap_axes("cummin", [](const array& a) { return cummin(a, 0, true); }, b, 2);
  check_vmap_axes("logcumsumexp", [](const array& a) { return logcumsumexp(a, -1); }, b, 1);
  check_vmap_axes("cumsum flattened", [](const array& a) { return cumsum(a); }, b, 1);
}
