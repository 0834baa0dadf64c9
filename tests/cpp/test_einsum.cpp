// einsum against loops over every label assignment, computed here in float64:
// many subscripts (products, traces, diagonals, transposes, outer products,
// batches, chains of up to 7 operands), implicit outputs, ellipses with
// broadcasting, dtypes, views and devices; the chosen path; derivatives and
// vmap; errors. kron and the window functions against their formulas;
// meshgrid on views and devices.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <set>
#include <string>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// sum over every assignment of the labels of prod_k operand_k[labels_k] into
// out[output labels]; subscripts of letters only, explicit or implicit.
std::vector<double> einsum_loops(const std::string& subscripts,
                                 const std::vector<std::vector<double>>& vals,
                                 const std::vector<Shape>& shapes, Shape& out_shape) {
  std::string lhs = subscripts, rhs;
  bool explicit_out = false;
  if (auto p = subscripts.find("->"); p != std::string::npos) {
    lhs = subscripts.substr(0, p);
    rhs = subscripts.substr(p + 2);
    explicit_out = true;
  }
  std::vector<std::string> terms{""};
  for (char c : lhs) {
    if (c == ',') {
      terms.push_back("");
    } else {
      terms.back() += c;
    }
  }
  std::map<char, int> size, count;
  for (size_t k = 0; k < terms.size(); ++k) {
    for (size_t d = 0; d < terms[k].size(); ++d) {
      size[terms[k][d]] = std::max(size[terms[k][d]], shapes[k][d]);
      ++count[terms[k][d]];
    }
  }
  if (!explicit_out) {
    for (auto [c, n] : count) {
      if (n == 1) rhs += c;
    }
  }
  std::vector<char> labels;
  for (auto& [c, n] : size) labels.push_back(c);
  out_shape.clear();
  for (char c : rhs) out_shape.push_back(size[c]);
  std::vector<double> out(shape_size(out_shape), 0.0);
  for (auto& [c, n] : size) {
    if (n == 0) return out;  // no assignments: zeros
  }
  std::map<char, int> at;
  for (char c : labels) at[c] = 0;
  while (true) {
    double prod = 1;
    for (size_t k = 0; k < terms.size(); ++k) {
      int64_t idx = 0;
      for (size_t d = 0; d < terms[k].size(); ++d) {
        int dim = shapes[k][d];
        idx = idx * dim + (dim == 1 ? 0 : at[terms[k][d]]);
      }
      prod *= vals[k][idx];
    }
    int64_t o = 0;
    for (char c : rhs) o = o * size[c] + at[c];
    if (!out.empty()) out[o] += prod;
    // Next assignment.
    size_t i = 0;
    for (; i < labels.size(); ++i) {
      if (++at[labels[i]] < size[labels[i]]) break;
      at[labels[i]] = 0;
    }
    if (i == labels.size()) break;
  }
  return out;
}

struct Case {
  std::string subscripts;
  std::vector<Shape> shapes;
};

