// Quantization: quantize / dequantize against a float64-free reference of the
// affine formula written here (packed words compared exactly, bit by bit), and
// of the mxfp4 / mxfp8 / nvfp4 formats (e2m1, e4m3, e8m0 written here from
// their definitions), qqmm against the product of the rounded operands,
// hand-packed words for 2, 3, 4 and 8 bits, the dequantization error bound,
// quantized_matmul against x @ W^T computed here in double, derivatives
// against finite differences, vmap against a loop, and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
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

namespace {

// The message of the std::invalid_argument that f throws.
std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::string("(no exception)");
}

void has(const std::string& m, const std::string& part) {
  EXPECT_NE(m.find(part), std::string::npos) << m << " (expected: " << part << ")";
}

}  // namespace

TEST(Quantize, BadInputIsRefusedWithAClearMessage) {
  array w = random_f64({4, 64}, 25);
  has(message([&] { quantize(random_f64({64}, 1)); }), "[quantize] w of shape (64,) must have at least 2");
  has(message([&] { quantize(random_f64({2, 48}, 1)); }), "divisible by group_size 64");
  has(message([&] { quantize(w, 16); }), "group_size 16 is not supported");
  has(message([&] { quantize(w, 64, 7); }), "bits 7 is not supported");
  has(message([&] { quantize(astype(w, int32)); }), "w must be floating point");
  has(message([&] { quantize(w, std::nullopt, std::nullopt, "int4"); }), "unknown mode 'int4'");
  has(message([&] { quantize(w, 64, 4, "affine", array(1.f)); }),
      "[quantize] global_scale is only used by mode 'nvfp4'");
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
      "[quantized_matmul] group_size 64 is not supported in mode 'nvfp4' (16)");
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

// ---- floating-point modes: mxfp4, mxfp8, nvfp4 ------------------------------------
//
// The reference encodes by scanning every value of a format: e2m1 to the
// nearest value with ties toward zero and a negative sign only on a non-zero
// code; e4m3 with fp8_code above (ties to the even code, saturating at 448);
// the e8m0 scale as the smallest power of two at least amax / max_value.
namespace {

const float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

int e2m1_code(float y) {
  const double a = std::fabs(static_cast<double>(y));
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    if (std::fabs(kE2M1[c] - a) < std::fabs(kE2M1[best] - a)) best = c;
  }
  return best | (y < 0 && best != 0 ? 8 : 0);
}

float e2m1_value(int c) { return c & 8 ? -kE2M1[c & 7] : kE2M1[c & 7]; }

struct FpMode {
  std::string name;
  int group, bits;
};
const FpMode kFpModes[] = {{"mxfp4", 32, 4}, {"mxfp8", 32, 8}, {"nvfp4", 16, 4}};

struct FpReference {
  std::vector<uint32_t> words;
  std::vector<uint8_t> scales;
  std::vector<float> values;  // what dequantize gives back, in float32
};

// Rows of float32 weights (K per row) quantized in mode m.
FpReference fp_reference(const std::vector<float>& w, int K, const FpMode& m,
                         std::optional<float> global_scale = std::nullopt) {
  FpReference r;
  const int per_word = 32 / m.bits;
  r.words.assign(w.size() / per_word, 0u);
  const float factor = global_scale ? *global_scale / (448.0f * 6.0f) : 1.0f;
  for (size_t start = 0; start < w.size(); start += m.group) {
    float amax = 0.0f;
    for (int k = 0; k < m.group; ++k) amax = std::max(amax, std::fabs(w[start + k]));
    const float scale = amax / (m.bits == 8 ? 448.0f : 6.0f);
    int code;
    float divisor, back;  // the element divisor; the scale read back
    if (m.name == "nvfp4") {
      code = fp8_code(global_scale ? scale / factor : scale);
      divisor = static_cast<float>(fp8_value(code));
      back = global_scale ? divisor * factor : divisor;
    } else {
      int n = 0;
      if (scale > 0) {
        n = -149;
        while (std::ldexp(1.0f, n) < scale) ++n;
      }
      code = (n + 127) & 255;
      divisor = std::ldexp(1.0f, n);
      back = code == 0 ? std::ldexp(1.0f, -127) : std::ldexp(1.0f, code - 127);
    }
    r.scales.push_back(static_cast<uint8_t>(code));
    for (int k = 0; k < m.group; ++k) {
      float y = divisor == 0 ? 0.0f : w[start + k] / divisor;
      if (global_scale) y /= factor;
      const int c = m.bits == 8 ? fp8_code(y) : e2m1_code(y);
      const size_t i = start + k;
      r.words[i / per_word] |= static_cast<uint32_t>(c) << (i % per_word * m.bits);
      const float v = m.bits == 8 ? static_cast<float>(fp8_value(c)) : e2m1_value(c);
      r.values.push_back(v * back);
    }
  }
  (void)K;
  return r;
}

