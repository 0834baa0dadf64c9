// linalg factorizations, solves, eigenproblems, norms and cross, checked by
// their defining properties with float64 host arithmetic written here (Q R ==
// A, U S Vt == A, A inv(A) == I, L L^T == A, L[p] U == A, A V == V diag(w), ...),
// against hand computations, on float32 and float64, batched, on views, on
// every device; and their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <random>

#include "harness.h"

using namespace tessera;
using harness::Layout;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::vector<Dtype> float_types() { return {float32, float64}; }
std::vector<Layout> layouts() { return {Layout::contiguous, Layout::transposed, Layout::strided}; }

double tol(Dtype t) { return t == float32 ? 2e-4 : 1e-10; }

std::vector<double> vals(const array& a) { return harness::to_doubles(a); }

std::vector<double> random_values(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

int64_t batch_of(const Shape& s) {
  int64_t b = 1;
  for (size_t i = 0; i + 2 < s.size(); ++i) b *= s[i];
  return b;
}

// Random matrices made well conditioned: + n I on each diagonal.
std::vector<double> conditioned(const Shape& s, uint64_t seed) {
  auto v = random_values(shape_size(s), seed);
  const int n = s.back();
  for (int64_t b = 0; b < batch_of(s); ++b) {
    for (int i = 0; i < n; ++i) v[b * n * n + i * n + i] += n;
  }
  return v;
}

// Symmetric positive definite: B B^T + n I.
std::vector<double> spd(const Shape& s, uint64_t seed) {
  auto r = random_values(shape_size(s), seed);
  const int n = s.back();
  std::vector<double> v(r.size());
  for (int64_t b = 0; b < batch_of(s); ++b) {
    const double* B = r.data() + b * n * n;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = i == j ? n : 0;
        for (int k = 0; k < n; ++k) acc += B[i * n + k] * B[j * n + k];
        v[b * n * n + i * n + j] = acc;
      }
    }
  }
  return v;
}

// Host products of batched row-major matrices.
std::vector<double> host_matmul(const std::vector<double>& a, const std::vector<double>& b,
                                int64_t batches, int m, int k, int n) {
  std::vector<double> c(batches * m * n, 0.0);
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int l = 0; l < k; ++l) acc += a[bi * m * k + i * k + l] * b[bi * k * n + l * n + j];
        c[bi * m * n + i * n + j] = acc;
      }
    }
  }
  return c;
}

std::vector<double> host_transpose(const std::vector<double>& a, int64_t batches, int m, int n) {
  std::vector<double> t(a.size());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) t[bi * m * n + j * m + i] = a[bi * m * n + i * n + j];
    }
  }
  return t;
}

std::vector<double> host_eye(int64_t batches, int n) {
  std::vector<double> e(batches * n * n, 0.0);
  for (int64_t b = 0; b < batches; ++b) {
    for (int i = 0; i < n; ++i) e[b * n * n + i * n + i] = 1;
  }
  return e;
}

// Entries of a matrix outside a triangle set to v (to check they are not read).
std::vector<double> fill_triangle(std::vector<double> a, int64_t batches, int n, bool upper_part,
                                  double v) {
  for (int64_t b = 0; b < batches; ++b) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (upper_part ? j > i : j < i) a[b * n * n + i * n + j] = v;
      }
    }
  }
  return a;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                 const std::string& ctx) {
  ASSERT_EQ(got.size(), want.size()) << ctx;
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    if (!(std::abs(got[i] - want[i]) <= tolerance * scale)) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << got[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

// Runs f(device, dtype, layout, context) over every device, float dtype and layout.
template <class F>
void sweep(F f) {
  for (auto d : harness::devices()) {
    for (Dtype t : float_types()) {
      for (Layout l : layouts()) {
        std::string ctx = std::string(d == Device::cpu ? "cpu" : "gpu") + " " + dtype_name(t) +
                          " " + harness::layout_name(l);
        SCOPED_TRACE(ctx);
        f(d, t, l, ctx);
      }
    }
  }
}

}  // namespace

TEST(Linalg, QrReconstructsAndIsOrthogonal) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    for (Shape s : std::vector<Shape>{{4, 4}, {2, 5, 3}, {3, 5}, {2, 2, 3, 3}}) {
      const int m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
      const int64_t b = batch_of(s);
      auto av = random_values(shape_size(s), 11);
      array a = harness::with_layout(av, s, t, l);
      auto [q, r] = linalg::qr(a, d);
      Shape qs = s, rs = s;
      qs.back() = k;
      rs[s.size() - 2] = k;
      EXPECT_EQ(q.shape(), qs) << ctx;
      EXPECT_EQ(r.shape(), rs) << ctx;
      EXPECT_EQ(q.dtype(), t);
      auto qv = vals(q), rv = vals(r);
      expect_near(host_matmul(qv, rv, b, m, k, n), av, tol(t), ctx + " Q R == A");
      expect_near(host_matmul(host_transpose(qv, b, m, k), qv, b, k, m, k), host_eye(b, k), tol(t),
                  ctx + " Q^T Q == I");
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int i = 0; i < k; ++i) {
          for (int j = 0; j < std::min(i, n); ++j) EXPECT_EQ(rv[bi * k * n + i * n + j], 0.0);
        }
      }
    }
  });
}

