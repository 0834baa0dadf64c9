// Transform rules of the unary elementwise primitives: jvp and vjp against
// finite differences (float64, and complex64 for the holomorphic and the
// complex-specific ops), vmap against a loop over the batch, and the zero
// derivatives of piecewise-constant, bool and integer results.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;
using grad_check::values;
using grad_check::on_each_device;
using grad_check::lift;

namespace {

using UnaryFn = std::function<array(const array&)>;

struct Case {
  std::string name;
  UnaryFn fn;
  double lo = -1, hi = 1;  // the domain of the random inputs
};

// Every primitive with a nonzero derivative, on inputs inside its domain.
std::vector<Case> differentiable_cases() {
  return {
      {"abs", [](const array& x) { return abs(x); }},
      {"negative", [](const array& x) { return negative(x); }},
      {"reciprocal", [](const array& x) { return reciprocal(x); }, 0.5, 2},
      {"square", [](const array& x) { return square(x); }},
      {"exp", [](const array& x) { return exp(x); }},
      {"expm1", [](const array& x) { return expm1(x); }},
      {"sqrt", [](const array& x) { return sqrt(x); }, 0.5, 2},
      {"rsqrt", [](const array& x) { return rsqrt(x); }, 0.5, 2},
      {"sin", [](const array& x) { return sin(x); }, -3, 3},
      {"cos", [](const array& x) { return cos(x); }, -3, 3},
      {"tan", [](const array& x) { return tan(x); }},
      {"arcsin", [](const array& x) { return arcsin(x); }, -0.9, 0.9},
      {"arccos", [](const array& x) { return arccos(x); }, -0.9, 0.9},
      {"arctan", [](const array& x) { return arctan(x); }, -3, 3},
      {"sinh", [](const array& x) { return sinh(x); }, -2, 2},
      {"cosh", [](const array& x) { return cosh(x); }, -2, 2},
      {"tanh", [](const array& x) { return tanh(x); }, -2, 2},
      {"arcsinh", [](const array& x) { return arcsinh(x); }, -3, 3},
      {"arccosh", [](const array& x) { return arccosh(x); }, 1.5, 4},
      {"arctanh", [](const array& x) { return arctanh(x); }, -0.9, 0.9},
      {"degrees", [](const array& x) { return degrees(x); }},
      {"radians", [](const array& x) { return radians(x); }, -90, 90},
      {"log", [](const array& x) { return log(x); }, 0.5, 3},
      {"log2", [](const array& x) { return log2(x); }, 0.5, 3},
      {"log10", [](const array& x) { return log10(x); }, 0.5, 3},
      {"log1p", [](const array& x) { return log1p(x); }, -0.5, 2},
      {"sigmoid", [](const array& x) { return sigmoid(x); }, -4, 4},
      {"erf", [](const array& x) { return erf(x); }, -2, 2},
      {"erfinv", [](const array& x) { return erfinv(x); }, -0.9, 0.9},
      {"nan_to_num", [](const array& x) { return nan_to_num(x); }},
  };
}

// Piecewise-constant primitives (away from their jumps), predicates, and
// stop_gradient.
std::vector<Case> zero_derivative_cases() {
  return {
      {"sign", [](const array& x) { return sign(x); }},
      {"floor", [](const array& x) { return floor(x); }, -3, 3},
      {"ceil", [](const array& x) { return ceil(x); }, -3, 3},
      {"trunc", [](const array& x) { return trunc(x); }, -3, 3},
      {"round", [](const array& x) { return round(x); }, -3, 3},
      {"round 2 decimals", [](const array& x) { return round(x, 2); }, -3, 3},
      {"logical_not", [](const array& x) { return logical_not(x); }},
      {"stop_gradient", [](const array& x) { return stop_gradient(x); }},
      {"isnan", [](const array& x) { return isnan(x); }},
      {"isinf", [](const array& x) { return isinf(x); }},
      {"isfinite", [](const array& x) { return isfinite(x); }},
      {"isposinf", [](const array& x) { return isposinf(x); }},
      {"isneginf", [](const array& x) { return isneginf(x); }},
      {"imag of a real array", [](const array& x) { return imag(x); }},
  };
}

void check_vmaps(const Case& c, uint64_t seed) {
  auto f = lift(c.fn);
  check_vmap(c.name + " axis 0", f, {random_f64({3, 2, 4}, seed, c.lo, c.hi)}, {0});
  check_vmap(c.name + " axis 2", f, {random_f64({2, 4, 3}, seed + 1, c.lo, c.hi)}, {2});
}

}  // namespace

