// tessera::random: the Threefry generator against the Random123 known-answer
// vectors, the bits layout against a reference written here from
// ../shared/reference/random-algorithm.md, the samplers against values from
// MLX itself, distributions (moments, Kolmogorov-Smirnov) on large samples,
// transforms, and bad input.
//
// The MLX values were obtained with MLX 0.32.4 (PyPI wheel `mlx[cpu]` on
// Linux x86-64, CPU device) by a C++ program linked against its libmlx.so,
// printing e.g. mx::random::bits({5}, mx::random::key(0)) and
// mx::random::uniform({5}, mx::random::key(0)) (floats printed with %.9g).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>

#include "grad_check.h"
#include "harness.h"
#include "tessera/backend/common/threefry.h"

using namespace tessera;

namespace {

// ---- an independent reference of the generator --------------------------------

std::pair<uint32_t, uint32_t> ref_hash(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1) {
  auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  for (int i = 0; i < 5; ++i) {
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl(x1, rot[(i % 2) * 4 + r]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + uint32_t(i + 1);
  }
  return {x0, x1};
}

// The B bytes of one key, straight from the algorithm's statement.
std::vector<uint8_t> ref_bytes(uint32_t k0, uint32_t k1, size_t bytes) {
  size_t W = (bytes + 3) / 4, h = W / 2, odd = W % 2;
  std::vector<uint32_t> w(W);
  for (size_t j = 0; j < h; ++j) {
    auto [a, b] = ref_hash(k0, k1, uint32_t(j), uint32_t(j + h + odd));
    w[j] = a;
    w[j + h + odd] = b;
  }
  if (odd) w[h] = ref_hash(k0, k1, uint32_t(h), 0).first;
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = uint8_t(w[i / 4] >> (8 * (i % 4)));
  return out;
}

std::vector<uint8_t> bytes_of(const array& a) {
  array c = copy(a);
  eval(c);
  const uint8_t* p = c.data<uint8_t>();
  return std::vector<uint8_t>(p, p + c.nbytes());
}

template <typename T>
std::vector<T> host(const array& a) {
  array c = copy(a);
  eval(c);
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.size());
}

std::vector<double> doubles(const array& a) { return harness::to_doubles(a); }

array key_of(uint32_t k0, uint32_t k1) { return array({k0, k1}, uint32); }

void expect_close(const array& got, const std::vector<double>& want, double rtol,
                  const std::string& ctx) {
  auto g = doubles(got);
  ASSERT_EQ(g.size(), want.size()) << ctx;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(g[i], want[i], rtol * std::max(1.0, std::abs(want[i]))) << ctx << " element " << i;
  }
}

// Kolmogorov-Smirnov statistic of the samples against the CDF.
double ks_statistic(std::vector<double> x, const std::function<double(double)>& cdf) {
  std::sort(x.begin(), x.end());
  const double n = double(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double f = cdf(x[i]);
    d = std::max({d, f - double(i) / n, double(i + 1) / n - f});
  }
  return d;
}

// The KS statistic's critical value at significance 0.001.
double ks_limit(size_t n) { return 1.95 / std::sqrt(double(n)); }

