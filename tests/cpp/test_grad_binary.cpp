// Transform rules of the binary and ternary elementwise primitives beyond the
// suites of test_elementwise.cpp (which check every op of op_table.h against
// finite differences and vmap against a loop): exact derivative values, where
// with a condition derived from an input, divmod, allclose and array_equal,
// second order, complex vjp conjugation.
#include <gtest/gtest.h>

#include <cmath>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;
using grad_check::values;
using grad_check::on_each_device;

namespace {

using BinaryFn = std::function<array(const array&, const array&)>;

VecFn vec(BinaryFn f) {
  return [f](const std::vector<array>& x) { return std::vector<array>{f(x[0], x[1])}; };
}

std::vector<double> zeros_of(size_t n) { return std::vector<double>(n, 0.0); }

}  // namespace

TEST(GradBinary, test_derivative_values) {
  array a({2.0, -3.0}, float64), b({5.0, 4.0}, float64);
  auto [outs, g] = vjp(vec([](const array& x, const array& y) { return multiply(x, y); }), {a, b},
                       {array({1.0, 2.0}, float64)});
  EXPECT_EQ(values(g[0]), (std::vector<double>{5, 8}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{2, -6}));
  // maximum: ties send the cotangent to the second input.
  array p({1.0, 2.0, 3.0}, float64), q({3.0, 2.0, 1.0}, float64);
  auto [outs2, g2] = vjp(vec([](const array& x, const array& y) { return maximum(x, y); }),
                         {p, q}, {array({1.0, 1.0, 1.0}, float64)});
  EXPECT_EQ(values(g2[0]), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(values(g2[1]), (std::vector<double>{1, 1, 0}));
  // d/db 0^b = 0 for b > 0 (not 0 * log(0)).
  auto [outs3, g3] = vjp(vec([](const array& x, const array& y) { return power(x, y); }),
                         {array({0.0, 2.0}, float64), array({2.0, 3.0}, float64)},
                         {array({1.0, 1.0}, float64)});
  EXPECT_EQ(values(g3[0]), (std::vector<double>{0, 12}));
  EXPECT_NEAR(values(g3[1])[0], 0, 0);
  EXPECT_NEAR(values(g3[1])[1], 8 * std::log(2.0), 1e-12);
}

TEST(GradBinary, test_select) {
  on_each_device([] {
    // The condition derives from the first input: it gets a zero gradient.
    auto f = [](const std::vector<array>& x) {
      return std::vector<array>{where(greater(x[0], array(0.0, float64)), x[1], x[2])};
    };
    std::vector<array> in{random_f64({3, 4}, 1), random_f64({3, 4}, 2), random_f64({3, 4}, 3)};
    check_derivatives("where", f, in);
    auto [outs, g] = vjp(f, in, {ones_like(in[1])});
    EXPECT_EQ(values(g[0]), zeros_of(12));
    auto c = values(greater(in[0], array(0.0, float64)));
    auto g1 = values(g[1]), g2 = values(g[2]);
    for (size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(g1[i], c[i]);
      EXPECT_EQ(g2[i], 1 - c[i]);
    }
  });
}

TEST(GradBinary, test_divmod) {
  on_each_device([] {
    auto f = [](const std::vector<array>& x) { return divmod(x[0], x[1]); };
    std::vector<array> in{random_f64({3, 4}, 1, -3, 3), random_f64({3, 4}, 2, 0.5, 2)};
    check_derivatives("divmod", f, in);
    // The quotient's cotangent is dropped; the remainder's follows remainder.
    auto [outs, g] = vjp(f, in, {ones_like(in[0]), zeros_like(in[0])});
    EXPECT_EQ(values(g[0]), zeros_of(12));
    EXPECT_EQ(values(g[1]), zeros_of(12));
    check_vmap("divmod axes (0, 2)", f,
               {random_f64({3, 2, 4}, 3, -3, 3), random_f64({2, 4, 3}, 4, 0.5, 2)}, {0, 2});
    check_vmap("divmod axes (-1, 1)", f,
               {random_f64({2, 4}, 5, -3, 3), random_f64({2, 3, 4}, 6, 0.5, 2)}, {-1, 1});
    array a({7, -7}, int32), b({2, 2}, int32);
    auto [outs2, t] = jvp(f, {a, b}, {ones_like(a), ones_like(b)});
    EXPECT_EQ(t[0].dtype(), int32);
    EXPECT_EQ(values(t[1]), zeros_of(2));
  });
}

TEST(GradBinary, test_all_true) {
  on_each_device([] {
    auto close = vec([](const array& a, const array& b) { return allclose(a, b, 0.5, 0.1); });
    std::vector<array> in{random_f64({3, 4}, 1), random_f64({3, 4}, 2)};
    check_derivatives("allclose", close, in);
    auto [outs, g] = vjp(close, in, {array(true)});
    EXPECT_EQ(values(g[0]), zeros_of(12));
    auto [outs2, t] = jvp(close, in, {ones_like(in[0]), ones_like(in[1])});
    EXPECT_EQ(t[0].dtype(), bool_);
    EXPECT_EQ(t[0].ndim(), 0u);
    // Batches where some elements are all close and some not.
    array a = random_f64({4, 3}, 3);
    array b = add(a, array({0.0, 1.0, 0.0, 0.0}, {4, 1}, float64));
    check_vmap("allclose axes (0, 0)", close, {a, b}, {0, 0});
    check_vmap("allclose axes (1, -1)", close, {transpose(a), random_f64({3}, 4)}, {1, -1});
    auto same = vec([](const array& x, const array& y) { return array_equal(x, y); });
    check_vmap("array_equal axes (0, 0)", same, {a, b}, {0, 0});
  });
}

TEST(GradBinary, test_equal_nan_vmap) {
  double nan = std::nan("");
  array a({1.0, nan, 2.0, nan}, {2, 2}, float64), b({1.0, nan, 3.0, 1.0}, {2, 2}, float64);
  auto f = vec([](const array& x, const array& y) { return array_equal(x, y, true); });
  check_vmap("array_equal equal_nan", f, {a, b}, {0, 0});
  check_vmap("array_equal equal_nan axes (1, -1)", f, {a, array({1.0, nan}, float64)}, {1, -1});
}

TEST(GradBinary, test_second_order) {
  // d²/da² (a * b)^2 = 2 b²; d²/da db (a / b) = -1 / b².
  auto f = [](const std::vector<array>& x) {
    auto fn = [](const std::vector<array>& y) {
      return std::vector<array>{power(multiply(y[0], y[1]), array(2.0)), divide(y[0], y[1])};
    };
    return vjp(fn, x, {ones_like(x[0]), ones_like(x[0])}).second;
  };
  check_derivatives("vjp of power and divide", f,
                    {random_f64({4}, 1, 0.5, 2), random_f64({4}, 2, 0.5, 2)});
  check_vmap("vmap of the vjp", f, {random_f64({3, 4}, 3, 0.5, 2), random_f64({4}, 4, 0.5, 2)},
             {0, -1});
}

// ---- complex64 --------------------------------------------------------------

TEST(GradBinary, test_complex_vjp_conjugates) {
  // vjp of a holomorphic f: c * conj(df/dx).
  using cd = std::complex<float>;
  cd a(1, 2), b(3, -1);
  std::vector<array> in{array(a), array(b)};
  array one(cd(1, 0));
  auto near = [](const array& x, cd want) { return std::abs(x.item<cd>() - want) < 1e-6f; };
  auto mul = vec([](const array& x, const array& y) { return multiply(x, y); });
  auto [o1, g1] = vjp(mul, in, {one});
  EXPECT_TRUE(near(g1[0], std::conj(b)));
  EXPECT_TRUE(near(g1[1], std::conj(a)));
  auto div = vec([](const array& x, const array& y) { return divide(x, y); });
  auto [o2, g2] = vjp(div, in, {one});
  EXPECT_TRUE(near(g2[0], std::conj(1.0f / b)));
  EXPECT_TRUE(near(g2[1], std::conj(-a / (b * b))));
  auto [o3, t3] = jvp(mul, in, {one, one});
  EXPECT_TRUE(near(t3[0], a + b));
}
