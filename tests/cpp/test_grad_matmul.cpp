// Transform rules of the matrix products (Matmul, AddMM): derivatives against
// finite differences in float64 for plain, batched, broadcast-batch and 1-D
// operands; vmap against a loop with either operand unbatched; integer
// products (outer of integers) with zero derivatives.
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
using grad_check::integers_f64;

namespace {

VecFn matmul_fn() {
  return [](const std::vector<array>& x) { return std::vector<array>{matmul(x[0], x[1])}; };
}

VecFn addmm_fn(float alpha, float beta) {
  return [=](const std::vector<array>& x) {
    return std::vector<array>{addmm(x[2], x[0], x[1], alpha, beta)};
  };
}

}  // namespace

TEST(GradMatmul, test_matmul_derivatives) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},           // matrices
      {{2, 3, 4}, {2, 4, 5}},     // batched
      {{2, 1, 3, 4}, {5, 4, 2}},  // broadcast batch axes: (2, 1) with (5)
      {{3, 4}, {2, 4, 5}},        // an unbatched operand against a batch
      {{2, 3, 4}, {4, 5}},        // a matrix shared by a's batch (Note [A shared b])
      {{2, 2, 3, 4}, {4, 5}},
  };
  uint64_t seed = 1;
  for (Device d : harness::devices()) {
    StreamContext ctx(d);
    for (auto& [sa, sb] : cases) {
      check_derivatives("matmul " + shape_str(sa) + " @ " + shape_str(sb),
                        matmul_fn(), {random_f64(sa, seed), random_f64(sb, seed + 1)});
      seed += 2;
    }
  }
}

TEST(GradMatmul, test_matmul_derivatives_of_vectors) {
  // matmul reshapes 1-D operands to (1, K) / (K, 1) before the node.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4}, {4, 5}}, {{3, 4}, {4}}, {{4}, {4}}, {{4}, {2, 4, 5}}, {{2, 3, 4}, {4}}};
  uint64_t seed = 20;
  for (auto& [sa, sb] : cases) {
    check_derivatives("matmul " + shape_str(sa) + " @ " + shape_str(sb),
                      matmul_fn(), {random_f64(sa, seed), random_f64(sb, seed + 1)});
    seed += 2;
  }
}

TEST(GradMatmul, test_matmul_cotangent_sums_over_broadcast_batch_axes) {
  // d/da sum(a @ b) with a (3, 4) shared by a batch of 2: the batch's rows of b summed.
  array a = random_f64({3, 4}, 30), b = random_f64({2, 4, 5}, 31);
  auto g = grad([&](const std::vector<array>& x) { return sum(matmul(x[0], x[1])); }, 0)({a, b});
  ASSERT_EQ(g[0].shape(), (Shape{3, 4}));
  auto bv = values(b);
  std::vector<double> want(12);
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 4; ++k) {
      double s = 0;
      for (int n = 0; n < 2; ++n) {
        for (int j = 0; j < 5; ++j) s += bv[n * 20 + k * 5 + j];
      }
      want[i * 4 + k] = s;
    }
  }
  auto gv = values(g[0]);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(gv[i], want[i], 1e-12) << i;
}

TEST(GradMatmul, test_matmul_vmap) {
  array a = integers_f64({3, 2, 4}, 40), b = integers_f64({3, 4, 5}, 41);
  array a1 = integers_f64({2, 4}, 42), b1 = integers_f64({4, 5}, 43);
  check_vmap("matmul both at 0", matmul_fn(), {a, b}, {0, 0});
  check_vmap("matmul a at 1, b at 2", matmul_fn(), {moveaxis(a, 0, 1), moveaxis(b, 0, 2)},
             {1, 2});
  check_vmap("matmul b unbatched", matmul_fn(), {a, b1}, {0, -1});
  check_vmap("matmul a unbatched, b at 1", matmul_fn(), {a1, moveaxis(b, 0, 1)}, {-1, 1});
  check_vmap("matmul vector @ batched matrix", matmul_fn(), {integers_f64({4}, 44), b}, {-1, 0});
  check_vmap("matmul batched vectors", matmul_fn(), {integers_f64({4, 3}, 45), b1}, {1, -1});
  check_vmap("matmul batched batch", matmul_fn(),
             {integers_f64({3, 2, 2, 4}, 46), integers_f64({2, 4, 5}, 47)}, {0, -1});
  // A shared b (Note [A shared b]): the node's operands have different batch
  // ranks, which vmap lines up.
  array x3 = integers_f64({3, 2, 2, 4}, 48);
  check_vmap("matmul batched batch, shared b batched", matmul_fn(), {x3, b}, {0, 0});
  check_vmap("matmul batch unbatched, shared b at 2", matmul_fn(),
             {integers_f64({2, 2, 4}, 49), moveaxis(b, 0, 2)}, {-1, 2});
  check_vmap("matmul batched batch at 2, shared b unbatched", matmul_fn(),
             {moveaxis(x3, 0, 2), b1}, {2, -1});
}

