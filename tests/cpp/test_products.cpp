// vecdot, diff, gather_mm, gather_qmm, segmented_mm, block_masked_mm and hadamard_transform
// against loops over their definitions in double precision, on every device;
// their derivatives against finite differences and vmap against a loop.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using grad_check::random_f64;

namespace {

// Row-major (r x c) @ (c x n) in double.
std::vector<double> mm(const double* a, const double* b, int r, int c, int n) {
  std::vector<double> out(static_cast<size_t>(r) * n, 0.0);
  for (int i = 0; i < r; ++i)
    for (int k = 0; k < c; ++k)
      for (int j = 0; j < n; ++j) out[i * n + j] += a[i * c + k] * b[k * n + j];
  return out;
}

std::vector<double> values_of(const array& a) { return harness::to_doubles(a); }

}  // namespace

TEST(Vecdot, SumsProductsOverTheAxisWithBroadcasting) {
  grad_check::on_each_device([] {
    array a = random_f64({3, 4}, 1), b = random_f64({4}, 2);
    auto va = values_of(a), vb = values_of(b);
    std::vector<double> want(3, 0.0);
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) want[i] += va[i * 4 + k] * vb[k];
    harness::expect_values(vecdot(a, b), want, "axis -1");
    std::vector<double> cols(4, 0.0);
    array c = random_f64({3, 1}, 3);
    auto vc = values_of(c);
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 3; ++i) cols[k] += va[i * 4 + k] * vc[i];
    harness::expect_values(vecdot(a, c, 0), cols, "axis 0, (3,4) with (3,1)");
    // Complex: the first operand is conjugated.
    array z = array({complex64_t(1, 2), complex64_t(0, -1)});
    array w = array({complex64_t(3, 0), complex64_t(2, 2)});
    array d = vecdot(z, w);
    // conj(1+2i)*3 + conj(-i)*(2+2i) = (3-6i) + (i)(2+2i) = 3-6i + 2i - 2 = 1-4i
    array parts = stack({real(d), imag(d)}, 0);
    harness::expect_values(parts, {1, -4}, "complex");
    EXPECT_THROW(vecdot(zeros({2, 3}), zeros({4})), std::invalid_argument);
    EXPECT_THROW(vecdot(zeros({2, 3}), zeros({3}), 2), std::out_of_range);
  });
}

TEST(Diff, RepeatedDifferencesAlongEachAxis) {
  grad_check::on_each_device([] {
    array x = harness::from_doubles({1, 4, 9, 16, 25, 2, 3, 5, 8, 13}, {2, 5}, float32);
    harness::expect_values(diff(x), {3, 5, 7, 9, 1, 2, 3, 5}, "n=1");
    harness::expect_values(diff(x, 2), {2, 2, 2, 1, 1, 2}, "n=2");
    harness::expect_values(diff(x, 1, 0), {1, -1, -4, -8, -12}, "axis 0");
    EXPECT_EQ(diff(x, 0).shape(), (Shape{2, 5}));
    EXPECT_EQ(diff(x, 7).shape(), (Shape{2, 0}));  // as NumPy: empty once n >= length
    array i = array({1, 4, 2}, int32);
    EXPECT_EQ(diff(i).dtype(), int32);
    harness::expect_values(diff(i), {3, -2}, "int32");
    array b = array({true, true, false, true});
    EXPECT_EQ(diff(b).dtype(), bool_);
    harness::expect_values(diff(b), {0, 1, 1}, "bool: not_equal");
    EXPECT_THROW(diff(x, -1), std::invalid_argument);
    EXPECT_THROW(diff(array(1.0f)), std::invalid_argument);
    EXPECT_THROW(diff(x, 1, 2), std::out_of_range);
  });
}

