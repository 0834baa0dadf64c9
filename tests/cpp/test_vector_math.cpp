// The CPU's vectorized transcendental ops (Note [Vector math] in
// backend/cpu/vector_math.cpp): values within a few float32 ulps of the
// float64 C library, the C library's special values, and the same bits
// wherever an element sits (offsets, strides, 16-bit inputs, fused blocks);
// and its float32 arithmetic, the scalar IEEE operation bit for bit.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

struct MathOp {
  std::string name;
  std::function<array(const array&)> op;
  std::function<double(double)> ref;
  double lo, hi;  // where the random arguments are drawn from
};

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

#define MATH_OP(NAME, REF, LO, HI) \
  MathOp { #NAME, [](const array& x) { return NAME(x); }, [](double x) { return REF(x); }, LO, HI }

std::vector<MathOp> math_ops() {
  return {
      MATH_OP(exp, std::exp, -90, 90),       MATH_OP(expm1, std::expm1, -5, 5),
      MATH_OP(log, std::log, 0, 1e6),        MATH_OP(log1p, std::log1p, -1, 10),
      MATH_OP(log2, std::log2, 0, 1e3),      MATH_OP(log10, std::log10, 0, 1e3),
      MATH_OP(sin, std::sin, -100, 100),     MATH_OP(cos, std::cos, -100, 100),
      MATH_OP(tanh, std::tanh, -12, 12),     MATH_OP(sigmoid, logistic, -100, 100),
  };
}

// Random arguments with the special values spread among them.
std::vector<float> arguments(const MathOp& m, size_t n) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(m.lo, m.hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(gen));
  const float special[] = {0.0f,      -0.0f,     INFINITY, -INFINITY, NAN,     1e-40f,
                           -1e-40f,   FLT_MIN,   FLT_MAX,  -FLT_MAX,  1e-30f,  88.5f,
                           -88.5f,    100.0f,    -104.0f,  40000.0f,  -1.0f,   -0.5f,
                           1e7f,      -3e-8f};
  for (size_t k = 0; k < std::size(special); ++k) v[k * 13 % n] = special[k];
  return v;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST(VectorMath, ValuesAndSpecialValuesMatchTheFloat64Library) {
  StreamContext cpu(Device::cpu);
  const size_t n = 4099;  // not a multiple of any vector width
  for (const auto& m : math_ops()) {
    std::vector<float> x = arguments(m, n);
    array y = m.op(array(x.data(), {static_cast<int>(n)}, float32));
    eval(y);
    const float* got = y.data<float>();
    int failures = 0;
    for (size_t i = 0; i < n && failures < 5; ++i) {
      const double want = m.ref(static_cast<double>(x[i]));
      const float wantf = static_cast<float>(want);
      bool ok;
      if (std::isnan(wantf) || std::isinf(wantf) || wantf == 0.0f) {
        // NaN, infinities and zeros exactly, with the sign of zero.
        ok = std::isnan(wantf) ? std::isnan(got[i]) : same_bits(got[i], wantf);
      } else {
        // A few ulps; results in the denormal range to within FLT_MIN (the
        // float32 formula of sigmoid underflows to 0 there).
        const double tol = 8 * FLT_EPSILON * std::abs(want) + FLT_MIN;
        ok = std::abs(got[i] - want) <= tol;
      }
      if (!ok) {
        ++failures;
        ADD_FAILURE() << m.name << "(" << x[i] << ") is " << got[i] << ", float64 library " << want;
      }
    }
  }
}

TEST(VectorMath, AValueDoesNotDependOnWhereItSits) {
  StreamContext cpu(Device::cpu);
  const int n = 1031;
  for (const auto& m : math_ops()) {
    std::vector<float> x = arguments(m, n);
    array a(x.data(), {n}, float32);
    array whole = m.op(a);
    eval(whole);
    const float* w = whole.data<float>();
    // In place: the input is a temporary that the op may write over.
    array in_place = m.op(copy(a));
    eval(in_place);
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(same_bits(in_place.data<float>()[i], w[i])) << m.name << " in place at " << i;
    }
    // Every offset into the span, a short one included.
    for (int k : {1, 3, 7, 15, 17, 1000}) {
      array part = m.op(slice(a, {k}, {n}));
      eval(part);
      for (int i = 0; i < n - k; ++i) {
        ASSERT_TRUE(same_bits(part.data<float>()[i], w[k + i])) << m.name << " offset " << k;
      }
    }
    // Strided and transposed inputs.
    array grid = reshape(slice(a, {0}, {1030}), {103, 10});
    array t = m.op(transpose(grid));
    array every_other = m.op(slice(a, {0}, {n}, {2}));
    eval({t, every_other});
    array tc = copy(t);  // row-major values of the transposed result
    eval(tc);
    for (int r = 0; r < 10; ++r) {
      for (int c = 0; c < 103; ++c) {
        ASSERT_TRUE(same_bits(tc.data<float>()[r * 103 + c], w[c * 10 + r])) << m.name;
      }
    }
    for (int i = 0; i < (n + 1) / 2; ++i) {
      ASSERT_TRUE(same_bits(every_other.data<float>()[i], w[2 * i])) << m.name << " stride 2";
    }
  }
}