TEST(GradUnary, test_derivatives) {
  on_each_device([] {
    uint64_t seed = 1;
    for (auto& c : differentiable_cases()) {
      check_derivatives(c.name, lift(c.fn), {random_f64({3, 4}, seed++, c.lo, c.hi)});
    }
  });
}

TEST(GradUnary, test_zero_derivatives) {
  on_each_device([] {
    uint64_t seed = 100;
    for (auto& c : zero_derivative_cases()) {
      array x = random_f64({3, 4}, seed++, c.lo, c.hi);
      if (c.name != "stop_gradient") check_derivatives(c.name, lift(c.fn), {x});
      auto [out, g] = vjp(c.fn, x, ones_like(c.fn(x)));
      EXPECT_EQ(g.dtype(), float64) << c.name;
      EXPECT_EQ(values(g), std::vector<double>(12, 0.0)) << c.name;
      auto [out2, t] = jvp(c.fn, x, ones_like(x));
      EXPECT_EQ(t.dtype(), out2.dtype()) << c.name;
      EXPECT_EQ(values(t), std::vector<double>(12, 0.0)) << c.name;
    }
  });
}

TEST(GradUnary, test_vmap) {
  on_each_device([] {
    uint64_t seed = 200;
    for (auto& c : differentiable_cases()) check_vmaps(c, seed += 2);
    for (auto& c : zero_derivative_cases()) check_vmaps(c, seed += 2);
    auto invert = lift([](const array& x) { return bitwise_invert(x); });
    check_vmap("bitwise_invert axis 1", invert, {array({1, -2, 3, 4, 0, 7}, {2, 3}, int32)}, {1});
  });
}

TEST(GradUnary, test_second_order) {
  // d²/dx² sin(x) = -sin(x): the rules are differentiable again.
  auto d2 = grad(grad([](const array& x) { return sin(x); }));
  EXPECT_NEAR(d2(array(0.7)).item<float>(), -std::sin(0.7f), 1e-6);
  // The vjp of exp(sqrt(x)) with unit cotangents, differentiated and batched.
  auto f = [](const std::vector<array>& x) {
    auto fn = [](const array& y) { return exp(sqrt(y)); };
    return std::vector<array>{vjp(fn, x[0], ones_like(x[0])).second};
  };
  check_derivatives("vjp of exp(sqrt(x))", f, {random_f64({5}, 300, 0.5, 2)});
  check_vmap("vmap of the vjp", f, {random_f64({3, 5}, 301, 0.5, 2)}, {1});
}

TEST(GradUnary, test_stop_gradient_blocks_the_gradient) {
  // d/dx (x * stop_gradient(x)) = stop_gradient(x).
  array x({1.5, -2.0, 3.0}, float64);
  auto f = [](const array& a) { return multiply(a, stop_gradient(a)); };
  auto [out, g] = vjp(f, x, ones_like(x));
  EXPECT_EQ(values(g), (std::vector<double>{1.5, -2.0, 3.0}));
  auto [out2, t] = jvp([](const array& a) { return stop_gradient(square(a)); }, x, ones_like(x));
  EXPECT_EQ(values(t), (std::vector<double>{0, 0, 0}));
}

TEST(GradUnary, test_nan_to_num_zero_at_replaced_elements) {
  double inf = std::numeric_limits<double>::infinity();
  array x({1.0, std::nan(""), inf, -inf, -2.0}, float64);
  auto f = [](const array& a) { return nan_to_num(a, 0.0f, 5.0f, -5.0f); };
  auto [out, g] = vjp(f, x, array({1.0, 2.0, 3.0, 4.0, 5.0}, float64));
  EXPECT_EQ(values(g), (std::vector<double>{1, 0, 0, 0, 5}));
  auto [out2, t] = jvp(f, x, array({1.0, 2.0, 3.0, 4.0, 5.0}, float64));
  EXPECT_EQ(values(t), (std::vector<double>{1, 0, 0, 0, 5}));
  check_vmap("nan_to_num with non-finite values", lift(f),
             {array({1.0, std::nan(""), inf, -inf, -2.0, 0.5}, {3, 2}, float64)}, {1});
}

