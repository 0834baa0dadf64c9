// Quantization: quantize / dequantize against a float64-free reference of the
// affine formula written here (packed words compared exactly, bit by bit),
// hand-packed words for 2, 3, 4 and 8 bits, the dequantization error bound,
// quantized_matmul against x @ W^T computed here in double, derivatives
// against finite differences, vmap against a loop, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using grad_check::random_f64;

namespace {

const int kBits[] = {2, 3, 4, 5, 6, 8};
const int kGroups[] = {32, 64, 128};

std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

template <typename T>
std::vector<T> host_values(const array& a) {
  array c = copy(a);
  eval(c);
  return std::vector<T>(c.data<T>(), c.data<T>() + c.size());
}

// The reference: MLX's affine rule in float32 (the scale nudged so that the
// extreme of larger magnitude is exact), round half to even, values written
// into the words one bit at a time.
struct Reference {
  std::vector<uint32_t> words;
  std::vector<float> scales, biases;
};

Reference quantize_reference(const std::vector<float>& w, int rows, int K, int g, int bits) {
  Reference r;
  const int groups = K / g;
  const uint32_t top = (1u << bits) - 1;
  r.words.assign(static_cast<size_t>(rows) * K * bits / 32, 0u);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < groups; ++j) {
      const float* x = &w[static_cast<size_t>(i) * K + j * g];
      float lo = x[0], hi = x[0];
      for (int k = 0; k < g; ++k) lo = std::min(lo, x[k]), hi = std::max(hi, x[k]);
      const bool low_edge = std::abs(lo) > std::abs(hi);
      float s = std::max((hi - lo) / static_cast<float>(top), 1e-7f);
      if (!low_edge) s = -s;
      const float edge = low_edge ? lo : hi;
      const float q0 = std::nearbyint(edge / s);
      float bias = 0.f;
      if (q0 != 0.f) s = edge / q0, bias = edge;
      r.scales.push_back(s);
      r.biases.push_back(bias);
      for (int k = 0; k < g; ++k) {
        const float v = std::nearbyint((x[k] - bias) / s);
        const uint32_t q = v <= 0 ? 0 : v >= top ? top : static_cast<uint32_t>(v);
        const int64_t first = (static_cast<int64_t>(i) * K + j * g + k) * bits;
        for (int b = 0; b < bits; ++b) {
          if ((q >> b) & 1u) r.words[(first + b) / 32] |= 1u << ((first + b) % 32);
        }
      }
    }
  }
  return r;
}

// W (rows, values) as doubles from the packed words, scales and biases.
std::vector<double> dequantize_reference(const std::vector<uint32_t>& words,
                                         const std::vector<double>& scales,
                                         const std::vector<double>& biases, int rows, int values,
                                         int g, int bits) {
  std::vector<double> out(static_cast<size_t>(rows) * values);
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < values; ++k) {
      const int64_t first = (static_cast<int64_t>(i) * values + k) * bits;
      uint32_t q = 0;
      for (int b = 0; b < bits; ++b) q |= ((words[(first + b) / 32] >> ((first + b) % 32)) & 1u) << b;
      const size_t gi = static_cast<size_t>(i) * (values / g) + k / g;
      out[static_cast<size_t>(i) * values + k] = scales[gi] * q + biases[gi];
    }
  }
  return out;
}

std::vector<double> as_doubles(const array& a) { return harness::to_doubles(a); }

}  // namespace

