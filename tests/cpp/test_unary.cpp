// Unary elementwise ops: every op on every dtype it accepts, every layout and
// the swept shapes, against a float64 (or complex<double>) reference; special
// values; integer edge cases; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>

#include "harness.h"

using namespace tessera;
using harness::Layout;

namespace {

using cd = std::complex<double>;

using harness::Rule;
using harness::out_dtype;
using harness::wrap_int;

struct UnaryCase {
  std::string name;
  std::function<array(const array&)> fn;
  std::function<double(double)> ref;
  std::vector<Dtype> dtypes;
  double lo, hi;
  Rule rule;
  // Set when complex64 is accepted: the reference and the output dtype.
  std::function<cd(cd)> cref = nullptr;
  Dtype complex_out = complex64;
};

std::vector<Shape> shapes() { return harness::sweep_shapes(); }

bool empty(const Shape& s) { return shape_size(s) == 0; }

// The harness's with_layout for complex64 values.
array complex_with_layout(const std::vector<cd>& v, const Shape& shape, Layout layout) {
  auto make = [](const std::vector<cd>& w, const Shape& s) {
    std::vector<complex64_t> c(w.size());
    for (size_t i = 0; i < w.size(); ++i) c[i] = complex64_t(float(w[i].real()), float(w[i].imag()));
    return array(c.begin(), s, complex64);
  };
  int nd = static_cast<int>(shape.size());
  array out = make(v, shape);
  if (nd > 0 && layout == Layout::transposed) {
    out = transpose(contiguous(transpose(make(v, shape))));
  } else if (nd > 0 && layout == Layout::strided) {
    Shape wide = shape;
    wide.back() *= 2;
    std::vector<cd> w(v.size() * 2, cd(-7, 0));
    for (size_t i = 0; i < v.size(); ++i) w[2 * i] = v[i];
    Shape start(nd, 0), step(nd, 1);
    step.back() = 2;
    out = slice(make(w, wide), start, wide, step);
  } else if (nd > 0 && layout == Layout::broadcast) {
    Shape row(shape.begin() + 1, shape.end());
    std::vector<cd> r(v.begin(), v.begin() + v.size() / shape[0]);
    out = broadcast_to(make(r, row), shape);
  }
  eval(out);
  return out;
}

void expect_complex(const array& got, const std::vector<cd>& want, const std::string& ctx,
                    double tol) {
  auto g = harness::to_complex(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    bool ok = std::abs(g[i] - want[i]) <= tol + tol * std::abs(want[i]);
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

void run_case(const UnaryCase& c) {
  uint64_t seed = 1;
  for (Dtype t : c.dtypes) {
    Dtype want_dtype = out_dtype(c.rule, t);
    for (const Shape& shape : shapes()) {
      for (Layout layout : harness::all_layouts()) {
        if (layout == Layout::broadcast && empty(shape)) continue;
        auto v = harness::random_values(shape_size(shape), t, c.lo, c.hi, seed++);
        for (auto& e : v) e += 0.0;  // integers rounded from negatives: -0 -> 0
        if (layout == Layout::broadcast) v = harness::rows_repeated(v, shape);
        array x = harness::with_layout(v, shape, t, layout);
        std::ostringstream ctx;
        ctx << c.name << " " << t << " " << shape_str(shape) << " "
            << harness::layout_name(layout);
        array y = c.fn(x);
        ASSERT_EQ(y.dtype(), want_dtype) << ctx.str();
        ASSERT_EQ(y.shape(), shape) << ctx.str();
        std::vector<double> want(v.size());
        for (size_t i = 0; i < v.size(); ++i) want[i] = wrap_int(c.ref(v[i]), want_dtype);
        harness::expect_values(y, want, ctx.str());
      }
    }
  }
  if (!c.cref) return;
  for (const Shape& shape : shapes()) {
    for (Layout layout : harness::all_layouts()) {
      if (layout == Layout::broadcast && empty(shape)) continue;
      size_t n = shape_size(shape);
      auto re = harness::random_values(n, float32, -1, 1, seed++);
      auto im = harness::random_values(n, float32, 0.1, 0.9, seed++);
      std::vector<cd> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = cd(re[i], im[i]);
      if (layout == Layout::broadcast && !shape.empty() && n > 0) {
        size_t row = n / shape[0];
        for (size_t i = row; i < n; ++i) v[i] = v[i % row];
      }
      array x = complex_with_layout(v, shape, layout);
      std::ostringstream ctx;
      ctx << c.name << " complex64 " << shape_str(shape) << " "
          << harness::layout_name(layout);
      array y = c.fn(x);
      ASSERT_EQ(y.dtype(), c.complex_out) << ctx.str();
      ASSERT_EQ(y.shape(), shape) << ctx.str();
      std::vector<cd> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = c.cref(v[i]);
      expect_complex(y, want, ctx.str(), 1e-5);
    }
  }
}

std::vector<Dtype> real_types() { return harness::real_types(); }
std::vector<Dtype> real_numbers() {  // real types without bool
  auto v = harness::real_types();
  v.erase(v.begin());
  return v;
}

double sign_of(double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }

// erfinv by bisection on std::erf (independent of the kernel's method).
double erfinv_ref(double y) {
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  double lo = -7, hi = 7;
  for (int i = 0; i < 200; ++i) {
    double mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

std::vector<UnaryCase> cases() {
  auto reals = real_types();
  auto numbers = real_numbers();
  auto floats = harness::float_types();
  auto ints_bool = harness::int_types();
  ints_bool.insert(ints_bool.begin(), bool_);
  auto id = [](double v) { return v; };
  auto cid = [](cd z) { return z; };
  std::vector<UnaryCase> c = {
      {"abs", [](const array& x) { return abs(x); }, [](double v) { return std::fabs(v); }, reals,
       -5, 5, Rule::same, [](cd z) { return cd(std::abs(z)); }, float32},
      {"positive", [](const array& x) { return positive(x); }, id, reals, -5, 5, Rule::same, cid},
      {"negative", [](const array& x) { return negative(x); }, [](double v) { return -v; },
       numbers, -5, 5, Rule::same, [](cd z) { return -z; }},
      {"sign", [](const array& x) { return sign(x); }, sign_of, reals, -3, 3, Rule::same,
       [](cd z) { return z / std::abs(z); }},
      {"logical_not", [](const array& x) { return logical_not(x); },
       [](double v) { return double(v == 0); }, reals, -2, 2, Rule::boolean,
       [](cd z) { return cd(z == cd(0)); }, bool_},
      {"reciprocal", [](const array& x) { return reciprocal(x); }, [](double v) { return 1 / v; },
       reals, -4, 4, Rule::float_out, [](cd z) { return 1.0 / z; }},
      {"floor", [](const array& x) { return floor(x); }, [](double v) { return std::floor(v); },
       reals, -5, 5, Rule::same},
      {"ceil", [](const array& x) { return ceil(x); }, [](double v) { return std::ceil(v); },
       reals, -5, 5, Rule::same},
      {"trunc", [](const array& x) { return trunc(x); }, [](double v) { return std::trunc(v); },
       reals, -5, 5, Rule::same},
      {"round", [](const array& x) { return round(x); }, [](double v) { return std::nearbyint(v); },
       reals, -5, 5, Rule::same,
       [](cd z) { return cd(std::nearbyint(z.real()), std::nearbyint(z.imag())); }},
      {"round(1)", [](const array& x) { return round(x, 1); },
       [](double v) { return std::nearbyint(v * 10) / 10; }, floats, -5, 5, Rule::same},
      {"round(-1)", [](const array& x) { return round(x, -1); },
       [](double v) { return std::nearbyint(v / 10) * 10; }, harness::int_types(), 0, 100,
       Rule::same},
      {"square", [](const array& x) { return square(x); }, [](double v) { return v * v; }, reals,
       -5, 5, Rule::same, [](cd z) { return z * z; }},
      {"exp", [](const array& x) { return exp(x); }, [](double v) { return std::exp(v); }, reals,
       -3, 3, Rule::float_out, [](cd z) { return std::exp(z); }},
      {"expm1", [](const array& x) { return expm1(x); }, [](double v) { return std::expm1(v); },
       reals, -1, 1, Rule::float_out, [](cd z) { return std::exp(z) - 1.0; }},
      {"sqrt", [](const array& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); },
       reals, 0, 9, Rule::float_out, [](cd z) { return std::sqrt(z); }},
      {"rsqrt", [](const array& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); },
       reals, 0.5, 9, Rule::float_out, [](cd z) { return 1.0 / std::sqrt(z); }},
      {"sin", [](const array& x) { return sin(x); }, [](double v) { return std::sin(v); }, reals,
       -3, 3, Rule::float_out, [](cd z) { return std::sin(z); }},
      {"cos", [](const array& x) { return cos(x); }, [](double v) { return std::cos(v); }, reals,
       -3, 3, Rule::float_out, [](cd z) { return std::cos(z); }},
      {"tan", [](const array& x) { return tan(x); }, [](double v) { return std::tan(v); }, reals,
       -1.2, 1.2, Rule::float_out, [](cd z) { return std::tan(z); }},
      {"arcsin", [](const array& x) { return arcsin(x); }, [](double v) { return std::asin(v); },
       reals, -1, 1, Rule::float_out, [](cd z) { return std::asin(z); }},
      {"arccos", [](const array& x) { return arccos(x); }, [](double v) { return std::acos(v); },
       reals, -1, 1, Rule::float_out, [](cd z) { return std::acos(z); }},
      {"arctan", [](const array& x) { return arctan(x); }, [](double v) { return std::atan(v); },
       reals, -5, 5, Rule::float_out, [](cd z) { return std::atan(z); }},
      {"sinh", [](const array& x) { return sinh(x); }, [](double v) { return std::sinh(v); },
       reals, -3, 3, Rule::float_out, [](cd z) { return std::sinh(z); }},
      {"cosh", [](const array& x) { return cosh(x); }, [](double v) { return std::cosh(v); },
       reals, -3, 3, Rule::float_out, [](cd z) { return std::cosh(z); }},
      {"tanh", [](const array& x) { return tanh(x); }, [](double v) { return std::tanh(v); },
       reals, -3, 3, Rule::float_out, [](cd z) { return std::tanh(z); }},
      {"arcsinh", [](const array& x) { return arcsinh(x); }, [](double v) { return std::asinh(v); },
       reals, -5, 5, Rule::float_out, [](cd z) { return std::asinh(z); }},
      {"arccosh", [](const array& x) { return arccosh(x); }, [](double v) { return std::acosh(v); },
       reals, 1, 5, Rule::float_out, [](cd z) { return std::acosh(z); }},
      {"arctanh", [](const array& x) { return arctanh(x); }, [](double v) { return std::atanh(v); },
       reals, -0.9, 0.9, Rule::float_out, [](cd z) { return std::atanh(z); }},
      {"degrees", [](const array& x) { return degrees(x); }, [](double v) { return v * 180 / M_PI; },
       reals, -5, 5, Rule::float_out},
      {"radians", [](const array& x) { return radians(x); }, [](double v) { return v * M_PI / 180; },
       reals, -100, 100, Rule::float_out},
      {"log", [](const array& x) { return log(x); }, [](double v) { return std::log(v); }, reals,
       0.5, 10, Rule::float_out, [](cd z) { return std::log(z); }},
      {"log2", [](const array& x) { return log2(x); }, [](double v) { return std::log2(v); },
       reals, 0.5, 10, Rule::float_out, [](cd z) { return std::log(z) / std::log(2.0); }},
      {"log10", [](const array& x) { return log10(x); }, [](double v) { return std::log10(v); },
       reals, 0.5, 10, Rule::float_out, [](cd z) { return std::log10(z); }},
      {"log1p", [](const array& x) { return log1p(x); }, [](double v) { return std::log1p(v); },
       reals, -0.5, 5, Rule::float_out, [](cd z) { return std::log(1.0 + z); }},
      {"sigmoid", [](const array& x) { return sigmoid(x); },
       [](double v) { return 1 / (1 + std::exp(-v)); }, reals, -5, 5, Rule::float_out,
       [](cd z) { return 1.0 / (1.0 + std::exp(-z)); }},
      {"erf", [](const array& x) { return erf(x); }, [](double v) { return std::erf(v); }, reals,
       -2, 2, Rule::float_out},
      {"erfinv", [](const array& x) { return erfinv(x); }, erfinv_ref, reals, -0.99, 0.99,
       Rule::float_out},
      {"stop_gradient", [](const array& x) { return stop_gradient(x); }, id, reals, -5, 5,
       Rule::same, cid},
      {"conjugate", [](const array& x) { return conjugate(x); }, id, reals, -5, 5, Rule::same,
       [](cd z) { return std::conj(z); }},
      {"real", [](const array& x) { return real(x); }, id, reals, -5, 5, Rule::same,
       [](cd z) { return cd(z.real()); }, float32},
      {"imag", [](const array& x) { return imag(x); }, [](double) { return 0.0; }, reals, -5, 5,
       Rule::same, [](cd z) { return cd(z.imag()); }, float32},
      {"bitwise_invert", [](const array& x) { return bitwise_invert(x); },
       [](double v) { return -v - 1; }, ints_bool, -50, 50, Rule::same},
      {"isnan", [](const array& x) { return isnan(x); }, [](double v) { return double(std::isnan(v)); },
       reals, -5, 5, Rule::boolean, [](cd) { return cd(0); }, bool_},
      {"isinf", [](const array& x) { return isinf(x); }, [](double v) { return double(std::isinf(v)); },
       reals, -5, 5, Rule::boolean, [](cd) { return cd(0); }, bool_},
      {"isfinite", [](const array& x) { return isfinite(x); },
       [](double v) { return double(std::isfinite(v)); }, reals, -5, 5, Rule::boolean,
       [](cd) { return cd(1); }, bool_},
      {"isposinf", [](const array& x) { return isposinf(x); }, [](double) { return 0.0; }, reals,
       -5, 5, Rule::boolean},
      {"isneginf", [](const array& x) { return isneginf(x); }, [](double) { return 0.0; }, reals,
       -5, 5, Rule::boolean},
      {"nan_to_num", [](const array& x) { return nan_to_num(x); }, id, reals, -5, 5, Rule::same,
       cid},
      {"operator-", [](const array& x) { return -x; }, [](double v) { return -v; }, numbers, -5,
       5, Rule::same},
      {"operator~", [](const array& x) { return ~x; }, [](double v) { return -v - 1; }, ints_bool,
       -50, 50, Rule::same},
      {"operator!", [](const array& x) { return !x; }, [](double v) { return double(v == 0); },
       reals, -2, 2, Rule::boolean},
  };
  return c;
}

}  // namespace

// bitwise_invert of bool is logical not: its reference above is -v - 1, which
// wrap_int maps to "nonzero", so bool needs its own check.
TEST(Unary, BitwiseInvertOfBoolIsLogicalNot) {
  harness::expect_values(bitwise_invert(array({true, false})), {0, 1}, "bool");
  harness::expect_values(~array({true, false}), {0, 1}, "operator~");
}

TEST(Unary, EveryOpEveryDtypeEveryLayout) {
  for (const auto& c : cases()) {
    if (c.name == "bitwise_invert" || c.name == "operator~") {
      UnaryCase ints = c;
      ints.dtypes = harness::int_types();
      run_case(ints);
    } else {
      run_case(c);
    }
  }
}

TEST(Unary, ResultDtypes) {
  for (Dtype t : harness::all_types()) {
    array x = astype(array({1, 2}), t);
    EXPECT_EQ(exp(x).dtype(), inexact_type(t)) << t;
    EXPECT_EQ(sqrt(x).dtype(), inexact_type(t)) << t;
    EXPECT_EQ(isnan(x).dtype(), bool_) << t;
    EXPECT_EQ(logical_not(x).dtype(), bool_) << t;
    EXPECT_EQ(abs(x).dtype(), t == complex64 ? float32 : t) << t;
    EXPECT_EQ(real(x).dtype(), t == complex64 ? float32 : t) << t;
    EXPECT_EQ(imag(x).dtype(), t == complex64 ? float32 : t) << t;
    EXPECT_EQ(square(x).dtype(), t) << t;
    EXPECT_EQ(sign(x).dtype(), t) << t;
  }
}

TEST(Unary, SpecialFloatValues) {
  const double inf = INFINITY, nan = NAN;
  for (Dtype t : {float16, bfloat16, float32, float64}) {
    array x = harness::from_doubles({nan, inf, -inf, -0.0, 0.0, -1.0}, {6}, t);
    std::string ctx = dtype_name(t);
    harness::expect_values(exp(x), {nan, inf, 0, 1, 1, std::exp(-1.0)}, ctx + " exp");
    harness::expect_values(log(x), {nan, inf, nan, -inf, -inf, nan}, ctx + " log");
    harness::expect_values(sqrt(x), {nan, inf, nan, 0, 0, nan}, ctx + " sqrt");
    harness::expect_values(abs(x), {nan, inf, inf, 0, 0, 1}, ctx + " abs");
    harness::expect_values(sign(x), {nan, 1, -1, 0, 0, -1}, ctx + " sign");
    harness::expect_values(reciprocal(x), {nan, 0, 0, -inf, inf, -1}, ctx + " reciprocal");
    harness::expect_values(isnan(x), {1, 0, 0, 0, 0, 0}, ctx + " isnan");
    harness::expect_values(isinf(x), {0, 1, 1, 0, 0, 0}, ctx + " isinf");
    harness::expect_values(isfinite(x), {0, 0, 0, 1, 1, 1}, ctx + " isfinite");
    harness::expect_values(isposinf(x), {0, 1, 0, 0, 0, 0}, ctx + " isposinf");
    harness::expect_values(isneginf(x), {0, 0, 1, 0, 0, 0}, ctx + " isneginf");
    harness::expect_values(sigmoid(x), {nan, 1, 0, 0.5, 0.5, 1 / (1 + std::exp(1.0))},
                           ctx + " sigmoid");
    harness::expect_values(erfinv(harness::from_doubles({1, -1, 2, 0}, {4}, t)),
                           {inf, -inf, nan, 0}, ctx + " erfinv");
    double big = finfo(t).max;
    harness::expect_values(nan_to_num(x), {0, big, -big, 0, 0, -1}, ctx + " nan_to_num");
    harness::expect_values(nan_to_num(x, 5.0f, 7.0f, -9.0f), {5, 7, -9, 0, 0, -1},
                           ctx + " nan_to_num(5, 7, -9)");
    harness::expect_values(logical_not(x), {0, 0, 0, 1, 1, 0}, ctx + " logical_not");
  }
  // -0.0 keeps its sign through negative, floor and ceil.
  array z = negative(array(0.0f));
  EXPECT_TRUE(std::signbit(z.item<float>()));
  EXPECT_TRUE(std::signbit(ceil(array(-0.5f)).item<float>()));
  EXPECT_TRUE(std::signbit(floor(array(-0.0f)).item<float>()));
}

TEST(Unary, RoundHalfToEven) {
  array x({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f});
  harness::expect_values(round(x), {0, 2, 2, 0, -2, -2, 3}, "round");
  harness::expect_values(round(array({1.25, 1.35, -2.25}, float64), 1), {1.2, 1.4, -2.2},
                         "round(1)");
  harness::expect_values(round(array({1234.5f}), -2), {1200}, "round(-2)");
  harness::expect_values(round(array({15, 25, -35, 44}, int32), -1), {20, 20, -40, 40},
                         "int round(-1)");
  EXPECT_EQ(round(array({15, 25}, int32), -1).dtype(), int32);
  harness::expect_values(round(array({true, false}), -1), {0, 0}, "bool round(-1)");
  harness::expect_values(round(array({true, false}), 2), {1, 0}, "bool round(2)");
  auto c = harness::to_complex(round(array(complex64_t(2.5f, -1.5f))));
  EXPECT_EQ(c[0], cd(2, -2));
}

TEST(Unary, IntegerEdgeCases) {
  harness::expect_values(abs(array({-128, 127, -5}, int8)), {-128, 127, 5}, "abs int8 wraps");
  harness::expect_values(negative(array({1, 0, 255}, uint8)), {255, 0, 1}, "negative uint8");
  array big(std::numeric_limits<int32_t>::min());
  EXPECT_EQ(negative(big).item<int32_t>(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(abs(array(std::numeric_limits<int64_t>::min())).item<int64_t>(),
            std::numeric_limits<int64_t>::min());
  harness::expect_values(square(array({16, -12}, int8)), {0, -112}, "square int8 wraps");
  harness::expect_values(bitwise_invert(array({0, 5, 255}, uint8)), {255, 250, 0}, "~uint8");
  harness::expect_values(bitwise_invert(array({0, 5, -1}, int32)), {-1, -6, 0}, "~int32");
  EXPECT_EQ(bitwise_invert(array(uint64_t{0})).item<uint64_t>(),
            std::numeric_limits<uint64_t>::max());
  harness::expect_values(sign(array({-7, 0, 9}, int64)), {-1, 0, 1}, "sign int64");
  harness::expect_values(sign(array({0, 9}, uint16)), {0, 1}, "sign uint16");
  harness::expect_values(floor(array({-3, 4}, int16)), {-3, 4}, "floor int16 unchanged");
  EXPECT_EQ(floor(array({-3, 4}, int16)).dtype(), int16);
  harness::expect_values(exp(array({0, 1}, int64)), {1, std::exp(1.0)}, "exp int64");
  harness::expect_values(sqrt(array({true, false})), {1, 0}, "sqrt bool");
  harness::expect_values(nan_to_num(array({1, 2}, int32)), {1, 2}, "nan_to_num int32");
}

TEST(Unary, ComplexSpecials) {
  array z(complex64_t(3, -4));
  EXPECT_EQ(abs(z).item<float>(), 5.0f);
  EXPECT_EQ(real(z).item<float>(), 3.0f);
  EXPECT_EQ(imag(z).item<float>(), -4.0f);
  EXPECT_EQ(conjugate(z).item<complex64_t>(), complex64_t(3, 4));
  EXPECT_EQ(sign(array(complex64_t(0, 0))).item<complex64_t>(), complex64_t(0, 0));
  array n(complex64_t(NAN, 1));
  EXPECT_TRUE(isnan(n).item<bool>());
  EXPECT_FALSE(isfinite(n).item<bool>());
  array i(complex64_t(1, INFINITY));
  EXPECT_TRUE(isinf(i).item<bool>());
  auto c = harness::to_complex(nan_to_num(array(complex64_t(NAN, -INFINITY))));
  EXPECT_EQ(c[0], cd(0, -std::numeric_limits<float>::max()));
}

TEST(Unary, LargeArraysRunInParallelChunks) {
  const int n = 300001;
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i % 1000) / 100.0 - 5;
  array x = harness::from_doubles(v, {n}, float32);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) want[i] = std::exp(float(v[i]));
  harness::expect_values(exp(x), want, "exp large");
  // A large strided view: the general path, split by rows.
  array m = harness::from_doubles(v, {1, n}, float32);
  array t = slice(reshape(m, {n}), {n - 1}, {-n - 1}, {-1});  // reversed
  std::vector<double> want_rev(n);
  for (int i = 0; i < n; ++i) want_rev[i] = -float(v[n - 1 - i]);
  harness::expect_values(negative(t), want_rev, "negative reversed");
}

TEST(Unary, InputsStillHeldAreNotOverwritten) {
  array x = copy(array({1.f, 2.f, 3.f}));
  eval(x);
  array y = exp(x);
  eval(y);
  harness::expect_values(x, {1, 2, 3}, "input unchanged");
  // A temporary input may be donated; the result is right either way.
  array z = sqrt(exp(copy(array({0.f, 2.f}))));
  harness::expect_values(z, {1, std::exp(1.0)}, "chain");
}

TEST(Unary, LastUseInputBufferIsDonated) {
  array x = copy(array({1.f, 4.f, 9.f}));
  eval(x);
  const void* p = x.data<float>();
  array y = sqrt(x);
  x = array(0);  // drop the last handle to the input
  eval(y);
  EXPECT_EQ(static_cast<const void*>(y.data<float>()), p);
  harness::expect_values(y, {1, 2, 3}, "sqrt in place");
}

TEST(Unary, ZeroDimAndEmpty) {
  array s = exp(array(0.0f));
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_EQ(s.item<float>(), 1.0f);
  array e = sin(astype(array({1.f}), float32));
  array empty = slice(array({1.f, 2.f}), {0}, {0}, {1});
  array r = isnan(empty);
  eval(r);
  EXPECT_EQ(r.shape(), (Shape{0}));
  EXPECT_EQ(r.dtype(), bool_);
  EXPECT_EQ(e.size(), 1u);
}

TEST(Unary, Errors) {
  auto expect_message = [](const std::function<void()>& f, const std::string& op,
                           const std::string& dtype) {
    try {
      f();
      ADD_FAILURE() << op << ": expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[" + op + "]"), std::string::npos) << msg;
      EXPECT_NE(msg.find(dtype), std::string::npos) << msg;
    }
  };
  array b({true, false});
  array f({1.f, 2.f});
  array c(complex64_t(1, 2));
  expect_message([&] { negative(b); }, "negative", "bool");
  expect_message([&] { (void)-b; }, "negative", "bool");
  expect_message([&] { bitwise_invert(f); }, "bitwise_invert", "float32");
  expect_message([&] { bitwise_invert(c); }, "bitwise_invert", "complex64");
  expect_message([&] { bitwise_invert(astype(f, float16)); }, "bitwise_invert", "float16");
  expect_message([&] { (void)~f; }, "bitwise_invert", "float32");
  expect_message([&] { floor(c); }, "floor", "complex64");
  expect_message([&] { ceil(c); }, "ceil", "complex64");
  expect_message([&] { trunc(c); }, "trunc", "complex64");
  expect_message([&] { erf(c); }, "erf", "complex64");
  expect_message([&] { erfinv(c); }, "erfinv", "complex64");
  expect_message([&] { degrees(c); }, "degrees", "complex64");
  expect_message([&] { radians(c); }, "radians", "complex64");
  expect_message([&] { isposinf(c); }, "isposinf", "complex64");
  expect_message([&] { isneginf(c); }, "isneginf", "complex64");
  EXPECT_THROW(negative(b), std::invalid_argument);
  EXPECT_THROW(floor(c), std::invalid_argument);
}