TEST(GatherMM, ChoosesMatricesByFlatBatchIndex) {
  grad_check::on_each_device([] {
    // a: batch (2, 3) of 4x5 matrices; b: batch (6,) of 5x2.
    array a = random_f64({2, 3, 4, 5}, 4), b = random_f64({6, 5, 2}, 5);
    auto va = values_of(a), vb = values_of(b);
    array li = array({5, 0, 2}, int32), ri = array({1, 1, 4}, uint32);
    array y = gather_mm(a, b, li, ri);
    ASSERT_EQ(y.shape(), (Shape{3, 4, 2}));
    std::vector<double> want;
    const int lv[] = {5, 0, 2}, rv[] = {1, 1, 4};
    for (int t = 0; t < 3; ++t) {
      auto p = mm(&va[lv[t] * 20], &vb[rv[t] * 10], 4, 5, 2);
      want.insert(want.end(), p.begin(), p.end());
    }
    harness::expect_values(y, want, "both indices");
    // Only rhs indices, shaped (2, 3): broadcast with a's batch (2, 3).
    array r2 = array({0, 1, 2, 3, 4, 5}, {2, 3}, int32);
    array y2 = gather_mm(a, b, std::nullopt, r2);
    ASSERT_EQ(y2.shape(), (Shape{2, 3, 4, 2}));
    std::vector<double> want2;
    for (int t = 0; t < 6; ++t) {
      auto p = mm(&va[t * 20], &vb[t * 10], 4, 5, 2);
      want2.insert(want2.end(), p.begin(), p.end());
    }
    harness::expect_values(y2, want2, "rhs indices only");
    EXPECT_THROW(gather_mm(a, b, array({0.5f})), std::invalid_argument);
    EXPECT_THROW(gather_mm(a, random_f64({6, 4, 2}, 6)), std::invalid_argument);
    EXPECT_THROW(gather_mm(array({1.0f}), b), std::invalid_argument);
  });
}

TEST(GatherQMM, ChoosesQuantizedMatricesByFlatBatchIndex) {
  grad_check::on_each_device([] {
    // Three (8 x 64) weights quantized in groups of 32 along K; x (2, 5, 64).
    array w = astype(random_f64({3, 8, 64}, 40), float32);
    auto q = quantize(w, 32, 4);
    // The dequantized weights, transposed per matrix to (64 x 8), in double.
    auto wd = values_of(dequantize(q[0], q[1], q[2], 32, 4));
    std::vector<double> wt(wd.size());
    for (int e = 0; e < 3; ++e)
      for (int n = 0; n < 8; ++n)
        for (int k = 0; k < 64; ++k) wt[e * 512 + k * 8 + n] = wd[e * 512 + n * 64 + k];
    array x = astype(random_f64({2, 5, 64}, 41), float32);
    auto vx = values_of(x);
    const int lv[] = {1, 0, 1, 1}, rv[] = {2, 0, 1, 2};
    array y = gather_qmm(x, q[0], q[1], q[2], array({1, 0, 1, 1}, int32),
                         array({2, 0, 1, 2}, uint32), true, 32, 4);
    ASSERT_EQ(y.shape(), (Shape{4, 5, 8}));
    std::vector<double> want;
    for (int t = 0; t < 4; ++t) {
      auto p = mm(&vx[lv[t] * 320], &wt[rv[t] * 512], 5, 64, 8);
      want.insert(want.end(), p.begin(), p.end());
    }
    harness::expect_values(y, want, "both indices", 1e-4, 1e-4);

    // rhs indices (2, 2) against an x without batch axes: (2, 2, 5, 8).
    array x1 = astype(random_f64({5, 64}, 42), float32);
    auto vx1 = values_of(x1);
    array y1 = gather_qmm(x1, q[0], q[1], q[2], std::nullopt, array({0, 2, 1, 1}, {2, 2}, int32),
                          true, 32, 4);
    ASSERT_EQ(y1.shape(), (Shape{2, 2, 5, 8}));
    std::vector<double> want1;
    for (int e : {0, 2, 1, 1}) {
      auto p = mm(vx1.data(), &wt[e * 512], 5, 64, 8);
      want1.insert(want1.end(), p.begin(), p.end());
    }
    harness::expect_values(y1, want1, "rhs indices only", 1e-4, 1e-4);

    // transpose = false: x @ dequantize(w2)[e], w2 (3, 64, 32) grouped along N.
    auto q2 = quantize(astype(random_f64({3, 64, 32}, 43), float32), 32, 8);
    auto wd2 = values_of(dequantize(q2[0], q2[1], q2[2], 32, 8));
    array y2 = gather_qmm(x1, q2[0], q2[1], q2[2], std::nullopt, array({2, 0}, int32), false,
                          32, 8);
    ASSERT_EQ(y2.shape(), (Shape{2, 5, 32}));
    std::vector<double> want2;
    for (int e : {2, 0}) {
      auto p = mm(vx1.data(), &wd2[e * 2048], 5, 64, 32);
      want2.insert(want2.end(), p.begin(), p.end());
    }
    harness::expect_values(y2, want2, "transpose false", 1e-4, 1e-4);

    EXPECT_THROW(gather_qmm(x, q[0], q[1], q[2], array({0.5f})), std::invalid_argument);
    EXPECT_THROW(gather_qmm(x, q[0], reshape(q[1], {48}), q[2]), std::invalid_argument);
  });
}