double mean_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}
double var_of(const std::vector<double>& v) {
  double m = mean_of(v), s = 0;
  for (double e : v) s += (e - m) * (e - m);
  return s / double(v.size());
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

// ---- the generator ----------------------------------------------------------------

TEST(Random, ThreefryKnownAnswers) {
  // Random123's kat_vectors for threefry2x32 with 20 rounds: counter, key, output.
  struct Kat {
    uint32_t c0, c1, k0, k1, x0, x1;
  };
  const Kat kats[] = {
      {0, 0, 0, 0, 0x6b200159u, 0x99ba4efeu},
      {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x1cb996fcu, 0xbb002be7u},
      {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xc4923a9cu, 0x483df7a0u},
  };
  for (auto& k : kats) {
    auto [a, b] = ref_hash(k.k0, k.k1, k.c0, k.c1);
    EXPECT_EQ(a, k.x0);
    EXPECT_EQ(b, k.x1);
    auto p = threefry::hash(k.k0, k.k1, k.c0, k.c1);
    EXPECT_EQ(p.x0, k.x0);
    EXPECT_EQ(p.x1, k.x1);
  }
  // One word of key (0, 0) is the first half of hash(key, (0, 0)).
  grad_check::on_each_device([] {
    EXPECT_EQ(host<uint32_t>(random::bits({1}, key_of(0, 0)))[0], 0x6b200159u);
  });
}

TEST(Random, KeyIsTheSeedsHalves) {
  array k = random::key(0x123456789abcdef0ull);
  EXPECT_EQ(k.dtype(), uint32);
  EXPECT_EQ(k.shape(), Shape{2});
  EXPECT_EQ(host<uint32_t>(k), (std::vector<uint32_t>{0x12345678u, 0x9abcdef0u}));
  EXPECT_EQ(host<uint32_t>(random::key(42)), (std::vector<uint32_t>{0u, 42u}));
}

TEST(Random, BitsFollowTheAlgorithmForEveryWidthAndSize) {
  const std::pair<uint32_t, uint32_t> keys[] = {{0, 0}, {0, 42}, {0x12345678u, 0x9abcdef0u},
                                                {0xffffffffu, 1}};
  const std::vector<Shape> shapes = {{}, {0}, {1}, {2}, {3}, {5}, {7}, {8}, {9}, {2, 3}, {3, 0, 2},
                                     {4, 5, 3}, {1001}};
  grad_check::on_each_device([&] {
    for (auto [k0, k1] : keys) {
      for (int width : {1, 2, 4}) {
        for (const auto& shape : shapes) {
          array b = random::bits(shape, width, key_of(k0, k1));
          Dtype t = width == 1 ? uint8 : width == 2 ? uint16 : uint32;
          ASSERT_EQ(b.dtype(), t);
          ASSERT_EQ(b.shape(), shape);
          EXPECT_EQ(bytes_of(b), ref_bytes(k0, k1, shape_size(shape) * width))
              << "key (" << k0 << ", " << k1 << ") width " << width << " shape "
              << shape_str(shape);
        }
      }
    }
  });
}

TEST(Random, SameKeySameBitsOnEveryDevice) {
  array k = random::key(2024);
  auto cpu = bytes_of(random::bits({1 << 16, 3}, 4, k, Device::cpu));
  auto cpu8 = bytes_of(random::bits({12345}, 1, k, Device::cpu));
  for (auto d : harness::devices()) {
    EXPECT_EQ(bytes_of(random::bits({1 << 16, 3}, 4, k, d)), cpu);
    EXPECT_EQ(bytes_of(random::bits({12345}, 1, k, d)), cpu8);
    EXPECT_EQ(bytes_of(random::uniform({1000}, float32, k, d)),
              bytes_of(random::uniform({1000}, float32, k, Device::cpu)));
  }
}

// ---- against MLX 0.32.4 --------------------------------------------------------------

TEST(Random, MatchesMLXBitsAndSplit) {
  grad_check::on_each_device([] {
    array k0 = random::key(0), k42 = random::key(42), kb = random::key(0x123456789abcdef0ull);
    EXPECT_EQ(host<uint32_t>(random::bits({5}, k0)),
              (std::vector<uint32_t>{0x9312778b, 0x19850714, 0x64a626ec, 0xe4e8dfbe, 0x98b89669}));
    EXPECT_EQ(host<uint32_t>(random::bits({2, 3}, k42)),
              (std::vector<uint32_t>{0xbad56946, 0xde837c89, 0xdf4f11df, 0x354ba891, 0x2fc69b62,
                                     0x8cdb9797}));
    EXPECT_EQ(host<uint16_t>(random::bits({5}, 2, k0)),
              (std::vector<uint16_t>{0x4ea9, 0xf71f, 0xfb2c, 0x508e, 0x4081}));
    EXPECT_EQ(host<uint16_t>(random::bits({5}, 2, kb)),
              (std::vector<uint16_t>{0xe2fd, 0x612e, 0x1b65, 0x1910, 0x0e45}));
    EXPECT_EQ(host<uint8_t>(random::bits({7}, 1, k42)),
              (std::vector<uint8_t>{0x2d, 0xb3, 0xd7, 0x03, 0xf4, 0x83, 0xd0}));
    EXPECT_EQ(host<uint8_t>(random::bits({3}, 1, kb)), (std::vector<uint8_t>{0x79, 0x03, 0x28}));
    array s = random::split(kb, 3);
    EXPECT_EQ(s.shape(), (Shape{3, 2}));
    EXPECT_EQ(host<uint32_t>(s), (std::vector<uint32_t>{0x2d7ccf79, 0x5e5bb7de, 0x72e48ad1,
                                                        0xa683f6a8, 0x8064d3db, 0xc5b142d5}));
    // The pair form: rows 0 and 1 of split(key, 2) (MLX: split(key(0)) =
    // [[4146024105, 967050713], [2718843009, 1272950319]]).
    auto [a, b] = random::split(k0);
    EXPECT_EQ(host<uint32_t>(a), (std::vector<uint32_t>{4146024105u, 967050713u}));
    EXPECT_EQ(host<uint32_t>(b), (std::vector<uint32_t>{2718843009u, 1272950319u}));
    EXPECT_EQ(random::split(k0, 0).shape(), (Shape{0, 2}));
  });
}

TEST(Random, MatchesMLXSamplers) {
  grad_check::on_each_device([] {
    array k0 = random::key(0), k42 = random::key(42), kb = random::key(0x123456789abcdef0ull);
    expect_close(random::uniform({5}, k0),
                 {0.574500561, 0.0996860936, 0.393160284, 0.894178391, 0.596566558}, 1e-7,
                 "uniform");
    expect_close(random::uniform(-2.0f, 3.0f, {4}, float32, k42),
                 {0.870722055, 2.28318787, -1.70269406, -1.68822193}, 1e-7, "uniform(-2, 3)");
    array h = random::uniform({4}, float16, kb);
    EXPECT_EQ(h.dtype(), float16);
    expect_close(h, {0.379638672, 0.940429688, 0.657714844, 0.437011719}, 1e-8, "uniform float16");
    expect_close(random::normal({5}, k0),
                 {0.187844157, -1.28334212, -0.271091551, 1.24905992, 0.244470015}, 2e-6,
                 "normal");
    expect_close(random::normal({4}, 1.5f, 2.0f, kb),
                 {0.887051105, 4.61542225, 2.31363702, 1.18272889}, 2e-6, "normal(1.5, 2)");
    EXPECT_EQ(host<int32_t>(random::randint(-5, 7, {6}, int32, k0)),
              (std::vector<int32_t>{1, -4, 3, 5, 2, 0}));
    EXPECT_EQ(host<int32_t>(random::randint(-5, 7, {6}, int32, k42)),
              (std::vector<int32_t>{3, 5, 5, -3, -3, 1}));
    EXPECT_EQ(host<bool>(random::bernoulli(0.3f, {8}, k42)),
              (std::vector<bool>{0, 0, 1, 1, 0, 1, 1, 1}));
    EXPECT_EQ(host<bool>(random::bernoulli(0.3f, {8}, kb)),
              (std::vector<bool>{0, 0, 0, 1, 0, 0, 1, 1}));
    expect_close(random::truncated_normal(array(-1.0f), array(2.0f), {4}, float32, k0),
                 {1.63392067, -0.404372931, 0.458909094, -0.250056416}, 2e-6, "truncated_normal");
    expect_close(random::gumbel({4}, float32, k42),
                 {0.589013696, 1.86600649, -1.03759873, -1.02061534}, 2e-6, "gumbel");
    expect_close(random::laplace({4}, kb), {0.275432825, -2.12609935, -0.37959075, 0.134725213},
                 2e-6, "laplace");
    array logits = array({0.1f, 1.0f, -0.5f, 2.0f});
    EXPECT_EQ(host<uint32_t>(random::categorical(reshape(logits, {2, 2}), -1, k0)),
              (std::vector<uint32_t>{0, 1}));
    EXPECT_EQ(host<uint32_t>(random::categorical(logits, -1, Shape{6}, k42)),
              (std::vector<uint32_t>{3, 3, 3, 1, 1, 3}));
    EXPECT_EQ(host<uint32_t>(random::categorical(logits, -1, Shape{6}, kb)),
              (std::vector<uint32_t>{1, 2, 3, 3, 3, 3}));
    EXPECT_EQ(host<uint32_t>(random::categorical(logits, -1, 5, k42)),
              (std::vector<uint32_t>{3, 3, 1, 1, 1}));
    array l2 = array({0.1f, 1.0f, -0.5f, 2.0f, 0.3f, 0.2f, 0.1f, 0.0f}, {2, 4});
    EXPECT_EQ(host<uint32_t>(random::categorical(l2, -1, 3, k42)),
              (std::vector<uint32_t>{3, 3, 3, 1, 3, 0}));
    array by_column = random::categorical(l2, 0, 3, k42);
    EXPECT_EQ(by_column.shape(), (Shape{4, 3}));
    EXPECT_EQ(host<uint32_t>(by_column),
              (std::vector<uint32_t>{0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0}));
    EXPECT_EQ(host<uint32_t>(random::permutation(8, k0)),
              (std::vector<uint32_t>{4, 6, 1, 2, 0, 7, 3, 5}));
    EXPECT_EQ(host<uint32_t>(random::permutation(8, kb)),
              (std::vector<uint32_t>{7, 3, 6, 1, 2, 5, 0, 4}));
    // MLX: multivariate_normal(zeros(2), eye(2), (3,), key(0)) draws normal((3, 2)).
    expect_close(random::multivariate_normal(zeros({2}), eye(2), {3}, float32, k0),
                 {0.187844157, -1.28334212, 0.649418294, 1.24905992, 0.24447001, -0.117449418},
                 2e-6, "multivariate_normal identity");
  });
}

TEST(Random, GlobalKeyMatchesMLXAfterSeed) {
  random::seed(7);
  expect_close(random::uniform({3}), {0.0777458325, 0.174454302, 0.83264631}, 1e-7, "first");
  expect_close(random::uniform({3}), {0.584717035, 0.436813712, 0.706478179}, 1e-7, "second");
  random::seed(7);
  expect_close(random::uniform({3}), {0.0777458325, 0.174454302, 0.83264631}, 1e-7, "reseeded");
}

// ---- dtypes, layouts, shapes ------------------------------------------------------------

TEST(Random, UniformEveryFloatDtypeInRange) {
  grad_check::on_each_device([] {
    array k = random::key(5);
    for (Dtype t : harness::float_types()) {
      array u = random::uniform(array(-3.0f), array(2.0f), {4000}, t, k);
      EXPECT_EQ(u.dtype(), t);
      auto v = doubles(u);
      for (double e : v) {
        ASSERT_GE(e, -3.0) << dtype_name(t);
        ASSERT_LT(e, 2.0) << dtype_name(t);
      }
      EXPECT_NEAR(mean_of(v), -0.5, 0.1) << dtype_name(t);
    }
    // Array bounds broadcast to the shape; transposed and broadcast views as bounds.
    array lo = transpose(array({0.0f, 10.0f, 20.0f, 30.0f, 40.0f, 50.0f}, {3, 2}));  // (2, 3)
    array hi = broadcast_to(array({1.0f, 11.0f, 21.0f}, {1, 3}), {2, 3});
    auto v = doubles(random::uniform(lo, add(lo, array(1.0f)), {4, 2, 3}, float32, k));
    auto lov = doubles(lo);
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_GE(v[i], lov[i % 6]);
      EXPECT_LT(v[i], lov[i % 6] + 1);
    }
    EXPECT_EQ(random::uniform(array(0.0f), hi, {2, 3}, float32, k).shape(), (Shape{2, 3}));
  });
}