TEST(Quantize, PackedWordsScalesAndBiasesMatchTheReference) {
  const int rows = 3, K = 256;
  auto v = random_floats(rows * K, 1);
  array w(v.begin(), {rows, K}, float32);
  for (Device d : harness::devices()) {
    for (int bits : kBits) {
      for (int g : kGroups) {
        SCOPED_TRACE("bits " + std::to_string(bits) + " group_size " + std::to_string(g));
        auto q = quantize(w, g, bits, "affine", std::nullopt, d);
        ASSERT_EQ(q.size(), 3u);
        EXPECT_EQ(q[0].shape(), (Shape{rows, K * bits / 32}));
        EXPECT_EQ(q[0].dtype(), uint32);
        EXPECT_EQ(q[1].shape(), (Shape{rows, K / g}));
        EXPECT_EQ(q[1].dtype(), float32);
        EXPECT_EQ(q[2].shape(), (Shape{rows, K / g}));
        auto ref = quantize_reference(v, rows, K, g, bits);
        EXPECT_EQ(host_values<uint32_t>(q[0]), ref.words);
        EXPECT_EQ(host_values<float>(q[1]), ref.scales);
        EXPECT_EQ(host_values<float>(q[2]), ref.biases);
      }
    }
  }
}

TEST(Quantize, HandPackedWords) {
  // One group of 32 values from 0 to m = 2^bits - 1: the larger extreme is m,
  // so (MLX's rule) the scale is -1 and the bias m, and q = m - value. The
  // words are those MLX 0.32.4 gives.
  auto words_of = [](std::vector<float> v, int bits, float m) {
    array w(v.begin(), {1, 32}, float32);
    auto q = quantize(w, 32, bits);
    EXPECT_EQ(host_values<float>(q[1]), std::vector<float>{-1.f});
    EXPECT_EQ(host_values<float>(q[2]), std::vector<float>{m});
    return host_values<uint32_t>(q[0]);
  };
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i % 16);
  EXPECT_EQ(words_of(v, 4, 15), (std::vector<uint32_t>{0x89ABCDEFu, 0x01234567u, 0x89ABCDEFu,
                                                       0x01234567u}));
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i % 4);
  EXPECT_EQ(words_of(v, 2, 3), (std::vector<uint32_t>{0x1B1B1B1Bu, 0x1B1B1B1Bu}));
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i % 8);
  // 7..0 in 3 bits is the 24-bit 0x053977; the next value straddles words.
  EXPECT_EQ(words_of(v, 3, 7), (std::vector<uint32_t>{0x77053977u, 0x39770539u, 0x05397705u}));
  std::vector<float> b(32, 0.f);
  b[0] = 1, b[1] = 2, b[2] = 3, b[3] = 255, b[5] = 7;
  auto w8 = words_of(b, 8, 255);
  ASSERT_EQ(w8.size(), 8u);
  EXPECT_EQ(w8[0], 0x00FCFDFEu);
  EXPECT_EQ(w8[1], 0xFFFFF8FFu);
  // The larger extreme at the bottom: -1 .. 0.5 in 4 bits gives scale 0.1
  // (-1 / -10), bias -1.
  std::vector<float> l(32);
  for (int i = 0; i < 32; ++i) l[i] = -1.f + 1.5f * static_cast<float>(i) / 31.f;
  auto q = quantize(array(l.begin(), {1, 32}, float32), 32, 4);
  EXPECT_EQ(host_values<float>(q[1]), std::vector<float>{0.1f});
  EXPECT_EQ(host_values<float>(q[2]), std::vector<float>{-1.f});
  // A group of zeros: the scale is the floor 1e-7, negated; the bias 0.
  auto z = quantize(zeros({1, 32}), 32, 4);
  EXPECT_EQ(host_values<float>(z[1]), std::vector<float>{-1e-7f});
  EXPECT_EQ(host_values<float>(z[2]), std::vector<float>{0.f});
  EXPECT_EQ(host_values<uint32_t>(z[0]), (std::vector<uint32_t>{0, 0, 0, 0}));
}