TEST(GradUnary, test_16_bit_inputs_keep_their_dtype) {
  for (Dtype t : {float16, bfloat16, float32}) {
    for (auto& c : differentiable_cases()) {
      array x = astype(random_f64({4}, 500, c.lo, c.hi), t);
      auto [out, g] = vjp(c.fn, x, ones_like(c.fn(x)));
      EXPECT_EQ(g.dtype(), t) << c.name;
      auto [out2, tangent] = jvp(c.fn, x, ones_like(x));
      EXPECT_EQ(tangent.dtype(), t) << c.name;
      // Close to float64 derivatives, to the dtype's precision.
      array x64 = astype(x, float64);
      auto want = values(vjp(c.fn, x64, ones_like(x64)).second), got = values(g);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], (t == float32 ? 1e-5 : 2e-2) * std::max(1.0, std::abs(want[i])))
            << c.name << " " << t;
      }
    }
  }
}

TEST(GradUnary, test_integer_results_have_zero_derivatives) {
  array x({-3, 2, 5}, int32);
  for (auto& [name, f] : std::vector<std::pair<std::string, UnaryFn>>{
           {"abs", [](const array& a) { return abs(a); }},
           {"negative", [](const array& a) { return negative(a); }},
           {"square", [](const array& a) { return square(a); }},
           {"sign", [](const array& a) { return sign(a); }},
           {"bitwise_invert", [](const array& a) { return bitwise_invert(a); }},
           {"round -1 decimals", [](const array& a) { return round(a, -1); }},
           {"imag", [](const array& a) { return imag(a); }}}) {
    auto [out, g] = vjp(f, x, ones_like(x));
    EXPECT_EQ(g.dtype(), int32) << name;
    EXPECT_EQ(values(g), (std::vector<double>{0, 0, 0})) << name;
    auto [out2, t] = jvp(f, x, ones_like(x));
    EXPECT_EQ(t.dtype(), out2.dtype()) << name;
    EXPECT_EQ(values(t), (std::vector<double>{0, 0, 0})) << name;
  }
  // Bool inputs: logical_not gives a bool zero tangent and a bool zero cotangent.
  array b({true, false});
  auto [out, g] = vjp([](const array& a) { return logical_not(a); }, b, b);
  EXPECT_EQ(g.dtype(), bool_);
  EXPECT_EQ(values(g), (std::vector<double>{0, 0}));
}

// ---- complex64 --------------------------------------------------------------

