// compile: values against the function itself (and NumPy-style loops written
// here), when it traces again, merged subexpressions, frozen closures, the
// refusal to evaluate during a trace, and composition with the transforms,
// on every device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <unordered_set>

#include "grad_check.h"
#include "harness.h"
#include "tessera/transforms/compile.h"

using namespace tessera;
using grad_check::random_f64;
using grad_check::values;

namespace {

// Nodes reachable from the outputs (before evaluation).
size_t count_nodes(const std::vector<array>& outputs) {
  std::unordered_set<const void*> seen;
  std::vector<array> stack(outputs.begin(), outputs.end());
  while (!stack.empty()) {
    array a = stack.back();
    stack.pop_back();
    if (!a.has_primitive() || !seen.insert(a.node()).second) continue;
    for (const auto& in : a.inputs()) stack.push_back(in);
  }
  return seen.size();
}

void expect_same(const array& got, const array& want, const std::string& ctx) {
  ASSERT_EQ(got.shape(), want.shape()) << ctx;
  ASSERT_EQ(got.dtype(), want.dtype()) << ctx;
  auto g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], w[i]) << ctx << " element " << i;
}

std::vector<array> double_it(const std::vector<array>& x) { return {x[0] + x[0]}; }

// Restores the compile mode a test changes.
struct ModeGuard {
  CompileMode saved = compile_mode();
  ~ModeGuard() { set_compile_mode(saved); }
};

}  // namespace

TEST(Compile, MatchesTheFunctionAndTracesOncePerSignature) {
  grad_check::on_each_device([] {
    ModeGuard guard;
    enable_compile();
    int traces = 0;
    VecFn f = [&](const std::vector<array>& x) {
      ++traces;
      array h = tanh(matmul(x[0], x[1])) + x[2];
      return std::vector<array>{sum(h * h, 1), h};
    };
    VecFn cf = compile(f);
    for (int call = 0; call < 3; ++call) {
      std::vector<array> in{random_f64({4, 3}, 10 + call), random_f64({3, 5}, 20 + call),
                            random_f64({5}, 30 + call)};
      auto got = cf(in);
      auto want = f(in);
      ASSERT_EQ(got.size(), 2u);
      expect_same(got[0], want[0], "reduced output, call " + std::to_string(call));
      expect_same(got[1], want[1], "hidden output, call " + std::to_string(call));
    }
    // Three compiled calls with one signature trace once; f itself ran 3 times.
    EXPECT_EQ(traces, 1 + 3);

    // A new shape or a new dtype traces again; an old one does not.
    traces = 0;
    cf({random_f64({2, 3}, 1), random_f64({3, 5}, 2), random_f64({5}, 3)});
    EXPECT_EQ(traces, 1);
    cf({astype(random_f64({4, 3}, 1), float32), astype(random_f64({3, 5}, 2), float32),
        astype(random_f64({5}, 3), float32)});
    EXPECT_EQ(traces, 2);
    cf({random_f64({2, 3}, 4), random_f64({3, 5}, 5), random_f64({5}, 6)});
    EXPECT_EQ(traces, 2);
  });
}

TEST(Compile, MergesCommonSubexpressions) {
  ModeGuard guard;
  set_compile_mode(CompileMode::no_fuse);  // nodes counted before fusion
  auto f = [](const std::vector<array>& x) {
    // exp(x) three times and x * y twice: one node each once merged.
    array a = exp(x[0]) + exp(x[0]) * multiply(x[0], x[1]);
    return std::vector<array>{a + exp(x[0]) - multiply(x[0], x[1])};
  };
  array x = random_f64({6}, 1), y = random_f64({6}, 2);
  auto plain = f({x, y});
  auto merged = compile(f)({x, y});
  set_compile_mode(CompileMode::no_simplify);
  auto unmerged = compile(f)({x, y});
  // Nodes: exp x3, multiply x2 (one more inside the first line), add x2, subtract x1.
  EXPECT_EQ(count_nodes(plain), count_nodes(unmerged));
  EXPECT_EQ(count_nodes(merged), count_nodes(plain) - 3);
  auto vx = values(x), vy = values(y);
  std::vector<double> want(6);
  for (size_t i = 0; i < 6; ++i) {
    double e = std::exp(vx[i]), m = vx[i] * vy[i];
    want[i] = e + e * m + e - m;
  }
  harness::expect_values(merged[0], want, "merged", 1e-12, 1e-12);
  harness::expect_values(unmerged[0], want, "unmerged", 1e-12, 1e-12);
}

TEST(Compile, ClosuresAreFrozenAtTheTrace) {
  ModeGuard guard;
  enable_compile();
  array scale = array(2.0, float64);
  auto cf = compile([&](const std::vector<array>& x) { return std::vector<array>{x[0] * scale}; });
  array x = random_f64({3}, 1);
  auto vx = values(x);
  harness::expect_values(cf({x})[0], {2 * vx[0], 2 * vx[1], 2 * vx[2]}, "traced");
  scale = array(5.0, float64);  // not seen: the record holds the traced constant
  harness::expect_values(cf({x})[0], {2 * vx[0], 2 * vx[1], 2 * vx[2]}, "replayed");
}