// Rows whose magnitudes span 2^-spread to 2^spread, a zero group, and (row 0)
// values on the midpoints between e2m1 values at scale 1.
std::vector<float> fp_test_weights(int rows, int K, uint64_t seed, int spread = 20) {
  auto v = random_floats(static_cast<size_t>(rows) * K, seed);
  std::mt19937_64 gen(seed);
  for (int i = 0; i < rows; ++i) {
    const float mag = std::ldexp(1.0f, static_cast<int>(gen() % (2 * spread + 1)) - spread);
    for (int k = 0; k < K; ++k) v[i * K + k] *= mag;
  }
  const float ties[] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                        -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5.0f, -0.0f};
  for (int k = 0; k < 16; ++k) v[k] = ties[k];
  for (int k = 0; k < 16; ++k) v[K + k] = 0.0f;  // row 1's first group of 16
  return v;
}

std::vector<double> to_doubles(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Batch i of y (rows x N) against batch i of x (rows x K) times the
// transpose of matrix experts[i] of W (E x N x K).
void expect_batches(const std::vector<double>& y, const std::vector<double>& x,
                    const std::vector<double>& W, const std::vector<uint32_t>& experts, int rows,
                    int K, int N, const std::string& ctx) {
  for (size_t i = 0; i < experts.size(); ++i) {
    const int64_t e = experts[i];
    std::vector<double> We(W.begin() + e * N * K, W.begin() + (e + 1) * N * K);
    std::vector<double> xi(x.begin() + i * rows * K, x.begin() + (i + 1) * rows * K);
    std::vector<double> yi(y.begin() + i * rows * N, y.begin() + (i + 1) * rows * N);
    expect_close(yi, matmul_reference(xi, rows, K, We, N, true), 1e-5,
                 ctx + " " + std::to_string(i));
  }
}

}  // namespace

TEST(FpQuantize, WordsScalesAndValuesMatchTheReference) {
  const int rows = 6, K = 128;
  auto v = fp_test_weights(rows, K, 31);
  array w(v.begin(), {rows, K}, float32);
  for (Device d : harness::devices()) {
    for (const FpMode& m : kFpModes) {
      SCOPED_TRACE(m.name);
      auto q = quantize(w, std::nullopt, std::nullopt, m.name, std::nullopt, d);
      ASSERT_EQ(q.size(), 2u);
      EXPECT_EQ(q[0].shape(), (Shape{rows, K * m.bits / 32}));
      EXPECT_EQ(q[0].dtype(), uint32);
      EXPECT_EQ(q[1].shape(), (Shape{rows, K / m.group}));
      EXPECT_EQ(q[1].dtype(), uint8);
      auto ref = fp_reference(v, K, m);
      EXPECT_EQ(host_values<uint32_t>(q[0]), ref.words);
      EXPECT_EQ(host_values<uint8_t>(q[1]), ref.scales);
      array back = dequantize(q[0], q[1], std::nullopt, m.group, m.bits, m.name, std::nullopt,
                              float32, d);
      EXPECT_EQ(back.shape(), w.shape());
      EXPECT_EQ(host_values<float>(back), ref.values);
      array bf = dequantize(q[0], q[1], std::nullopt, std::nullopt, std::nullopt, m.name,
                            std::nullopt, std::nullopt, d);
      EXPECT_EQ(bf.dtype(), bfloat16);
      EXPECT_EQ(host_values<float>(astype(bf, float32)), ref.values);  // exact in bfloat16
    }
  }
}