TEST(Quantize, DequantizeIsWithinTheNudgedScale) {
  const int rows = 4, K = 128;
  for (Device d : harness::devices()) {
    for (Dtype t : {float32, float16, bfloat16, float64}) {
      auto v = random_floats(rows * K, 2, -3.f, 2.f);
      array w = astype(array(v.begin(), {rows, K}, float32), t);
      auto wv = as_doubles(w);
      for (int bits : kBits) {
        for (int g : kGroups) {
          SCOPED_TRACE(dtype_name(t) + " bits " + std::to_string(bits) + " group_size " +
                       std::to_string(g));
          auto q = quantize(w, g, bits, "affine", std::nullopt, d);
          array back = dequantize(q[0], q[1], q[2], g, bits, "affine", std::nullopt, std::nullopt, d);
          EXPECT_EQ(back.dtype(), t);
          EXPECT_EQ(back.shape(), w.shape());
          auto bv = as_doubles(back), sv = as_doubles(q[1]), zv = as_doubles(q[2]);
          auto want = dequantize_reference(host_values<uint32_t>(q[0]), sv, zv, rows, K, g, bits);
          // Rounding of the result to t, and of the scale to t (16-bit floats).
          double slack = harness::rtol_for(t);
          int failures = 0;
          for (size_t i = 0; i < bv.size() && failures < 3; ++i) {
            double s = std::abs(sv[i / g]);
            double mag = s * ((1 << bits) - 1) + std::abs(zv[i / g]) + std::abs(wv[i]);
            if (std::abs(bv[i] - want[i]) > slack * mag + 1e-12 ||
                std::abs(bv[i] - wv[i]) > 1.5 * s + slack * mag + 1e-9) {
              ADD_FAILURE() << "element " << i << ": w " << wv[i] << " dequantized " << bv[i]
                            << " reference " << want[i] << " scale " << s;
              ++failures;
            }
          }
        }
      }
    }
  }
}

TEST(Quantize, DequantizeDtypeAndConstantGroups) {
  array w = ones({2, 64}, float32);
  auto q = quantize(w);  // group_size 64, bits 4
  EXPECT_EQ(q[0].shape(), (Shape{2, 8}));
  // A constant group of ones: the scale floor 1e-7, negated, nudged to
  // 1 / round(1 / -1e-7); the bias 1 (MLX gives -1e-07 and 1).
  const float s = 1.f / std::nearbyint(1.f / -1e-7f);
  EXPECT_EQ(host_values<float>(q[1]), (std::vector<float>{s, s}));
  EXPECT_EQ(host_values<float>(q[2]), (std::vector<float>{1.f, 1.f}));
  array back = dequantize(q[0], q[1], q[2], std::nullopt, std::nullopt, "affine", std::nullopt,
                          float16);
  EXPECT_EQ(back.dtype(), float16);
  for (double x : as_doubles(back)) EXPECT_EQ(x, 1.0);
}

namespace {

// y = x @ W^T (transpose) or x @ W in double, W (rows, values) from `deq`.
std::vector<double> matmul_reference(const std::vector<double>& x, int64_t M, int64_t K,
                                     const std::vector<double>& W, int64_t N, bool transpose) {
  std::vector<double> y(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += x[m * K + k] * (transpose ? W[n * K + k] : W[k * N + n]);
      y[m * N + n] = acc;
    }
  }
  return y;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                  const std::string& ctx) {
  ASSERT_EQ(got.size(), want.size()) << ctx;
  double scale = 1e-6;
  for (double v : want) scale = std::max(scale, std::abs(v));
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 3; ++i) {
    if (!(std::abs(got[i] - want[i]) <= rtol * scale)) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << got[i] << ", want " << want[i];
      ++failures;
    }
  }
}

}  // namespace