TEST(Linalg, SvdReconstructsWithOrthogonalFactors) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    for (Shape s : std::vector<Shape>{{4, 4}, {2, 5, 3}, {3, 5}}) {
      const int m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
      const int64_t b = batch_of(s);
      auto av = random_values(shape_size(s), 12);
      array a = harness::with_layout(av, s, t, l);
      auto usv = linalg::svd(a, d);
      ASSERT_EQ(usv.size(), 3u);
      auto u = vals(usv[0]), sv = vals(usv[1]), vt = vals(usv[2]);
      ASSERT_EQ(u.size(), size_t(b * m * m));
      ASSERT_EQ(sv.size(), size_t(b * k));
      ASSERT_EQ(vt.size(), size_t(b * n * n));
      // U[:, :k] diag(S) Vt[:k] == A.
      std::vector<double> us(b * m * k), vk(b * k * n);
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < k; ++j) us[bi * m * k + i * k + j] = u[bi * m * m + i * m + j] * sv[bi * k + j];
        }
        for (int i = 0; i < k; ++i) {
          for (int j = 0; j < n; ++j) vk[bi * k * n + i * n + j] = vt[bi * n * n + i * n + j];
        }
        for (int i = 0; i + 1 < k; ++i) EXPECT_GE(sv[bi * k + i], sv[bi * k + i + 1]) << ctx;
        for (int i = 0; i < k; ++i) EXPECT_GE(sv[bi * k + i], 0.0) << ctx;
      }
      expect_near(host_matmul(us, vk, b, m, k, n), av, tol(t), ctx + " U S Vt == A");
      expect_near(host_matmul(host_transpose(u, b, m, m), u, b, m, m, m), host_eye(b, m), tol(t),
                  ctx + " U^T U == I");
      expect_near(host_matmul(vt, host_transpose(vt, b, n, n), b, n, n, n), host_eye(b, n), tol(t),
                  ctx + " Vt Vt^T == I");
      auto only = linalg::svd(a, false, d);
      ASSERT_EQ(only.size(), 1u);
      expect_near(vals(only[0]), sv, tol(t), ctx + " S without U, V");
    }
  });
}

TEST(Linalg, SvdOfAKnownMatrix) {
  for (auto d : harness::devices()) {
    // [[3, 0], [4, 5]] has singular values sqrt(45) and sqrt(5).
    array a = array({3.0, 0.0, 4.0, 5.0}, {2, 2}, float64);
    expect_near(vals(linalg::svd(a, false, d)[0]), {std::sqrt(45.0), std::sqrt(5.0)}, 1e-12, "svd");
  }
}

TEST(Linalg, InvTimesAIsIdentity) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    for (Shape s : std::vector<Shape>{{1, 1}, {5, 5}, {3, 4, 4}}) {
      const int n = s.back();
      const int64_t b = batch_of(s);
      auto av = conditioned(s, 13);
      array x = linalg::inv(harness::with_layout(av, s, t, l), d);
      EXPECT_EQ(x.shape(), s);
      EXPECT_EQ(x.dtype(), t);
      expect_near(host_matmul(av, vals(x), b, n, n, n), host_eye(b, n), tol(t), ctx + " A inv(A)");
    }
  });
  for (auto d : harness::devices()) {
    expect_near(vals(linalg::inv(array({4.0, 7.0, 2.0, 6.0}, {2, 2}, float64), d)),
                {0.6, -0.7, -0.2, 0.4}, 1e-12, "inv by hand");
  }
}

TEST(Linalg, TriInvReadsOneTriangle) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    Shape s{2, 4, 4};
    const int n = 4;
    for (bool upper : {false, true}) {
      auto av = fill_triangle(conditioned(s, 14), 2, n, !upper, 0.0);
      auto noisy = fill_triangle(av, 2, n, !upper, 99.0);
      array x = linalg::tri_inv(harness::with_layout(noisy, s, t, l), upper, d);
      auto xv = vals(x);
      expect_near(host_matmul(av, xv, 2, n, n, n), host_eye(2, n), tol(t), ctx + " tri_inv");
      expect_near(xv, fill_triangle(xv, 2, n, !upper, 0.0), 0, ctx + " triangular result");
    }
  });
}