TEST(FpQuantize, HandWorkedCodes) {
  // mxfp4, one group with largest magnitude 6: the scale is 2^0 (code 127)
  // and the values are their own codes; 0.25 ties toward 0, 0.75 toward 0.5,
  // -0.25 rounds to an unsigned 0.
  std::vector<float> v(32, 0.0f);
  const float head[] = {6.0f, 0.25f, 0.75f, -0.75f, -0.25f, 1.75f, 5.0f, 2.9f};
  std::copy(std::begin(head), std::end(head), v.begin());
  array w(v.begin(), {1, 32}, float32);
  auto q = quantize(w, std::nullopt, std::nullopt, "mxfp4");
  // codes 7, 0, 1, 9, 0, 3, 6, 5 from the lowest nibble up.
  EXPECT_EQ(host_values<uint32_t>(q[0])[0], 0x56309107u);
  EXPECT_EQ(host_values<uint8_t>(q[1]), (std::vector<uint8_t>{127}));
  // mxfp8 doubles the largest magnitude to 896: the scale is 2^1 (code 128),
  // 896 / 2 = 448 is e4m3 code 0x7e, 1.0 / 2 = 0.5 is 0x30.
  std::vector<float> u(32, 0.0f);
  u[0] = 896.0f, u[1] = 1.0f, u[2] = -1.0f;
  auto q8 = quantize(array(u.begin(), {1, 32}, float32), std::nullopt, std::nullopt, "mxfp8");
  EXPECT_EQ(host_values<uint32_t>(q8[0])[0], 0x00b0307eu);
  EXPECT_EQ(host_values<uint8_t>(q8[1]), (std::vector<uint8_t>{128}));
  // nvfp4: largest magnitude 3 gives the e4m3 scale 0.5 (0x30); 3 / 0.5 = 6.
  std::vector<float> n(16, 0.0f);
  n[0] = 3.0f, n[1] = -1.0f;
  auto q4 = quantize(array(n.begin(), {1, 16}, float32), std::nullopt, std::nullopt, "nvfp4");
  EXPECT_EQ(host_values<uint32_t>(q4[0])[0], 0x000000c7u);  // codes 7 and 8 | 4 (-2)
  EXPECT_EQ(host_values<uint8_t>(q4[1]), (std::vector<uint8_t>{0x30}));
}

TEST(FpQuantize, NvFp4GlobalScale) {
  const int rows = 4, K = 64;
  auto v = fp_test_weights(rows, K, 32);
  array w(v.begin(), {rows, K}, float32);
  const FpMode m = kFpModes[2];
  for (Device d : harness::devices()) {
    for (float g : {0.7f, 3.0f, 250.0f}) {
      SCOPED_TRACE("global_scale " + std::to_string(g));
      array gs(g);
      auto q = quantize(w, std::nullopt, std::nullopt, "nvfp4", gs, d);
      auto ref = fp_reference(v, K, m, g);
      EXPECT_EQ(host_values<uint32_t>(q[0]), ref.words);
      EXPECT_EQ(host_values<uint8_t>(q[1]), ref.scales);
      array back = dequantize(q[0], q[1], std::nullopt, std::nullopt, std::nullopt, "nvfp4", gs,
                              std::nullopt, d);
      EXPECT_EQ(back.dtype(), float32);  // bfloat16 promoted with the float32 global scale
      EXPECT_EQ(host_values<float>(back), ref.values);
    }
  }
}

TEST(FpQuantize, HalfPrecisionRoundsTheScaleInItsDtype) {
  // amax / 448 is rounded to float16 first: 0.00085878... / 448 is a float16
  // subnormal that rounds to exactly 2^-19, so the e8m0 scale is 2^-19 (code
  // 108) and the largest element saturates at 448 (0x7e).
  std::vector<float> v(32, 0.0f);
  v[0] = 0.0008587837f;
  array w = astype(array(v.begin(), {1, 32}, float32), float16);
  for (Device d : harness::devices()) {
    auto q = quantize(w, std::nullopt, std::nullopt, "mxfp8", std::nullopt, d);
    EXPECT_EQ(host_values<uint8_t>(q[1]), (std::vector<uint8_t>{108}));
    EXPECT_EQ(host_values<uint32_t>(q[0])[0] & 0xffu, 0x7eu);
  }
}