TEST(Random, KeyViewsGiveTheSameNumbers) {
  grad_check::on_each_device([] {
    array keys = random::split(random::key(9), 4);  // (4, 2)
    array row = reshape(slice(keys, {2, 0}, {3, 2}), {2});
    array dense = array(host<uint32_t>(row).begin(), {2}, uint32);
    EXPECT_EQ(bytes_of(random::bits({33}, row)), bytes_of(random::bits({33}, dense)));
    array col = slice(transpose(keys), {0, 1}, {2, 2});  // a strided (2, 1) view
    array strided = reshape(col, {2});
    EXPECT_EQ(bytes_of(random::normal({10}, strided)),
              bytes_of(random::normal({10}, reshape(slice(keys, {1, 0}, {2, 2}), {2}))));
  });
}

TEST(Random, RandintEveryIntegerDtype) {
  grad_check::on_each_device([] {
    array k = random::key(11);
    for (Dtype t : harness::int_types()) {
      array r = random::randint(3, 100, {3000}, t, k);
      EXPECT_EQ(r.dtype(), t);
      auto v = doubles(r);
      std::set<double> seen(v.begin(), v.end());
      EXPECT_EQ(*seen.begin(), 3) << dtype_name(t);
      EXPECT_EQ(*seen.rbegin(), 99) << dtype_name(t);
      for (double e : v) ASSERT_EQ(e, std::floor(e));
      EXPECT_EQ(seen.size(), 97u) << dtype_name(t);
    }
    auto b = host<bool>(random::randint(0, 2, {1000}, bool_, k));
    int ones = int(std::count(b.begin(), b.end(), true));
    EXPECT_GT(ones, 400);
    EXPECT_LT(ones, 600);
    // Negative ranges floor (not truncate) and stay in [low, high).
    auto neg = doubles(random::randint(-7, -2, {2000}, int64, k));
    std::set<double> s(neg.begin(), neg.end());
    EXPECT_EQ(s, (std::set<double>{-7, -6, -5, -4, -3}));
    // MLX's result when low >= high: every value is low.
    EXPECT_EQ(host<int32_t>(random::randint(5, 3, {3}, int32, k)),
              (std::vector<int32_t>{5, 5, 5}));
  });
}

