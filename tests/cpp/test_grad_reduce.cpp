// Transform rules of the reductions: sum, prod, max, min, mean, all, any
// (Reduce), argmax / argmin, var / std, logsumexp, softmax, trace. Derivatives
// against finite differences in float64, vmap against a loop over the batch
// (batch axis first and inside), zero derivatives of integer and bool results.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;
using grad_check::values;
using grad_check::lift;
using grad_check::check_on_devices;
using grad_check::check_vmap_axes;
using grad_check::integers_f64;

namespace {

using Unary = std::function<array(const array&)>;

void expect_values(const array& got, const std::vector<double>& want, const std::string& ctx,
                   double tol = 1e-12) {
  auto g = values(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << ctx << " element " << i;
}

std::vector<double> vjp_of(const Unary& f, const array& x) {
  auto [outs, vjps] = vjp(lift(f), {x}, {ones_like(f(x))});
  EXPECT_EQ(vjps[0].shape(), x.shape());
  EXPECT_EQ(vjps[0].dtype(), x.dtype());
  return values(vjps[0]);
}

}  // namespace

// ---- Reduce

TEST(GradReduce, test_sum_mean_derivatives_over_axes_and_keepdims) {
  array x = random_f64({3, 4, 5}, 1);
  check_on_devices("sum all", [](const array& a) { return sum(a); }, x);
  check_on_devices("sum axis 1", [](const array& a) { return sum(a, 1); }, x);
  check_on_devices("sum axes (0,2) keepdims",
                   [](const array& a) { return sum(a, {0, 2}, true); }, x);
  check_on_devices("mean all keepdims", [](const array& a) { return mean(a, true); }, x);
  check_on_devices("mean axes (-1,0)", [](const array& a) { return mean(a, {-1, 0}); }, x);
}

TEST(GradReduce, test_prod_derivatives_with_and_without_zeros) {
  // prod is multilinear, so central differences are exact even at zeros.
  check_on_devices("prod axis 1", [](const array& a) { return prod(a, 1); },
                   random_f64({3, 4, 2}, 2, 0.5, 1.5));
  check_on_devices("prod all keepdims", [](const array& a) { return prod(a, true); },
                   random_f64({2, 3}, 3, 0.5, 1.5));
  // Row 0 has no zero, row 1 one zero, row 2 two zeros.
  array z({2.0, 3.0, 4.0, 5.0, 0.0, 3.0, 0.0, 2.0, 0.0}, {3, 3}, float64);
  check_on_devices("prod with zeros", [](const array& a) { return prod(a, 1); }, z);
  EXPECT_EQ(vjp_of([](const array& a) { return prod(a, 1); }, z),
            (std::vector<double>{12, 8, 6, 0, 15, 0, 0, 0, 0}));
  // The gradient is multilinear too, so its own derivatives (the second
  // derivatives of prod) are checked the same way, on rows with no, one, two
  // and three zeros.
  array z2({2.0, 3.0, 4.0, 5.0, 0.0, 3.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0}, {4, 3}, float64);
  grad_check::on_each_device([&] {
    check_derivatives("gradient of prod with zeros", [](const std::vector<array>& x) {
      auto f = [](const array& a) { return prod(a, 1); };
      return std::vector<array>{vjp(f, x[0], ones_like(f(x[0]))).second};
    }, {z2});
  });
  // By hand: row (5, 0, 3) has d2/dx0 dx1 = 3, d2/dx1 dx2 = 5, d2/dx0 dx2 = 0.
  auto row_grad = [](const array& a) { return vjp([](const array& b) { return prod(b); }, a,
                                                   array(1.0, float64)).second; };
  array r({5.0, 0.0, 3.0}, {3}, float64);
  auto [g, h0] = jvp(row_grad, r, array({1.0, 0.0, 0.0}, {3}, float64));
  EXPECT_EQ(values(h0), (std::vector<double>{0, 3, 0}));
  auto [g1, h1] = jvp(row_grad, r, array({0.0, 1.0, 0.0}, {3}, float64));
  EXPECT_EQ(values(h1), (std::vector<double>{3, 0, 5}));
}

TEST(GradReduce, test_max_min_derivatives_and_ties) {
  array x = random_f64({4, 5}, 4);
  check_on_devices("max axis 0", [](const array& a) { return max(a, 0); }, x);
  check_on_devices("min axis 1 keepdims", [](const array& a) { return min(a, 1, true); }, x);
  check_on_devices("max all", [](const array& a) { return max(a); }, x);
  // Ties share the cotangent evenly.
  array t({1.0, 3.0, 3.0, 2.0, -1.0, -1.0, -1.0, 0.0}, {2, 4}, float64);
  auto g = vjp_of([](const array& a) { return max(a, 1); }, t);
  EXPECT_EQ(g, (std::vector<double>{0, 0.5, 0.5, 0, 0, 0, 0, 1}));
  g = vjp_of([](const array& a) { return min(a, 1); }, t);
  EXPECT_EQ(g, (std::vector<double>{1, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0}));
  auto [outs, tangents] = jvp(lift([](const array& a) { return max(a, 1); }), {t},
                              {array({0.0, 2.0, 4.0, 0.0, 0.0, 0.0, 0.0, 5.0}, {2, 4}, float64)});
  expect_values(tangents[0], {3, 5}, "max jvp averages tied tangents");
}

TEST(GradReduce, test_reduce_vmap) {
  array x = integers_f64({3, 4, 5}, 5);
  for (auto [name, f] : std::vector<std::pair<std::string, Unary>>{
           {"sum", [](const array& a) { return sum(a, 1); }},
           {"sum keepdims", [](const array& a) { return sum(a, {0, 1}, true); }},
           {"prod", [](const array& a) { return prod(a, 0); }},
           {"max", [](const array& a) { return max(a, -1); }},
           {"min keepdims", [](const array& a) { return min(a, 0, true); }},
           {"mean", [](const array& a) { return mean(a); }},
           {"all", [](const array& a) { return all(a, 1); }},
           {"any keepdims", [](const array& a) { return any(a, 0, true); }}}) {
    check_vmap_axes(name, f, x, 1);
    check_vmap_axes(name, f, x, 2);
  }
}

TEST(GradReduce, test_bool_and_integer_reductions_have_zero_derivatives) {
  array x = random_f64({3, 4}, 6);
  for (auto [name, f] : std::vector<std::pair<std::string, Unary>>{
           {"all", [](const array& a) { return all(a, 1); }},
           {"any", [](const array& a) { return any(a, true); }}}) {
    auto [outs, vjps] = vjp(lift(f), {x}, {ones_like(f(x))});
    EXPECT_EQ(vjps[0].dtype(), float64) << name;
    expect_values(vjps[0], std::vector<double>(12, 0.0), name + " vjp");
    auto [outs2, jvps] = jvp(lift(f), {x}, {ones_like(x)});
    EXPECT_EQ(jvps[0].shape(), outs2[0].shape()) << name;
    EXPECT_EQ(jvps[0].dtype(), bool_) << name;
    expect_values(jvps[0], std::vector<double>(outs2[0].size(), 0.0), name + " jvp");
  }
  array i = astype(integers_f64({3, 4}, 7), int32);
  for (auto [name, f] : std::vector<std::pair<std::string, Unary>>{
           {"sum", [](const array& a) { return sum(a, 0); }},
           {"prod", [](const array& a) { return prod(a, 1, true); }},
           {"max", [](const array& a) { return max(a); }},
           {"mean", [](const array& a) { return mean(a, 1); }}}) {
    auto [outs, vjps] = vjp(lift(f), {i}, {ones_like(f(i))});
    EXPECT_EQ(vjps[0].dtype(), int32) << name;
    expect_values(vjps[0], std::vector<double>(12, 0.0), name + " vjp");
    auto [outs2, jvps] = jvp(lift(f), {i}, {ones_like(i)});
    EXPECT_EQ(jvps[0].shape(), outs2[0].shape()) << name;
    EXPECT_EQ(jvps[0].dtype(), outs2[0].dtype()) << name;
    expect_values(jvps[0], std::vector<double>(outs2[0].size(), 0.0), name + " jvp");
  }
}

// ---- ArgReduce

TEST(GradReduce, test_argmax_argmin_zero_derivatives_and_vmap) {
  array x = random_f64({3, 4}, 8);
  for (auto [name, f] : std::vector<std::pair<std::string, Unary>>{
           {"argmax", [](const array& a) { return argmax(a, 1); }},
           {"argmin keepdims", [](const array& a) { return argmin(a, 0, true); }},
           {"argmax all", [](const array& a) { return argmax(a); }}}) {
    auto [outs, vjps] = vjp(lift(f), {x}, {ones_like(f(x))});
    expect_values(vjps[0], std::vector<double>(12, 0.0), name + " vjp");
    auto [outs2, jvps] = jvp(lift(f), {x}, {ones_like(x)});
    EXPECT_EQ(jvps[0].shape(), outs2[0].shape()) << name;
    EXPECT_EQ(jvps[0].dtype(), uint32) << name;
    expect_values(jvps[0], std::vector<double>(outs2[0].size(), 0.0), name + " jvp");
  }
  array b = random_f64({3, 4, 5}, 9);
  check_vmap_axes("argmax", [](const array& a) { return argmax(a, 1); }, b, 1);
  check_vmap_axes("argmin keepdims", [](const array& a) { return argmin(a, 0, true); }, b, 2);
  check_vmap_axes("argmax all", [](const array& a) { return argmax(a); }, b, 2);
}

// ---- Variance

TEST(GradReduce, test_var_std_derivatives) {
  array x = random_f64({3, 4, 5}, 10);
  check_on_devices("var all", [](const array& a) { return var(a); }, x);
  check_on_devices("var axis 1 ddof 1", [](const array& a) { return var(a, 1, false, 1); }, x);
  check_on_devices("std axes (0,2) keepdims",
                   [](const array& a) { return tessera::std(a, {0, 2}, true); }, x);
  check_on_devices("std axis -1 ddof 1",
                   [](const array& a) { return tessera::std(a, -1, false, 1); }, x);
}

TEST(GradReduce, test_var_of_complex_follows_the_real_gradient_convention) {
  // var(z) = mean |z - mean|^2: with cotangent 1 the gradient is 2 (z - mean) / N.
  std::vector<complex64_t> zv{{1, 2}, {-3, 0.5}, {2, -1}, {0, 1}};
  array z(zv.begin(), {4}, complex64);
  auto [outs, vjps] = vjp(lift([](const array& a) { return var(a); }), {z},
                          {array(complex64_t{1, 0})});
  array g = copy(vjps[0]);
  eval(g);
  complex64_t m{0, 0};
  for (auto v : zv) m += v;
  m /= 4.f;
  for (int i = 0; i < 4; ++i) {
    complex64_t want = 2.f * (zv[i] - m) / 4.f;
    complex64_t got = g.data<complex64_t>()[i];
    EXPECT_NEAR(got.real(), want.real(), 1e-6) << i;
    EXPECT_NEAR(got.imag(), want.imag(), 1e-6) << i;
  }
}

TEST(GradReduce, test_var_std_vmap) {
  array x = integers_f64({3, 4, 5}, 11);
  check_vmap_axes("var", [](const array& a) { return var(a, 1); }, x, 1);
  check_vmap_axes("var keepdims ddof 1", [](const array& a) { return var(a, {0, 1}, true, 1); },
                  x, 2);
  check_vmap_axes("std", [](const array& a) { return tessera::std(a, 0); }, x, 2);
}

// ---- LogSumExp, Softmax

TEST(GradReduce, test_logsumexp_derivatives_and_vmap) {
  array x = random_f64({3, 4, 5}, 12, -3, 3);
  check_on_devices("logsumexp all", [](const array& a) { return logsumexp(a); }, x);
  check_on_devices("logsumexp axis 1", [](const array& a) { return logsumexp(a, 1); }, x);
  check_on_devices("logsumexp axes (0,2) keepdims",
                   [](const array& a) { return logsumexp(a, {0, 2}, true); }, x);
  // The exp terms are not integers: on the GPU the batched and the looped
  // reductions read different layouts and so add them in different orders.
  array b = integers_f64({3, 4, 5}, 13);
  check_vmap_axes("logsumexp", [](const array& a) { return logsumexp(a, -1); }, b, 1, 4);
  check_vmap_axes("logsumexp keepdims", [](const array& a) { return logsumexp(a, 0, true); }, b,
                  2, 4);
}

TEST(GradReduce, test_softmax_derivatives_and_vmap) {
  array x = random_f64({3, 4, 5}, 14, -3, 3);
  check_on_devices("softmax last", [](const array& a) { return softmax(a, -1); }, x);
  check_on_devices("softmax axes (0,1)", [](const array& a) { return softmax(a, {0, 1}); }, x);
  check_on_devices("softmax all", [](const array& a) { return softmax(a); }, x);
  array b = integers_f64({3, 4, 5}, 15);
  check_vmap_axes("softmax", [](const array& a) { return softmax(a, -1); }, b, 1);
  check_vmap_axes("softmax axis 0", [](const array& a) { return softmax(a, 0); }, b, 2);
}

// ---- Trace

TEST(GradReduce, test_trace_derivatives_and_vmap) {
  array x = random_f64({4, 3, 5}, 16);
  check_on_devices("trace", [](const array& a) { return trace(a); }, x);
  check_on_devices("trace offset 1 axes (2,0)",
                   [](const array& a) { return trace(a, 1, 2, 0); }, x);
  check_on_devices("trace offset -1 axes (1,2)",
                   [](const array& a) { return trace(a, -1, 1, 2); }, x);
  auto g = vjp_of([](const array& a) { return trace(a, 1, 0, 1); }, random_f64({3, 3}, 17));
  EXPECT_EQ(g, (std::vector<double>{0, 1, 0, 0, 0, 1, 0, 0, 0}));
  array b = integers_f64({2, 4, 3, 5}, 18);
  check_vmap_axes("trace", [](const array& a) { return trace(a, 0, 0, 1); }, b, 1);
  check_vmap_axes("trace offset 1 axes (2,0)", [](const array& a) { return trace(a, 1, 2, 0); },
                  b, 2);
  check_vmap_axes("trace axes (1,2)", [](const array& a) { return trace(a, -1, 1, 2); }, b, 3);
}

// ---- Composition: the rules are public ops, so their graphs differentiate again.

TEST(GradReduce, test_second_derivatives_through_the_rules) {
  array w = random_f64({3, 4}, 19);
  auto derivative_of = [](const Unary& f) {
    return [f](const array& x) { return grad(f)(x); };
  };
  std::vector<std::pair<std::string, Unary>> cases = {
      {"logsumexp", [](const array& a) { return logsumexp(a); }},
      {"softmax", [w](const array& a) { return sum(multiply(softmax(a, -1), w)); }},
      {"var", [](const array& a) { return sum(var(a, 0, false, 1)); }},
      {"std", [](const array& a) { return sum(tessera::std(a, 1)); }},
      {"prod", [](const array& a) { return prod(a); }},
      {"mean of max", [](const array& a) { return mean(multiply(max(a, 1), max(a, 1))); }},
      {"trace", [](const array& a) { return multiply(trace(a), trace(a)); }},
  };
  array x = random_f64({3, 4}, 20, 0.5, 1.5);
  for (auto& [name, f] : cases) {
    check_derivatives("d grad " + name, lift(derivative_of(f)), {x});
  }
}