TEST(VectorMath, SixteenBitFloatsRoundTheFloat32Value) {
  StreamContext cpu(Device::cpu);
  const int n = 700;
  for (const auto& m : math_ops()) {
    std::vector<float> x = arguments(m, n);
    for (Dtype t : {float16, bfloat16}) {
      array h = astype(array(x.data(), {n}, float32), t);
      array got = m.op(h);
      array want = astype(m.op(astype(h, float32)), t);
      eval({got, want});
      ASSERT_EQ(got.dtype(), t);
      auto g = astype(got, float32), w = astype(want, float32);
      eval({g, w});
      for (int i = 0; i < n; ++i) {
        const float a = g.data<float>()[i], b = w.data<float>()[i];
        ASSERT_TRUE(same_bits(a, b) || (std::isnan(a) && std::isnan(b)))
            << m.name << " " << dtype_name(t) << " at " << i;
      }
    }
  }
}

TEST(VectorMath, FusedChainsComputeTheUnfusedBits) {
  StreamContext cpu(Device::cpu);
  const int n = 5000;
  std::vector<float> x(n);
  std::mt19937 gen(3);
  std::normal_distribution<float> g(0.0f, 3.0f);
  for (auto& v : x) v = g(gen);
  array a(x.data(), {n}, float32);
  auto f = [](const std::vector<array>& in) {
    const array& v = in[0];
    array gelu = v * 0.5f * (tanh((v + v * v * v * 0.044715f) * 0.7978845608f) + 1.0f);
    return std::vector<array>{gelu + sigmoid(v) * log1p(abs(v)) - exp(negative(v * v)) + sin(v)};
  };
  auto plain = f({a})[0];
  auto fused = compile(f)({a})[0];
  eval({plain, fused});
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(same_bits(plain.data<float>()[i], fused.data<float>()[i])) << "at " << i;
  }
}

// The float32 arithmetic loops compiled for the machine's vector width
// (cpu::binary_span): every element, the special values included, is the
// IEEE operation of the scalar code, whichever operand is a single value and
// whatever the length.
TEST(VectorMath, ArithmeticIsTheScalarOperationInEveryLayout) {
  StreamContext cpu(Device::cpu);
  struct Arith {
    const char* name;
    std::function<array(const array&, const array&)> op;
    std::function<float(float, float)> ref;
  };
  auto max_ref = [](float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); };
  auto min_ref = [](float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); };
  const std::vector<Arith> ops = {
      {"add", [](const array& a, const array& b) { return add(a, b); }, std::plus<float>()},
      {"subtract", [](const array& a, const array& b) { return subtract(a, b); }, std::minus<float>()},
      {"multiply", [](const array& a, const array& b) { return multiply(a, b); }, std::multiplies<float>()},
      {"divide", [](const array& a, const array& b) { return divide(a, b); }, std::divides<float>()},
      {"maximum", [](const array& a, const array& b) { return maximum(a, b); }, max_ref},
      {"minimum", [](const array& a, const array& b) { return minimum(a, b); }, min_ref},
  };
  const MathOp wide{"", nullptr, nullptr, -1e3, 1e3};
  for (int n : {1, 7, 16, 33, 1000, 70001}) {
    std::vector<float> xa = arguments(wide, std::max(n, 300)), xb(xa.rbegin(), xa.rend());
    xa.resize(n);
    xb.resize(n);
    array a(xa.data(), {n}, float32), b(xb.data(), {n}, float32);
    const float s = -2.5f;
    for (const auto& o : ops) {
      // Both vectors, a single value first, a single value second.
      const array outs[3] = {o.op(a, b), o.op(array(s), b), o.op(a, array(s))};
      for (int form = 0; form < 3; ++form) {
        eval({outs[form]});
        for (int i = 0; i < n; ++i) {
          const float want = form == 0 ? o.ref(xa[i], xb[i])
                             : form == 1 ? o.ref(s, xb[i])
                                         : o.ref(xa[i], s);
          const float got = outs[form].data<float>()[i];
          ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : same_bits(want, got))
              << o.name << " form " << form << " n " << n << " at " << i << ": " << got
              << " for " << want;
        }
      }
    }
  }
}