TEST(Linalg, SolveRecoversX) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    const int n = 5;
    Shape sa{3, n, n};
    auto av = conditioned(sa, 15);
    array a = harness::with_layout(av, sa, t, l);
    // Matrix right-hand sides.
    auto xv = random_values(3 * n * 2, 16);
    auto bv = host_matmul(av, xv, 3, n, n, 2);
    array x = linalg::solve(a, harness::with_layout(bv, {3, n, 2}, t, l), d);
    EXPECT_EQ(x.shape(), (Shape{3, n, 2}));
    expect_near(vals(x), xv, tol(t) * 10, ctx + " solve matrix");
    // One vector against a batch of matrices (broadcast).
    Shape s2{n, n};
    auto a2 = conditioned(s2, 17);
    auto x2 = random_values(n, 18);
    auto b2 = host_matmul(a2, x2, 1, n, n, 1);
    array y = linalg::solve(harness::with_layout(a2, s2, t, l), harness::from_doubles(b2, {n}, t), d);
    EXPECT_EQ(y.shape(), (Shape{n}));
    expect_near(vals(y), x2, tol(t) * 10, ctx + " solve vector");
    // Batched a with one shared b.
    array z = linalg::solve(a, harness::from_doubles(random_values(n * 1, 19), {n, 1}, t), d);
    EXPECT_EQ(z.shape(), (Shape{3, n, 1}));
    auto zb = host_matmul(av, vals(z), 3, n, n, 1);
    auto b1 = random_values(n, 19);
    for (int bi = 0; bi < 3; ++bi) {
      expect_near(std::vector<double>(zb.begin() + bi * n, zb.begin() + (bi + 1) * n), b1,
                  tol(t) * 10, ctx + " solve broadcast");
    }
  });
}

TEST(Linalg, SolveTriangular) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    const int n = 4;
    for (bool upper : {false, true}) {
      auto av = fill_triangle(conditioned({n, n}, 20), 1, n, !upper, 0.0);
      auto xv = random_values(n * 3, 21);
      auto bv = host_matmul(av, xv, 1, n, n, 3);
      array x = linalg::solve_triangular(harness::with_layout(av, {n, n}, t, l),
                                         harness::from_doubles(bv, {n, 3}, t), upper, d);
      expect_near(vals(x), xv, tol(t) * 10, ctx + " solve_triangular");
    }
  });
}

TEST(Linalg, CholeskyFactors) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    Shape s{2, 5, 5};
    const int n = 5;
    auto av = spd(s, 22);
    for (bool upper : {false, true}) {
      // The triangle that is not read holds garbage.
      auto noisy = fill_triangle(av, 2, n, !upper, 7.0);
      array f = linalg::cholesky(harness::with_layout(noisy, s, t, l), upper, d);
      auto fv = vals(f);
      auto ft = host_transpose(fv, 2, n, n);
      auto prod = upper ? host_matmul(ft, fv, 2, n, n, n) : host_matmul(fv, ft, 2, n, n, n);
      expect_near(prod, av, tol(t), ctx + (upper ? " U^T U == A" : " L L^T == A"));
      expect_near(fv, fill_triangle(fv, 2, n, !upper, 0.0), 0, ctx + " triangular factor");
      // cholesky_inv(factor) is inv(A).
      array ci = linalg::cholesky_inv(f, upper, d);
      expect_near(host_matmul(av, vals(ci), 2, n, n, n), host_eye(2, n), tol(t), ctx + " cholesky_inv");
    }
  });
}

TEST(Linalg, LuReconstructsWithPermutation) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    for (Shape s : std::vector<Shape>{{5, 5}, {2, 4, 4}, {4, 3}, {3, 5}}) {
      const int m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
      const int64_t b = batch_of(s);
      auto av = random_values(shape_size(s), 23);
      auto plu = linalg::lu(harness::with_layout(av, s, t, l), d);
      ASSERT_EQ(plu.size(), 3u);
      EXPECT_EQ(plu[0].dtype(), uint32);
      auto p = vals(plu[0]), lv = vals(plu[1]), uv = vals(plu[2]);
      ASSERT_EQ(lv.size(), size_t(b * m * k));
      ASSERT_EQ(uv.size(), size_t(b * k * n));
      auto prod = host_matmul(lv, uv, b, m, k, n);
      // A == L[p] @ U: row i of A is row p[i] of L U.
      std::vector<double> permuted(prod.size());
      for (int64_t bi = 0; bi < b; ++bi) {
        std::vector<bool> seen(m, false);
        for (int i = 0; i < m; ++i) {
          int pi = static_cast<int>(p[bi * m + i]);
          ASSERT_TRUE(pi >= 0 && pi < m && !seen[pi]) << ctx << ": p is not a permutation";
          seen[pi] = true;
          for (int j = 0; j < n; ++j) permuted[bi * m * n + i * n + j] = prod[bi * m * n + pi * n + j];
        }
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < k; ++j) {
            double want = i == j ? 1.0 : (j > i ? 0.0 : lv[bi * m * k + i * k + j]);
            EXPECT_EQ(lv[bi * m * k + i * k + j], want) << ctx << " L unit lower";
            if (i < k && j < i && j < n) EXPECT_EQ(uv[bi * k * n + i * n + j], 0.0) << ctx;
          }
        }
      }
      expect_near(permuted, av, tol(t), ctx + " L[p] U == A");
      // lu_factor: the compact factors hold the same L and U.
      auto [f, piv] = linalg::lu_factor(harness::with_layout(av, s, t, l), d);
      EXPECT_EQ(f.shape(), s);
      auto fv = vals(f);
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int i = 0; i < k; ++i) {
          for (int j = i; j < n; ++j) EXPECT_EQ(fv[bi * m * n + i * n + j], uv[bi * k * n + i * n + j]);
        }
      }
      for (double pv : vals(piv)) EXPECT_TRUE(pv >= 0 && pv < m);
    }
  });
}