std::vector<Case> cases() {
  return {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"ij,jk", {{2, 3}, {3, 2}}},
      {"ij,kj->ik", {{3, 4}, {5, 4}}},
      {"ii->i", {{4, 4}}},
      {"ii", {{5, 5}}},
      {"iij->j", {{3, 3, 2}}},
      {"iii->", {{3, 3, 3}}},
      {"ij->ji", {{3, 5}}},
      {"ij", {{3, 5}}},
      {"ji", {{3, 5}}},
      {"ij->", {{3, 5}}},
      {"ijk->kji", {{2, 3, 4}}},
      {"i,i->", {{6}, {6}}},
      {"i,i", {{6}, {6}}},
      {"i,j->ij", {{3}, {4}}},
      {"ij,kl->ijkl", {{2, 2}, {3, 2}}},
      {"ij,ij->ij", {{3, 4}, {3, 4}}},
      {"ij,ij->", {{3, 4}, {3, 4}}},
      {"ijk,ikl->ijl", {{2, 3, 4}, {2, 4, 5}}},
      {"bij,bjk,bkl->bil", {{2, 2, 3}, {2, 3, 4}, {2, 4, 2}}},
      {"ab,bc,cd,de->ae", {{2, 3}, {3, 4}, {4, 2}, {2, 3}}},
      {"ik,kj,ji->", {{3, 4}, {4, 2}, {2, 3}}},
      {"ij,j->i", {{4, 5}, {5}}},
      {"i,ij,j->", {{3}, {3, 4}, {4}}},
      {"abc,cd->abd", {{2, 3, 4}, {4, 3}}},
      {"aij,ajk->", {{2, 2, 3}, {2, 3, 2}}},
      {"ij,jk,kl,lm,mn,no,op->ip", {{2, 3}, {3, 2}, {2, 3}, {3, 2}, {2, 2}, {2, 3}, {3, 2}}},
      {"ab,cd,ef->", {{2, 2}, {2, 3}, {3, 1}}},
      {"ij,ij->ij", {{1, 4}, {3, 4}}},  // a size-1 dimension broadcasts
      {"i,i->i", {{1}, {5}}},
      {"ij,jk->ik", {{0, 3}, {3, 2}}},  // empty
      {"ij,jk->ik", {{2, 0}, {0, 3}}},  // empty contraction: zeros
      {"Ab,bA->A", {{3, 2}, {2, 3}}},
  };
}

std::vector<std::vector<double>> random_operands(const std::vector<Shape>& shapes, Dtype t,
                                                 uint64_t seed) {
  std::vector<std::vector<double>> v;
  for (auto& s : shapes) v.push_back(harness::random_values(shape_size(s), t, -2, 2, seed++));
  return v;
}

}  // namespace

TEST(Einsum, test_einsum_matches_loops_for_many_subscripts) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    uint64_t seed = 1;
    for (auto& c : cases()) {
      for (Dtype t : {float32, float64}) {
        auto vals = random_operands(c.shapes, t, seed += 10);
        std::vector<array> ops;
        for (size_t k = 0; k < vals.size(); ++k) ops.push_back(harness::from_doubles(vals[k], c.shapes[k], t));
        Shape want_shape;
        auto want = einsum_loops(c.subscripts, vals, c.shapes, want_shape);
        array got = einsum(c.subscripts, ops);
        std::string ctxs = c.subscripts + " " + dtype_name(t);
        EXPECT_EQ(got.shape(), want_shape) << ctxs;
        EXPECT_EQ(got.dtype(), t) << ctxs;
        harness::expect_values(got, want, ctxs, t == float32 ? 1e-5 : 1e-12);
      }
    }
  }
}

TEST(Einsum, test_every_dtype_and_views) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : harness::all_types()) {
      for (auto layout : harness::all_layouts()) {
        for (const Case& c : std::vector<Case>{{"ij,jk->ik", {{3, 4}, {4, 5}}},
                                               {"ii->i", {{4, 4}}},
                                               {"ij,ij->i", {{3, 4}, {3, 4}}},
                                               {"i,j->ji", {{3}, {2}}}}) {
          std::vector<std::vector<double>> vals;
          std::vector<array> ops;
          uint64_t seed = 5;
          for (auto& s : c.shapes) {
            auto v = harness::rows_repeated(harness::random_values(shape_size(s), t, 0, 3, seed++), s);
            vals.push_back(v);
            ops.push_back(harness::with_layout(v, s, t, layout));
          }
          Shape want_shape;
          auto want = einsum_loops(c.subscripts, vals, c.shapes, want_shape);
          if (t == bool_) {
            for (auto& w : want) w = w != 0;
          } else {
            for (auto& w : want) w = harness::wrap_int(w, t);
          }
          array got = einsum(c.subscripts, ops);
          std::string ctxs = c.subscripts + " " + dtype_name(t) + " " + harness::layout_name(layout);
          EXPECT_EQ(got.dtype(), t) << ctxs;
          EXPECT_EQ(got.shape(), want_shape) << ctxs;
          double tol = t == float16 ? 4e-3 : t == bfloat16 ? 3e-2 : t == float32 || t == complex64 ? 1e-5 : 1e-12;
          harness::expect_values(got, want, ctxs, tol, tol);
        }
      }
    }
  }
}