TEST(Random, NormalEveryDtypeAndComplex) {
  grad_check::on_each_device([] {
    array k = random::key(12);
    for (Dtype t : harness::float_types()) {
      array z = random::normal({20000}, t, k);
      EXPECT_EQ(z.dtype(), t);
      auto v = doubles(z);
      EXPECT_NEAR(mean_of(v), 0, 0.03) << dtype_name(t);
      EXPECT_NEAR(var_of(v), 1, 0.04) << dtype_name(t);
    }
    array c = random::normal({20000}, complex64, k);
    EXPECT_EQ(c.dtype(), complex64);
    auto re = doubles(real(c)), im = doubles(imag(c));
    EXPECT_NEAR(var_of(re), 0.5, 0.03);
    EXPECT_NEAR(var_of(im), 0.5, 0.03);
    // Its parts are erfinv of the uniform drawn for shape + (2,).
    auto u = doubles(erfinv(random::uniform(array(std::nextafter(-1.0f, 0.0f)), array(1.0f),
                                            {20000, 2}, float32, k)));
    for (size_t i = 0; i < 100; ++i) {
      EXPECT_EQ(re[i], u[2 * i]);
      EXPECT_EQ(im[i], u[2 * i + 1]);
    }
    // loc and scale arrays broadcast.
    auto s = doubles(random::normal({2, 20000}, float32, array({10.0f, -10.0f}, {2, 1}),
                                    array(0.5f), k));
    std::vector<double> first(s.begin(), s.begin() + 20000), second(s.begin() + 20000, s.end());
    EXPECT_NEAR(mean_of(first), 10, 0.02);
    EXPECT_NEAR(mean_of(second), -10, 0.02);
    EXPECT_NEAR(var_of(first), 0.25, 0.01);
  });
}

