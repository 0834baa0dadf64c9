// Reductions, argmax/argmin, var/std, logsumexp, softmax, count_nonzero, trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "grad_check.h"
#include "harness.h"
#include "tessera/ops/array_api.h"

using namespace tessera;
using harness::Layout;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<int> norm(std::vector<int> axes, int nd) {
  for (auto& a : axes) a = a < 0 ? a + nd : a;
  std::sort(axes.begin(), axes.end());
  return axes;
}

// The values reduced into each output (row-major over the kept axes), each group
// in row-major order of the reduced axes.
std::vector<std::vector<double>> groups(const std::vector<double>& v, const Shape& shape,
                                        const std::vector<int>& axes_in) {
  int nd = static_cast<int>(shape.size());
  auto axes = norm(axes_in, nd);
  std::vector<char> red(nd, 0);
  for (int a : axes) red[a] = 1;
  size_t out_size = 1;
  for (int d = 0; d < nd; ++d) {
    if (!red[d]) out_size *= shape[d];
  }
  std::vector<std::vector<double>> g(out_size);
  std::vector<int> idx(nd, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    size_t o = 0;
    for (int d = 0; d < nd; ++d) {
      if (!red[d]) o = o * shape[d] + idx[d];
    }
    g[o].push_back(v[i]);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return g;
}

Shape out_shape(const Shape& shape, const std::vector<int>& axes_in, bool keepdims) {
  auto axes = norm(axes_in, static_cast<int>(shape.size()));
  Shape out;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    bool r = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!r) out.push_back(shape[d]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

std::vector<double> ref(const std::vector<double>& v, const Shape& shape,
                        const std::vector<int>& axes,
                        const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (auto& g : groups(v, shape, axes)) out.push_back(f(g));
  return out;
}

double r_sum(const std::vector<double>& g) { return std::accumulate(g.begin(), g.end(), 0.0); }
double r_prod(const std::vector<double>& g) {
  double p = 1;
  for (double x : g) p *= x;
  return p;
}
double r_max(const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); }
double r_min(const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); }
double r_mean(const std::vector<double>& g) { return g.empty() ? kNaN : r_sum(g) / g.size(); }
double r_var(const std::vector<double>& g, int ddof) {
  double m = r_mean(g), s = 0;
  for (double x : g) s += (x - m) * (x - m);
  return s / std::max<double>(double(g.size()) - ddof, 0.0);
}
double r_all(const std::vector<double>& g) {
  return std::all_of(g.begin(), g.end(), [](double x) { return x != 0; });
}
double r_any(const std::vector<double>& g) {
  return std::any_of(g.begin(), g.end(), [](double x) { return x != 0; });
}
double r_count(const std::vector<double>& g) {
  return static_cast<double>(std::count_if(g.begin(), g.end(), [](double x) { return x != 0; }));
}
double r_lse(const std::vector<double>& g) {
  double s = 0;
  for (double x : g) s += std::exp(x);
  return std::log(s);
}

using AxesOp = std::function<array(const array&, const std::vector<int>&, bool)>;
using AllOp = std::function<array(const array&, bool)>;

struct ReductionCase {
  const char* name;
  AxesOp with_axes;
  AllOp all_axes;
  std::function<double(const std::vector<double>&)> reference;
  std::function<Dtype(Dtype)> result_dtype;
  std::vector<Dtype> dtypes;
  double lo, hi;
  bool needs_nonempty;  // max / min: no identity
};

// harness::with_layout, and a broadcast into a leading axis of size 0 (which the
// harness cannot build: it takes the row from the values).
array layout_input(const std::vector<double>& v, const Shape& shape, Dtype t, Layout layout) {
  if (layout == Layout::broadcast && !shape.empty() && shape[0] == 0) {
    Shape row(shape.begin() + 1, shape.end());
    std::vector<double> r(shape_size(row), 1.0);
    array out = broadcast_to(harness::from_doubles(r, row, t), shape);
    eval(out);
    return out;
  }
  return harness::with_layout(v, shape, t, layout);
}

Dtype same(Dtype t) { return t; }
Dtype to_bool(Dtype) { return bool_; }
Dtype to_int32(Dtype) { return int32; }