TEST(QuantizedMatmul, MatchesTheProductWithTheDequantizedMatrix) {
  for (Device d : harness::devices()) {
    for (bool transpose : {true, false}) {
      for (int bits : {3, 4, 8}) {
        for (Dtype t : {float32, float16, bfloat16, float64}) {
          const int g = 64, K = 128, N = 96;
          // transpose: w holds W (N, K); else W (K, N).
          const int rows = transpose ? N : K, values = transpose ? K : N;
          if (values % g) continue;
          SCOPED_TRACE(std::string(d == Device::cpu ? "cpu" : "gpu") + " transpose " +
                       (transpose ? "true" : "false") + " bits " + std::to_string(bits) + " " +
                       dtype_name(t));
          array wf = astype(random_f64({rows, values}, 3), t);
          auto q = quantize(wf, g, bits, "affine", std::nullopt, d);
          auto W = as_doubles(dequantize(q[0], q[1], q[2], g, bits, "affine", std::nullopt,
                                         float64, d));
          for (Shape xs : {Shape{3, K}, Shape{2, 3, K}, Shape{K}, Shape{0, K}, Shape{4, 10, K}}) {
            array x = astype(random_f64(xs, 4), t);
            array y = quantized_matmul(x, q[0], q[1], q[2], transpose, g, bits, "affine", d);
            Shape want_shape = xs;
            want_shape.back() = N;
            EXPECT_EQ(y.shape(), want_shape);
            EXPECT_EQ(y.dtype(), t);
            int64_t M = static_cast<int64_t>(x.size()) / K;
            auto want = matmul_reference(as_doubles(x), M, K, W, N, transpose);
            expect_close(as_doubles(y), want, t == float64 ? 1e-12 : harness::rtol_for(t) * 4,
                         "x " + shape_str(xs));
          }
        }
      }
    }
  }
}

// Every bits, group size and dtype, with row counts around the small-M
// kernels' bounds (8 and 16 rows) and on both sides of them, for both layouts.
// With transpose, K = 1152 is two 512-value steps and a 128-value tail for 4
// bits (other bits: other step counts), and N = 76 ends inside an n8 tile.
TEST(QuantizedMatmul, EveryBitsGroupDtypeAndRowCount) {
  const int row_counts[] = {1, 2, 3, 7, 8, 15, 16, 17, 64};
  for (bool transpose : {true, false}) {
    const int K = transpose ? 1152 : 256, N = transpose ? 76 : 384;
    const int rows = transpose ? N : K, values = transpose ? K : N;
    for (int bits : kBits) {
      for (int g : kGroups) {
        for (Dtype t : harness::float_types()) {
          const uint64_t seed = bits * 1000 + g * 10 + static_cast<int>(t.val);
          array wf = astype(random_f64({rows, values}, seed), t);
          auto q = quantize(wf, g, bits, "affine", std::nullopt, Device::cpu);
          auto W = as_doubles(dequantize(q[0], q[1], q[2], g, bits, "affine", std::nullopt,
                                         float64, Device::cpu));
          for (Device d : harness::devices()) {
            for (int M : row_counts) {
              const std::string ctx = std::string(d == Device::cpu ? "cpu" : "gpu") +
                                      " transpose " + (transpose ? "true" : "false") + " bits " +
                                      std::to_string(bits) + " group " + std::to_string(g) + " " +
                                      dtype_name(t) + " M " + std::to_string(M);
              array x = astype(random_f64({M, K}, seed + M), t);
              array y = quantized_matmul(x, q[0], q[1], q[2], transpose, g, bits, "affine", d);
              ASSERT_EQ(y.shape(), (Shape{M, N})) << ctx;
              ASSERT_EQ(y.dtype(), t) << ctx;
              auto want = matmul_reference(as_doubles(x), M, K, W, N, transpose);
              expect_close(as_doubles(y), want, t == float64 ? 1e-12 : harness::rtol_for(t) * 4,
                           ctx);
            }
          }
        }
      }
    }
  }
}