namespace {
// Determinant by Gaussian elimination with partial pivoting, in float64.
double host_det(std::vector<double> a, int n) {
  double det = 1;
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r * n + c]) > std::abs(a[p * n + c])) p = r;
    }
    if (a[p * n + c] == 0) return 0;
    if (p != c) {
      for (int j = 0; j < n; ++j) std::swap(a[p * n + j], a[c * n + j]);
      det = -det;
    }
    det *= a[c * n + c];
    for (int r = c + 1; r < n; ++r) {
      double f = a[r * n + c] / a[c * n + c];
      for (int j = c; j < n; ++j) a[r * n + j] -= f * a[c * n + j];
    }
  }
  return det;
}
}  // namespace

TEST(Linalg, DetAndSlogdet) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    Shape s{3, 4, 4};
    auto av = random_values(shape_size(s), 24, -2, 2);
    array a = harness::with_layout(av, s, t, l);
    std::vector<double> want;
    for (int b = 0; b < 3; ++b) want.push_back(host_det({av.begin() + b * 16, av.begin() + (b + 1) * 16}, 4));
    expect_near(vals(linalg::det(a, d)), want, tol(t) * 10, ctx + " det");
    auto [sg, la] = linalg::slogdet(a, d);
    auto sv = vals(sg), lv = vals(la);
    for (int b = 0; b < 3; ++b) {
      EXPECT_EQ(sv[b], want[b] > 0 ? 1.0 : -1.0) << ctx;
      EXPECT_NEAR(lv[b], std::log(std::abs(want[b])), tol(t) * 10) << ctx;
    }
  });
  for (auto d : harness::devices()) {
    // By hand: det [[1, 2], [3, 4]] = -2; a row swap and a permutation matrix.
    EXPECT_NEAR(linalg::det(array({1.0, 2.0, 3.0, 4.0}, {2, 2}, float64), d).item<double>(), -2, 1e-12);
    EXPECT_NEAR(linalg::det(array({0.f, 1.f, 0.f, 0.f, 0.f, 1.f, 1.f, 0.f, 0.f}, {3, 3}), d).item<float>(),
                1, 1e-6);
    EXPECT_NEAR(linalg::det(array({2.0, 0.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0, -4.0}, {3, 3}, float64), d)
                    .item<double>(),
                -24, 1e-12);
    // Singular: det 0, slogdet (0, -inf).
    array sing = array({1.0, 2.0, 2.0, 4.0}, {2, 2}, float64);
    EXPECT_EQ(linalg::det(sing, d).item<double>(), 0.0);
    auto [sg, la] = linalg::slogdet(sing, d);
    EXPECT_EQ(sg.item<double>(), 0.0);
    EXPECT_EQ(la.item<double>(), -kInf);
    // The determinant of a 0 x 0 matrix is 1.
    EXPECT_EQ(linalg::det(zeros({0, 0}, float32), d).item<float>(), 1.f);
  }
}