// ---- distributions ------------------------------------------------------------------------

TEST(Random, DistributionsPassKolmogorovSmirnov) {
  const size_t n = 200000;
  grad_check::on_each_device([&] {
    array k = random::key(31337);
    auto u = doubles(random::uniform({int(n)}, k));
    EXPECT_LT(ks_statistic(u, [](double x) { return std::clamp(x, 0.0, 1.0); }), ks_limit(n));
    EXPECT_NEAR(mean_of(u), 0.5, 0.003);
    EXPECT_NEAR(var_of(u), 1.0 / 12, 0.001);

    auto z = doubles(random::normal({int(n)}, random::key(1)));
    EXPECT_LT(ks_statistic(z, normal_cdf), ks_limit(n));
    EXPECT_NEAR(mean_of(z), 0, 0.01);
    EXPECT_NEAR(var_of(z), 1, 0.01);

    const double a = -0.5, b = 1.5;
    auto t = doubles(random::truncated_normal(array(float(a)), array(float(b)), {int(n)}, float32,
                                              random::key(2)));
    for (double e : t) {
      ASSERT_GE(e, a);
      ASSERT_LE(e, b);
    }
    const double za = normal_cdf(a), zb = normal_cdf(b);
    EXPECT_LT(ks_statistic(t, [&](double x) { return (normal_cdf(x) - za) / (zb - za); }),
              ks_limit(n));

    auto g = doubles(random::gumbel({int(n)}, float32, random::key(3)));
    EXPECT_LT(ks_statistic(g, [](double x) { return std::exp(-std::exp(-x)); }), ks_limit(n));
    EXPECT_NEAR(mean_of(g), 0.5772156649, 0.01);
    EXPECT_NEAR(var_of(g), M_PI * M_PI / 6, 0.03);

    const double loc = 1.0, scale = 2.0;
    auto l = doubles(random::laplace({int(n)}, float32, float(loc), float(scale), random::key(4)));
    auto laplace_cdf = [&](double x) {
      double y = (x - loc) / scale;
      return y < 0 ? 0.5 * std::exp(y) : 1 - 0.5 * std::exp(-y);
    };
    EXPECT_LT(ks_statistic(l, laplace_cdf), ks_limit(n));
    EXPECT_NEAR(mean_of(l), loc, 0.03);
    EXPECT_NEAR(var_of(l), 2 * scale * scale, 0.1);
  });
}

