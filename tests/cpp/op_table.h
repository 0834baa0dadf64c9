// The elementwise ops, each described once: the function to call, a float64
// (and complex<double>) reference, the dtypes it accepts, the domain of each
// input, how the result dtype follows, how its derivatives are checked, and
// the tolerance per dtype. The value, derivative and vmap suites of
// test_elementwise.cpp run every entry on every device of harness::devices().
//
// A new op adds one entry:
//
//   unary("exp", [](auto& x) { return exp(x); }, [](double v) { return std::exp(v); },
//         reals(), {-3, 3}, Rule::float_out)
//       .complex([](cd z) { return std::exp(z); })
//       .smooth()
//       .complex_derivatives(),
#pragma once

#include <cmath>
#include <complex>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "harness.h"
#include "tessera/tessera.h"

namespace op_table {

using namespace tessera;
using harness::Layout;
using harness::Rule;
using cd = std::complex<double>;

// Where an input's values are drawn from: [lo, hi], rounded to its dtype. An
// input whose dtype does not follow the swept one (where's condition) names it.
struct Domain {
  double lo, hi;
  std::optional<Dtype> dtype = std::nullopt;
  bool operator==(const Domain&) const = default;
};

// How an op's derivatives are checked (test_elementwise.cpp, Derivatives).
enum class Grad {
  none,     // integer and bit ops: only the zero cotangents of integer inputs
  smooth,   // jvp and vjp against finite differences in float64
  zero,     // piecewise constant or a predicate: finite differences, and exactly zero
  blocked,  // zero by definition (stop_gradient): exactly zero
};

// Relative (and absolute) tolerance of a result of each dtype against the
// reference; integer and bool results are exact.
struct Tolerance {
  double f16 = 2e-3, bf16 = 1.6e-2, f32 = 2e-6, f64 = 1e-12, c64 = 1e-5;
  double operator()(Dtype t) const {
    if (t == float16) return f16;
    if (t == bfloat16) return bf16;
    if (t == float32) return f32;
    if (t == float64) return f64;
    if (t == complex64) return c64;
    return 0;
  }
};

using Fn = std::function<array(const std::vector<array>&)>;
// The result at one element from the inputs' values there, given the dtype
// the op computes in (the swept dtype).
using Ref = std::function<double(std::span<const double>, Dtype)>;
using ComplexRef = std::function<cd(std::span<const cd>)>;

namespace detail {

template <typename R>
Ref real_ref(R r) {
  return [r](std::span<const double> x, Dtype t) -> double {
    if constexpr (std::is_invocable_r_v<double, R, double>) {
      return r(x[0]);
    } else if constexpr (std::is_invocable_r_v<double, R, double, Dtype>) {
      return r(x[0], t);
    } else if constexpr (std::is_invocable_r_v<double, R, double, double>) {
      return r(x[0], x[1]);
    } else if constexpr (std::is_invocable_r_v<double, R, double, double, Dtype>) {
      return r(x[0], x[1], t);
    } else {
      return r(x[0], x[1], x[2]);
    }
  };
}

template <typename R>
ComplexRef complex_ref(R r) {
  return [r](std::span<const cd> z) -> cd {
    if constexpr (std::is_invocable_r_v<cd, R, cd>) {
      return r(z[0]);
    } else if constexpr (std::is_invocable_r_v<cd, R, cd, cd>) {
      return r(z[0], z[1]);
    } else {
      return r(z[0], z[1], z[2]);
    }
  };
}

}  // namespace detail

struct Op {
  std::string name;  // distinct; failures name the op by it
  Fn fn;
  Ref ref;
  std::vector<Dtype> dtypes;   // accepted; complex64 comes with cref
  std::vector<Domain> domain;  // one per input, for values and vmap
  Rule rule = Rule::same;      // the result dtype from the swept dtype
  ComplexRef cref = nullptr;
  // The real and imaginary parts of complex64 inputs: by default above the
  // branch cuts on the real axis; binary() takes both from [-2, 2].
  Domain complex_re{-1, 1}, complex_im{0.1, 0.9};
  Grad grad = Grad::none;
  std::vector<Domain> smooth_domain;  // where derivatives are checked, in float64
  bool complex_grad = false;          // derivatives also checked in complex64
  // Integer and bool dtypes on which the op returns its input (or a copy): its
  // derivatives there pass the tangent and the cotangent through, where other
  // integer and bool results have zero derivatives.
  std::vector<Dtype> identity_on;
  bool vmappable = true;
  std::vector<Layout> layouts = harness::all_layouts();
  Tolerance tol;