TEST(FpQuantize, BatchedWeightsAndVmap) {
  const int K = 64;
  auto v = fp_test_weights(2 * 3, K, 33);
  array w(v.begin(), {2, 3, K}, float32);
  for (const FpMode& m : kFpModes) {
    SCOPED_TRACE(m.name);
    auto q = quantize(w, std::nullopt, std::nullopt, m.name);
    EXPECT_EQ(q[0].shape(), (Shape{2, 3, K * m.bits / 32}));
    auto ref = fp_reference(v, K, m);
    EXPECT_EQ(host_values<uint32_t>(q[0]), ref.words);
    EXPECT_EQ(host_values<uint8_t>(q[1]), ref.scales);
  }
  grad_check::on_each_device([&] {
    for (const FpMode& m : kFpModes) {
      std::string name = m.name;
      grad_check::check_vmap(
          name + " quantize",
          [name](const std::vector<array>& a) {
            return quantize(a[0], std::nullopt, std::nullopt, name);
          },
          {astype(random_f64({3, 4, K}, 34), float32)}, {0});
      auto q = quantize(w, std::nullopt, std::nullopt, name);
      grad_check::check_vmap(
          name + " dequantize",
          [name](const std::vector<array>& a) {
            return std::vector<array>{dequantize(a[0], a[1], std::nullopt, std::nullopt,
                                                 std::nullopt, name, std::nullopt, float32)};
          },
          {q[0], q[1]}, {0, 0});
    }
  });
}

TEST(FpQuantizedMatmul, MatchesTheProductWithTheReferenceMatrix) {
  const int K = 64, N = 32;
  for (Device d : harness::devices()) {
    for (const FpMode& m : kFpModes) {
      for (bool transpose : {true, false}) {
        SCOPED_TRACE(m.name + (transpose ? " transpose" : " no transpose"));
        const int rows = transpose ? N : K, values = transpose ? K : N;
        auto v = fp_test_weights(rows, values, 35, 3);
        auto q = quantize(array(v.begin(), {rows, values}, float32), std::nullopt, std::nullopt,
                          m.name, std::nullopt, d);
        auto W = to_doubles(fp_reference(v, values, m).values);
        for (Dtype t : {float32, float16, bfloat16}) {
          array x = astype(random_f64({3, K}, 36), t);
          array y = quantized_matmul(x, q[0], q[1], std::nullopt, transpose, std::nullopt,
                                     std::nullopt, m.name, d);
          EXPECT_EQ(y.shape(), (Shape{3, N}));
          EXPECT_EQ(y.dtype(), t);
          expect_close(as_doubles(y), matmul_reference(as_doubles(x), 3, K, W, N, transpose),
                       harness::rtol_for(t) * 4, dtype_name(t));
        }
      }
    }
  }
}

TEST(FpQuantizedMatmul, BatchedAndGathered) {
  const int K = 64, N = 16, E = 3;
  for (const FpMode& m : kFpModes) {
    SCOPED_TRACE(m.name);
    auto v = fp_test_weights(E * N, K, 37, 3);
    auto q = quantize(array(v.begin(), {E, N, K}, float32), std::nullopt, std::nullopt, m.name);
    auto W = to_doubles(fp_reference(v, K, m).values);
    array x = astype(random_f64({E, 2, K}, 38), float32);
    array idx = array({2, 0, 2, 1}, Shape{4}, uint32);
    array xg = astype(random_f64({4, 1, K}, 39), float32);
    grad_check::on_each_device([&] {
      array y = quantized_matmul(x, q[0], q[1], std::nullopt, true, std::nullopt, std::nullopt,
                                 m.name);
      array yg = gather_qmm(xg, q[0], q[1], std::nullopt, std::nullopt, idx, true, std::nullopt,
                            std::nullopt, m.name);
      EXPECT_EQ(y.shape(), (Shape{E, 2, N}));
      EXPECT_EQ(yg.shape(), (Shape{4, 1, N}));
      expect_batches(as_doubles(y), as_doubles(x), W, {0, 1, 2}, 2, K, N, "expert");
      expect_batches(as_doubles(yg), as_doubles(xg), W, {2, 0, 2, 1}, 1, K, N, "gathered row");
    });
  }
}