TEST(GradMatmul, test_integer_products_have_zero_derivatives_and_vmap) {
  array x = astype(integers_f64({3}, 50), int32), y = astype(integers_f64({4}, 51), int32);
  auto f = [](const std::vector<array>& in) { return std::vector<array>{outer(in[0], in[1])}; };
  auto [outs, vjps] = vjp(f, {x, y}, {ones({3, 4}, int32)});
  EXPECT_EQ(vjps[0].dtype(), int32);
  EXPECT_EQ(values(vjps[0]), std::vector<double>(3, 0.0));
  EXPECT_EQ(values(vjps[1]), std::vector<double>(4, 0.0));
  auto [outs2, jvps] = jvp(f, {x, y}, {ones({3}, int32), ones({4}, int32)});
  EXPECT_EQ(jvps[0].shape(), (Shape{3, 4}));
  EXPECT_EQ(jvps[0].dtype(), int32);
  EXPECT_EQ(values(jvps[0]), std::vector<double>(12, 0.0));
  array xs = astype(integers_f64({2, 3}, 52), int32);
  check_vmap("outer of integers", f, {xs, y}, {0, -1});
  check_vmap("outer of integers at 1", f, {transpose(xs), y}, {1, -1});
}

TEST(GradMatmul, test_addmm_derivatives) {
  for (Device d : harness::devices()) {
    StreamContext ctx(d);
    check_derivatives("addmm", addmm_fn(2.f, 0.5f),
                      {random_f64({3, 4}, 60), random_f64({4, 5}, 61), random_f64({3, 5}, 62)});
    check_derivatives("addmm broadcast c", addmm_fn(-1.5f, 3.f),
                      {random_f64({2, 3, 4}, 63), random_f64({4, 5}, 64), random_f64({5}, 65)});
    check_derivatives("addmm shared b", addmm_fn(2.f, 0.5f),
                      {random_f64({2, 2, 3, 4}, 69), random_f64({4, 5}, 59), random_f64({3, 5}, 58)});
    check_derivatives("addmm vector a", addmm_fn(1.f, 1.f),
                      {random_f64({4}, 66), random_f64({2, 4, 5}, 67), random_f64({2, 1}, 68)});
  }
}

TEST(GradMatmul, test_addmm_vmap) {
  array a = integers_f64({3, 2, 4}, 70), b = integers_f64({3, 4, 5}, 71),
        c = integers_f64({3, 2, 5}, 72);
  auto f = addmm_fn(2.f, 0.5f);
  check_vmap("addmm all at 0", f, {a, b, c}, {0, 0, 0});
  check_vmap("addmm at 1, 2, 2", f, {moveaxis(a, 0, 1), moveaxis(b, 0, 2), moveaxis(c, 0, 2)},
             {1, 2, 2});
  check_vmap("addmm c unbatched", f, {a, b, integers_f64({2, 5}, 73)}, {0, 0, -1});
  check_vmap("addmm only c batched", f, {integers_f64({2, 4}, 74), integers_f64({4, 5}, 75), c},
             {-1, -1, 0});
  check_vmap("addmm only b batched, c broadcast", f,
             {integers_f64({2, 4}, 76), b, integers_f64({5}, 77)}, {-1, 0, -1});
  // a with a batch of its own and a shared b (Note [A shared b]).
  array a3 = integers_f64({3, 2, 2, 4}, 78);
  check_vmap("addmm batched batch, shared b", f, {a3, b, integers_f64({5}, 79)}, {0, 0, -1});
  check_vmap("addmm batch unbatched, shared b batched", f,
             {integers_f64({2, 2, 4}, 80), b, integers_f64({2, 5}, 81)}, {-1, 0, -1});
}

TEST(GradMatmul, test_vmap_of_grad_gives_per_example_gradients) {
  // loss(W, x) = logsumexp(W x): d/dW = softmax(W x) x^T for each example x.
  array W = random_f64({3, 4}, 80), X = random_f64({5, 4}, 81);
  auto loss = [](const std::vector<array>& in) { return logsumexp(matmul(in[0], in[1])); };
  auto per_example = vmap(grad(loss, 0), {-1, 0})({W, X});
  ASSERT_EQ(per_example[0].shape(), (Shape{5, 3, 4}));
  auto got = values(per_example[0]);
  for (int n = 0; n < 5; ++n) {
    array x = slice(X, {n, 0}, {n + 1, 4});
    array want = matmul(reshape(softmax(matmul(W, reshape(x, {4}))), {3, 1}), x);
    auto w = values(want);
    for (int i = 0; i < 12; ++i) EXPECT_NEAR(got[n * 12 + i], w[i], 1e-12) << n << " " << i;
  }
}

TEST(GradMatmul, test_second_derivatives_of_products) {
  // d/dA of grad_A sum((A B)^2) = 2 (A B) B^T: checks the rules of the vjp graph.
  array A = random_f64({3, 4}, 90), B = random_f64({2, 4, 5}, 91);
  auto g = [B](const std::vector<array>& in) {
    return grad([B](const array& a) { return sum(square(matmul(a, B))); })(in[0]);
  };
  check_derivatives("d grad sum((A B)^2)",
                    [g](const std::vector<array>& in) { return std::vector<array>{g(in)}; },
                    {A});
  array C = random_f64({3, 5}, 92);
  auto loss = [](const std::vector<array>& x) {
    return sum(square(addmm(x[2], x[0], x[1], 2.f, 0.5f)));
  };
  auto h = [loss](const std::vector<array>& in) {
    return grad(loss, std::vector<int>{0, 1, 2})(in);
  };
  check_derivatives("d grad sum(addmm^2)", h, {A, random_f64({4, 5}, 93), C});
}
