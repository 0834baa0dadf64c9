// The transforms themselves: argument handling, composition (grad of grad,
// vmap of grad, jvp of vjp), functions that evaluate inside, integer paths,
// and the error for a primitive without rules. The rules of each primitive
// family are checked in test_grad_*.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"
#include "tessera/ops/primitives/fast.h"
#include "tessera/ops/primitives/sort.h"

using namespace tessera;
using grad_check::random_f64;
using grad_check::values;

namespace {

void expect_near(const array& got, const std::vector<double>& want, const std::string& ctx,
                 double tol = 1e-12) {
  auto g = values(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_NEAR(g[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << ctx << " element " << i;
  }
}

// A primitive without transform rules.
class Opaque : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& in, array& out) override {
    out.set_data(allocator::malloc(out.nbytes()));
    std::copy(in[0].data<double>(), in[0].data<double>() + in[0].size(), out.data<double>());
  }
  void eval_gpu(const std::vector<array>&, array&) override {}
  TESSERA_PRIMITIVE_NAME(Opaque)
};

}  // namespace

TEST(Transforms, GradOfASumOfSquaresOnEveryDevice) {
  for (Device d : harness::devices()) {
    StreamContext ctx(d);
    array x = random_f64({3, 4}, 1);
    auto g = grad([](const array& a) { return sum(multiply(a, a)); })(x);
    auto v = values(x);
    for (auto& e : v) e *= 2;
    expect_near(g, v, "grad sum(x^2)");
  }
}

TEST(Transforms, ValueAndGradArgnumsAndAuxiliaryOutputs) {
  array x = random_f64({5}, 2), y = random_f64({5}, 3);
  auto f = [](const std::vector<array>& in) {
    array loss = sum(multiply(in[0], in[1]));
    return std::vector<array>{loss, multiply(in[0], array(2.0, float64))};
  };
  auto [value, grads] = value_and_grad(f, std::vector<int>{1, 0})({x, y});
  ASSERT_EQ(value.size(), 2u);
  ASSERT_EQ(grads.size(), 2u);
  // Ascending argnums: d/dx = y, d/dy = x.
  expect_near(grads[0], values(y), "d/dx");
  expect_near(grads[1], values(x), "d/dy");
  auto xv = values(x);
  double want = 0;
  auto yv = values(y);
  for (size_t i = 0; i < xv.size(); ++i) want += xv[i] * yv[i];
  EXPECT_NEAR(value[0].item<double>(), want, 1e-12);
  EXPECT_THROW(value_and_grad(f, std::vector<int>{})({x, y}), std::invalid_argument);
  EXPECT_THROW(value_and_grad(f, 2)({x, y}), std::invalid_argument);
  auto not_scalar = [](const std::vector<array>& in) { return std::vector<array>{in[0]}; };
  EXPECT_THROW(value_and_grad(not_scalar, 0)({x}), std::invalid_argument);
}

TEST(Transforms, VjpAndJvpCheckTheirArguments) {
  auto f = [](const std::vector<array>& in) { return std::vector<array>{multiply(in[0], in[0])}; };
  array x = random_f64({3}, 4);
  EXPECT_THROW(vjp(f, {x}, {random_f64({4}, 5)}), std::invalid_argument);
  EXPECT_THROW(jvp(f, {x}, {}), std::invalid_argument);
  // An output that does not depend on the primal has a zero vjp.
  auto constant = [](const std::vector<array>&) { return std::vector<array>{ones({2}, float64)}; };
  auto [outs, vjps] = vjp(constant, {x}, {ones({2}, float64)});
  expect_near(vjps[0], {0, 0, 0}, "constant");
}

TEST(Transforms, GradOfGradIsAHessianVectorProduct) {
  array x = random_f64({6}, 6), v = random_f64({6}, 7);
  auto f = [](const array& a) { return sum(multiply(multiply(a, a), a)); };  // sum x^3
  auto hvp = grad([&](const array& a) { return sum(multiply(grad(f)(a), v)); })(x);
  auto xv = values(x), vv = values(v);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = 6 * xv[i] * vv[i];
  expect_near(hvp, want, "hvp", 1e-10);
}

