// Transform rules of the linalg factorizations and of the ops composed from
// them: vjp and jvp against central finite differences in float64 (cholesky
// and eigh read one triangle, so their derivatives are checked on any input,
// not only symmetric ones), and vmap against a loop over the batch.
#include <gtest/gtest.h>

#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::on_each_device;
using grad_check::random_f64;
using grad_check::values;

namespace {

// Random float64 matrices plus n I (well conditioned), batched over `shape`.
array conditioned(const Shape& shape, uint64_t seed) {
  int n = shape.back();
  return add(random_f64(shape, seed), multiply(eye(n, float64), array(double(n), float64)));
}

// Symmetric positive definite: B B^T + n I.
array spd(const Shape& shape, uint64_t seed) {
  array b = random_f64(shape, seed);
  int n = shape.back();
  return add(matmul(b, swapaxes(b, -1, -2)), multiply(eye(n, float64), array(double(n), float64)));
}

VecFn one(std::function<array(const array&)> f) { return grad_check::lift(f); }
VecFn many(std::function<std::vector<array>(const array&)> f) {
  return [f](const std::vector<array>& x) { return f(x[0]); };
}
template <typename P>
VecFn pair_of(std::function<P(const array&)> f) {
  return [f](const std::vector<array>& x) {
    auto [a, b] = f(x[0]);
    return std::vector<array>{a, b};
  };
}

}  // namespace

TEST(GradLinalg, InverseAndSolve) {
  on_each_device([] {
    array a = conditioned({4, 4}, 1), ab = conditioned({2, 3, 3}, 2);
    check_derivatives("inv", one([](const array& x) { return linalg::inv(x); }), {a});
    check_derivatives("inv batched", one([](const array& x) { return linalg::inv(x); }), {ab});
    for (bool upper : {false, true}) {
      auto f = one([upper](const array& x) { return linalg::tri_inv(x, upper); });
      check_derivatives(upper ? "tri_inv upper" : "tri_inv lower", f, {a});
    }
    auto solve = [](const std::vector<array>& x) { return std::vector<array>{linalg::solve(x[0], x[1])}; };
    check_derivatives("solve", solve, {a, random_f64({4, 2}, 3)});
    check_derivatives("solve vector", solve, {a, random_f64({4}, 4)});
    check_derivatives("solve batched", solve, {ab, random_f64({2, 3, 2}, 5)});
    for (bool upper : {false, true}) {
      auto st = [upper](const std::vector<array>& x) {
        return std::vector<array>{linalg::solve_triangular(x[0], x[1], upper)};
      };
      check_derivatives("solve_triangular", st, {a, random_f64({4, 3}, 6)});
    }
    check_derivatives("pinv", one([](const array& x) { return linalg::pinv(x); }), {a});
    check_derivatives("pinv tall", one([](const array& x) { return linalg::pinv(x); }),
                      {random_f64({5, 3}, 7)});
  });
}

TEST(GradLinalg, Cholesky) {
  on_each_device([] {
    // Any input: the factor depends on one triangle only.
    array a = add(spd({4, 4}, 8), multiply(random_f64({4, 4}, 9), array(0.1, float64)));
    for (bool upper : {false, true}) {
      check_derivatives(upper ? "cholesky upper" : "cholesky",
                        one([upper](const array& x) { return linalg::cholesky(x, upper); }), {a});
      check_derivatives("cholesky_inv",
                        one([upper](const array& x) {
                          return linalg::cholesky_inv(linalg::cholesky(x, upper), upper);
                        }),
                        {a});
    }
    check_derivatives("cholesky batched", one([](const array& x) { return linalg::cholesky(x); }),
                      {spd({2, 3, 3}, 10)});
  });
}