TEST(Random, BernoulliFrequencies) {
  grad_check::on_each_device([] {
    const int n = 100000;
    for (float p : {0.0f, 0.1f, 0.5f, 0.9f, 1.0f}) {
      array b = random::bernoulli(p, {n}, random::key(7));
      EXPECT_EQ(b.dtype(), bool_);
      auto v = host<bool>(b);
      double f = double(std::count(v.begin(), v.end(), true)) / n;
      EXPECT_NEAR(f, p, 4 * std::sqrt(p * (1 - p) / n) + 1e-9) << "p = " << p;
    }
    // p broadcast over the shape (one probability per column), p's shape by default.
    auto v = host<bool>(random::bernoulli(array({0.2f, 0.8f}), {n, 2}, random::key(8)));
    double c0 = 0, c1 = 0;
    for (int i = 0; i < n; ++i) {
      c0 += v[2 * i];
      c1 += v[2 * i + 1];
    }
    EXPECT_NEAR(c0 / n, 0.2, 0.006);
    EXPECT_NEAR(c1 / n, 0.8, 0.006);
    EXPECT_EQ(random::bernoulli(array({0.2f, 0.8f}, float64), random::key(1)).shape(), Shape{2});
    EXPECT_EQ(random::bernoulli().shape(), Shape{});
    EXPECT_EQ(random::bernoulli(std::optional<array>(random::key(1))).shape(), Shape{});
  });
}

TEST(Random, CategoricalFrequencies) {
  grad_check::on_each_device([] {
    const std::vector<float> lg = {0.0f, 1.0f, -1.0f, 2.0f};
    std::vector<double> p(4);
    double z = 0;
    for (int i = 0; i < 4; ++i) z += std::exp(lg[i]);
    for (int i = 0; i < 4; ++i) p[i] = std::exp(lg[i]) / z;
    const int n = 100000;
    auto check = [&](const array& draws, const std::string& ctx) {
      EXPECT_EQ(draws.dtype(), uint32) << ctx;
      auto v = host<uint32_t>(draws);
      std::vector<double> f(4, 0);
      for (auto e : v) {
        ASSERT_LT(e, 4u) << ctx;
        f[e] += 1.0 / double(v.size());
      }
      for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(f[i], p[i], 4 * std::sqrt(p[i] * (1 - p[i]) / double(v.size()))) << ctx;
      }
    };
    array logits(lg.begin(), {4}, float32);
    check(random::categorical(logits, -1, Shape{n}, random::key(1)), "1-D, shape (inverse CDF)");
    check(random::categorical(logits, 0, n, random::key(2)), "num_samples");
    // Gumbel-max along axis 0 of (4, n) logits (a broadcast view).
    array wide = broadcast_to(reshape(logits, {4, 1}), {4, n});
    array d = random::categorical(wide, 0, random::key(3));
    EXPECT_EQ(d.shape(), Shape{n});
    check(d, "axis 0 of broadcast logits");
    EXPECT_EQ(random::categorical(reshape(logits, {1, 4}), -1, 7, random::key(1)).shape(),
              (Shape{1, 7}));
    EXPECT_EQ(random::categorical(reshape(logits, {1, 4}), 1, Shape{5, 1}, random::key(1)).shape(),
              (Shape{5, 1}));
  });
}