TEST(Transforms, VmapOfGradGivesPerExampleGradients) {
  array w = random_f64({4}, 8);
  array X = random_f64({5, 4}, 9);
  // loss(w, x) = (x . w)^2, gradient 2 (x . w) x.
  auto loss = [](const std::vector<array>& in) {
    array p = sum(multiply(in[0], in[1]));
    return multiply(p, p);
  };
  auto per_example = vmap(grad(loss, 0), {-1, 0})({w, X});
  ASSERT_EQ(per_example[0].shape(), (Shape{5, 4}));
  auto wv = values(w), xv = values(X);
  std::vector<double> want;
  for (int i = 0; i < 5; ++i) {
    double p = 0;
    for (int j = 0; j < 4; ++j) p += xv[i * 4 + j] * wv[j];
    for (int j = 0; j < 4; ++j) want.push_back(2 * p * xv[i * 4 + j]);
  }
  expect_near(per_example[0], want, "per-example gradients", 1e-10);
}

TEST(Transforms, JvpOfVjp) {
  // g(x) = vjp of sin at x with cotangent 1 = cos(x); its jvp along t is -sin(x) t.
  array x = random_f64({5}, 10), t = random_f64({5}, 11);
  auto g = [](const std::vector<array>& in) {
    return vjp([](const std::vector<array>& a) { return std::vector<array>{sin(a[0])}; }, in,
               {ones_like(in[0])})
        .second;
  };
  auto [outs, tangents] = jvp(g, {x}, {t});
  auto xv = values(x), tv = values(t);
  std::vector<double> want_out, want_tan;
  for (size_t i = 0; i < xv.size(); ++i) {
    want_out.push_back(std::cos(xv[i]));
    want_tan.push_back(-std::sin(xv[i]) * tv[i]);
  }
  expect_near(outs[0], want_out, "cos");
  expect_near(tangents[0], want_tan, "-sin t");
}

TEST(Transforms, GradThroughALoopThatReadsValues) {
  // Doubles x until its sum passes 100: the gradient of sum(y) is 2^k.
  auto f = [](const array& x) {
    array y = x;
    int k = 0;
    while (sum(y).item<double>() < 100) {
      y = multiply(y, array(2.0, float64));
      ++k;
    }
    return sum(y);
  };
  array x = array({1.0, 2.0}, float64);
  auto g = grad(f)(x);
  expect_near(g, {64, 64}, "2^6");  // 3 * 2^6 = 192 >= 100 > 96
}

TEST(Transforms, GradThroughViewsAndSliceUpdates) {
  // y = x with y[1:3] = 3 x[0:2]; sum(y * y).
  array x = random_f64({4}, 12);
  auto f = [](const array& a) {
    array part = multiply(slice(a, {0}, {2}), array(3.0, float64));
    array y = slice_update(a, part, Shape{1}, Shape{3});
    return sum(multiply(y, y));
  };
  auto xv = values(x);
  // y = [x0, 3x0, 3x1, x3]: d/dx0 = 2 x0 + 18 x0, d/dx1 = 18 x1, d/dx2 = 0, d/dx3 = 2 x3.
  std::vector<double> want{20 * xv[0], 18 * xv[1], 0, 2 * xv[3]};
  expect_near(grad(f)(x), want, "slice_update");
}

TEST(Transforms, IntegerPathsHaveZeroGradient) {
  array x = random_f64({3}, 13, 1, 5);
  auto f = [](const array& a) {
    array i = astype(a, int32);
    return add(sum(astype(i, float64)), sum(multiply(a, array(0.5, float64))));
  };
  expect_near(grad(f)(x), {0.5, 0.5, 0.5}, "through an integer cast");
}

TEST(Transforms, StopGradientBlocksTheGradient) {
  array x = random_f64({3}, 14);
  auto f = [](const array& a) { return sum(multiply(stop_gradient(a), a)); };
  expect_near(grad(f)(x), values(x), "stop_gradient");
}