TEST(SegmentedMM, OneProductPerRangeOfTheInnerAxis) {
  grad_check::on_each_device([] {
    array a = random_f64({3, 8}, 7), b = random_f64({8, 2}, 8);
    auto va = values_of(a), vb = values_of(b);
    array seg = array({0, 3, 3, 8, 2, 2, 0, 8}, {2, 2, 2}, int32);
    array y = segmented_mm(a, b, seg);
    ASSERT_EQ(y.shape(), (Shape{2, 2, 3, 2}));
    std::vector<double> want;
    const int ranges[4][2] = {{0, 3}, {3, 8}, {2, 2}, {0, 8}};
    for (auto& r : ranges) {
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) {
          double acc = 0;
          for (int k = r[0]; k < r[1]; ++k) acc += va[i * 8 + k] * vb[k * 2 + j];
          want.push_back(acc);
        }
    }
    harness::expect_values(y, want, "segments");
    EXPECT_THROW(segmented_mm(a, b, array({0, 1, 2}, int32)), std::invalid_argument);
    EXPECT_THROW(segmented_mm(a, random_f64({7, 2}, 9), seg), std::invalid_argument);
    EXPECT_THROW(segmented_mm(a, b, array({0.f, 3.f})), std::invalid_argument);
  });
}

TEST(BlockMaskedMM, ZeroesOrScalesTiles) {
  grad_check::on_each_device([] {
    const int M = 40, K = 70, N = 33, bs = 32;  // 2 x 3 x 2 tiles, the last ones partial
    array a = random_f64({M, K}, 10), b = random_f64({K, N}, 11);
    auto va = values_of(a), vb = values_of(b);
    std::mt19937 gen(3);
    auto bits = [&](int n) {
      std::vector<bool> v;
      for (int i = 0; i < n; ++i) v.push_back(gen() % 3 != 0);
      return v;
    };
    auto ml = bits(2 * 3), mr = bits(3 * 2), mo = bits(2 * 2);
    auto as_array = [](const std::vector<bool>& v, Shape s) {
      std::vector<double> d(v.begin(), v.end());
      return harness::from_doubles(d, s, bool_);
    };
    array y = block_masked_mm(a, b, bs, as_array(mo, {2, 2}), as_array(ml, {2, 3}),
                              as_array(mr, {3, 2}));
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < K; ++k)
        if (!ml[(i / bs) * 3 + k / bs]) va[i * K + k] = 0;
    for (int k = 0; k < K; ++k)
      for (int j = 0; j < N; ++j)
        if (!mr[(k / bs) * 2 + j / bs]) vb[k * N + j] = 0;
    auto want = mm(va.data(), vb.data(), M, K, N);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        if (!mo[(i / bs) * 2 + j / bs]) want[i * N + j] = 0;
    harness::expect_values(y, want, "boolean masks");
    // A floating output mask scales its tiles.
    array scale = harness::from_doubles({2, 0.5, -1, 3}, {2, 2}, float64);
    array z = block_masked_mm(a, b, bs, scale);
    auto full = mm(values_of(a).data(), values_of(b).data(), M, K, N);
    const double f[] = {2, 0.5, -1, 3};
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) full[i * N + j] *= f[(i / bs) * 2 + j / bs];
    harness::expect_values(z, full, "float output mask");
    EXPECT_THROW(block_masked_mm(a, b, 16), std::invalid_argument);
    EXPECT_THROW(block_masked_mm(a, b, 32, zeros({3, 2}, bool_)), std::invalid_argument);
  });
}