  int arity() const { return static_cast<int>(domain.size()); }
  bool accepts(Dtype t) const {
    for (Dtype d : dtypes) {
      if (d == t) return true;
    }
    return false;
  }
  // The dtype of input k when dtype t is swept.
  Dtype input_dtype(int k, Dtype t) const { return domain[k].dtype.value_or(t); }

  // Also complex64, against r (a function of one complex<double> per input).
  template <typename R>
  Op&& complex(R r) && {
    cref = detail::complex_ref(r);
    dtypes.push_back(complex64);
    return std::move(*this);
  }
  // Derivatives on float64 inputs drawn from `d` (default [-1, 1] each).
  Op&& smooth(std::vector<Domain> d = {}) && {
    return std::move(*this).derivatives(Grad::smooth, d);
  }
  Op&& zero_derivative(std::vector<Domain> d = {}) && {
    return std::move(*this).derivatives(Grad::zero, d);
  }
  Op&& blocked() && { return std::move(*this).derivatives(Grad::blocked, {}); }
  Op&& complex_derivatives() && {
    complex_grad = true;
    return std::move(*this);
  }
  Op&& identity_on_integers(std::vector<Dtype> dtypes) && {
    identity_on = std::move(dtypes);
    return std::move(*this);
  }

 private:
  Op&& derivatives(Grad g, std::vector<Domain> d) && {
    grad = g;
    if (d.empty()) {
      for (auto& in : domain) d.push_back(in.dtype ? in : Domain{-1, 1});
    }
    smooth_domain = std::move(d);
    return std::move(*this);
  }
};

namespace detail {

inline Op make_op(std::string name, Fn fn, Ref ref, std::vector<Dtype> dtypes,
                  std::vector<Domain> domain, Rule rule) {
  Op op;
  op.name = std::move(name);
  op.fn = std::move(fn);
  op.ref = std::move(ref);
  op.dtypes = std::move(dtypes);
  op.domain = std::move(domain);
  op.rule = rule;
  return op;
}

}  // namespace detail

template <typename F, typename R>
Op unary(std::string name, F f, R ref, std::vector<Dtype> dtypes, Domain d,
         Rule rule = Rule::same) {
  auto fn = [f](const std::vector<array>& x) { return f(x[0]); };
  return detail::make_op(std::move(name), fn, detail::real_ref(ref), std::move(dtypes), {d}, rule);
}

template <typename F, typename R>
Op binary(std::string name, F f, R ref, std::vector<Dtype> dtypes, Domain a, Domain b,
          Rule rule = Rule::same) {
  auto fn = [f](const std::vector<array>& x) { return f(x[0], x[1]); };
  Op op = detail::make_op(std::move(name), fn, detail::real_ref(ref), std::move(dtypes), {a, b},
                          rule);
  op.complex_re = op.complex_im = {-2, 2};
  return op;
}

template <typename F, typename R>
Op ternary(std::string name, F f, R ref, std::vector<Dtype> dtypes, Domain a, Domain b, Domain c,
           Rule rule = Rule::same) {
  auto fn = [f](const std::vector<array>& x) { return f(x[0], x[1], x[2]); };
  return detail::make_op(std::move(name), fn, detail::real_ref(ref), std::move(dtypes),
                         {a, b, c}, rule);
}

inline std::vector<Dtype> reals() { return harness::real_types(); }
inline std::vector<Dtype> numbers() {  // real types without bool
  auto v = harness::real_types();
  v.erase(v.begin());
  return v;
}
inline std::vector<Dtype> ints_bool() {
  auto v = harness::int_types();
  v.insert(v.begin(), bool_);
  return v;
}

namespace ref {

inline double sign(double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }

// erfinv by bisection on std::erf (independent of the kernel's method).
inline double erfinv(double y) {
  if (y == 1) return INFINITY;
  if (y == -1) return -INFINITY;
  double lo = -7, hi = 7;
  for (int i = 0; i < 200; ++i) {
    double mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The remainder with the sign of the divisor (Python); integers by zero give 0.
inline double remainder(double a, double b, Dtype t) {
  if (!is_inexact(t) && b == 0) return 0.0;
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Floor of the quotient (integers too, as Python and MLX); integers by zero give 0.
inline double floor_divide(double a, double b, Dtype t) {
  if (!is_inexact(t) && b == 0) return 0.0;
  return std::floor(a / b);
}

// ~v: bool negates, integers are two's complement (wrapped by the harness).
inline double bitwise_invert(double v, Dtype t) { return t == bool_ ? double(v == 0) : -v - 1; }

inline double isclose(double a, double b) {
  return double(a == b || std::abs(a - b) <= 0.1 + 0.5 * std::abs(b));
}

}  // namespace ref

// Every elementwise op of tessera/ops/unary.h and binary.h with one result.
inline std::vector<Op> make_ops() {
  const auto all = reals();
  const auto floats = harness::float_types();
  const auto ints = harness::int_types();
  auto id = [](double v) { return v; };
  auto cid = [](cd z) { return z; };
  std::vector<Op> ops = {
      // ---- unary ----------------------------------------------------------
      unary("abs", [](auto& x) { return abs(x); }, [](double v) { return std::fabs(v); }, all,
            {-5, 5}, Rule::real_part)
          .complex([](cd z) { return cd(std::abs(z)); })
          .smooth()
          .complex_derivatives()
          .identity_on_integers({bool_, uint8, uint16, uint32, uint64}),
      unary("positive", [](auto& x) { return positive(x); }, id, all, {-5, 5})
          .complex(cid)
          .smooth()
          .identity_on_integers(ints_bool()),
      unary("negative", [](auto& x) { return negative(x); }, [](double v) { return -v; },
            numbers(), {-5, 5})
          .complex([](cd z) { return -z; })
          .smooth()
          .complex_derivatives(),
      unary("sign", [](auto& x) { return sign(x); }, ref::sign, all, {-3, 3})
          .complex([](cd z) { return z / std::abs(z); })
          .zero_derivative(),
      unary("logical_not", [](auto& x) { return logical_not(x); },
            [](double v) { return double(v == 0); }, all, {-2, 2}, Rule::boolean)
          .complex([](cd z) { return cd(z == cd(0)); })
          .zero_derivative(),
      unary("reciprocal", [](auto& x) { return reciprocal(x); }, [](double v) { return 1 / v; },
            all, {-4, 4}, Rule::float_out)
          .complex([](cd z) { return 1.0 / z; })
          .smooth({{0.5, 2}})
          .complex_derivatives(),
      unary("floor", [](auto& x) { return floor(x); }, [](double v) { return std::floor(v); }, all,
            {-5, 5})
          .zero_derivative({{-3, 3}})
          .identity_on_integers(ints_bool()),
      unary("ceil", [](auto& x) { return ceil(x); }, [](double v) { return std::ceil(v); }, all,
            {-5, 5})
          .zero_derivative({{-3, 3}})
          .identity_on_integers(ints_bool()),
      unary("trunc", [](auto& x) { return trunc(x); }, [](double v) { return std::trunc(v); }, all,
            {-5, 5})
          .zero_derivative({{-3, 3}})
          .identity_on_integers(ints_bool()),
      unary("round", [](auto& x) { return round(x); }, [](double v) { return std::nearbyint(v); },
            all, {-5, 5})
          .complex([](cd z) { return cd(std::nearbyint(z.real()), std::nearbyint(z.imag())); })
          .zero_derivative({{-3, 3}})
          .identity_on_integers(ints_bool()),
      unary("round_1_decimal", [](auto& x) { return round(x, 1); },
            [](double v) { return std::nearbyint(v * 10) / 10; }, floats, {-5, 5})
          .zero_derivative({{-3, 3}}),
      unary("round_2_decimals", [](auto& x) { return round(x, 2); },
            [](double v) { return std::nearbyint(v * 100) / 100; }, floats, {-5, 5})
          .zero_derivative({{-3, 3}}),
      unary("round_minus_1_decimals", [](auto& x) { return round(x, -1); },
            [](double v) { return std::nearbyint(v / 10) * 10; }, ints, {0, 100}),
      unary("square", [](auto& x) { return square(x); }, [](double v) { return v * v; }, all,
            {-5, 5})
          .complex([](cd z) { return z * z; })
          .smooth()
          .complex_derivatives(),
      unary("exp", [](auto& x) { return exp(x); }, [](double v) { return std::exp(v); }, all,
            {-3, 3}, Rule::float_out)
          .complex([](cd z) { return std::exp(z); })
          .smooth()
          .complex_derivatives(),
      unary("expm1", [](auto& x) { return expm1(x); }, [](double v) { return std::expm1(v); }, all,
            {-1, 1}, Rule::float_out)
          .complex([](cd z) { return std::exp(z) - 1.0; })
          .smooth()
          .complex_derivatives(),
      unary("sqrt", [](auto& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, all,
            {0, 9}, Rule::float_out)
          .complex([](cd z) { return std::sqrt(z); })
          .smooth({{0.5, 2}})
          .complex_derivatives(),
      unary("rsqrt", [](auto& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); },
            all, {0.5, 9}, Rule::float_out)
          .complex([](cd z) { return 1.0 / std::sqrt(z); })
          .smooth({{0.5, 2}})
          .complex_derivatives(),
      unary("sin", [](auto& x) { return sin(x); }, [](double v) { return std::sin(v); }, all,
            {-3, 3}, Rule::float_out)
          .complex([](cd z) { return std::sin(z); })
          .smooth({{-3, 3}})
          .complex_derivatives(),
      unary("cos", [](auto& x) { return cos(x); }, [](double v) { return std::cos(v); }, all,
            {-3, 3}, Rule::float_out)
          .complex([](cd z) { return std::cos(z); })
          .smooth({{-3, 3}})
          .complex_derivatives(),
      unary("tan", [](auto& x) { return tan(x); }, [](double v) { return std::tan(v); }, all,
            {-1.2, 1.2}, Rule::float_out)
          .complex([](cd z) { return std::tan(z); })
          .smooth()
          .complex_derivatives(),
      unary("arcsin", [](auto& x) { return arcsin(x); }, [](double v) { return std::asin(v); },
            all, {-1, 1}, Rule::float_out)
          .complex([](cd z) { return std::asin(z); })
          .smooth({{-0.9, 0.9}})
          .complex_derivatives(),
      unary("arccos", [](auto& x) { return arccos(x); }, [](double v) { return std::acos(v); },
            all, {-1, 1}, Rule::float_out)
          .complex([](cd z) { return std::acos(z); })
          .smooth({{-0.9, 0.9}})
          .complex_derivatives(),
      unary("arctan", [](auto& x) { return arctan(x); }, [](double v) { return std::atan(v); },
            all, {-5, 5}, Rule::float_out)
          .complex([](cd z) { return std::atan(z); })
          .smooth({{-3, 3}})
          .complex_derivatives(),
      unary("sinh", [](auto& x) { return sinh(x); }, [](double v) { return std::sinh(v); }, all,
            {-3, 3}, Rule::float_out)
          .complex([](cd z) { return std::sinh(z); })
          .smooth({{-2, 2}})
          .complex_derivatives(),
      unary("cosh", [](auto& x) { return cosh(x); }, [](double v) { return std::cosh(v); }, all,
            {-3, 3}, Rule::float_out)
          .complex([](cd z) { return std::cosh(z); })
          .smooth({{-2, 2}})
          .complex_derivatives(),
      unary("tanh", [](auto& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, all,
            {-3, 3}, Rule::float_out)
          .complex([](cd z) { return std::tanh(z); })
          .smooth({{-2, 2}})
          .complex_derivatives(),
      unary("arcsinh", [](auto& x) { return arcsinh(x); }, [](double v) { return std::asinh(v); },
            all, {-5, 5}, Rule::float_out)
          .complex([](cd z) { return std::asinh(z); })
          .smooth({{-3, 3}})
          .complex_derivatives(),
      unary("arccosh", [](auto& x) { return arccosh(x); }, [](double v) { return std::acosh(v); },
            all, {1, 5}, Rule::float_out)
          .complex([](cd z) { return std::acosh(z); })
          .smooth({{1.5, 4}})
          .complex_derivatives(),
      unary("arctanh", [](auto& x) { return arctanh(x); }, [](double v) { return std::atanh(v); },
            all, {-0.9, 0.9}, Rule::float_out)
          .complex([](cd z) { return std::atanh(z); })
          .smooth({{-0.9, 0.9}})
          .complex_derivatives(),
      unary("degrees", [](auto& x) { return degrees(x); },
            [](double v) { return v * 180 / M_PI; }, all, {-5, 5}, Rule::float_out)
          .smooth(),
      unary("radians", [](auto& x) { return radians(x); },
            [](double v) { return v * M_PI / 180; }, all, {-100, 100}, Rule::float_out)
          .smooth({{-90, 90}}),
      unary("log", [](auto& x) { return log(x); }, [](double v) { return std::log(v); }, all,
            {0.5, 10}, Rule::float_out)
          .complex([](cd z) { return std::log(z); })
          .smooth({{0.5, 3}})
          .complex_derivatives(),
      unary("log2", [](auto& x) { return log2(x); }, [](double v) { return std::log2(v); }, all,
            {0.5, 10}, Rule::float_out)
          .complex([](cd z) { return std::log(z) / std::log(2.0); })
          .smooth({{0.5, 3}})
          .complex_derivatives(),
      unary("log10", [](auto& x) { return log10(x); }, [](double v) { return std::log10(v); },
            all, {0.5, 10}, Rule::float_out)
          .complex([](cd z) { return std::log10(z); })
          .smooth({{0.5, 3}})
          .complex_derivatives(),
      unary("log1p", [](auto& x) { return log1p(x); }, [](double v) { return std::log1p(v); },
            all, {-0.5, 5}, Rule::float_out)
          .complex([](cd z) { return std::log(1.0 + z); })
          .smooth({{-0.5, 2}})
          .complex_derivatives(),
      unary("sigmoid", [](auto& x) { return sigmoid(x); },
            [](double v) { return 1 / (1 + std::exp(-v)); }, all, {-5, 5}, Rule::float_out)
          .complex([](cd z) { return 1.0 / (1.0 + std::exp(-z)); })
          .smooth({{-4, 4}})
          .complex_derivatives(),
      unary("erf", [](auto& x) { return erf(x); }, [](double v) { return std::erf(v); }, all,
            {-2, 2}, Rule::float_out)
          .smooth({{-2, 2}}),
      unary("erfinv", [](auto& x) { return erfinv(x); }, ref::erfinv, all, {-0.99, 0.99},
            Rule::float_out)
          .smooth({{-0.9, 0.9}}),
      unary("stop_gradient", [](auto& x) { return stop_gradient(x); }, id, all, {-5, 5})
          .complex(cid)
          .blocked(),
      unary("conjugate", [](auto& x) { return conjugate(x); }, id, all, {-5, 5})
          .complex([](cd z) { return std::conj(z); })
          .smooth()
          .complex_derivatives()
          .identity_on_integers(ints_bool()),
      unary("real", [](auto& x) { return real(x); }, id, all, {-5, 5}, Rule::real_part)
          .complex([](cd z) { return cd(z.real()); })
          .smooth()
          .complex_derivatives()
          .identity_on_integers(ints_bool()),
      unary("imag", [](auto& x) { return imag(x); }, [](double) { return 0.0; }, all, {-5, 5},
            Rule::real_part)
          .complex([](cd z) { return cd(z.imag()); })
          .zero_derivative()
          .complex_derivatives(),
      unary("bitwise_invert", [](auto& x) { return bitwise_invert(x); }, ref::bitwise_invert,
            ints_bool(), {-50, 50}),
      unary("isnan", [](auto& x) { return isnan(x); },
            [](double v) { return double(std::isnan(v)); }, all, {-5, 5}, Rule::boolean)
          .complex([](cd) { return cd(0); })
          .zero_derivative(),
      unary("isinf", [](auto& x) { return isinf(x); },
            [](double v) { return double(std::isinf(v)); }, all, {-5, 5}, Rule::boolean)
          .complex([](cd) { return cd(0); })
          .zero_derivative(),
      unary("isfinite", [](auto& x) { return isfinite(x); },
            [](double v) { return double(std::isfinite(v)); }, all, {-5, 5}, Rule::boolean)
          .complex([](cd) { return cd(1); })
          .zero_derivative(),
      unary("isposinf", [](auto& x) { return isposinf(x); }, [](double) { return 0.0; }, all,
            {-5, 5}, Rule::boolean)
          .complex([](cd z) { return cd(z == cd(INFINITY, 0)); })
          .zero_derivative(),
      unary("isneginf", [](auto& x) { return isneginf(x); }, [](double) { return 0.0; }, all,
            {-5, 5}, Rule::boolean)
          .complex([](cd z) { return cd(z == cd(-INFINITY, 0)); })
          .zero_derivative(),
      unary("nan_to_num", [](auto& x) { return nan_to_num(x); }, id, all, {-5, 5})
          .complex(cid)
          .smooth()
          .identity_on_integers(ints_bool()),
      unary("operator_negate", [](auto& x) { return -x; }, [](double v) { return -v; }, numbers(),
            {-5, 5})
          .smooth(),
      unary("operator_invert", [](auto& x) { return ~x; }, ref::bitwise_invert, ints_bool(),
            {-50, 50}),
      unary("operator_not", [](auto& x) { return !x; }, [](double v) { return double(v == 0); },
            all, {-2, 2}, Rule::boolean)
          .zero_derivative(),

      // ---- binary ---------------------------------------------------------
      binary("add", [](auto& a, auto& b) { return add(a, b); }, std::plus<double>(), all, {-5, 5},
             {-5, 5})
          .complex([](cd a, cd b) { return a + b; })
          .smooth()
          .complex_derivatives(),
      binary("subtract", [](auto& a, auto& b) { return subtract(a, b); }, std::minus<double>(),
             numbers(), {-5, 5}, {-5, 5})
          .complex([](cd a, cd b) { return a - b; })
          .smooth()
          .complex_derivatives(),
      binary("multiply", [](auto& a, auto& b) { return multiply(a, b); },
             std::multiplies<double>(), all, {-5, 5}, {-5, 5})
          .complex([](cd a, cd b) { return a * b; })
          .smooth()
          .complex_derivatives(),
      binary("divide", [](auto& a, auto& b) { return divide(a, b); }, std::divides<double>(), all,
             {-5, 5}, {-5, 5}, Rule::float_out)
          .complex([](cd a, cd b) { return a / b; })
          .smooth({{-1, 1}, {0.5, 2}})
          .complex_derivatives(),
      binary("floor_divide", [](auto& a, auto& b) { return floor_divide(a, b); },
             ref::floor_divide, all, {-9, 9}, {-4, 4})
          .zero_derivative({{-3, 3}, {0.5, 2}}),
      binary("remainder", [](auto& a, auto& b) { return remainder(a, b); }, ref::remainder, all,
             {-9, 9}, {-4, 4})
          .smooth({{-3, 3}, {0.5, 2}}),
      binary("power_int", [](auto& a, auto& b) { return power(a, b); },
             [](double a, double b) { return std::pow(a, b); }, ints_bool(), {-5, 5}, {0, 5}),
      binary("power_float", [](auto& a, auto& b) { return power(a, b); },
             [](double a, double b) { return std::pow(a, b); }, floats, {0.5, 3}, {-2, 2})
          .complex([](cd a, cd b) { return std::pow(a, b); })
          .smooth({{0.5, 2}, {-1.5, 1.5}})
          .complex_derivatives(),
      binary("maximum", [](auto& a, auto& b) { return maximum(a, b); },
             [](double a, double b) { return std::max(a, b); }, all, {-5, 5}, {-5, 5})
          .smooth(),
      binary("minimum", [](auto& a, auto& b) { return minimum(a, b); },
             [](double a, double b) { return std::min(a, b); }, all, {-5, 5}, {-5, 5})
          .smooth(),
      binary("logaddexp", [](auto& a, auto& b) { return logaddexp(a, b); },
             [](double a, double b) { return std::log(std::exp(a) + std::exp(b)); }, all, {-5, 5},
             {-5, 5}, Rule::float_out)
          .complex([](cd a, cd b) { return std::log(std::exp(a) + std::exp(b)); })
          .smooth({{-3, 3}, {-3, 3}}),
      binary("arctan2", [](auto& a, auto& b) { return arctan2(a, b); },
             [](double a, double b) { return std::atan2(a, b); }, all, {-5, 5}, {-5, 5},
             Rule::float_out)
          .smooth(),
      binary("hypot", [](auto& a, auto& b) { return hypot(a, b); },
             [](double a, double b) { return std::hypot(a, b); }, all, {-5, 5}, {-5, 5},
             Rule::float_out)
          .smooth({{0.5, 3}, {-3, -0.5}}),
      binary("equal", [](auto& a, auto& b) { return equal(a, b); },
             [](double a, double b) { return double(a == b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .complex([](cd a, cd b) { return cd(a == b); })
          .zero_derivative(),
      binary("not_equal", [](auto& a, auto& b) { return not_equal(a, b); },
             [](double a, double b) { return double(a != b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .complex([](cd a, cd b) { return cd(a != b); })
          .zero_derivative(),
      binary("less", [](auto& a, auto& b) { return less(a, b); },
             [](double a, double b) { return double(a < b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .zero_derivative(),
      binary("less_equal", [](auto& a, auto& b) { return less_equal(a, b); },
             [](double a, double b) { return double(a <= b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .zero_derivative(),
      binary("greater", [](auto& a, auto& b) { return greater(a, b); },
             [](double a, double b) { return double(a > b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .zero_derivative(),
      binary("greater_equal", [](auto& a, auto& b) { return greater_equal(a, b); },
             [](double a, double b) { return double(a >= b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .zero_derivative(),
      binary("logical_and", [](auto& a, auto& b) { return logical_and(a, b); },
             [](double a, double b) { return double(a != 0 && b != 0); }, all, {-1, 1}, {-1, 1},
             Rule::boolean)
          .complex([](cd a, cd b) { return cd(a != cd(0) && b != cd(0)); })
          .zero_derivative(),
      binary("logical_or", [](auto& a, auto& b) { return logical_or(a, b); },
             [](double a, double b) { return double(a != 0 || b != 0); }, all, {-1, 1}, {-1, 1},
             Rule::boolean)
          .zero_derivative(),
      binary("logical_xor", [](auto& a, auto& b) { return logical_xor(a, b); },
             [](double a, double b) { return double((a != 0) != (b != 0)); }, all, {-1, 1},
             {-1, 1}, Rule::boolean)
          .zero_derivative(),
      binary("isclose", [](auto& a, auto& b) { return isclose(a, b, 0.5, 0.1); }, ref::isclose,
             all, {-2, 2}, {-2, 2}, Rule::boolean)
          .complex([](cd a, cd b) {
            return cd(a == b || std::abs(a - b) <= 0.1 + 0.5 * std::abs(b));
          })
          .zero_derivative(),
      binary("bitwise_and", [](auto& a, auto& b) { return bitwise_and(a, b); },
             [](double a, double b) { return double(int64_t(a) & int64_t(b)); }, ints_bool(),
             {-60, 60}, {-60, 60}),
      binary("bitwise_or", [](auto& a, auto& b) { return bitwise_or(a, b); },
             [](double a, double b) { return double(int64_t(a) | int64_t(b)); }, ints_bool(),
             {-60, 60}, {-60, 60}),
      binary("bitwise_xor", [](auto& a, auto& b) { return bitwise_xor(a, b); },
             [](double a, double b) { return double(int64_t(a) ^ int64_t(b)); }, ints_bool(),
             {-60, 60}, {-60, 60}),
      binary("left_shift", [](auto& a, auto& b) { return left_shift(a, b); },
             [](double a, double b) { return std::ldexp(a, int(b)); }, ints, {-20, 20}, {0, 6}),
      binary("right_shift", [](auto& a, auto& b) { return right_shift(a, b); },
             [](double a, double b) { return std::floor(std::ldexp(a, -int(b))); }, ints,
             {-100, 100}, {0, 6}),
      binary("operator_plus", [](auto& a, auto& b) { return a + b; }, std::plus<double>(), all,
             {-5, 5}, {-5, 5})
          .smooth(),
      binary("operator_mod", [](auto& a, auto& b) { return a % b; }, ref::remainder, numbers(),
             {-9, 9}, {-4, 4})
          .smooth({{-3, 3}, {0.5, 2}}),
      binary("operator_greater_equal", [](auto& a, auto& b) { return a >= b; },
             [](double a, double b) { return double(a >= b); }, all, {-2, 2}, {-2, 2},
             Rule::boolean)
          .zero_derivative(),
      binary("operator_xor", [](auto& a, auto& b) { return a ^ b; },
             [](double a, double b) { return double(int64_t(a) ^ int64_t(b)); }, ints_bool(),
             {-60, 60}, {-60, 60}),

      // ---- ternary --------------------------------------------------------
      ternary("where", [](auto& c, auto& x, auto& y) { return where(c, x, y); },
              [](double c, double x, double y) { return c != 0 ? x : y; }, all, {0, 1, bool_},
              {-5, 5}, {-5, 5})
          .complex([](cd c, cd x, cd y) { return c != cd(0) ? x : y; })
          .smooth(),
      ternary("clip", [](auto& a, auto& lo, auto& hi) { return clip(a, lo, hi); },
              [](double a, double lo, double hi) { return std::min(std::max(a, lo), hi); }, all,
              {-5, 5}, {-3, 0}, {0, 3})
          .smooth({{-2, 2}, {-1.5, 0}, {0, 1.5}}),
  };
  return ops;
}

inline const std::vector<Op>& ops() {
  static const std::vector<Op> table = make_ops();
  return table;
}

}  // namespace op_table