TEST(Transforms, DependsOrdersWithoutDataFlow) {
  grad_check::on_each_device([] {
    array x = random_f64({3}, 30), y = random_f64({2}, 31);
    array later = exp(y);  // unevaluated: depends must run it
    auto r = depends({x, y}, {later});
    ASSERT_EQ(r.size(), 2u);
    eval(r[0]);
    EXPECT_TRUE(later.is_available());
    expect_near(r[0], values(x), "the input passed through");
    expect_near(r[1], values(y), "the second input passed through");

    // Gradients reach the inputs, not the dependencies.
    auto f = [](const std::vector<array>& p) {
      return std::vector<array>{sum(square(depends({p[0]}, {p[1]})[0]))};
    };
    auto [value, g] = value_and_grad(f, std::vector<int>{0, 1})({x, y});
    auto vx = values(x);
    expect_near(g[0], {2 * vx[0], 2 * vx[1], 2 * vx[2]}, "d/dinput");
    expect_near(g[1], {0, 0}, "d/ddependency");
    auto [out, tangent] = jvp([&](const array& a) { return depends({a}, {y})[0] * 3.0; }, x,
                              ones({3}, float64));
    expect_near(tangent, {3, 3, 3}, "jvp");

    // vmap: each row passed through, after the per-row dependency.
    array batch = random_f64({4, 3}, 32);
    array mapped = vmap([](const array& a) { return depends({a}, {sum(a)})[0] * 2.0; })(batch);
    auto vb = values(batch);
    for (auto& v : vb) v *= 2;
    expect_near(mapped, vb, "vmap");
  });
}

TEST(Transforms, APrimitiveWithoutRulesIsNamed) {
  array x = random_f64({3}, 15);
  auto f = [](const array& a) {
    return sum(array(a.shape(), a.dtype(), std::make_shared<Opaque>(to_stream(Device::cpu)), {a}));
  };
  try {
    grad(f)(x);
    ADD_FAILURE() << "grad through a primitive without a vjp rule did not throw";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("Opaque"), std::string::npos) << e.what();
  }
}

TEST(Transforms, VmapAxesAndErrors) {
  array x = random_f64({3, 5}, 16);
  auto row_sums = vmap([](const array& a) { return sum(a); }, 1, 0)(x);  // map over columns
  ASSERT_EQ(row_sums.shape(), (Shape{5}));
  auto xv = values(x);
  std::vector<double> want(5, 0);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) want[j] += xv[i * 5 + j];
  }
  expect_near(row_sums, want, "vmap over axis 1", 1e-12);
  // An unmapped output is broadcast along the batch.
  auto constant = vmap([](const std::vector<array>&) { return std::vector<array>{ones({2}, float64)}; },
                       {0}, {0})({x});
  EXPECT_EQ(constant[0].shape(), (Shape{3, 2}));
  EXPECT_THROW(vmap([](const array& a) { return a; }, 2)(x), std::out_of_range);
  EXPECT_THROW(vmap([](const std::vector<array>& a) { return a; }, {0, 0})({x, random_f64({4}, 1)}),
               std::invalid_argument);
}

namespace {

// Calls each transform rule of the primitive behind outs on its inputs; the
// names of the rules that are missing ("[Name] has no vjp implementation").
std::vector<std::string> missing_rules(const std::vector<array>& outs) {
  std::vector<std::string> missing;
  const array& a = outs[0];
  if (!a.has_primitive()) return missing;
  auto& p = a.primitive();
  const auto& inputs = a.inputs();
  std::vector<int> argnums;
  std::vector<array> tangents, batched;
  std::vector<int> axes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    argnums.push_back(static_cast<int>(i));
    tangents.push_back(ones_like(inputs[i]));
    Shape shape = inputs[i].shape();
    shape.insert(shape.begin(), 2);
    batched.push_back(broadcast_to(expand_dims(inputs[i], 0), shape));
    axes.push_back(0);
  }
  std::vector<array> cotangents;
  for (auto& o : outs) cotangents.push_back(ones_like(o));
  auto attempt = [&](const char* rule, const std::function<void()>& f) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      if (std::string(e.what()).find("has no " + std::string(rule)) != std::string::npos) {
        missing.push_back(std::string(p.name()) + "." + rule);
      }
    } catch (const std::exception&) {
      // A rule that exists and refuses these inputs (e.g. a dtype) is a rule.
    }
  };
  if (!inputs.empty()) {
    attempt("vjp", [&] { p.vjp(inputs, cotangents, argnums, outs); });
    attempt("jvp", [&] { p.jvp(inputs, tangents, argnums); });
    attempt("vmap", [&] { p.vmap(batched, axes); });
  }
  return missing;
}

}  // namespace