TEST(Linalg, EighDiagonalizes) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    Shape s{2, 5, 5};
    const int n = 5;
    auto sym = random_values(shape_size(s), 25);
    for (int b = 0; b < 2; ++b) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < i; ++j) sym[b * 25 + j * n + i] = sym[b * 25 + i * n + j];
      }
    }
    for (std::string uplo : {"L", "U"}) {
      auto noisy = fill_triangle(sym, 2, n, uplo == "L", 5.0);
      auto [w, v] = linalg::eigh(harness::with_layout(noisy, s, t, l), uplo, d);
      auto wv = vals(w), vv = vals(v);
      std::vector<double> vw(vv.size());
      for (int b = 0; b < 2; ++b) {
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < n; ++j) vw[b * 25 + i * n + j] = vv[b * 25 + i * n + j] * wv[b * n + j];
        }
        for (int j = 0; j + 1 < n; ++j) EXPECT_LE(wv[b * n + j], wv[b * n + j + 1]) << ctx;
      }
      expect_near(host_matmul(sym, vv, 2, n, n, n), vw, tol(t), ctx + " A V == V diag(w) " + uplo);
      expect_near(host_matmul(host_transpose(vv, 2, n, n), vv, 2, n, n, n), host_eye(2, n), tol(t),
                  ctx + " V^T V == I");
      expect_near(vals(linalg::eigvalsh(harness::with_layout(noisy, s, t, l), uplo, d)), wv, tol(t),
                  ctx + " eigvalsh");
    }
  });
  for (auto d : harness::devices()) {
    // [[2, 1], [1, 2]] has eigenvalues 1 and 3.
    expect_near(vals(linalg::eigvalsh(array({2.0, 1.0, 1.0, 2.0}, {2, 2}, float64), "L", d)), {1, 3},
                1e-12, "eigvalsh by hand");
  }
}

TEST(Linalg, EigOfGeneralMatrices) {
  for (Dtype t : float_types()) {
    for (Layout l : layouts()) {
      SCOPED_TRACE(dtype_name(t) + " " + harness::layout_name(l));
      Shape s{2, 4, 4};
      const int n = 4;
      auto av = random_values(shape_size(s), 26);
      auto [w, v] = linalg::eig(harness::with_layout(av, s, t, l), Device::cpu);
      EXPECT_EQ(w.dtype(), complex64);
      EXPECT_EQ(v.shape(), s);
      auto wc = harness::to_complex(w), vc = harness::to_complex(v);
      for (int b = 0; b < 2; ++b) {
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < n; ++j) {
            std::complex<double> av_ij = 0;
            for (int k = 0; k < n; ++k) av_ij += av[b * 16 + i * n + k] * vc[b * 16 + k * n + j];
            std::complex<double> want = vc[b * 16 + i * n + j] * wc[b * n + j];
            EXPECT_NEAR(std::abs(av_ij - want), 0.0, 1e-4) << "A v_j == w_j v_j";
          }
        }
      }
      auto only = harness::to_complex(linalg::eigvals(harness::with_layout(av, s, t, l), Device::cpu));
      for (size_t i = 0; i < only.size(); ++i) EXPECT_NEAR(std::abs(only[i] - wc[i]), 0.0, 1e-5);
    }
  }
  // A rotation by 90 degrees: eigenvalues +i and -i.
  auto w = harness::to_complex(linalg::eigvals(array({0.f, -1.f, 1.f, 0.f}, {2, 2}), Device::cpu));
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(std::abs(w[0] - std::complex<double>(0, 1)) * std::abs(w[0] - std::complex<double>(0, -1)), 0, 1e-6);
  EXPECT_NEAR(std::abs(w[0] + w[1]), 0, 1e-6);
  if (is_available(Device::gpu)) {
    EXPECT_THROW(linalg::eig(array({1.f, 2.f, 3.f, 4.f}, {2, 2}), Device::gpu), std::invalid_argument);
  }
}

namespace {
// Singular values of a 2 x 2 matrix from the eigenvalues of A^T A.
std::pair<double, double> singular_2x2(const double* a) {
  double p = a[0] * a[0] + a[2] * a[2], q = a[0] * a[1] + a[2] * a[3], r = a[1] * a[1] + a[3] * a[3];
  double mean = (p + r) / 2, rad = std::sqrt((p - r) * (p - r) / 4 + q * q);
  return {std::sqrt(mean + rad), std::sqrt(std::max(mean - rad, 0.0))};
}
}  // namespace