// gather_qmm over 16-bit float experts: each row block of x against the
// matrix its index names, for row counts the small-M kernel takes (1 to 16)
// and one it does not.
TEST(GatherQMM, HalfPrecisionExpertsMatchEachMatrix) {
  const int E = 3, N = 40, K = 384, g = 64;
  for (Device d : harness::devices()) {
    for (int bits : {3, 4, 8}) {
      for (Dtype t : {float16, bfloat16}) {
        array wf = astype(random_f64({E, N, K}, 20 + bits), t);
        auto q = quantize(wf, g, bits, "affine", std::nullopt, d);
        for (int M : {1, 5, 16, 20}) {
          const std::string ctx = std::string(d == Device::cpu ? "cpu" : "gpu") + " bits " +
                                  std::to_string(bits) + " " + dtype_name(t) + " M " +
                                  std::to_string(M);
          array x = astype(random_f64({4, M, K}, 30 + M), t);
          const std::vector<int32_t> idx = {2, 0, 2, 1};
          array y = gather_qmm(x, q[0], q[1], q[2], std::nullopt,
                               array(idx.begin(), {4}, int32), true, g, bits, "affine", false, d);
          ASSERT_EQ(y.shape(), (Shape{4, M, N})) << ctx;
          auto xv = as_doubles(x), yv = as_doubles(y);
          for (int i = 0; i < 4; ++i) {
            const array e(idx[i]);
            auto W = as_doubles(dequantize(take(q[0], e, 0), take(q[1], e, 0), take(q[2], e, 0), g,
                                           bits, "affine", std::nullopt, float64, Device::cpu));
            std::vector<double> xi(xv.begin() + i * M * K, xv.begin() + (i + 1) * M * K);
            std::vector<double> got(yv.begin() + i * M * N, yv.begin() + (i + 1) * M * N);
            expect_close(got, matmul_reference(xi, M, K, W, N, true), harness::rtol_for(t) * 4,
                         ctx + " expert row block " + std::to_string(i));
          }
        }
      }
    }
  }
}

TEST(QuantizedMatmul, BatchedWeightsBroadcastWithX) {
  const int g = 32, K = 64, N = 40, B = 3;
  for (Device d : harness::devices()) {
    array wf = random_f64({B, N, K}, 5);
    auto q = quantize(wf, g, 4, "affine", std::nullopt, d);
    EXPECT_EQ(q[0].shape(), (Shape{B, N, K / 8}));
    array x = random_f64({2, 1, 9, K}, 6);  // batch (2, 1) against (3,)
    array y = quantized_matmul(x, q[0], q[1], q[2], true, g, 4, "affine", d);
    ASSERT_EQ(y.shape(), (Shape{2, B, 9, N}));
    auto xv = as_doubles(x), yv = as_doubles(y);
    for (int b = 0; b < B; ++b) {
      auto W = as_doubles(dequantize(take(q[0], array(b), 0), take(q[1], array(b), 0),
                                     take(q[2], array(b), 0), g, 4));
      for (int i = 0; i < 2; ++i) {
        std::vector<double> xi(xv.begin() + i * 9 * K, xv.begin() + (i + 1) * 9 * K);
        auto want = matmul_reference(xi, 9, K, W, N, true);
        std::vector<double> got(yv.begin() + (i * B + b) * 9 * N, yv.begin() + (i * B + b + 1) * 9 * N);
        expect_close(got, want, 1e-12, "batch " + std::to_string(i) + "," + std::to_string(b));
      }
    }
  }
}

TEST(QuantizedMatmul, DerivativesMatchFiniteDifferences) {
  grad_check::on_each_device([] {
    for (bool transpose : {true, false}) {
      constexpr int g = 32, K = 64, N = 32;
      array wf = random_f64(transpose ? Shape{N, K} : Shape{K, N}, 7);
      auto q = quantize(wf, g, 4);
      array wq = q[0];
      auto f = [wq, transpose](const std::vector<array>& a) {
        return std::vector<array>{quantized_matmul(a[0], wq, a[1], a[2], transpose, 32, 4)};
      };
      std::string name = std::string("quantized_matmul transpose ") + (transpose ? "true" : "false");
      grad_check::check_derivatives(name, f, {random_f64({3, 2, K}, 8), q[1], q[2]});
      grad_check::check_derivatives(name + " (vector x)", f, {random_f64({K}, 9), q[1], q[2]});
    }
    array wf = random_f64({2, 32, 64}, 10);
    auto q = quantize(wf, 32, 8);
    array wq = q[0];
    grad_check::check_derivatives(
        "quantized_matmul batched w",
        [wq](const std::vector<array>& a) {
          return std::vector<array>{quantized_matmul(a[0], wq, a[1], a[2], true, 32, 8)};
        },
        {random_f64({3, 1, 4, 64}, 11), q[1], q[2]});
    auto deq = [wq](const std::vector<array>& a) {
      return std::vector<array>{dequantize(wq, a[0], a[1], 32, 8)};
    };
    grad_check::check_derivatives("dequantize", deq, {q[1], q[2]});
  });
}