TEST(Transforms, EveryPrimitiveHasItsRules) {
  array x = random_f64({3, 4}, 20, 0.1, 0.9), y = random_f64({3, 4}, 21, 0.1, 0.9);
  array i = astype(multiply(x, array(10.0, float64)), int32);
  array j = astype(multiply(y, array(10.0, float64)), int32);
  array m = random_f64({4, 3}, 22), v = random_f64({4}, 23);
  using U = array (*)(const array&, StreamOrDevice);
  using B = array (*)(const array&, const array&, StreamOrDevice);
  std::vector<std::pair<std::string, std::vector<array>>> cases;
  for (U f : std::vector<U>{abs, negative, sign, reciprocal, floor, ceil, trunc, square, exp,
                            expm1, sqrt, rsqrt, sin, cos, tan, arcsin, arccos, arctan, sinh, cosh,
                            tanh, arcsinh, arctanh, degrees, radians, log, log2, log10, log1p,
                            sigmoid, erf, erfinv, conjugate, real, imag, isnan, isinf, isfinite,
                            isposinf, isneginf, stop_gradient}) {
    cases.push_back({"unary", {f(x, {})}});
  }
  cases.push_back({"arccosh", {arccosh(add(x, array(1.5, float64)))}});
  cases.push_back({"logical_not", {logical_not(greater(x, y))}});
  cases.push_back({"bitwise_invert", {bitwise_invert(i)}});
  for (B f : std::vector<B>{add, subtract, multiply, divide, floor_divide, remainder, power,
                            maximum, minimum, logaddexp, arctan2, not_equal, greater,
                            greater_equal, less, less_equal, logical_and, logical_or,
                            logical_xor}) {
    cases.push_back({"binary", {f(x, y, {})}});
  }
  for (B f : std::vector<B>{bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift}) {
    cases.push_back({"bitwise", {f(i, j, {})}});
  }
  cases.push_back({"equal", {equal(x, y)}});
  cases.push_back({"isclose", {isclose(x, y)}});
  cases.push_back({"divmod", divmod(x, y)});
  cases.push_back({"where", {where(greater(x, y), x, y)}});
  cases.push_back({"all_true", {array_equal(x, y)}});
  cases.push_back({"round", {round(x, 1)}});
  cases.push_back({"nan_to_num", {nan_to_num(x)}});
  cases.push_back({"astype", {astype(x, float32)}});
  cases.push_back({"copy", {copy(x)}});
  cases.push_back({"broadcast", {broadcast_to(v, {3, 4})}});
  cases.push_back({"contiguous", {contiguous(transpose(x))}});
  cases.push_back({"tril", {tril(x)}});
  cases.push_back({"view", {view(x, int64)}});
  cases.push_back({"as_strided", {as_strided(x, {2, 2}, {4, 1}, 0)}});
  cases.push_back({"matmul", {matmul(x, m)}});
  cases.push_back({"addmm", {addmm(random_f64({3, 3}, 24), x, m)}});
  cases.push_back({"sum", {sum(x, 1)}});
  cases.push_back({"max", {max(x, 0)}});
  cases.push_back({"prod", {prod(x, 1)}});
  cases.push_back({"argmax", {argmax(x, 1)}});
  cases.push_back({"var", {var(x, 1)}});
  cases.push_back({"logsumexp", {logsumexp(x, 1)}});
  cases.push_back({"softmax", {softmax(x, 1)}});
  cases.push_back({"trace", {trace(m)}});
  cases.push_back({"transpose", {transpose(x)}});
  cases.push_back({"slice", {slice(x, {0, 1}, {2, 3})}});
  cases.push_back({"reshape", {reshape(transpose(x), {12})}});
  cases.push_back({"dynamic slice", {slice(x, array({1}), {0}, {2, 4})}});
  cases.push_back({"slice_update", {slice_update(x, ones({1, 2}, float64), Shape{0, 1}, Shape{1, 3})}});
  cases.push_back({"dynamic slice_update", {slice_update(x, ones({1, 4}, float64), array({1}), {0})}});
  cases.push_back({"concatenate", {concatenate({x, y}, 0)}});
  cases.push_back({"pad", {pad(x, 1)}});
  cases.push_back({"diagonal", {diagonal(x)}});
  cases.push_back({"cumsum", {cumsum(x, 1)}});
  cases.push_back({"cummax", {cummax(x, 0, true, false)}});
  cases.push_back({"sort", {sort(x, 1)}});
  cases.push_back({"argsort", {argsort(x, 0)}});
  cases.push_back({"partition", {partition(x, 1, 1)}});
  cases.push_back({"argpartition", {argpartition(x, 1, 0)}});
  cases.push_back({"searchsorted", {searchsorted(sort(v), x)}});
  cases.push_back({"permute_axis", {detail::permute_axis(x, argsort(x, 1), 1)}});
  array k = array({2, 0, -1}, int32);
  cases.push_back({"gather", {take(x, k, 1)}});
  cases.push_back({"scatter", {scatter(x, k, ones({3, 1, 4}, float64), 0)}});
  cases.push_back({"scatter_add", {scatter_add(x, k, ones({3, 1, 4}, float64), 0)}});
  cases.push_back({"scatter_prod", {scatter_prod(x, k, ones({3, 1, 4}, float64), 0)}});
  cases.push_back({"scatter_max", {scatter_max(x, k, ones({3, 1, 4}, float64), 0)}});
  cases.push_back({"scatter_min", {scatter_min(x, k, ones({3, 1, 4}, float64), 0)}});
  cases.push_back({"take_along_axis", {take_along_axis(x, reshape(k, {3, 1}), 1)}});
  cases.push_back({"put_along_axis", {put_along_axis(x, reshape(k, {3, 1}), array(2.0), 1)}});
  cases.push_back({"scatter_add_axis", {scatter_add_axis(x, reshape(k, {3, 1}), array(2.0), 1)}});
  cases.push_back({"masked_scatter", {masked_scatter(x, greater(x, y), v)}});
  array sq = add(matmul(m, transpose(m)), multiply(eye(4, float64), array(4.0, float64)));
  cases.push_back({"lu_factor", [&] { auto [f, p] = linalg::lu_factor(sq); return std::vector<array>{f, p}; }()});
  cases.push_back({"solve", {linalg::solve(sq, v)}});
  cases.push_back({"inv", {linalg::inv(sq)}});
  cases.push_back({"cholesky", {linalg::cholesky(sq)}});
  cases.push_back({"qr", [&] { auto [q, r] = linalg::qr(m); return std::vector<array>{q, r}; }()});
  cases.push_back({"svd", linalg::svd(m)});
  cases.push_back({"eigh", [&] { auto [w, e] = linalg::eigh(sq); return std::vector<array>{w, e}; }()});
  cases.push_back({"eig", [&] { auto [w, e] = linalg::eig(sq, Device::cpu); return std::vector<array>{w, e}; }()});
  cases.push_back({"fft", {fft::rfft(x)}});
  cases.push_back({"random bits", {random::bits({3}, random::key(1))}});
  array wide = random_f64({4, 32}, 25);
  auto packed = quantize(wide, 32, 4);
  cases.push_back({"quantize", packed});
  cases.push_back({"dequantize", {dequantize(packed[0], packed[1], packed[2], 32, 4)}});
  cases.push_back({"quantized_matmul",
                   {quantized_matmul(random_f64({2, 32}, 26), packed[0], packed[1], packed[2],
                                     true, 32, 4)}});
  cases.push_back({"depends", depends({x, m}, {y})});
  {
    fast::PrimitiveScope nodes;
    array x3 = reshape(x, {1, 3, 4}), x4 = reshape(x, {1, 1, 3, 4});
    cases.push_back({"rms_norm", {fast::rms_norm(x, v, 1e-5f)}});
    cases.push_back({"layer_norm", {fast::layer_norm(x, v, v, 1e-5f)}});
    cases.push_back({"rope", {fast::rope(x3, 4, false, 1e4f, 1.0f, 0)}});
    cases.push_back({"attention", {fast::scaled_dot_product_attention(x4, x4, x4, 0.5f)}});
  }
  std::vector<std::string> missing;
  for (auto& [label, outs] : cases) {
    for (auto& m : missing_rules(outs)) missing.push_back(m + " (" + label + ")");
  }
  std::string list;
  for (auto& m : missing) list += "\n  " + m;
  EXPECT_TRUE(missing.empty()) << "primitives without a transform rule:" << list;
}