TEST(Linalg, NormsMatchFloat64References) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    // Vector norms along axis 1 of a (3, 5) array.
    auto xv = random_values(15, 27, -2, 2);
    xv[3] = 0;
    array x = harness::with_layout(xv, {3, 5}, t, l);
    for (double ord : {0.0, 1.0, 2.0, 3.0, 0.5, -1.0, kInf, -kInf}) {
      std::vector<double> want;
      for (int i = 0; i < 3; ++i) {
        double acc = ord == kInf ? 0 : (ord == -kInf ? kInf : 0);
        for (int j = 0; j < 5; ++j) {
          double e = std::abs(xv[i * 5 + j]);
          if (ord == 0) acc += e != 0;
          else if (ord == kInf) acc = std::max(acc, e);
          else if (ord == -kInf) acc = std::min(acc, e);
          else acc += std::pow(e, ord);
        }
        if (ord != 0 && std::isfinite(ord)) acc = std::pow(acc, 1 / ord);
        want.push_back(acc);
      }
      array got = linalg::norm(x, ord, 1, false, d);
      EXPECT_EQ(got.shape(), (Shape{3}));
      expect_near(vals(got), want, tol(t) * 10, ctx + " vector ord " + std::to_string(ord));
    }
    // No ord: the 2-norm of the flattened array; keepdims keeps its rank.
    double all = 0;
    for (double e : xv) all += e * e;
    array n2 = linalg::norm(x, std::nullopt, true, d);
    EXPECT_EQ(n2.shape(), (Shape{1, 1}));
    expect_near(vals(n2), {std::sqrt(all)}, tol(t), ctx + " 2-norm of all");
    // Matrix norms over axes (1, 2) of a batch of 2 x 2 matrices.
    auto mv = random_values(3 * 4, 28, -2, 2);
    array m = harness::with_layout(mv, {3, 2, 2}, t, l);
    auto per = [&](auto f) {
      std::vector<double> r;
      for (int b = 0; b < 3; ++b) r.push_back(f(mv.data() + 4 * b));
      return r;
    };
    auto a_ = [](const double* p, int i, int j) { return std::abs(p[i * 2 + j]); };
    std::vector<int> ax{1, 2};
    expect_near(vals(linalg::norm(m, 1.0, ax, false, d)),
                per([&](const double* p) { return std::max(a_(p, 0, 0) + a_(p, 1, 0), a_(p, 0, 1) + a_(p, 1, 1)); }),
                tol(t), ctx + " ord 1");
    expect_near(vals(linalg::norm(m, -1.0, ax, false, d)),
                per([&](const double* p) { return std::min(a_(p, 0, 0) + a_(p, 1, 0), a_(p, 0, 1) + a_(p, 1, 1)); }),
                tol(t), ctx + " ord -1");
    expect_near(vals(linalg::norm(m, kInf, ax, false, d)),
                per([&](const double* p) { return std::max(a_(p, 0, 0) + a_(p, 0, 1), a_(p, 1, 0) + a_(p, 1, 1)); }),
                tol(t), ctx + " ord inf");
    expect_near(vals(linalg::norm(m, -kInf, ax, false, d)),
                per([&](const double* p) { return std::min(a_(p, 0, 0) + a_(p, 0, 1), a_(p, 1, 0) + a_(p, 1, 1)); }),
                tol(t), ctx + " ord -inf");
    expect_near(vals(linalg::norm(m, "fro", ax, false, d)),
                per([](const double* p) { return std::sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]); }),
                tol(t), ctx + " fro");
    expect_near(vals(linalg::norm(m, 2.0, ax, false, d)),
                per([](const double* p) { return singular_2x2(p).first; }), tol(t), ctx + " ord 2");
    expect_near(vals(linalg::norm(m, -2.0, ax, false, d)),
                per([](const double* p) { return singular_2x2(p).second; }), tol(t), ctx + " ord -2");
    expect_near(vals(linalg::norm(m, "nuc", ax, false, d)),
                per([](const double* p) { auto sv = singular_2x2(p); return sv.first + sv.second; }),
                tol(t), ctx + " nuc");
    // keepdims on a matrix norm over axes (0, 2) of (2, 3, 2).
    array k = linalg::norm(harness::with_layout(random_values(12, 29), {2, 3, 2}, t, l), "nuc",
                           std::vector<int>{0, 2}, true, d);
    EXPECT_EQ(k.shape(), (Shape{1, 3, 1}));
    array k1 = linalg::norm(harness::with_layout(random_values(12, 29), {2, 3, 2}, t, l), 1.0,
                            std::vector<int>{2, 0}, true, d);
    EXPECT_EQ(k1.shape(), (Shape{1, 3, 1}));
  });
  // Integer input computes in float32; a 1-D array with an ord.
  array i = array({3, -4}, int32);
  EXPECT_EQ(linalg::norm(i).dtype(), float32);
  EXPECT_FLOAT_EQ(linalg::norm(i).item<float>(), 5.f);
  EXPECT_FLOAT_EQ(linalg::norm(i, 1.0).item<float>(), 7.f);
  // Complex input: norms of the magnitudes.
  array c = array(std::vector<complex64_t>{{3.f, 4.f}, {0.f, 0.f}}.begin(), {2}, complex64);
  EXPECT_FLOAT_EQ(linalg::norm(c).item<float>(), 5.f);
}

TEST(Linalg, NormErrors) {
  array m = ones({2, 3, 4});
  EXPECT_THROW(linalg::norm(m, 2.0), std::invalid_argument);                    // 3-D with an ord
  EXPECT_THROW(linalg::norm(ones({2, 2}), 3.0), std::invalid_argument);         // no matrix 3-norm
  EXPECT_THROW(linalg::norm(ones({4}), "fro"), std::invalid_argument);          // 'fro' of a vector
  EXPECT_THROW(linalg::norm(ones({2, 2}), "max"), std::invalid_argument);
  EXPECT_THROW(linalg::norm(m, 2.0, std::vector<int>{0, 1, 2}), std::invalid_argument);
  EXPECT_THROW(linalg::norm(m, 2.0, std::vector<int>{1, 1}), std::invalid_argument);
  EXPECT_THROW(linalg::norm(m, 2.0, 3), std::out_of_range);
}