TEST(Random, PermutationIsAPermutation) {
  grad_check::on_each_device([] {
    for (int n : {0, 1, 2, 17, 500}) {
      auto p = host<uint32_t>(random::permutation(n, random::key(n)));
      ASSERT_EQ(int(p.size()), n);
      std::vector<uint32_t> sorted = p, want(n);
      std::sort(sorted.begin(), sorted.end());
      std::iota(want.begin(), want.end(), 0u);
      EXPECT_EQ(sorted, want) << "n = " << n;
    }
    // The order is the stable argsort of bits((n,)).
    auto b = host<uint32_t>(random::bits({300}, random::key(77)));
    std::vector<uint32_t> order(300);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t i, uint32_t j) { return b[i] < b[j]; });
    EXPECT_EQ(host<uint32_t>(random::permutation(300, random::key(77))), order);
    // An array (a transposed view) shuffled along an axis: its rows in that order.
    array x = transpose(reshape(arange(0, 12), {3, 4}));  // (4, 3)
    auto perm = host<uint32_t>(random::permutation(4, random::key(5)));
    auto got = host<int32_t>(random::permutation(x, 0, random::key(5)));
    auto xv = host<int32_t>(x);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 3; ++c) EXPECT_EQ(got[r * 3 + c], xv[perm[r] * 3 + c]);
    }
    auto cols = host<int32_t>(random::permutation(x, -1, random::key(5)));
    auto perm3 = host<uint32_t>(random::permutation(3, random::key(5)));
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 3; ++c) EXPECT_EQ(cols[r * 3 + c], xv[r * 3 + perm3[c]]);
    }
  });
}

TEST(Random, MultivariateNormalMoments) {
  grad_check::on_each_device([] {
    array mean = array({1.0f, -2.0f, 0.5f});
    array cov = array({2.0f, 0.6f, 0.2f, 0.6f, 1.0f, -0.3f, 0.2f, -0.3f, 0.5f}, {3, 3});
    const int n = 100000;
    array x = random::multivariate_normal(mean, cov, {n}, float32, random::key(21));
    EXPECT_EQ(x.shape(), (Shape{n, 3}));
    auto v = doubles(x);
    auto cv = doubles(cov);
    double m[3] = {0, 0, 0};
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < 3; ++j) m[j] += v[3 * i + j] / n;
    }
    EXPECT_NEAR(m[0], 1.0, 0.02);
    EXPECT_NEAR(m[1], -2.0, 0.02);
    EXPECT_NEAR(m[2], 0.5, 0.02);
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        double c = 0;
        for (int i = 0; i < n; ++i) c += (v[3 * i + a] - m[a]) * (v[3 * i + b] - m[b]) / n;
        EXPECT_NEAR(c, cv[3 * a + b], 0.03) << a << "," << b;
      }
    }
    // Batches of means and covariances broadcast with shape; a singular PSD cov works.
    array means = array({0.0f, 0.0f, 5.0f, 5.0f}, {2, 2});
    array sing = array({1.0f, 1.0f, 1.0f, 1.0f}, {2, 2});
    auto y = doubles(random::multivariate_normal(means, sing, {4, 2}, float32, random::key(3)));
    ASSERT_EQ(y.size(), 16u);
    for (int i = 0; i < 8; ++i) {
      EXPECT_NEAR(y[2 * i], y[2 * i + 1], 1e-5);  // both coordinates are the same draw
      EXPECT_TRUE(std::isfinite(y[2 * i]));
    }
  });
}

// ---- transforms ------------------------------------------------------------------------------

TEST(Random, VmapOverKeys) {
  grad_check::on_each_device([] {
    array keys = random::split(random::key(3), 5);
    grad_check::check_vmap(
        "bits", grad_check::lift([](const array& k) { return random::bits({3, 2}, k); }), {keys},
        {0});
    grad_check::check_vmap(
        "bits width 1", grad_check::lift([](const array& k) { return random::bits({7}, 1, k); }),
        {keys}, {0});
    grad_check::check_vmap(
        "uniform", grad_check::lift([](const array& k) { return random::uniform({4}, k); }),
        {keys}, {0});
    grad_check::check_vmap(
        "normal (keys along axis 1)",
        grad_check::lift([](const array& k) { return random::normal({4}, k); }),
        {transpose(keys)}, {1});
    grad_check::check_vmap(
        "split", grad_check::lift([](const array& k) { return random::split(k, 3); }), {keys},
        {0});
  });
}