TEST(Einsum, test_mixed_dtypes_promote) {
  array a = astype(reshape(arange(6), {2, 3}), int32);
  array b = astype(reshape(arange(6), {3, 2}), float32);
  array c = einsum("ij,jk->ik", {a, b});
  EXPECT_EQ(c.dtype(), float32);
  harness::expect_values(c, {10, 13, 28, 40}, "int32 x float32");
}

TEST(Einsum, test_ellipsis_broadcasts) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array a = grad_check::random_f64({2, 1, 3, 4}, 1), b = grad_check::random_f64({5, 4, 2}, 2);
    harness::expect_values(einsum("...ij,...jk->...ik", {a, b}), harness::to_doubles(matmul(a, b)),
                           "batched matmul");
    EXPECT_EQ(einsum("...ij,...jk->...ik", {a, b}).shape(), (Shape{2, 5, 3, 2}));
    // Implicit output: the ellipsis first, then the letters that appear once.
    harness::expect_values(einsum("...ij,...jk", {a, b}), harness::to_doubles(matmul(a, b)),
                           "implicit batched matmul");
    array m = grad_check::random_f64({3, 4, 4}, 3);
    harness::expect_values(einsum("...ii->...i", {m}), harness::to_doubles(diagonal(m, 0, 1, 2)),
                           "batched diagonal");
    array m2 = grad_check::random_f64({4, 3, 4}, 5);
    harness::expect_values(einsum("i...i", {m2}), harness::to_doubles(trace(m2, 0, 0, 2)),
                           "ellipsis in the middle");
    // Without "..." in an explicit output, the ellipsis axes are summed.
    harness::expect_values(einsum("...i->i", {m}), harness::to_doubles(sum(m, {0, 1})),
                           "ellipsis summed");
    array v = grad_check::random_f64({4}, 4);
    harness::expect_values(einsum("...,...->...", {m, v}), harness::to_doubles(multiply(m, v)),
                           "elementwise broadcast");
    harness::expect_values(einsum("ij...,j...->i...", {m, reshape(v, {4, 1})}),
                           harness::to_doubles(sum(multiply(m, reshape(v, {1, 4, 1})), 1)),
                           "ellipsis at the end");
  }
}

TEST(Einsum, test_path_is_the_cheapest_order) {
  array a = zeros({1000, 2}), b = zeros({2, 1000}), c = zeros({1000, 2});
  auto [path, text] = einsum_path("ij,jk,kl->il", {a, b, c});
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[0], (std::vector<int>{1, 2}));
  EXPECT_EQ(path[1], (std::vector<int>{0, 1}));
  EXPECT_NE(text.find("Complete contraction:  ij,jk,kl->il"), std::string::npos) << text;
  EXPECT_NE(text.find("Optimized FLOP count:  8000"), std::string::npos) << text;
  // The other way round: contract the first two.
  auto [p2, t2] = einsum_path("ij,jk,kl->il", {zeros({2, 1000}), zeros({1000, 2}), zeros({2, 1000})});
  EXPECT_EQ(p2[0], (std::vector<int>{0, 1}));
  // One operand: nothing to contract.
  auto [p1, t1] = einsum_path("ii->i", {zeros({3, 3})});
  EXPECT_EQ(p1, (std::vector<std::vector<int>>{{0}}));
  // Many operands (greedy): a chain whose cheap end is in the middle.
  std::vector<array> ops;
  std::vector<Shape> shapes = {{50, 50}, {50, 50}, {50, 2}, {2, 2}, {2, 50}, {50, 50}, {50, 50}};
  for (auto& s : shapes) ops.push_back(zeros(s));
  auto [p7, t7] = einsum_path("ab,bc,cd,de,ef,fg,gh->ah", ops);
  EXPECT_EQ(p7.size(), 6u);
  EXPECT_EQ(p7[0], (std::vector<int>{2, 3}));
}