TEST(Qqmm, MatchesTheProductOfTheRoundedOperands) {
  const int M = 3, K = 64, N = 16;
  auto xv = fp_test_weights(M, K, 41, 3);
  auto wv = fp_test_weights(N, K, 42, 3);
  array x(xv.begin(), {M, K}, float32), w(wv.begin(), {N, K}, float32);
  for (Device d : harness::devices()) {
    for (const FpMode& m : kFpModes) {
      for (std::optional<float> g : {std::optional<float>(), std::optional<float>(5.0f)}) {
        if (g && m.name != "nvfp4") continue;
        SCOPED_TRACE(m.name + (g ? " with global scales" : ""));
        std::optional<array> gx, gw;
        if (g) gx = array(*g * 0.5f), gw = array(*g);
        auto X = to_doubles(fp_reference(xv, K, m, g ? std::optional<float>(*g * 0.5f) : g).values);
        auto W = to_doubles(fp_reference(wv, K, m, g).values);
        auto want = matmul_reference(X, M, K, W, N, true);
        array y = qqmm(x, w, std::nullopt, std::nullopt, std::nullopt, m.name, gx, gw, d);
        EXPECT_EQ(y.shape(), (Shape{M, N}));
        EXPECT_EQ(y.dtype(), float32);
        expect_close(as_doubles(y), want, 1e-5, "w unquantized");
        auto q = quantize(w, std::nullopt, std::nullopt, m.name, gw, d);
        array yq = qqmm(x, q[0], q[1], std::nullopt, std::nullopt, m.name, gx, gw, d);
        expect_close(as_doubles(yq), want, 1e-5, "w quantized");
        // The rows one at a time, and as vectors.
        array y1 = qqmm(slice(x, {1, 0}, {2, K}), q[0], q[1], std::nullopt, std::nullopt, m.name,
                        gx, gw, d);
        EXPECT_EQ(y1.shape(), (Shape{1, N}));
        expect_close(as_doubles(y1), std::vector<double>(want.begin() + N, want.begin() + 2 * N),
                     1e-5, "one row");
        array yv = qqmm(reshape(slice(x, {1, 0}, {2, K}), {K}), q[0], q[1], std::nullopt,
                        std::nullopt, m.name, gx, gw, d);
        EXPECT_EQ(yv.shape(), (Shape{N}));
      }
    }
  }
}

TEST(Qqmm, GradientPassesStraightThroughTheRounding) {
  const int M = 2, K = 32, N = 4;
  auto xv = fp_test_weights(M, K, 43, 3);
  auto wv = fp_test_weights(N, K, 44, 3);
  array x(xv.begin(), {M, K}, float32), w(wv.begin(), {N, K}, float32);
  const FpMode m = kFpModes[1];  // mxfp8
  auto X = to_doubles(fp_reference(xv, K, m).values);
  auto W = to_doubles(fp_reference(wv, K, m).values);
  grad_check::on_each_device([&] {
    auto f = [](const std::vector<array>& a) {
      return std::vector<array>{qqmm(a[0], a[1], std::nullopt, std::nullopt, std::nullopt, "mxfp8")};
    };
    auto [out, grads] = vjp(f, {x, w}, {ones({M, N}, float32)});
    // d sum / dx[m, k] = sum_n W_hat[n, k]; d sum / dw[n, k] = sum_m X_hat[m, k].
    std::vector<double> gx(M * K), gw(N * K);
    for (int k = 0; k < K; ++k) {
      double cw = 0, cx = 0;
      for (int n = 0; n < N; ++n) cw += W[n * K + k];
      for (int i = 0; i < M; ++i) cx += X[i * K + k];
      for (int i = 0; i < M; ++i) gx[i * K + k] = cw;
      for (int n = 0; n < N; ++n) gw[n * K + k] = cx;
    }
    expect_close(as_doubles(grads[0]), gx, 1e-6, "dx");
    expect_close(as_doubles(grads[1]), gw, 1e-6, "dw");
  });
}