TEST(Random, DerivativesThroughTheAffineParts) {
  grad_check::on_each_device([] {
    array k = random::key(4);
    grad_check::check_derivatives(
        "uniform bounds",
        grad_check::vec([&](const std::vector<array>& in) {
          return random::uniform(in[0], in[1], {3, 4}, float64, k);
        }),
        {grad_check::random_f64({4}, 1, -2, -1), grad_check::random_f64({3, 4}, 2, 1, 2)});
    grad_check::check_derivatives(
        "normal loc and scale",
        grad_check::vec([&](const std::vector<array>& in) {
          return random::normal({3, 2}, float64, in[0], in[1], k);
        }),
        {grad_check::random_f64({2}, 3), grad_check::random_f64({3, 1}, 4, 0.5, 2)});
    // d uniform / d low = 1 - u, d / d high = u, with u the draw on [0, 1).
    array u = random::uniform({6}, float64, k);
    auto [val, g] = value_and_grad(
        [&](const std::vector<array>& in) {
          return std::vector<array>{sum(random::uniform(in[0], in[1], {6}, float64, k))};
        },
        std::vector<int>{0, 1})({array(2.0, float64), array(5.0, float64)});
    double su = 0;
    for (double e : doubles(u)) su += e;
    EXPECT_NEAR(g[0].item<double>(), 6 - su, 1e-12);
    EXPECT_NEAR(g[1].item<double>(), su, 1e-12);
    // The bits have zero derivative w.r.t. the key.
    auto [outs, cot] = vjp(
        [](const std::vector<array>& in) {
          return std::vector<array>{astype(random::bits({4}, in[0]), float32)};
        },
        {k}, {ones({4})});
    EXPECT_EQ(host<uint32_t>(cot[0]), (std::vector<uint32_t>{0, 0}));
  });
}

// ---- bad input ------------------------------------------------------------------------------

TEST(Random, BadInputGivesClearErrors) {
  array k = random::key(0);
  auto throws_with = [](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "expected an error mentioning " << part;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  throws_with([&] { random::bits({3}, array({1u, 2u, 3u}, uint32)); }, "[bits] expected a key of shape (2,)");
  throws_with([&] { random::bits({3}, array({1, 2}, int32)); }, "[bits] expected a key of dtype uint32");
  throws_with([&] { random::uniform({3}, zeros({1, 2}, uint32)); }, "key of shape (2,), got (1,2)");
  throws_with([&] { random::split(zeros({3}, uint32)); }, "[split]");
  throws_with([&] { random::bits({3}, 3, k); }, "width must be 1, 2 or 4");
  throws_with([&] { random::bits({-1}, k); }, "negative dimensions");
  throws_with([&] { random::uniform({3}, int32, k); }, "[uniform]");
  throws_with([&] { random::uniform(zeros({2}), array(1.0f), {3}, float32, k); }, "[uniform]");
  throws_with([&] { random::uniform(zeros({3}), array(1.0f), {1}, float32, k); }, "[uniform]");
  throws_with([&] { random::normal({3}, int32, k); }, "[normal]");
  throws_with([&] { random::randint(0, 3, {3}, float32, k); }, "[randint]");
  throws_with([&] { random::bernoulli(array(1), {3}, k); }, "[bernoulli]");
  throws_with([&] { random::bernoulli(zeros({4}), {3}, k); }, "[bernoulli]");
  throws_with([&] { random::truncated_normal(array(0.0f), array(1.0f), {3}, int32, k); },
              "[truncated_normal]");
  throws_with([&] { random::gumbel({3}, int32, k); }, "[gumbel]");
  throws_with([&] { random::laplace({3}, int32, k); }, "[laplace]");
  throws_with([&] { random::categorical(zeros({2, 4}), -1, Shape{3}, k); }, "[categorical]");
  throws_with([&] { random::permutation(-1, k); }, "[permutation]");
  throws_with([&] { random::multivariate_normal(zeros({2}), eye(2), {}, float16, k); },
              "dtype must be float32");
  throws_with([&] { random::multivariate_normal(zeros({3}), eye(2), {}, float32, k); },
              "[multivariate_normal]");
  throws_with([&] { random::multivariate_normal(zeros({2}), zeros({2, 3}), {}, float32, k); },
              "[multivariate_normal]");
  EXPECT_THROW(random::categorical(zeros({2, 4}), 2, k), std::out_of_range);
  EXPECT_THROW(random::permutation(zeros({2, 4}), -3, k), std::out_of_range);
}
