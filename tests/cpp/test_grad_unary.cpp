// Transform rules of the unary elementwise primitives beyond the suites of
// test_elementwise.cpp (which check every op of op_table.h against finite
// differences and vmap against a loop): second order, stop_gradient inside a
// product, nan_to_num at replaced elements, complex values, complex sign.
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
using grad_check::lift;

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

// ---- complex64 --------------------------------------------------------------

namespace {

using cd = std::complex<double>;

array complex_array(const std::vector<cd>& v) {
  return harness::from_complex(v, {static_cast<int>(v.size())});
}

}  // namespace

TEST(GradUnary, test_complex_values) {
  // d|z| = Re(conj(z / |z|) dz); the vjp of a real cotangent c is c z / |z|.
  array z = complex_array({{3, 4}});
  auto [out, g] = vjp([](const array& a) { return abs(a); }, z, array({2.0f}));
  EXPECT_NEAR(std::abs(harness::to_complex(g)[0] - cd(1.2, 1.6)), 0, 1e-6);
  // The vjp of a holomorphic f is c * conj(f'(z)): for z², 2 conj(z).
  auto [out2, g2] = vjp([](const array& a) { return square(a); }, z, complex_array({{1, 0}}));
  EXPECT_EQ(harness::to_complex(g2)[0], cd(6, -8));
  // imag: the cotangent c comes back as i c.
  auto [out3, g3] = vjp([](const array& a) { return imag(a); }, z, array({2.0f}));
  EXPECT_EQ(harness::to_complex(g3)[0], cd(0, 2));
}

TEST(GradUnary, test_complex_sign_is_rejected) {
  array z = complex_array({{3, 4}});
  auto f = [](const array& a) { return sign(a); };
  EXPECT_THROW(vjp(f, z, z), std::invalid_argument);
  EXPECT_THROW(jvp(f, z, z), std::invalid_argument);
}