TEST(Compile, InputsOutputsAndConstantsAsOutputs) {
  ModeGuard guard;
  enable_compile();
  auto cf = compile([](const std::vector<array>& x) {
    return std::vector<array>{x[1], ones({2}, float32), x[0] + x[0]};
  });
  array a = array({1.f, 2.f}), b = array({7.f, 8.f, 9.f});
  for (int call = 0; call < 2; ++call) {
    auto out = cf({a, b});
    harness::expect_values(out[0], {7, 8, 9}, "input passed through");
    harness::expect_values(out[1], {1, 1}, "constant");
    harness::expect_values(out[2], {2, 4}, "computed");
  }
}

TEST(Compile, MultiOutputPrimitives) {
  grad_check::on_each_device([] {
    ModeGuard guard;
    enable_compile();
    auto f = [](const std::vector<array>& x) {
      auto qr_ = divmod(x[0], x[1]);
      return std::vector<array>{qr_[1], qr_[0] * x[1]};
    };
    auto cf = compile(f);
    for (int call = 0; call < 2; ++call) {
      array a = random_f64({5}, 40 + call, -9, 9), b = random_f64({5}, 50 + call, 1, 3);
      auto got = cf({a, b});
      auto va = values(a), vb = values(b);
      std::vector<double> rem(5), quot(5);
      for (int i = 0; i < 5; ++i) {
        double q = std::floor(va[i] / vb[i]);
        quot[i] = q * vb[i];
        rem[i] = va[i] - q * vb[i];
      }
      harness::expect_values(got[0], rem, "remainder", 1e-12, 1e-12);
      harness::expect_values(got[1], quot, "quotient times b", 1e-12, 1e-12);
    }
  });
}

TEST(Compile, EvaluatingDuringTheTraceRaises) {
  ModeGuard guard;
  enable_compile();
  bool read = true;
  auto cf = compile([&](const std::vector<array>& x) {
    array y = x[0] * 2.0f;
    if (read && y.item<float>() > 0) return std::vector<array>{y};
    return std::vector<array>{y + 1.0f};
  });
  try {
    cf({array(1.0f)});
    FAIL() << "evaluating a traced value did not raise";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[compile]"), std::string::npos) << e.what();
  }
  // A failed trace leaves nothing behind: the next call traces again.
  read = false;
  harness::expect_values(cf({array(1.0f)})[0], {3}, "after a failed trace");
}

TEST(Compile, DisabledCallsTheFunction) {
  ModeGuard guard;
  int traces = 0;
  auto cf = compile([&](const std::vector<array>& x) {
    ++traces;
    return std::vector<array>{x[0] + 1.0f};
  });
  disable_compile();
  cf({array(1.0f)});
  harness::expect_values(cf({array(1.0f)})[0], {2}, "disabled");
  EXPECT_EQ(traces, 2);
  enable_compile();
  cf({array(1.0f)});
  cf({array(1.0f)});
  EXPECT_EQ(traces, 3);
}

TEST(Compile, CapturelessLambdaAndFunctionPointer) {
  auto cf = compile([](const std::vector<array>& x) { return std::vector<array>{exp(x[0])}; });
  harness::expect_values(cf({array(0.0f)})[0], {1}, "captureless lambda");
  auto cg = compile(&double_it);
  harness::expect_values(cg({array({1.f, 3.f})})[0], {2, 6}, "function pointer");
}

TEST(Compile, ComposesWithTheTransforms) {
  grad_check::on_each_device([] {
    ModeGuard guard;
    enable_compile();
    auto loss = [](const std::vector<array>& p) {
      return std::vector<array>{sum(square(sin(p[0]) * p[1]))};
    };
    array w = random_f64({4}, 7), v = random_f64({4}, 8);
    auto want = value_and_grad(loss, std::vector<int>{0, 1})({w, v});

    // grad of a compiled function (the replay is differentiated).
    auto g1 = value_and_grad(compile(loss), std::vector<int>{0, 1})({w, v});
    // A compiled gradient (the backward graph is recorded).
    VecFn step = [&](const std::vector<array>& p) {
      auto [value, grads] = value_and_grad(loss, std::vector<int>{0, 1})(p);
      grads.insert(grads.begin(), value[0]);
      return grads;
    };
    auto cstep = compile(step);
    for (int call = 0; call < 2; ++call) {
      auto g2 = cstep({w, v});
      expect_same(g2[0], want.first[0], "compiled value_and_grad: value");
      expect_same(g2[1], want.second[0], "compiled value_and_grad: d/dw");
      expect_same(g2[2], want.second[1], "compiled value_and_grad: d/dv");
    }
    expect_same(g1.first[0], want.first[0], "grad of compiled: value");
    expect_same(g1.second[0], want.second[0], "grad of compiled: d/dw");
    expect_same(g1.second[1], want.second[1], "grad of compiled: d/dv");

    // vmap of a compiled function, and a compiled vmap.
    auto row = [](const std::vector<array>& x) { return std::vector<array>{sum(exp(x[0]))}; };
    array batch = random_f64({3, 5}, 9);
    auto want_v = vmap(row)({batch});
    expect_same(vmap(compile(row))({batch})[0], want_v[0], "vmap of compiled");
    expect_same(compile(vmap(row))({batch})[0], want_v[0], "compiled vmap");
  });
}