TEST(GradLinalg, QrAndSvd) {
  on_each_device([] {
    auto qr = pair_of<std::pair<array, array>>([](const array& x) { return linalg::qr(x); });
    check_derivatives("qr square", qr, {random_f64({4, 4}, 11)});
    check_derivatives("qr tall", qr, {random_f64({5, 3}, 12)});
    check_derivatives("qr batched", qr, {random_f64({2, 4, 3}, 13)});
    auto svd = many([](const array& x) { return linalg::svd(x); });
    check_derivatives("svd", svd, {random_f64({4, 4}, 14)});
    check_derivatives("svd batched", svd, {random_f64({2, 3, 3}, 15)});
    auto sv = many([](const array& x) { return linalg::svd(x, false); });
    check_derivatives("singular values tall", sv, {random_f64({5, 3}, 16)});
    check_derivatives("singular values wide", sv, {random_f64({2, 5}, 17)});
    // Through the reduced factors of a rectangular matrix: U[:, :k] S Vt[:k].
    auto rebuilt = one([](const array& x) {
      auto usv = linalg::svd(x);
      array u = slice(usv[0], {0, 0}, {5, 3});
      return matmul(multiply(u, usv[1]), usv[2]);
    });
    check_derivatives("svd reconstruction", rebuilt, {random_f64({5, 3}, 18)});
  });
}

TEST(GradLinalg, Eigh) {
  on_each_device([] {
    array a = random_f64({4, 4}, 19);
    for (std::string uplo : {"L", "U"}) {
      auto eigh = pair_of<std::pair<array, array>>([uplo](const array& x) { return linalg::eigh(x, uplo); });
      check_derivatives("eigh " + uplo, eigh, {a});
      check_derivatives("eigvalsh " + uplo,
                        one([uplo](const array& x) { return linalg::eigvalsh(x, uplo); }), {a});
    }
    check_derivatives("eigh batched",
                      pair_of<std::pair<array, array>>([](const array& x) { return linalg::eigh(x); }),
                      {random_f64({2, 3, 3}, 20)});
  });
}

TEST(GradLinalg, LuDetSlogdet) {
  on_each_device([] {
    array a = random_f64({4, 4}, 21, -2, 2);
    check_derivatives("det", one([](const array& x) { return linalg::det(x); }), {a});
    check_derivatives("det batched", one([](const array& x) { return linalg::det(x); }),
                      {random_f64({3, 3, 3}, 22)});
    check_derivatives("slogdet",
                      one([](const array& x) { return linalg::slogdet(x).second; }), {a});
    check_derivatives("slogdet both", pair_of<std::pair<array, array>>([](const array& x) {
                        return linalg::slogdet(x);
                      }),
                      {a});
    check_derivatives("lu", many([](const array& x) {
                        auto plu = linalg::lu(x);
                        return std::vector<array>{plu[1], plu[2], astype(plu[0], float64)};
                      }),
                      {a});
    check_derivatives("lu_factor", many([](const array& x) {
                        auto [f, pivots] = linalg::lu_factor(x);
                        return std::vector<array>{f, astype(pivots, float64)};
                      }),
                      {a});
  });
}

TEST(GradLinalg, NormAndCross) {
  on_each_device([] {
    array v = random_f64({3, 5}, 23, 0.2, 1.5);
    for (double ord : {1.0, 2.0, 3.0, 0.5, -1.0}) {
      check_derivatives("vector norm " + std::to_string(ord),
                        one([ord](const array& x) { return linalg::norm(x, ord, 1); }), {v});
    }
    check_derivatives("norm", one([](const array& x) { return linalg::norm(x); }), {v});
    array m = random_f64({2, 3, 3}, 24);
    std::vector<int> ax{1, 2};
    for (double ord : {2.0, -2.0}) {
      check_derivatives("matrix norm " + std::to_string(ord),
                        one([ord, ax](const array& x) { return linalg::norm(x, ord, ax); }), {m});
    }
    for (std::string ord : {"fro", "nuc"}) {
      check_derivatives("matrix norm " + ord,
                        one([ord, ax](const array& x) { return linalg::norm(x, ord, ax); }), {m});
    }
    auto cross = [](const std::vector<array>& x) { return std::vector<array>{linalg::cross(x[0], x[1])}; };
    check_derivatives("cross", cross, {random_f64({4, 3}, 25), random_f64({4, 3}, 26)});
  });
}