TEST(Transforms, CustomFunctionUsesTheGivenRules) {
  array x = random_f64({4}, 30);
  // sin with a vjp of 2 * cotangent: grad gives 2 everywhere.
  auto f = custom_vjp(
      [](const std::vector<array>& in) { return std::vector<array>{sin(in[0])}; },
      [](const std::vector<array>&, const std::vector<array>& cot, const std::vector<array>&) {
        return std::vector<array>{multiply(cot[0], array(2.0, float64))};
      });
  auto loss = [&](const array& a) { return sum(f({a})[0]); };
  expect_near(grad(loss)(x), {2, 2, 2, 2}, "custom vjp");
  // The value is fun's; jvp without a custom rule falls back to fun's own.
  auto xv = values(x);
  std::vector<double> want;
  for (double e : xv) want.push_back(std::sin(e));
  expect_near(f({x})[0], want, "custom value");
  auto [outs, tangents] = jvp(f, {x}, {ones_like(x)});
  std::vector<double> cosines;
  for (double e : xv) cosines.push_back(std::cos(e));
  expect_near(tangents[0], cosines, "fallback jvp");
}

TEST(Transforms, CheckpointGivesTheSameGradientWithLessMemory) {
  // 8 segments of 8 elementwise ops on 2^20 float32 values.
  const int n = 1 << 20;
  auto segment = [](const std::vector<array>& in) {
    array y = in[0];
    for (int k = 0; k < 8; ++k) y = sin(add(y, array(0.1f)));
    return std::vector<array>{y};
  };
  auto checkpointed = checkpoint(segment);
  auto loss = [&](bool remat) {
    return [&, remat](const array& x) {
      array y = x;
      for (int s = 0; s < 8; ++s) y = remat ? checkpointed({y})[0] : segment({y})[0];
      return sum(y);
    };
  };
  array x = astype(divide(arange(0, n), array(static_cast<float>(n))), float32);
  eval(x);
  size_t peaks[2];
  array grads[2] = {x, x};
  for (int remat = 0; remat < 2; ++remat) {
    clear_cache();
    reset_peak_memory();
    size_t base = get_active_memory();
    grads[remat] = grad(loss(remat == 1))(x);
    eval(grads[remat]);
    peaks[remat] = get_peak_memory() - base;
  }
  auto a = values(grads[0]), b = values(grads[1]);
  for (size_t i = 0; i < a.size(); i += 4099) ASSERT_NEAR(a[i], b[i], 1e-5 * std::abs(a[i]) + 1e-6);
  EXPECT_LT(peaks[1], peaks[0]) << "peak bytes without checkpoint " << peaks[0] << ", with "
                                << peaks[1];
  std::printf("checkpoint: peak %zu MiB without, %zu MiB with\n", peaks[0] >> 20, peaks[1] >> 20);
}