TEST(QuantizedMatmul, GradientWithRespectToWIsRefused) {
  auto q = quantize(random_f64({32, 64}, 12), 32, 4);
  array x = random_f64({2, 64}, 13);
  auto f = [&](const std::vector<array>& a) {
    return std::vector<array>{sum(quantized_matmul(x, a[0], q[1], q[2], true, 32, 4))};
  };
  EXPECT_THROW(vjp(f, {q[0]}, {array(1.0, float64)}), std::invalid_argument);
  EXPECT_THROW(vjp([&](const std::vector<array>& a) {
                 return std::vector<array>{quantize(a[0], 32, 4)[1]};
               }, {random_f64({2, 32}, 14)}, {ones({2, 1}, float64)}),
               std::invalid_argument);
}

namespace {

// Weights whose 3-bit quantization is exact: every group of 32 holds each
// integer in [-3, 4] (scale -1, bias 4), so products with small integers are
// exact in any order of summation (BLAS or not, batched or not).
array exact_weights(const Shape& shape) {
  std::vector<double> v(shape_size(shape));
  const int64_t K = shape.back();
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t r = static_cast<int64_t>(i) / K, j = static_cast<int64_t>(i) % K;
    v[i] = static_cast<double>((r * 7 + j * 3) % 8) - 3;
  }
  return array(v.begin(), shape, float64);
}

}  // namespace

TEST(QuantizedMatmul, VmapMatchesALoop) {
  const int g = 32, K = 64, N = 32, B = 3;
  auto q = quantize(exact_weights({N, K}), g, 3);
  auto qb = quantize(exact_weights({B, N, K}), g, 3);
  EXPECT_EQ(grad_check::values(q[1]), std::vector<double>(N * K / g, -1.0));
  EXPECT_EQ(grad_check::values(q[2]), std::vector<double>(N * K / g, 4.0));
  grad_check::on_each_device([&] {
    auto qmm = [](const std::vector<array>& a) {
      return std::vector<array>{quantized_matmul(a[0], a[1], a[2], a[3], true, 32, 3)};
    };
    auto qmm_t = [](const std::vector<array>& a) {
      return std::vector<array>{quantized_matmul(a[0], a[1], a[2], a[3], false, 32, 3)};
    };
    using grad_check::integers_f64;
    // x batched (matrix and vector elements), weights shared.
    grad_check::check_vmap("x batched", qmm, {integers_f64({B, 5, K}, 17), q[0], q[1], q[2]},
                           {0, -1, -1, -1});
    grad_check::check_vmap("x batched axis 1", qmm, {integers_f64({5, B, K}, 18), q[0], q[1], q[2]},
                           {1, -1, -1, -1});
    grad_check::check_vmap("x vectors", qmm_t, {integers_f64({B, N}, 19), q[0], q[1], q[2]},
                           {0, -1, -1, -1});
    // weights batched, x shared or batched.
    grad_check::check_vmap("w batched", qmm, {integers_f64({2, 5, K}, 20), qb[0], qb[1], qb[2]},
                           {-1, 0, 0, 0});
    grad_check::check_vmap("both batched", qmm, {integers_f64({B, K}, 21), qb[0], qb[1], qb[2]},
                           {0, 0, 0, 0});
    grad_check::check_vmap("scales batched", qmm,
                           {integers_f64({4, K}, 22), q[0], qb[1], q[2]}, {-1, -1, 0, -1});
    // quantize and dequantize.
    grad_check::check_vmap("quantize", [](const std::vector<array>& a) { return quantize(a[0], 32, 4); },
                           {random_f64({B, 4, K}, 23)}, {0});
    grad_check::check_vmap("quantize axis 2",
                           [](const std::vector<array>& a) { return quantize(a[0], 32, 4); },
                           {random_f64({4, K, B}, 24)}, {2});
    grad_check::check_vmap("dequantize",
                           [](const std::vector<array>& a) {
                             return std::vector<array>{dequantize(a[0], a[1], a[2], 32, 3)};
                           },
                           {qb[0], qb[1], q[2]}, {0, 0, -1});
  });
}