std::vector<ReductionCase> reduction_cases() {
  auto real = harness::real_types();
  return {
      {"sum", [](auto& a, auto& ax, bool k) { return sum(a, ax, k); },
       [](auto& a, bool k) { return sum(a, k); }, r_sum, accumulation_type, real, -3, 3, false},
      {"prod", [](auto& a, auto& ax, bool k) { return prod(a, ax, k); },
       [](auto& a, bool k) { return prod(a, k); }, r_prod, accumulation_type, real, -2, 2, false},
      {"max", [](auto& a, auto& ax, bool k) { return max(a, ax, k); },
       [](auto& a, bool k) { return max(a, k); }, r_max, same, real, -50, 50, true},
      {"min", [](auto& a, auto& ax, bool k) { return min(a, ax, k); },
       [](auto& a, bool k) { return min(a, k); }, r_min, same, real, -50, 50, true},
      {"mean", [](auto& a, auto& ax, bool k) { return mean(a, ax, k); },
       [](auto& a, bool k) { return mean(a, k); }, r_mean, inexact_type, real, -5, 5, false},
      {"all", [](auto& a, auto& ax, bool k) { return all(a, ax, k); },
       [](auto& a, bool k) { return all(a, k); }, r_all, to_bool, real, -1, 1, false},
      {"any", [](auto& a, auto& ax, bool k) { return any(a, ax, k); },
       [](auto& a, bool k) { return any(a, k); }, r_any, to_bool, real, -1, 1, false},
      {"count_nonzero", [](auto& a, auto& ax, bool k) { return count_nonzero(a, ax, k); },
       [](auto& a, bool k) { return count_nonzero(a, k); }, r_count, to_int32, real, -1, 1, false},
      {"logsumexp", [](auto& a, auto& ax, bool k) { return logsumexp(a, ax, k); },
       [](auto& a, bool k) { return logsumexp(a, k); }, r_lse, inexact_type, real, -4, 4, false},
      {"var", [](auto& a, auto& ax, bool k) { return var(a, ax, k); },
       [](auto& a, bool k) { return var(a, k); }, [](auto& g) { return r_var(g, 0); },
       inexact_type, real, -5, 5, false},
      {"std", [](auto& a, auto& ax, bool k) { return tessera::std(a, ax, k); },
       [](auto& a, bool k) { return tessera::std(a, k); },
       [](auto& g) { return std::sqrt(r_var(g, 0)); }, inexact_type, real, -5, 5, false},
  };
}

// Axes configurations valid for an array of nd dimensions.
std::vector<std::vector<int>> axes_for(int nd) {
  std::vector<std::vector<int>> out{{}};
  if (nd >= 1) {
    out.push_back({0});
    out.push_back({-1});
  }
  if (nd >= 2) out.push_back({0, nd - 1});
  if (nd >= 3) out.push_back({-2});
  return out;
}

// Results are rounded once to their dtype; float32 ones went through a float exp
// or a float32 accumulation.
double tolerance(Dtype t, const char*) {
  return t == float32 ? 1e-5 : harness::rtol_for(t);
}

}  // namespace

TEST(Reduce, EveryReductionEveryDtypeLayoutAndAxes) {
  for (auto& c : reduction_cases()) {
    for (Dtype t : c.dtypes) {
      for (const Shape& shape : harness::sweep_shapes()) {
        int nd = static_cast<int>(shape.size());
        auto values = harness::random_values(shape_size(shape), t, c.lo, c.hi, 7);
        values = harness::rows_repeated(values, shape);
        for (Layout layout : harness::all_layouts()) {
          array x = layout_input(values, shape, t, layout);
          std::string base = std::string(c.name) + " " + dtype_name(t) + " " + shape_str(shape) +
                             " " + harness::layout_name(layout);
          // Reduced axes None, with keepdims alternating.
          for (bool keepdims : {false, true}) {
            std::vector<int> all_ax(nd);
            std::iota(all_ax.begin(), all_ax.end(), 0);
            if (c.needs_nonempty && x.size() == 0) {
              EXPECT_THROW(c.all_axes(x, keepdims), std::invalid_argument) << base;
              continue;
            }
            array y = c.all_axes(x, keepdims);
            std::string ctx = base + " axes=None keepdims=" + std::to_string(keepdims);
            EXPECT_EQ(y.dtype(), c.result_dtype(t)) << ctx;
            EXPECT_EQ(y.shape(), out_shape(shape, all_ax, keepdims)) << ctx;
            double tol = tolerance(y.dtype(), c.name);
            harness::expect_values(y, ref(values, shape, all_ax, c.reference), ctx, tol, tol);
          }
          for (auto& axes : axes_for(nd)) {
            bool keepdims = axes.size() % 2 == 1;
            std::string ctx = base + " axes=" + ints_str(axes);
            auto g = groups(values, shape, axes);
            bool empty_group = std::any_of(g.begin(), g.end(), [](auto& v) { return v.empty(); });
            if (c.needs_nonempty && empty_group) {
              EXPECT_THROW(c.with_axes(x, axes, keepdims), std::invalid_argument) << ctx;
              continue;
            }
            array y = c.with_axes(x, axes, keepdims);
            EXPECT_EQ(y.dtype(), c.result_dtype(t)) << ctx;
            EXPECT_EQ(y.shape(), out_shape(shape, axes, keepdims)) << ctx;
            double tol = tolerance(y.dtype(), c.name);
            harness::expect_values(y, ref(values, shape, axes, c.reference), ctx, tol, tol);
          }
        }
      }
    }
  }
}