TEST(Linalg, CrossProducts) {
  for (auto d : harness::devices()) {
    for (Dtype t : {float32, float64, int32}) {
      SCOPED_TRACE(dtype_name(t));
      auto av = random_values(12, 30, -3, 3), bv = random_values(12, 31, -3, 3);
      for (auto& v : av) v = std::round(v);
      for (auto& v : bv) v = std::round(v);
      // Vectors along axis 1 of (4, 3), the second operand transposed in memory.
      array a = harness::from_doubles(av, {4, 3}, t);
      array b = harness::with_layout(bv, {4, 3}, t, Layout::transposed);
      std::vector<double> want;
      for (int i = 0; i < 4; ++i) {
        const double* x = av.data() + 3 * i;
        const double* y = bv.data() + 3 * i;
        want.insert(want.end(), {x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2],
                                 x[0] * y[1] - x[1] * y[0]});
      }
      array c = linalg::cross(a, b, -1, d);
      EXPECT_EQ(c.dtype(), t);
      expect_near(vals(c), want, 0, "cross");
      // Along axis 0, and broadcast against one vector.
      expect_near(vals(linalg::cross(transpose(a), transpose(b), 0, d)),
                  host_transpose(want, 1, 4, 3), 0, "cross axis 0");
      array one = harness::from_doubles({1, 0, 0}, {3}, t);
      auto bc = vals(linalg::cross(one, b, -1, d));
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(bc[3 * i], 0);
        EXPECT_EQ(bc[3 * i + 1], -bv[3 * i + 2]);
        EXPECT_EQ(bc[3 * i + 2], bv[3 * i + 1]);
      }
      // Size 2 vectors are padded with 0: only the z component remains.
      array a2 = harness::from_doubles({1, 2}, {2}, t), b2 = harness::from_doubles({3, 4}, {2}, t);
      expect_near(vals(linalg::cross(a2, b2, -1, d)), {0, 0, -2}, 0, "cross of size 2");
    }
  }
  EXPECT_THROW(linalg::cross(ones({4}), ones({4})), std::invalid_argument);
  EXPECT_THROW(linalg::cross(ones({3}), ones({3}), 1), std::out_of_range);
}

TEST(Linalg, EmptyMatrices) {
  for (auto d : harness::devices()) {
    EXPECT_EQ(linalg::inv(zeros({0, 0}), d).shape(), (Shape{0, 0}));
    auto [q, r] = linalg::qr(zeros({3, 0}), d);
    eval({q, r});
    EXPECT_EQ(q.shape(), (Shape{3, 0}));
    EXPECT_EQ(r.shape(), (Shape{0, 0}));
    EXPECT_EQ(linalg::svd(zeros({0, 2, 2}), false, d)[0].shape(), (Shape{0, 2}));
    auto w = linalg::eigvalsh(zeros({2, 0, 0}), "L", d);
    eval(w);
    EXPECT_EQ(w.shape(), (Shape{2, 0}));
  }
}

TEST(Linalg, BadInputIsRejected) {
  array rect = ones({2, 3});
  for (auto f : {+[](const array& a) { return linalg::inv(a); },
                 +[](const array& a) { return linalg::cholesky(a); },
                 +[](const array& a) { return linalg::det(a); },
                 +[](const array& a) { return linalg::eigvalsh(a); },
                 +[](const array& a) { return linalg::tri_inv(a); }}) {
    EXPECT_THROW(f(rect), std::invalid_argument);         // not square
    EXPECT_THROW(f(ones({3})), std::invalid_argument);    // not a matrix
    EXPECT_THROW(f(ones({2, 2}, int32)), std::invalid_argument);
    EXPECT_THROW(f(ones({2, 2}, float16)), std::invalid_argument);
  }
  EXPECT_THROW(linalg::qr(ones({2, 2}, int32)), std::invalid_argument);
  EXPECT_THROW(linalg::svd(ones({2, 2}, complex64)), std::invalid_argument);
  EXPECT_THROW(linalg::lu(ones({4})), std::invalid_argument);
  EXPECT_THROW(linalg::eigh(ones({2, 2}), "X"), std::invalid_argument);
  EXPECT_THROW(linalg::solve(ones({3, 3}), ones({4})), std::invalid_argument);
  EXPECT_THROW(linalg::solve(ones({3, 3}), ones({2, 3, 1}, int32)), std::invalid_argument);
  EXPECT_THROW(linalg::solve(ones({2, 3, 3}), ones({4, 3, 1})), std::invalid_argument);
  try {
    linalg::inv(rect);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[linalg::inv]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(2,3)"), std::string::npos) << e.what();
  }
}