TEST(HadamardTransform, MatchesSylvestersMatrix) {
  grad_check::on_each_device([] {
    for (int n : {1, 2, 8, 64}) {
      array x = random_f64({3, n}, 12 + n);
      auto vx = values_of(x);
      std::vector<double> want(3 * n, 0.0);
      for (int r = 0; r < 3; ++r)
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            double h = (__builtin_popcount(i & j) % 2) ? -1.0 : 1.0;
            want[r * n + i] += h * vx[r * n + j] / std::sqrt(double(n));
          }
      harness::expect_values(hadamard_transform(x), want, "n = " + std::to_string(n), 1e-12);
      for (auto& w : want) w *= 2.0 * std::sqrt(double(n));
      harness::expect_values(hadamard_transform(x, 2.0f), want, "scale 2", 1e-12);
    }
    array i = array({1, 0, 0, 0}, int32);
    array h = hadamard_transform(i);
    EXPECT_EQ(h.dtype(), float32);
    harness::expect_values(h, {0.5, 0.5, 0.5, 0.5}, "integer input");
    EXPECT_THROW(hadamard_transform(zeros({2, 36})), std::invalid_argument);
    // m * 2^k: MLX's matrix of order 12 has the first row +-++++++++++ and is
    // used as kron(H_12, S_2) for 24.
    array h12 = hadamard_transform(eye(12), 1.0f);
    harness::expect_values(slice(h12, {0, 0}, {1, 12}), {1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                           "H_12 row 0");
    array h24 = hadamard_transform(eye(24), 1.0f);
    array want24 = reshape(multiply(reshape(h12, {12, 1, 12, 1}),
                                    reshape(array({1.f, 1.f, 1.f, -1.f}), {1, 2, 1, 2})),
                           {24, 24});
    EXPECT_TRUE(array_equal(h24, want24).item<bool>());
    EXPECT_THROW(hadamard_transform(array(1.0f)), std::invalid_argument);
  });
}

TEST(Products, DerivativesMatchFiniteDifferences) {
  using V = std::vector<array>;
  grad_check::on_each_device([] {
    grad_check::check_derivatives("vecdot", [](const V& x) { return V{vecdot(x[0], x[1])}; },
                                  {random_f64({3, 4}, 20), random_f64({4}, 21)});
    grad_check::check_derivatives("diff", [](const V& x) { return V{diff(x[0], 2, 0)}; },
                                  {random_f64({5, 3}, 22)});
    grad_check::check_derivatives(
        "gather_mm",
        [](const V& x) {
          return V{gather_mm(x[0], x[1], array({1, 0, 1}, int32), array({2, 2, 0}, int32))};
        },
        {random_f64({2, 3, 4}, 23), random_f64({3, 4, 2}, 24)});
    grad_check::check_derivatives(
        "segmented_mm",
        [](const V& x) { return V{segmented_mm(x[0], x[1], array({0, 2, 1, 4}, {2, 2}, int32))}; },
        {random_f64({3, 4}, 25), random_f64({4, 2}, 26)});
    grad_check::check_derivatives(
        "block_masked_mm",
        [](const V& x) {
          return V{block_masked_mm(x[0], x[1], 32, array({true, false}, {1, 2}))};
        },
        {random_f64({3, 5}, 27), random_f64({5, 40}, 28)});
    grad_check::check_derivatives("hadamard_transform",
                                  [](const V& x) { return V{hadamard_transform(x[0])}; },
                                  {random_f64({2, 8}, 29)});
  });
}

TEST(Products, VmapMatchesALoop) {
  using V = std::vector<array>;
  grad_check::on_each_device([] {
    grad_check::check_vmap("vecdot", [](const V& x) { return V{vecdot(x[0], x[1])}; },
                           {grad_check::integers_f64({4, 3}, 30), grad_check::integers_f64({3}, 31)},
                           {0, -1});
    grad_check::check_vmap("diff", [](const V& x) { return V{diff(x[0])}; },
                           {grad_check::integers_f64({3, 5}, 32)}, {1});
    grad_check::check_vmap("hadamard_transform",
                           [](const V& x) { return V{hadamard_transform(x[0], 1.0f)}; },
                           {grad_check::integers_f64({3, 4}, 33)}, {0});
    grad_check::check_vmap(
        "segmented_mm",
        [](const V& x) { return V{segmented_mm(x[0], x[1], array({0, 2, 2, 4}, {2, 2}, int32))}; },
        {grad_check::integers_f64({2, 3, 4}, 34), grad_check::integers_f64({4, 2}, 35)}, {0, -1});
  });
}