namespace {

using cd = std::complex<double>;

array complex_array(const std::vector<cd>& v) {
  std::vector<complex64_t> c;
  for (auto z : v) c.emplace_back(float(z.real()), float(z.imag()));
  return array(c.begin(), {static_cast<int>(c.size())}, complex64);
}

std::vector<cd> complex_values(const array& a) {
  auto re = values(real(a)), im = values(imag(a));
  std::vector<cd> v;
  for (size_t i = 0; i < re.size(); ++i) v.emplace_back(re[i], is_complex(a.dtype()) ? im[i] : 0);
  return v;
}

std::vector<cd> random_complex(size_t n, uint64_t seed, double lo, double hi) {
  auto re = values(random_f64({static_cast<int>(n)}, seed, lo, hi));
  auto im = values(random_f64({static_cast<int>(n)}, seed + 1, lo, hi));
  std::vector<cd> v;
  for (size_t i = 0; i < n; ++i) v.emplace_back(re[i], im[i]);
  return v;
}

// Re(sum(conj(a) * b)): the real inner product of which the vjp is the adjoint.
double inner(const std::vector<cd>& a, const std::vector<cd>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (std::conj(a[i]) * b[i]).real();
  return s;
}

// In complex64: jvp against central differences, and
// <c, jvp(t)> == <vjp(c), t> for the real inner product.
void check_complex(const std::string& name, const UnaryFn& f, double lo, double hi,
                   uint64_t seed) {
  const size_t n = 6;
  auto xv = random_complex(n, seed, lo, hi), tv = random_complex(n, seed + 2, -1, 1);
  array x = complex_array(xv), t = complex_array(tv);
  auto [out, tangent] = jvp(f, x, t);
  double eps = 1e-2;
  std::vector<cd> plus, minus;
  for (size_t i = 0; i < n; ++i) {
    plus.push_back(xv[i] + eps * tv[i]);
    minus.push_back(xv[i] - eps * tv[i]);
  }
  auto fp = complex_values(f(complex_array(plus))), fm = complex_values(f(complex_array(minus)));
  auto got = complex_values(tangent);
  for (size_t i = 0; i < n; ++i) {
    cd fd = (fp[i] - fm[i]) / (2 * eps);
    EXPECT_LE(std::abs(got[i] - fd), 2e-3 * std::max(1.0, std::abs(fd)))
        << name << ": jvp element " << i << " is " << got[i] << ", finite differences give " << fd;
  }
  auto cv = random_complex(n, seed + 4, -1, 1);
  if (!is_complex(out.dtype())) {
    for (auto& z : cv) z = z.real();
  }
  array c = astype(complex_array(cv), out.dtype());
  auto [out2, cot] = vjp(f, x, c);
  EXPECT_EQ(cot.dtype(), complex64) << name;
  double lhs = inner(cv, got), rhs = inner(complex_values(cot), tv);
  EXPECT_LE(std::abs(lhs - rhs), 1e-4 * std::max(1.0, std::abs(lhs)))
      << name << ": <c, jvp(t)> = " << lhs << " but <vjp(c), t> = " << rhs;
}

}  // namespace

TEST(GradUnary, test_complex_derivatives) {
  uint64_t seed = 400;
  for (auto& c : differentiable_cases()) {
    // Real-only ops, and nan_to_num, which complex64 inputs leave as they are.
    if (c.name == "degrees" || c.name == "radians" || c.name == "erf" || c.name == "erfinv" ||
        c.name == "nan_to_num") {
      continue;
    }
    // Away from the branch cuts and the poles.
    double lo = c.lo > 0 ? c.lo : 0.2, hi = c.hi;
    check_complex(c.name, c.fn, lo, hi, seed += 8);
  }
  for (auto& [name, f] : std::vector<std::pair<std::string, UnaryFn>>{
           {"conjugate", [](const array& a) { return conjugate(a); }},
           {"real", [](const array& a) { return real(a); }},
           {"imag", [](const array& a) { return imag(a); }}}) {
    check_complex(name, f, -1, 1, seed += 8);
  }
}

TEST(GradUnary, test_complex_values) {
  // d|z| = Re(conj(z / |z|) dz); the vjp of a real cotangent c is c z / |z|.
  array z = complex_array({{3, 4}});
  auto [out, g] = vjp([](const array& a) { return abs(a); }, z, array({2.0f}));
  EXPECT_NEAR(std::abs(complex_values(g)[0] - cd(1.2, 1.6)), 0, 1e-6);
  // The vjp of a holomorphic f is c * conj(f'(z)): for z², 2 conj(z).
  auto [out2, g2] = vjp([](const array& a) { return square(a); }, z, complex_array({{1, 0}}));
  EXPECT_EQ(complex_values(g2)[0], cd(6, -8));
  // imag: the cotangent c comes back as i c.
  auto [out3, g3] = vjp([](const array& a) { return imag(a); }, z, array({2.0f}));
  EXPECT_EQ(complex_values(g3)[0], cd(0, 2));
}

TEST(GradUnary, test_complex_sign_is_rejected) {
  array z = complex_array({{3, 4}});
  auto f = [](const array& a) { return sign(a); };
  EXPECT_THROW(vjp(f, z, z), std::invalid_argument);
  EXPECT_THROW(jvp(f, z, z), std::invalid_argument);
}
