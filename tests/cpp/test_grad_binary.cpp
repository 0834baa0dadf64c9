// Transform rules of the binary (and ternary) elementwise primitives: jvp and
// vjp against finite differences (float64, and complex64 for the holomorphic
// ones), vmap against a loop over the batch with the mapped axes in several
// places and unmapped inputs, and the zero derivatives of comparisons, bool and
// integer results.
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

struct Case {
  std::string name;
  BinaryFn fn;
  double a_lo = -1, a_hi = 1, b_lo = -1, b_hi = 1;  // domains of the random inputs
  bool zero = false;                                // a piecewise-constant result
};

std::vector<Case> cases() {
  return {
      {"add", [](const array& a, const array& b) { return add(a, b); }},
      {"subtract", [](const array& a, const array& b) { return subtract(a, b); }},
      {"multiply", [](const array& a, const array& b) { return multiply(a, b); }},
      {"divide", [](const array& a, const array& b) { return divide(a, b); }, -1, 1, 0.5, 2},
      {"power", [](const array& a, const array& b) { return power(a, b); }, 0.5, 2, -1.5, 1.5},
      {"maximum", [](const array& a, const array& b) { return maximum(a, b); }},
      {"minimum", [](const array& a, const array& b) { return minimum(a, b); }},
      {"logaddexp", [](const array& a, const array& b) { return logaddexp(a, b); }, -3, 3, -3, 3},
      {"arctan2", [](const array& a, const array& b) { return arctan2(a, b); }},
      {"remainder", [](const array& a, const array& b) { return remainder(a, b); }, -3, 3, 0.5, 2},
      {"floor_divide", [](const array& a, const array& b) { return floor_divide(a, b); },
       -3, 3, 0.5, 2, true},
      {"equal", [](const array& a, const array& b) { return equal(a, b); }, -1, 1, -1, 1, true},
      {"not_equal", [](const array& a, const array& b) { return not_equal(a, b); }, -1, 1, -1, 1,
       true},
      {"greater", [](const array& a, const array& b) { return greater(a, b); }, -1, 1, -1, 1, true},
      {"greater_equal", [](const array& a, const array& b) { return greater_equal(a, b); }, -1, 1,
       -1, 1, true},
      {"less", [](const array& a, const array& b) { return less(a, b); }, -1, 1, -1, 1, true},
      {"less_equal", [](const array& a, const array& b) { return less_equal(a, b); }, -1, 1, -1, 1,
       true},
      {"logical_and", [](const array& a, const array& b) { return logical_and(a, b); }, -1, 1, -1,
       1, true},
      {"logical_or", [](const array& a, const array& b) { return logical_or(a, b); }, -1, 1, -1, 1,
       true},
      {"logical_xor", [](const array& a, const array& b) { return logical_xor(a, b); }, -1, 1, -1,
       1, true},
      {"isclose", [](const array& a, const array& b) { return isclose(a, b, 0.5, 0.1); }, -1, 1,
       -1, 1, true},
  };
}

// The vmap cases: both inputs mapped (same axis, different axes) and one
// unmapped input on either side.
void check_vmaps(const std::string& name, const VecFn& f, double a_lo, double a_hi, double b_lo,
                 double b_hi, uint64_t seed) {
  auto a = [&](const Shape& s) { return random_f64(s, seed++, a_lo, a_hi); };
  auto b = [&](const Shape& s) { return random_f64(s, seed++, b_lo, b_hi); };
  check_vmap(name + " axes (0, 0)", f, {a({3, 2, 4}), b({3, 2, 4})}, {0, 0});
  check_vmap(name + " axes (2, 1)", f, {a({2, 4, 3}), b({2, 3, 4})}, {2, 1});
  check_vmap(name + " axes (1, -1)", f, {a({2, 3, 4}), b({2, 4})}, {1, -1});
  check_vmap(name + " axes (-1, 0)", f, {a({2, 4}), b({3, 2, 4})}, {-1, 0});
}

std::vector<double> zeros_of(size_t n) { return std::vector<double>(n, 0.0); }

}  // namespace

TEST(GradBinary, test_derivatives) {
  on_each_device([] {
    uint64_t seed = 1;
    for (auto& c : cases()) {
      array a = random_f64({3, 4}, seed++, c.a_lo, c.a_hi);
      array b = random_f64({3, 4}, seed++, c.b_lo, c.b_hi);
      check_derivatives(c.name, vec(c.fn), {a, b});
      if (!c.zero) continue;
      auto [outs, g] = vjp(vec(c.fn), {a, b}, {ones_like(c.fn(a, b))});
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(g[i].dtype(), float64) << c.name;
        EXPECT_EQ(values(g[i]), zeros_of(12)) << c.name;
      }
      auto [outs2, t] = jvp(vec(c.fn), {a, b}, {ones_like(a), ones_like(b)});
      EXPECT_EQ(t[0].dtype(), outs2[0].dtype()) << c.name;
      EXPECT_EQ(values(t[0]), zeros_of(12)) << c.name;
    }
  });
}

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