TEST(GradLinalg, VmapIsALoop) {
  on_each_device([] {
    array a = conditioned({3, 4, 4}, 30), s = spd({3, 4, 4}, 31), r = random_f64({3, 5, 3}, 32);
    array b = random_f64({3, 4, 2}, 33);
    check_vmap("inv", one([](const array& x) { return linalg::inv(x); }), {a}, {0});
    check_vmap("inv axis 2", one([](const array& x) { return linalg::inv(x); }), {moveaxis(a, 0, 2)}, {2});
    check_vmap("tri_inv", one([](const array& x) { return linalg::tri_inv(x, true); }), {a}, {0});
    check_vmap("cholesky", one([](const array& x) { return linalg::cholesky(x); }),
               {moveaxis(s, 0, 1)}, {1});
    check_vmap("qr", pair_of<std::pair<array, array>>([](const array& x) { return linalg::qr(x); }),
               {r}, {0});
    check_vmap("svd", many([](const array& x) { return linalg::svd(x); }), {moveaxis(r, 0, 2)}, {2});
    check_vmap("singular values", many([](const array& x) { return linalg::svd(x, false); }), {r}, {0});
    check_vmap("eigh", pair_of<std::pair<array, array>>([](const array& x) { return linalg::eigh(x, "U"); }),
               {s}, {0});
    check_vmap("eigvalsh", one([](const array& x) { return linalg::eigvalsh(x); }), {s}, {0});
    check_vmap("lu", many([](const array& x) { return linalg::lu(x); }), {a}, {0});
    check_vmap("det", one([](const array& x) { return linalg::det(x); }), {a}, {0});
    check_vmap("norm", one([](const array& x) { return linalg::norm(x, "nuc"); }), {r}, {0});
    check_vmap("pinv", one([](const array& x) { return linalg::pinv(x); }), {r}, {0});
    auto solve = [](const std::vector<array>& x) { return std::vector<array>{linalg::solve(x[0], x[1])}; };
    check_vmap("solve", solve, {a, b}, {0, 0});
    check_vmap("solve unbatched a", solve, {reshape(slice(a, {0, 0, 0}, {1, 4, 4}), {4, 4}), b}, {-1, 0});
  });
  // eig on the CPU.
  array g = random_f64({3, 4, 4}, 34);
  check_vmap("eig", pair_of<std::pair<array, array>>([](const array& x) { return linalg::eig(x, Device::cpu); }),
             {g}, {0});
  check_vmap("eigvals", one([](const array& x) { return linalg::eigvals(x, Device::cpu); }), {g}, {0});
}

TEST(GradLinalg, EigIsNotDifferentiable) {
  array g = random_f64({3, 3}, 35);
  auto f = [](const std::vector<array>& x) { return std::vector<array>{linalg::eigvals(x[0], Device::cpu)}; };
  EXPECT_THROW(vjp(f, {g}, {ones({3}, complex64)}), std::invalid_argument);
  EXPECT_THROW(jvp(f, {g}, {ones({3, 3}, float64)}), std::invalid_argument);
}

TEST(GradLinalg, DroppedOutputsAreMadeAgain) {
  // The eigenvectors are dropped inside the function: the eigenvalues alone
  // have eigvalsh's derivatives, and the same through qr's Q alone.
  array a = random_f64({3, 3}, 36);
  a = add(a, transpose(a));
  auto w_only = [](const std::vector<array>& x) {
    auto [w, v] = linalg::eigh(x[0]);
    return std::vector<array>{w};
  };
  auto w_direct = [](const std::vector<array>& x) {
    return std::vector<array>{linalg::eigvalsh(x[0])};
  };
  array c = array({0.3, -1.0, 2.0}, {3}, float64);
  auto got = vjp(w_only, {a}, {c}).second[0];
  auto want = vjp(w_direct, {a}, {c}).second[0];
  auto g = values(got), w = values(want);
  ASSERT_EQ(g.size(), w.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], 1e-12) << i;
  check_derivatives("eigh eigenvalues alone", w_only, {a});
  check_derivatives("qr Q alone", [](const std::vector<array>& x) {
    return std::vector<array>{linalg::qr(x[0]).first};
  }, {random_f64({4, 3}, 37)});
}