TEST(Quantize, BadInputIsRefusedWithAClearMessage) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no exception)");
  };
  array w = random_f64({4, 64}, 25);
  auto has = [](const std::string& m, const std::string& part) {
    EXPECT_NE(m.find(part), std::string::npos) << m << " (expected: " << part << ")";
  };
  has(message([&] { quantize(random_f64({64}, 1)); }), "[quantize] w of shape (64,) must have at least 2");
  has(message([&] { quantize(random_f64({2, 48}, 1)); }), "divisible by group_size 64");
  has(message([&] { quantize(w, 16); }), "group_size 16 is not supported");
  has(message([&] { quantize(w, 64, 7); }), "bits 7 is not supported");
  has(message([&] { quantize(astype(w, int32)); }), "w must be floating point");
  has(message([&] { quantize(w, std::nullopt, std::nullopt, "mxfp4"); }),
      "mode 'mxfp4' is not implemented");
  has(message([&] { quantize(w, std::nullopt, std::nullopt, "int4"); }), "unknown mode 'int4'");
  has(message([&] { quantize(w, 64, 4, "affine", array(1.f)); }), "global_scale");
  auto q = quantize(w);
  has(message([&] { dequantize(astype(q[0], int32), q[1], q[2]); }), "[dequantize] w must be uint32");
  has(message([&] { dequantize(q[0], q[1]); }), "needs biases");
  has(message([&] { dequantize(q[0], q[1], q[2], 32); }), "expected (4,2)");
  has(message([&] { dequantize(q[0], q[1], q[2], 64, 3); }), "whole groups");
  has(message([&] { dequantize(q[0], transpose(q[1]), q[2]); }), "scales of shape (1,4)");
  has(message([&] { dequantize(reshape(q[0], {32}), q[1], q[2]); }), "at least 2 dimensions");
  has(message([&] { quantized_matmul(random_f64({2, 65}, 1), q[0], q[1], q[2]); }),
      "[quantized_matmul] the last dimension of x (2,65) must match the inner dimension 64");
  has(message([&] { quantized_matmul(random_f64({2, 5}, 1), q[0], q[1], q[2], false); }),
      "must match the inner dimension 4");
  has(message([&] { quantized_matmul(array({1, 2}), q[0], q[1], q[2]); }), "x must be floating");
  has(message([&] { quantized_matmul(random_f64({2, 64}, 1), q[0], q[1], q[2], true, 64, 4, "nvfp4"); }),
      "mode 'nvfp4' is not implemented");
}