TEST(Reduce, SingleAxisOverloadsAndNegativeAxes) {
  array x({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  harness::expect_values(sum(x, 1), {6, 15}, "sum axis 1");
  harness::expect_values(sum(x, -2), {5, 7, 9}, "sum axis -2");
  EXPECT_EQ(sum(x, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(sum(x, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  harness::expect_values(sum(x), {21}, "sum all");
  harness::expect_values(prod(x, 1), {6, 120}, "prod");
  harness::expect_values(max(x, 0), {4, 5, 6}, "max");
  harness::expect_values(min(x, -1), {1, 4}, "min");
  harness::expect_values(mean(x, 0), {2.5, 3.5, 4.5}, "mean");
  harness::expect_values(mean(x, std::vector<int>{}), {1, 2, 3, 4, 5, 6}, "mean over no axes");
  EXPECT_EQ(all(array({true, false})).item<bool>(), false);
  EXPECT_EQ(any(array({true, false})).item<bool>(), true);
  EXPECT_EQ(all(array({true, true}), 0).item<bool>(), true);
  EXPECT_EQ(count_nonzero(array({0, 3, 0, 4}, int32), 0).item<int>(), 2);
  EXPECT_EQ(count_nonzero(x, 1, true).shape(), (Shape{2, 1}));
}

TEST(Reduce, ScalarsAndEmpty) {
  array s(4.0f);
  EXPECT_EQ(sum(s).item<float>(), 4.0f);
  EXPECT_EQ(max(s).item<float>(), 4.0f);
  EXPECT_EQ(prod(array(3, int8)).dtype(), int32);
  EXPECT_EQ(argmax(s).item<uint32_t>(), 0u);
  EXPECT_THROW(sum(s, 0), std::out_of_range);

  array e = reshape(array({1.f}), {1, 1});
  e = slice(e, {0, 0}, {0, 1});  // shape (0, 1)
  EXPECT_EQ(e.shape(), (Shape{0, 1}));
  EXPECT_EQ(sum(e).item<float>(), 0.0f);
  EXPECT_EQ(prod(e).item<float>(), 1.0f);
  EXPECT_TRUE(std::isnan(mean(e).item<float>()));
  EXPECT_TRUE(std::isnan(var(e).item<float>()));
  EXPECT_EQ(all(e).item<bool>(), true);
  EXPECT_EQ(any(e).item<bool>(), false);
  EXPECT_EQ(logsumexp(e).item<float>(), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(sum(e, 1).shape(), (Shape{0}));
  EXPECT_EQ(max(e, 1).shape(), (Shape{0}));  // nothing to reduce into: allowed
  EXPECT_THROW(max(e), std::invalid_argument);
  EXPECT_THROW(min(e, 0), std::invalid_argument);
  EXPECT_THROW(argmax(e), std::invalid_argument);
  EXPECT_THROW(argmin(e, 0), std::invalid_argument);
  EXPECT_EQ(softmax(e, 0).shape(), (Shape{0, 1}));
}

TEST(Reduce, AxisErrors) {
  array x({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_THROW(sum(x, 2), std::out_of_range);
  EXPECT_THROW(sum(x, -3), std::out_of_range);
  EXPECT_THROW(sum(x, {0, 0}), std::invalid_argument);
  EXPECT_THROW(sum(x, {1, -1}), std::invalid_argument);
  EXPECT_THROW(mean(x, 5), std::out_of_range);
  EXPECT_THROW(var(x, 5), std::out_of_range);
  EXPECT_THROW(logsumexp(x, {0, -2}), std::invalid_argument);
  EXPECT_THROW(argmax(x, 2), std::out_of_range);
  EXPECT_THROW(count_nonzero(x, 3), std::out_of_range);
  EXPECT_THROW(softmax(x, 2), std::out_of_range);
  EXPECT_THROW(all(x, {0, 1, 0}), std::invalid_argument);
  try {
    max(x, 7);
    FAIL() << "no exception";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("[max]"), std::string::npos) << e.what();
  }
  try {
    max(slice(x, {0, 0}, {0, 3}), 0);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[max]"), std::string::npos) << e.what();
  }
}

TEST(Reduce, IntegerWideningAndWrap) {
  array a({100, 100, 100}, int8);
  EXPECT_EQ(sum(a).dtype(), int32);
  EXPECT_EQ(sum(a).item<int>(), 300);
  array b({200, 200}, uint8);
  EXPECT_EQ(sum(b).dtype(), uint32);
  EXPECT_EQ(sum(b).item<uint32_t>(), 400u);
  EXPECT_EQ(sum(array({true, true, false})).dtype(), int32);
  EXPECT_EQ(sum(array({true, true, false})).item<int>(), 2);
  EXPECT_EQ(sum(array({int64_t{1} << 40, int64_t{1} << 40})).item<int64_t>(), int64_t{1} << 41);
  EXPECT_EQ(prod(array({-3, 5}, int16)).item<int>(), -15);
  // int32 overflow wraps as in NumPy.
  EXPECT_EQ(sum(array({2147483647, 1}, int32)).item<int>(), -2147483647 - 1);
  EXPECT_EQ(max(array({-5, -3, -9}, int64)).item<int64_t>(), -3);
  EXPECT_EQ(min(array({5, 3, 9}, uint64)).item<uint64_t>(), 3u);
}

TEST(Reduce, NaNPropagatesThroughMaxMin) {
  array x({1.f, NAN, 3.f, 2.f, 5.f, 4.f}, {2, 3});
  harness::expect_values(max(x, 1), {kNaN, 5}, "max nan");
  harness::expect_values(min(x, 1), {kNaN, 2}, "min nan");
  EXPECT_TRUE(std::isnan(max(x).item<float>()));
  // Long rows (the vectorised lanes) too.
  std::vector<double> v(1000, 1.0);
  v[777] = kNaN;
  EXPECT_TRUE(std::isnan(max(harness::from_doubles(v, {1000}, float32)).item<float>()));
  EXPECT_TRUE(std::isnan(sum(harness::from_doubles(v, {1000}, float64)).item<double>()));
  harness::expect_values(max(array({-kInf, -kInf}, float64)), {-kInf}, "max -inf");
}

TEST(Reduce, Float32SumIsAccurateOnLargeInputs) {
  const size_t n = 1000000;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& f : v) f = dist(gen);
  double want = 0;
  for (float f : v) want += f;
  array x(v.begin(), {static_cast<int>(n)}, float32);
  double got = sum(x).item<float>();
  EXPECT_NEAR(got, want, 1e-5 * want);
  EXPECT_NEAR(mean(x).item<float>(), want / n, 1e-5 * want / n);

  // Rows (split across threads), columns, and the column split.
  for (Shape shape : {Shape{4, 250000}, Shape{250000, 4}, Shape{1000, 1000}, Shape{125000, 8}}) {
    array m = reshape(x, shape);
    for (int axis : {0, 1}) {
      std::vector<double> dv(v.begin(), v.end());
      auto want_ax = ref(dv, shape, {axis}, r_sum);
      harness::expect_values(sum(m, axis), want_ax, "sum " + shape_str(shape), 1e-5, 1e-5);
      harness::expect_values(max(m, axis), ref(dv, shape, {axis}, r_max), "max", 0, 0);
      auto want_var = ref(dv, shape, {axis}, [](auto& g) { return r_var(g, 1); });
      harness::expect_values(var(m, axis, false, 1), want_var, "var " + shape_str(shape), 1e-5,
                             1e-7);
    }
    // The transposed view, not copied.
    array t = transpose(m);
    std::vector<double> dv(v.begin(), v.end());
    harness::expect_values(sum(t, 1), ref(dv, shape, {0}, r_sum), "sum T", 1e-5, 1e-5);
  }
}

TEST(Reduce, ComplexSumProdMeanMax) {
  std::vector<complex64_t> v{{1, 2}, {3, -1}, {0.5f, 0.5f}, {3, 4}};
  array x(v.begin(), {2, 2}, complex64);
  EXPECT_EQ(sum(x).dtype(), complex64);
  EXPECT_EQ(sum(x).item<complex64_t>(), complex64_t(7.5f, 5.5f));
  EXPECT_EQ(prod(x, 1).dtype(), complex64);
  auto p = harness::to_complex(prod(x, 1));
  EXPECT_NEAR(p[0].real(), 5, 1e-6);   // (1+2i)(3-i) = 5+5i
  EXPECT_NEAR(p[0].imag(), 5, 1e-6);
  EXPECT_NEAR(p[1].real(), -0.5, 1e-6);  // (0.5+0.5i)(3+4i) = -0.5+3.5i
  EXPECT_NEAR(p[1].imag(), 3.5, 1e-6);
  EXPECT_EQ(mean(x).item<complex64_t>(), complex64_t(7.5f / 4, 5.5f / 4));
  EXPECT_EQ(max(x).item<complex64_t>(), complex64_t(3, 4));  // lexicographic
  EXPECT_EQ(min(x).item<complex64_t>(), complex64_t(0.5f, 0.5f));
  EXPECT_EQ(argmax(x).item<uint32_t>(), 3u);
  EXPECT_EQ(any(x).item<bool>(), true);
  EXPECT_EQ(count_nonzero(array(v.begin(), {4}, complex64)).item<int>(), 4);
  // var of complex: mean |x - mean|^2, a float32 (MLX's), std its root.
  array c(std::vector<complex64_t>{{0, 1}, {0, -1}}.begin(), {2}, complex64);
  EXPECT_EQ(var(c).dtype(), float32);
  EXPECT_EQ(var(c).item<float>(), 1.f);
  EXPECT_EQ(tessera::std(c, false, 1).item<float>(), std::sqrt(2.f));
  EXPECT_THROW(softmax(x), std::invalid_argument);
  EXPECT_THROW(logsumexp(x), std::invalid_argument);
}

TEST(Reduce, VarStdDdof) {
  array x({1.f, 2.f, 3.f, 4.f}, {4});
  EXPECT_NEAR(var(x).item<float>(), 1.25, 1e-6);
  EXPECT_NEAR(var(x, false, 1).item<float>(), 5.0 / 3, 1e-6);
  EXPECT_NEAR(tessera::std(x, false, 1).item<float>(), std::sqrt(5.0 / 3), 1e-6);
  EXPECT_NEAR(tessera::std(x, 0, true, 2).item<float>(), std::sqrt(2.5), 1e-6);
  EXPECT_EQ(tessera::std(x, 0, true, 2).shape(), (Shape{1}));
  EXPECT_EQ(var(x, false, 4).item<float>(), std::numeric_limits<float>::infinity());
  EXPECT_EQ(var(x, false, 9).item<float>(), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(var(array({2.f, 2.f}), false, 2).item<float>()));
  EXPECT_EQ(var(array({1, 2, 3, 4}, int32)).dtype(), float32);
  EXPECT_EQ(var(array({1, 2}, float16)).dtype(), float16);
  EXPECT_EQ(var(array({1, 2}, float64)).dtype(), float64);
  // Large offset: the two-pass variance does not cancel.
  array big({1e9 + 1, 1e9 + 3, 1e9 + 5, 1e9 + 7}, {4}, float64);
  EXPECT_NEAR(var(big).item<double>(), 5.0, 1e-9);
  EXPECT_NEAR(var(astype(big, float32)).item<float>(), 0.0, 1e-9);  // all round to 1e9
}

TEST(Reduce, ArgmaxArgmin) {
  array x({3.f, 7.f, 7.f, 1.f, 1.f, 0.f}, {2, 3});
  EXPECT_EQ(argmax(x).dtype(), uint32);
  EXPECT_EQ(argmax(x).item<uint32_t>(), 1u);  // first of the ties
  EXPECT_EQ(argmin(x).item<uint32_t>(), 5u);
  harness::expect_values(argmax(x, 1), {1, 0}, "argmax axis 1");
  harness::expect_values(argmin(x, 1), {0, 2}, "argmin axis 1");
  harness::expect_values(argmax(x, 0), {0, 0, 0}, "argmax axis 0");
  harness::expect_values(argmin(x, -2), {1, 1, 1}, "argmin axis -2");
  EXPECT_EQ(argmax(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(argmax(x, true).shape(), (Shape{1, 1}));
  // Flattened index of the row-major order, also for a transposed view.
  EXPECT_EQ(argmin(transpose(x)).item<uint32_t>(), 5u);  // x.T flat: 3 1 7 1 7 0
  EXPECT_EQ(argmax(transpose(x)).item<uint32_t>(), 2u);
  // NaN wins, first NaN.
  array n({1.f, NAN, 5.f, NAN}, {4});
  EXPECT_EQ(argmax(n).item<uint32_t>(), 1u);
  EXPECT_EQ(argmin(n).item<uint32_t>(), 1u);
  array n0({NAN, 9.f}, {2});
  EXPECT_EQ(argmax(n0).item<uint32_t>(), 0u);
  EXPECT_EQ(argmin(n0).item<uint32_t>(), 0u);
}

TEST(Reduce, ArgmaxEveryDtypeAndLayout) {
  for (Dtype t : harness::real_types()) {
    for (const Shape& shape : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}, Shape{6, 40}}) {
      int nd = static_cast<int>(shape.size());
      auto values = harness::rows_repeated(
          harness::random_values(shape_size(shape), t, -20, 20, 11), shape);
      for (Layout layout : harness::all_layouts()) {
        array x = layout_input(values, shape, t, layout);
        for (int axis = -nd; axis < nd; ++axis) {
          std::string ctx = dtype_name(t) + " " + shape_str(shape) + " " +
                            harness::layout_name(layout) + " axis " + std::to_string(axis);
          auto first_of = [](const std::vector<double>& g, bool is_max) {
            size_t best = 0;
            for (size_t i = 1; i < g.size(); ++i) {
              if (is_max ? g[i] > g[best] : g[i] < g[best]) best = i;
            }
            return static_cast<double>(best);
          };
          harness::expect_values(argmax(x, axis),
                                 ref(values, shape, {axis}, [&](auto& g) { return first_of(g, true); }),
                                 "argmax " + ctx, 0, 0);
          harness::expect_values(argmin(x, axis),
                                 ref(values, shape, {axis}, [&](auto& g) { return first_of(g, false); }),
                                 "argmin " + ctx, 0, 0);
        }
      }
    }
  }
}

TEST(Reduce, LogSumExpInfinities) {
  auto lse = [](std::vector<double> v) {
    return logsumexp(harness::from_doubles(v, {static_cast<int>(v.size())}, float32)).item<float>();
  };
  EXPECT_EQ(lse({-kInf, -kInf}), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(lse({kInf, 1}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(lse({kInf, -kInf}), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(lse({kNaN, 1})));
  EXPECT_NEAR(lse({-kInf, 0}), 0.0, 1e-7);
  EXPECT_NEAR(lse({1000, 1000}), 1000 + std::log(2.0), 1e-3);
  EXPECT_NEAR(lse({-1000, -1000}), -1000 + std::log(2.0), 1e-3);
  array x({1.f, 2.f, 3.f, 4.f}, {2, 2});
  harness::expect_values(logsumexp(x, 0, true), {std::log(std::exp(1) + std::exp(3)),
                                                 std::log(std::exp(2) + std::exp(4))},
                         "lse axis 0", 1e-6, 1e-6);
  EXPECT_EQ(logsumexp(x, 0, true).shape(), (Shape{1, 2}));
  EXPECT_EQ(logsumexp(array({1, 2}, int32)).dtype(), float32);
}

namespace {

std::vector<double> softmax_ref(const std::vector<double>& v, const Shape& shape,
                                const std::vector<int>& axes_in) {
  // Softmax over the groups of `axes`, scattered back to row-major order.
  int nd = static_cast<int>(shape.size());
  auto axes = norm(axes_in, nd);
  auto g = groups(v, shape, axes);
  std::vector<std::vector<double>> sm(g.size());
  for (size_t o = 0; o < g.size(); ++o) {
    double m = -kInf;
    for (double x : g[o]) m = std::max(m, x);
    double s = 0;
    for (double x : g[o]) s += std::exp(x - m);
    for (double x : g[o]) sm[o].push_back(std::exp(x - m) / s);
  }
  // Walk the array again in the order groups() used.
  std::vector<char> red(nd, 0);
  for (int a : axes) red[a] = 1;
  std::vector<size_t> pos(g.size(), 0);
  std::vector<double> out(v.size());
  std::vector<int> idx(nd, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    size_t o = 0;
    for (int d = 0; d < nd; ++d) {
      if (!red[d]) o = o * shape[d] + idx[d];
    }
    out[i] = sm[o][pos[o]++];
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace

TEST(Reduce, SoftmaxEveryDtypeLayoutAndAxes) {
  for (Dtype t : harness::real_types()) {
    for (const Shape& shape : harness::sweep_shapes()) {
      int nd = static_cast<int>(shape.size());
      auto values =
          harness::rows_repeated(harness::random_values(shape_size(shape), t, -5, 5, 5), shape);
      for (Layout layout : harness::all_layouts()) {
        array x = layout_input(values, shape, t, layout);
        for (auto& axes : axes_for(nd)) {
          std::string ctx = dtype_name(t) + " " + shape_str(shape) + " " +
                            harness::layout_name(layout) + " axes " + ints_str(axes);
          array y = softmax(x, axes);
          EXPECT_EQ(y.dtype(), inexact_type(t)) << ctx;
          EXPECT_EQ(y.shape(), shape) << ctx;
          double tol = tolerance(y.dtype(), "softmax");
          harness::expect_values(y, softmax_ref(values, shape, axes), ctx, tol, tol);
        }
        std::vector<int> all_ax(nd);
        std::iota(all_ax.begin(), all_ax.end(), 0);
        array y = softmax(x, true);
        double tol = tolerance(y.dtype(), "softmax");
        harness::expect_values(y, softmax_ref(values, shape, all_ax), dtype_name(t) + " all", tol,
                               tol);
      }
    }
  }
}

TEST(Reduce, SoftmaxRowsSumToOneAndLargeValues) {
  array big({1000.f, 1000.f}, {2});
  harness::expect_values(softmax(big), {0.5, 0.5}, "softmax big", 1e-7, 1e-7);
  harness::expect_values(softmax(array({-1000.f, -1000.f}, {2})), {0.5, 0.5}, "softmax -big");
  harness::expect_values(softmax(harness::from_doubles({0, -kInf}, {2}, float32)), {1, 0}, "softmax -inf");
  // Rows of various lengths (lanes and tails), donated input, sum to 1.
  for (int n : {1, 5, 16, 17, 100, 3000}) {
    auto v = harness::random_values(4 * n, float32, -30, 30, n);
    array x = harness::from_doubles(v, {4, n}, float32);
    array y = softmax(x, -1);
    harness::expect_values(sum(y, -1), {1, 1, 1, 1}, "rows sum n=" + std::to_string(n), 1e-5,
                           1e-5);
    harness::expect_values(y, softmax_ref(v, {4, n}, {-1}), "softmax n=" + std::to_string(n),
                           1e-5, 1e-7);
  }
  // Inputs used again after a softmax keep their values.
  array x({1.f, 2.f, 3.f}, {3});
  array y = softmax(x);
  eval(y);
  harness::expect_values(x, {1, 2, 3}, "input kept");
  EXPECT_EQ(softmax(x, std::vector<int>{}).shape(), (Shape{3}));
  harness::expect_values(softmax(x, std::vector<int>{}), {1, 1, 1}, "softmax over no axes");
  array s(2.5f);
  EXPECT_EQ(softmax(s).item<float>(), 1.0f);
}

TEST(Reduce, Trace) {
  std::vector<double> v(12);
  std::iota(v.begin(), v.end(), 0.0);
  array m = harness::from_doubles(v, {3, 4}, int32);  // [[0..3],[4..7],[8..11]]
  EXPECT_EQ(trace(m).dtype(), int32);
  EXPECT_EQ(trace(m).item<int>(), 0 + 5 + 10);
  EXPECT_EQ(trace(m, 1, 0, 1).item<int>(), 1 + 6 + 11);
  EXPECT_EQ(trace(m, 3, 0, 1).item<int>(), 3);
  EXPECT_EQ(trace(m, -1, 0, 1).item<int>(), 4 + 9);
  EXPECT_EQ(trace(m, 4, 0, 1).item<int>(), 0);
  EXPECT_EQ(trace(m, -3, 0, 1).item<int>(), 0);
  EXPECT_EQ(trace(m, 0, 1, 0).item<int>(), 15);
  EXPECT_EQ(trace(m, 0, 0, 1, float32).dtype(), float32);
  EXPECT_EQ(trace(m, 0, 0, 1, float32).item<float>(), 15.0f);
  EXPECT_EQ(trace(astype(m, int8)).dtype(), int32);
  EXPECT_EQ(trace(transpose(m)).item<int>(), 15);
  // 3-D: the planes of axes (1, 2), for each index of axis 0; and a transposed layout.
  std::vector<double> w(24);
  std::iota(w.begin(), w.end(), 0.0);
  for (Layout layout : harness::all_layouts()) {
    auto wv = harness::rows_repeated(w, {2, 3, 4});
    array a = layout_input(wv, {2, 3, 4}, float32, layout);
    std::vector<double> want;
    for (int i = 0; i < 2; ++i) {
      want.push_back(wv[i * 12 + 0] + wv[i * 12 + 5] + wv[i * 12 + 10]);
    }
    harness::expect_values(trace(a, 0, 1, 2), want, harness::layout_name(layout));
    // axis1 = 2, axis2 = 0, offset -1: a[0, j, 1] + a[1, j, 2].
    std::vector<double> want2;
    for (int j = 0; j < 3; ++j) want2.push_back(wv[j * 4 + 1] + wv[12 + j * 4 + 2]);
    harness::expect_values(trace(a, -1, 2, 0), want2, "axes (2,0) offset -1");
  }
  EXPECT_THROW(trace(array({1.f, 2.f})), std::invalid_argument);
  EXPECT_THROW(trace(m, 0, 1, 1), std::invalid_argument);
  EXPECT_THROW(trace(m, 0, 1, -1), std::invalid_argument);
  EXPECT_THROW(trace(m, 0, 0, 2), std::out_of_range);
}

// ---- median, minmax, number_of_elements ------------------------------------

TEST(Median, AgainstHandValuesOnEachDevice) {
  harness::on_each_device([] {
    array x({3.f, 1.f, 2.f, 4.f, 6.f, 5.f}, {2, 3});
    harness::expect_values(median(x), {3.5}, "all");
    harness::expect_values(median(x, 1), {2, 5}, "axis 1");
    array k = median(x, 0, true);
    EXPECT_EQ(k.shape(), (Shape{1, 3}));
    harness::expect_values(k, {3.5, 3.5, 3.5}, "axis 0 keepdims");
    harness::expect_values(median(transpose(x), 0), {2, 5}, "transposed view");
    // Integers give float32 (float-out); a NaN gives NaN.
    array i = median(array({1, 2, 4, 8}));
    EXPECT_EQ(i.dtype(), float32);
    harness::expect_values(i, {3}, "int");
    EXPECT_EQ(median(array({1.f, 2.f}, bfloat16)).dtype(), bfloat16);
    EXPECT_TRUE(std::isnan(median(array({3.f, NAN, 1.f})).item<float>()));
    EXPECT_THROW(median(zeros({0})), std::invalid_argument);
    EXPECT_THROW(median(array({1.f}), 1), std::out_of_range);
  });
}

TEST(Median, DerivativesGoToTheMiddleElements) {
  auto f = [](const std::vector<array>& x) { return std::vector{median(x[0], 1)}; };
  grad_check::check_derivatives("median", f, {grad_check::random_f64({3, 5}, 3)});
  grad_check::check_derivatives("median even", f, {grad_check::random_f64({2, 4}, 4)});
}

TEST(MinMax, IsMinAndMax) {
  array x({3, 1, 2, 7}, {2, 2}, int32);
  auto r = minmax(x, 0);
  ASSERT_EQ(r.size(), 2u);
  harness::expect_values(r[0], {2, 1}, "min");
  harness::expect_values(r[1], {3, 7}, "max");
  auto all = minmax(x);
  EXPECT_EQ(all[0].item<int32_t>(), 1);
  EXPECT_EQ(all[1].item<int32_t>(), 7);
}

TEST(NumberOfElements, OverAxesAndTheirComplement) {
  array x = zeros({2, 3, 4});
  EXPECT_EQ(number_of_elements(x, {0, 2}, false).item<int32_t>(), 8);
  EXPECT_EQ(number_of_elements(x, {0, 2}, true).item<int32_t>(), 3);
  array f = number_of_elements(x, {-1}, false, float32);
  EXPECT_EQ(f.dtype(), float32);
  EXPECT_EQ(f.item<float>(), 4.f);
  EXPECT_THROW(number_of_elements(x, {3}, false), std::out_of_range);
}