TEST(VectorMath, ExactUnaryOpsAreTheScalarOperation) {
  StreamContext cpu(Device::cpu);
  struct Exact {
    const char* name;
    std::function<array(const array&)> op;
    std::function<float(float)> ref;
  };
  const std::vector<Exact> ops = {
      {"abs", [](const array& x) { return abs(x); }, [](float x) { return std::fabs(x); }},
      {"negative", [](const array& x) { return negative(x); }, [](float x) { return -x; }},
      {"reciprocal", [](const array& x) { return reciprocal(x); }, [](float x) { return 1.0f / x; }},
      {"floor", [](const array& x) { return floor(x); }, [](float x) { return std::floor(x); }},
      {"ceil", [](const array& x) { return ceil(x); }, [](float x) { return std::ceil(x); }},
      {"trunc", [](const array& x) { return trunc(x); }, [](float x) { return std::trunc(x); }},
      {"square", [](const array& x) { return square(x); }, [](float x) { return x * x; }},
      {"sqrt", [](const array& x) { return sqrt(x); }, [](float x) { return std::sqrt(x); }},
      {"rsqrt", [](const array& x) { return rsqrt(x); }, [](float x) { return 1.0f / std::sqrt(x); }},
      {"degrees", [](const array& x) { return degrees(x); },
       [](float x) { return x * static_cast<float>(57.295779513082320877); }},
      {"radians", [](const array& x) { return radians(x); },
       [](float x) { return x * static_cast<float>(0.017453292519943295770); }},
  };
  const MathOp wide{"", nullptr, nullptr, -1e3, 1e3};
  for (int n : {1, 7, 33, 70001}) {
    std::vector<float> xs = arguments(wide, std::max(n, 300));
    xs.resize(n);
    array x(xs.data(), {n}, float32);
    for (const auto& o : ops) {
      array y = o.op(x);
      eval({y});
      for (int i = 0; i < n; ++i) {
        const float want = o.ref(xs[i]), got = y.data<float>()[i];
        ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : same_bits(want, got))
            << o.name << " n " << n << " at " << i << ": " << got << " for " << want;
      }
    }
  }
}

// The rational tanh (Note [Vector math]): within 4e-7 of float64 tanh over a
// dense sweep of small and large arguments, never past ±1, ±1 exactly where
// float32 tanh rounds to it, and odd.
TEST(VectorMath, TanhStaysWithinOneAndItsTolerance) {
  StreamContext cpu(Device::cpu);
  std::vector<float> x;
  for (double v = 1e-9; v < 12; v *= 1.0001) x.push_back(static_cast<float>(v));
  for (float v = 7.5f; v < 9.5f; v = std::nextafter(v, 10.0f) + 1e-5f) x.push_back(v);
  const int n = static_cast<int>(x.size());
  array pos = tanh(array(x.data(), {n}, float32));
  array neg = tanh(negative(array(x.data(), {n}, float32)));
  eval(pos, neg);
  for (int i = 0; i < n; ++i) {
    const double want = std::tanh(static_cast<double>(x[i]));
    const float got = pos.data<float>()[i];
    ASSERT_LE(std::abs(got - want), 4e-7 * want) << "tanh(" << x[i] << ") = " << got;
    ASSERT_LE(got, 1.0f) << "tanh(" << x[i] << ")";
    ASSERT_TRUE(same_bits(neg.data<float>()[i], -got)) << "tanh(-" << x[i] << ")";
    if (static_cast<float>(want) == 1.0f && x[i] > 9.0f) ASSERT_EQ(got, 1.0f) << x[i];
  }
}