TEST(GradBinary, test_16_bit_inputs_keep_their_dtype) {
  for (Dtype t : {float16, bfloat16}) {
    array a = astype(random_f64({4}, 1, 0.5, 2), t), b = astype(random_f64({4}, 2, 0.5, 2), t);
    for (auto& c : cases()) {
      auto [outs, g] = vjp(vec(c.fn), {a, b}, {ones_like(c.fn(a, b))});
      EXPECT_EQ(g[0].dtype(), t) << c.name;
      EXPECT_EQ(g[1].dtype(), t) << c.name;
      auto [outs2, tangent] = jvp(vec(c.fn), {a, b}, {ones_like(a), ones_like(b)});
      EXPECT_EQ(tangent[0].dtype(), outs2[0].dtype()) << c.name;
    }
  }
}

TEST(GradBinary, test_vmap) {
  on_each_device([] {
    uint64_t seed = 100;
    for (auto& c : cases()) {
      check_vmaps(c.name, vec(c.fn), c.a_lo, c.a_hi, c.b_lo, c.b_hi, seed += 8);
    }
  });
}

TEST(GradBinary, test_integer_and_bool_ops) {
  array a({6, -3, 5}, int32), b({4, 2, 7}, int32);
  std::vector<std::pair<std::string, BinaryFn>> fns = {
      {"add", [](const array& x, const array& y) { return add(x, y); }},
      {"subtract", [](const array& x, const array& y) { return subtract(x, y); }},
      {"multiply", [](const array& x, const array& y) { return multiply(x, y); }},
      {"power", [](const array& x, const array& y) { return power(x, y); }},
      {"maximum", [](const array& x, const array& y) { return maximum(x, y); }},
      {"minimum", [](const array& x, const array& y) { return minimum(x, y); }},
      {"remainder", [](const array& x, const array& y) { return remainder(x, y); }},
      {"floor_divide", [](const array& x, const array& y) { return floor_divide(x, y); }},
      {"bitwise_and", [](const array& x, const array& y) { return bitwise_and(x, y); }},
      {"bitwise_or", [](const array& x, const array& y) { return bitwise_or(x, y); }},
      {"bitwise_xor", [](const array& x, const array& y) { return bitwise_xor(x, y); }},
      {"left_shift", [](const array& x, const array& y) { return left_shift(x, y); }},
      {"right_shift", [](const array& x, const array& y) { return right_shift(x, y); }},
      {"less", [](const array& x, const array& y) { return less(x, y); }},
  };
  for (auto& [name, f] : fns) {
    auto [outs, g] = vjp(vec(f), {a, b}, {ones_like(f(a, b))});
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(g[i].dtype(), int32) << name;
      EXPECT_EQ(values(g[i]), zeros_of(3)) << name;
    }
    auto [outs2, t] = jvp(vec(f), {a, b}, {ones_like(a), ones_like(b)});
    EXPECT_EQ(t[0].dtype(), outs2[0].dtype()) << name;
    EXPECT_EQ(values(t[0]), zeros_of(3)) << name;
    // Small integers: exact in any order.
    array batch_a = array({1, 2, 3, -4, 5, 6}, {3, 2}, int32);
    array batch_b = array({3, 1, 2, 2, 1, 3}, {2, 3}, int32);
    check_vmap(name + " int32 axes (0, 1)", vec(f), {batch_a, batch_b}, {0, 1});
    check_vmap(name + " int32 axes (-1, 1)", vec(f), {array({2, 1}, {2}, int32), batch_b}, {-1, 1});
  }
  array p({true, false, true}), q({true, true, false});
  auto f = vec([](const array& x, const array& y) { return logical_and(x, y); });
  auto [outs, g] = vjp(f, {p, q}, {p});
  EXPECT_EQ(g[0].dtype(), bool_);
  EXPECT_EQ(values(g[0]), zeros_of(3));
  check_vmap("logical_xor bool", vec([](const array& x, const array& y) {
               return logical_xor(x, y);
             }),
             {array({true, false, true, true}, {2, 2}), array({false, true}, {2})}, {1, -1});
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
    // A constant bool condition.
    array cond = array({true, false, false, true}, {2, 2});
    auto h = [cond](const std::vector<array>& x) {
      return std::vector<array>{where(cond, x[0], x[1])};
    };
    check_derivatives("where with a constant condition", h,
                      {random_f64({2, 2}, 4), random_f64({2, 2}, 5)});
    // vmap: every combination of mapped and unmapped inputs, several axes.
    auto sel = [](const std::vector<array>& x) {
      return std::vector<array>{where(x[0], x[1], x[2])};
    };
    array c0 = greater(random_f64({3, 2, 4}, 6), array(0.0, float64));
    array c2 = greater(random_f64({2, 4, 3}, 7), array(0.0, float64));
    array c1 = greater(random_f64({2, 4}, 8), array(0.0, float64));
    check_vmap("where axes (0, 0, 0)", sel,
               {c0, random_f64({3, 2, 4}, 9), random_f64({3, 2, 4}, 10)}, {0, 0, 0});
    check_vmap("where axes (2, 1, -1)", sel,
               {c2, random_f64({2, 3, 4}, 11), random_f64({2, 4}, 12)}, {2, 1, -1});
    check_vmap("where axes (-1, -1, 1)", sel,
               {c1, random_f64({2, 4}, 13), random_f64({2, 3, 4}, 14)}, {-1, -1, 1});
    check_vmap("where axes (0, -1, 2)", sel,
               {c0, random_f64({2, 4}, 15), random_f64({2, 4, 3}, 16)}, {0, -1, 2});
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