TEST(Einsum, test_errors_name_the_problem) {
  array m = zeros({3, 4}), v = zeros({4});
  EXPECT_THROW(einsum("ij,jk->ik", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("ij", {m, v}), std::invalid_argument);
  EXPECT_THROW(einsum("i2", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("ijk", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("i", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("ij->ii", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("ij->k", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("ij,i->j", {m, v}), std::invalid_argument);  // 3 vs 4
  EXPECT_THROW(einsum("ii", {m}), std::invalid_argument);          // a diagonal of 3 vs 4
  EXPECT_THROW(einsum("....", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("ij->i->j", {m}), std::invalid_argument);
  EXPECT_THROW(einsum("", std::vector<array>{}), std::invalid_argument);
  try {
    einsum("ij,i->j", {m, v});
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[einsum]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'i'"), std::string::npos) << msg;
  }
}

TEST(Einsum, test_derivatives_and_vmap) {
  using grad_check::check_derivatives;
  using grad_check::random_f64;
  auto fn = [](std::string sub) {
    return [sub](const std::vector<array>& x) { return std::vector<array>{einsum(sub, x)}; };
  };
  grad_check::on_each_device([&] {
    check_derivatives("ij,jk->ik", fn("ij,jk->ik"), {random_f64({3, 4}, 1), random_f64({4, 2}, 2)});
    check_derivatives("ii->i", fn("ii->i"), {random_f64({4, 4}, 3)});
    check_derivatives("ii", fn("ii"), {random_f64({4, 4}, 4)});
    check_derivatives("i,j->ij", fn("i,j->ij"), {random_f64({3}, 5), random_f64({4}, 6)});
    check_derivatives("bij,bjk,bkl->bil", fn("bij,bjk,bkl->bil"),
                      {random_f64({2, 2, 3}, 7), random_f64({2, 3, 4}, 8), random_f64({2, 4, 2}, 9)});
    check_derivatives("...ij,...jk", fn("...ij,...jk"), {random_f64({2, 1, 3, 4}, 10), random_f64({3, 4, 2}, 11)});
    check_derivatives("ij->", fn("ij->"), {random_f64({3, 4}, 12)});
  });
  grad_check::check_vmap("ij,jk->ik", fn("ij,jk->ik"),
                         {grad_check::integers_f64({3, 2, 4}, 13), grad_check::integers_f64({4, 5}, 14)},
                         {0, -1});
  grad_check::check_vmap("ii->i batch axis 1", fn("ii->i"), {grad_check::integers_f64({3, 2, 3}, 15)},
                         {1});
  grad_check::check_vmap("i,j->ij", fn("i,j->ij"),
                         {grad_check::integers_f64({3, 2}, 16), grad_check::integers_f64({4, 2}, 17)},
                         {1, 1});
}

// ---- kron -------------------------------------------------------------------------

TEST(Kron, test_kron_matches_the_block_formula) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{2, 3}, {4, 5}}, {{3}, {2, 2}}, {{2, 2}, {3}}, {{}, {3}}, {{2, 1, 3}, {2, 2}}, {{0, 2}, {2, 2}}};
    for (Dtype t : {float32, int32, float64}) {
      for (auto& [sa, sb] : shapes) {
        auto va = harness::random_values(shape_size(sa), t, -3, 3, 1);
        auto vb = harness::random_values(shape_size(sb), t, -3, 3, 2);
        array a = harness::with_layout(va, sa, t, sa.size() > 1 ? harness::Layout::transposed
                                                                : harness::Layout::contiguous);
        array b = harness::from_doubles(vb, sb, t);
        const size_t nd = std::max(sa.size(), sb.size());
        Shape pa(nd - sa.size(), 1), pb(nd - sb.size(), 1), out;
        pa.insert(pa.end(), sa.begin(), sa.end());
        pb.insert(pb.end(), sb.begin(), sb.end());
        for (size_t d = 0; d < nd; ++d) out.push_back(pa[d] * pb[d]);
        std::vector<double> want(shape_size(out));
        for (size_t o = 0; o < want.size(); ++o) {
          int64_t rem = o, ia = 0, ib = 0;
          std::vector<int64_t> idx(nd);
          for (int d = int(nd) - 1; d >= 0; --d) {
            idx[d] = rem % out[d];
            rem /= out[d];
          }
          for (size_t d = 0; d < nd; ++d) {
            ia = ia * pa[d] + idx[d] / pb[d];
            ib = ib * pb[d] + idx[d] % pb[d];
          }
          want[o] = va[ia] * vb[ib];
        }
        array k = kron(a, b);
        std::string c = shape_str(sa) + " x " + shape_str(sb) + " " + dtype_name(t);
        EXPECT_EQ(k.shape(), out) << c;
        EXPECT_EQ(k.dtype(), t) << c;
        harness::expect_values(k, want, c);
      }
    }
  }
  grad_check::check_derivatives("kron", [](const std::vector<array>& x) {
    return std::vector<array>{kron(x[0], x[1])};
  }, {grad_check::random_f64({2, 3}, 3), grad_check::random_f64({3, 2}, 4)});
}

// ---- windows ----------------------------------------------------------------------

TEST(Windows, test_windows_follow_their_formulas) {
  const double pi = std::numbers::pi;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int M : {-1, 0, 1, 2, 5, 12, 51}) {
      std::vector<double> hann, hamm, black, bart;
      for (int n = 0; n < M; ++n) {
        double x = M == 1 ? 0 : 2 * pi * n / (M - 1);
        hann.push_back(M == 1 ? 1 : 0.5 - 0.5 * std::cos(x));
        hamm.push_back(M == 1 ? 1 : 0.54 - 0.46 * std::cos(x));
        black.push_back(M == 1 ? 1 : 0.42 - 0.5 * std::cos(x) + 0.08 * std::cos(2 * x));
        bart.push_back(M == 1 ? 1
                       : n <= (M - 1) / 2.0 ? 2.0 * n / (M - 1)
                                            : 2.0 - 2.0 * n / (M - 1));
      }
      std::string c = " M=" + std::to_string(M);
      for (auto [w, want, name] : {std::tuple{hanning(M), hann, "hanning"},
                                   std::tuple{hamming(M), hamm, "hamming"},
                                   std::tuple{blackman(M), black, "blackman"},
                                   std::tuple{bartlett(M), bart, "bartlett"}}) {
        EXPECT_EQ(w.dtype(), float32) << name << c;
        EXPECT_EQ(w.shape(), (Shape{std::max(M, 0)})) << name << c;
        harness::expect_values(w, want, name + c, 1e-6, 1e-6);
      }
    }
  }
}

// ---- meshgrid (creation.cpp) on views and every device ------------------------------

TEST(Meshgrid, test_meshgrid_of_views_on_every_device) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array x = slice(arange(6), {0}, {6}, {2});          // 0 2 4
    array y = flip(astype(arange(2), float32));          // 1 0
    auto xy = meshgrid({x, y});
    ASSERT_EQ(xy.size(), 2u);
    EXPECT_EQ(xy[0].shape(), (Shape{2, 3}));
    harness::expect_values(xy[0], {0, 2, 4, 0, 2, 4}, "xy x");
    harness::expect_values(xy[1], {1, 1, 1, 0, 0, 0}, "xy y");
    auto ij = meshgrid({x, y}, false, "ij");
    EXPECT_EQ(ij[0].shape(), (Shape{3, 2}));
    harness::expect_values(ij[0], {0, 0, 2, 2, 4, 4}, "ij x");
    harness::expect_values(ij[1], {1, 0, 1, 0, 1, 0}, "ij y");
    auto sp = meshgrid({x, y}, true, "ij");
    EXPECT_EQ(sp[0].shape(), (Shape{3, 1}));
    EXPECT_EQ(sp[1].shape(), (Shape{1, 2}));
  }
}