TEST(Linalg, SingularAndIndefiniteMatricesRaiseAtEval) {
  for (auto d : harness::devices()) {
    for (Dtype t : float_types()) {
      array sing = harness::from_doubles({1, 2, 2, 4}, {2, 2}, t);
      EXPECT_THROW(eval(linalg::inv(sing, d)), std::invalid_argument);
      EXPECT_THROW(eval(linalg::solve(sing, harness::from_doubles({1, 1}, {2}, t), d)),
                   std::invalid_argument);
      EXPECT_THROW(eval(linalg::tri_inv(harness::from_doubles({1, 0, 3, 0}, {2, 2}, t), false, d)),
                   std::invalid_argument);
      EXPECT_THROW(eval(linalg::cholesky(harness::from_doubles({1, 2, 2, 1}, {2, 2}, t), false, d)),
                   std::invalid_argument);
      // The framework stays usable, and the message names the op.
      try {
        eval(linalg::inv(sing, d));
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("singular"), std::string::npos) << e.what();
      }
      EXPECT_NEAR(linalg::det(sing, d).item<double>(), 0.0, 1e-6);
    }
  }
}

TEST(Linalg, PinvSatisfiesPenroseConditions) {
  sweep([](Device d, Dtype t, Layout l, const std::string& ctx) {
    for (Shape s : std::vector<Shape>{{4, 4}, {2, 5, 3}, {3, 5}}) {
      const int m = s[s.size() - 2], n = s.back();
      const int64_t b = batch_of(s);
      auto av = random_values(shape_size(s), 40);
      array p = linalg::pinv(harness::with_layout(av, s, t, l), d);
      Shape ps = s;
      ps[s.size() - 2] = n;
      ps.back() = m;
      EXPECT_EQ(p.shape(), ps) << ctx;
      auto pv = vals(p);
      // A P A == A and P A P == P.
      expect_near(host_matmul(host_matmul(av, pv, b, m, n, m), av, b, m, m, n), av, tol(t) * 10,
                  ctx + " A P A");
      expect_near(host_matmul(host_matmul(pv, av, b, n, m, n), pv, b, n, n, m), pv, tol(t) * 10,
                  ctx + " P A P");
    }
    // A rank-1 matrix: pinv of x y^T is y x^T / (|x|^2 |y|^2).
    std::vector<double> x{1, 2}, y{3, 0, 4};
    std::vector<double> a, want;
    for (double xi : x) for (double yj : y) a.push_back(xi * yj);
    for (double yj : y) for (double xi : x) want.push_back(yj * xi / (5.0 * 25.0));
    expect_near(vals(linalg::pinv(harness::with_layout(a, {2, 3}, t, l), d)), want, tol(t),
                ctx + " pinv of rank 1");
  });
}

TEST(Linalg, EveryDeviceMatchesTheCpu) {
  // Results that the factorization determines uniquely, on each device
  // against the CPU's (the GPU runs cuSOLVER, the CPU LAPACK).
  for (auto d : harness::devices()) {
    for (Dtype t : float_types()) {
      SCOPED_TRACE(std::string(d == Device::cpu ? "cpu " : "gpu ") + dtype_name(t));
      Shape s{3, 6, 6};
      array a = harness::from_doubles(conditioned(s, 50), s, t);
      array p = harness::from_doubles(spd(s, 51), s, t);
      array r = harness::from_doubles(random_values(3 * 7 * 4, 52), {3, 7, 4}, t);
      array b = harness::from_doubles(random_values(3 * 6 * 2, 53), {3, 6, 2}, t);
      auto both = [&](const std::function<array(Device)>& f, const std::string& what) {
        expect_near(vals(f(d)), vals(f(Device::cpu)), tol(t) * 10, what);
      };
      both([&](Device x) { return linalg::inv(a, x); }, "inv");
      both([&](Device x) { return linalg::tri_inv(a, true, x); }, "tri_inv");
      both([&](Device x) { return linalg::solve(a, b, x); }, "solve");
      both([&](Device x) { return linalg::cholesky(p, false, x); }, "cholesky");
      both([&](Device x) { return linalg::det(a, x); }, "det");
      both([&](Device x) { return linalg::lu_factor(a, x).first; }, "lu_factor");
      both([&](Device x) { return linalg::lu(a, x)[0]; }, "lu permutation");
      both([&](Device x) { return linalg::eigvalsh(p, "L", x); }, "eigvalsh");
      both([&](Device x) { return linalg::svd(r, false, x)[0]; }, "singular values");
      both([&](Device x) { return linalg::svd(swapaxes(r, -1, -2), false, x)[0]; }, "singular values wide");
      both([&](Device x) { return abs(linalg::qr(r, x).second, x); }, "|R|");
    }
  }
}