// fp8 e4m3: every code decoded against hand-worked values and round-tripped;
// encoding against the nearest finite value found by scanning all of them
// here (ties to the even code), with saturation, NaN and signed zeros.
namespace {

// The e4m3 value of code c, from its fields.
double fp8_value(int c) {
  const int sign = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::nan("");
  double v = e == 0 ? m / 8.0 * std::pow(2.0, -6) : (1 + m / 8.0) * std::pow(2.0, e - 7);
  return sign ? -v : v;
}

// The code to_fp8 must give for x.
int fp8_code(float x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xff : 0x7f;
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  for (int c = 1; c < 0x7f; ++c) {
    double d = std::fabs(fp8_value(c) - a), db = std::fabs(fp8_value(best) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return best | (std::signbit(x) ? 0x80 : 0);
}

}  // namespace

TEST(Fp8, DecodesEveryCodeAndRoundTrips) {
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  for (Device d : harness::devices()) {
    StreamContext ctx(d);
    array x(codes.begin(), Shape{256}, uint8);
    auto v = host_values<float>(from_fp8(x, float32));
    EXPECT_EQ(v[0x38], 1.0f);
    EXPECT_EQ(v[0x7e], 448.0f);
    EXPECT_EQ(v[0x01], std::ldexp(1.0f, -9));
    EXPECT_EQ(v[0x08], std::ldexp(1.0f, -6));
    EXPECT_EQ(v[0xb8], -1.0f);
    EXPECT_TRUE(v[0x80] == 0.0f && std::signbit(v[0x80]));
    EXPECT_TRUE(std::isnan(v[0x7f]) && std::isnan(v[0xff]));
    for (int c = 0; c < 256; ++c) {
      if (!std::isnan(fp8_value(c))) {
        ASSERT_EQ(v[c], static_cast<float>(fp8_value(c))) << c;
      }
    }
    auto back = host_values<uint8_t>(to_fp8(from_fp8(x, float32)));
    for (int c = 0; c < 256; ++c) ASSERT_EQ(back[c], c) << c;
    EXPECT_EQ(from_fp8(x).dtype(), bfloat16);
    auto h = host_values<float>(astype(from_fp8(x, float16), float32));
    for (int c = 0; c < 256; ++c) {
      if (!std::isnan(fp8_value(c))) ASSERT_EQ(h[c], static_cast<float>(fp8_value(c))) << c;
    }
  }
}

TEST(Fp8, EncodesToTheNearestValueTiesToEven) {
  auto xs = random_floats(2000, 91, -500.f, 500.f);
  auto small = random_floats(1000, 92, -0.05f, 0.05f);
  xs.insert(xs.end(), small.begin(), small.end());
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, 1.0625f, 1.1875f, -1.0625f, 448.0f, 464.0f, 1e6f, inf, -inf,
                  std::nanf(""), std::ldexp(1.0f, -10), std::ldexp(3.0f, -11)}) {
    xs.push_back(x);
  }
  for (Device d : harness::devices()) {
    StreamContext ctx(d);
    for (Dtype t : {float32, float16, bfloat16}) {
      array x = astype(array(xs.begin(), Shape{int(xs.size())}, float32), t);
      auto xv = host_values<float>(astype(x, float32));
      array q = to_fp8(x);
      ASSERT_EQ(q.dtype(), uint8);
      auto got = host_values<uint8_t>(q);
      for (size_t i = 0; i < xs.size(); ++i) {
        ASSERT_EQ(int(got[i]), fp8_code(xv[i])) << dtype_name(t) << " x = " << xv[i];
      }
    }
  }
  // Hand-worked: ties 1.0625 -> 1.0 (0x38, even), 1.1875 -> 1.25 (0x3a, even);
  // beyond 448 saturates.
  auto h = host_values<uint8_t>(to_fp8(array({1.0625f, 1.1875f, 1000.f, -inf}, Shape{4})));
  EXPECT_EQ(h, (std::vector<uint8_t>{0x38, 0x3a, 0x7e, 0xfe}));
}

TEST(Fp8, RejectsWrongDtypes) {
  EXPECT_THROW(
      {
        try {
          to_fp8(array({1, 2}, Shape{2}, int32));
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("[to_fp8]"), std::string::npos);
          throw;
        }
      },
      std::invalid_argument);
  EXPECT_THROW(from_fp8(array({1.f}, Shape{1})), std::invalid_argument);
  EXPECT_THROW(from_fp8(array({uint8_t(1)}, Shape{1}, uint8), int32), std::invalid_argument);
}