TEST(GatherQqmm, ChoosesTheMatricesByIndex) {
  const int K = 32, N = 8, E = 3;
  auto wv = fp_test_weights(E * N, K, 45, 3);
  auto xv = fp_test_weights(4, K, 46, 3);
  array w(wv.begin(), {E, N, K}, float32), x(xv.begin(), {4, 1, K}, float32);
  const FpMode m = kFpModes[2];
  auto W = to_doubles(fp_reference(wv, K, m).values);
  auto X = to_doubles(fp_reference(xv, K, m).values);
  const std::vector<uint32_t> experts = {1, 2, 0, 1};
  array idx(experts.begin(), Shape{4}, uint32);
  grad_check::on_each_device([&] {
    auto q = quantize(w, std::nullopt, std::nullopt, "nvfp4");
    array y = gather_qqmm(x, q[0], q[1], std::nullopt, idx);
    EXPECT_EQ(y.shape(), (Shape{4, 1, N}));
    expect_batches(as_doubles(y), X, W, experts, 1, K, N, "row");
  });
}

TEST(FpQuantize, BadInputIsRefusedWithAClearMessage) {
  array w = astype(random_f64({4, 64}, 47), float32);
  const auto none = std::nullopt;
  has(message([&] { quantize(w, 64, none, "mxfp4"); }),
      "[quantize] group_size 64 is not supported in mode 'mxfp4' (32)");
  has(message([&] { quantize(w, none, 8, "nvfp4"); }),
      "[quantize] bits 8 is not supported in mode 'nvfp4' (4)");
  has(message([&] { quantize(w, none, 4, "mxfp8"); }), "bits 4 is not supported in mode 'mxfp8' (8)");
  has(message([&] { quantize(w, none, none, "mxfp4", array(1.0f)); }),
      "[quantize] global_scale is only used by mode 'nvfp4'");
  has(message([&] { quantize(w, none, none, "nvfp4", array({1.0f, 2.0f})); }),
      "global_scale must be a float32 scalar, got shape (2,)");
  has(message([&] { quantize(w, none, none, "nvfp4", astype(array(1.0f), float16)); }),
      "dtype float16");
  has(message([&] { quantize(slice(w, {0, 0}, {4, 40}), none, none, "nvfp4"); }),
      "the last dimension of w (40) must be divisible by group_size 16");
  has(message([&] { quantize(astype(w, int32), none, none, "mxfp8"); }), "w must be floating point");
  auto q = quantize(w, none, none, "mxfp4");
  has(message([&] { dequantize(q[0], q[1], q[1], none, none, "mxfp4"); }),
      "[dequantize] biases are only used by mode 'affine'");
  has(message([&] { dequantize(q[0], astype(q[1], float32), none, none, none, "mxfp4"); }),
      "[dequantize] scales must be uint8 in mode 'mxfp4', got float32");
  has(message([&] { dequantize(q[0], q[1], none, none, none, "nvfp4"); }),
      "do not match w of shape (4,8): expected (4,4)");
  has(message([&] { quantized_matmul(w, q[0], q[1], q[1], true, none, none, "mxfp4"); }),
      "[quantized_matmul] biases are only used by mode 'affine'");
  has(message([&] { quantized_matmul(slice(w, {0, 0}, {4, 32}), q[0], q[1], none, true, none,
                                     none, "mxfp4"); }),
      "must match the inner dimension 64");
  has(message([&] { qqmm(w, w, none, none, none, "affine"); }),
      "[qqmm] mode 'affine' is not supported");
  has(message([&] { qqmm(astype(w, float64), w); }),
      "[qqmm] x must be float32, float16 or bfloat16, got float64");
  has(message([&] { qqmm(w, q[0], none, none, none, "mxfp4"); }),
      "[qqmm] a quantized (uint32) w needs its scales");
  has(message([&] { qqmm(w, w, q[1], none, none, "mxfp4"); }),
      "[qqmm] scales are only used with a quantized (uint32) w");
  has(message([&] { qqmm(w, w, none, none, none, "mxfp8", array(1.0f)); }),
      "[qqmm] global_scale_x is only used by mode 'nvfp4'");
  has(message([&] { qqmm(slice(w, {0, 0}, {4, 40}), w); }),
      "x of shape (4,40) must have a last dimension divisible by group_size 16");
  has(message([&] { qqmm(slice(w, {0, 0}, {4, 32}), w); }), "must match the inner dimension 64");
  has(message([&] { gather_qqmm(w, w, none, none, none, none, none, "affine"); }),
      "[gather_qqmm] mode 'affine' is not supported");
}
