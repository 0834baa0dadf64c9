// Scalar operands (Note [Scalar operands] in core/array.h): the per-thread
// cache of 0-d constants that C++ and Python scalars become as operands, and
// the ops that read them, on the default device (the GPU where there is one).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

const std::vector<Dtype> kAllDtypes = {bool_,   uint8,   uint16,  uint32,   uint64,
                                       int8,    int16,   int32,   int64,    float16,
                                       bfloat16, float32, float64, complex64};

}  // namespace

TEST(ScalarOperands, CacheHitReturnsEqualValuesForEveryDtype) {
  for (Dtype t : kAllDtypes) {
    array a = scalar_operand(3, t);
    array b = scalar_operand(3, t);
    EXPECT_TRUE(a.is_same(b)) << dtype_name(t);
    EXPECT_EQ(a.dtype(), t);
    EXPECT_EQ(a.ndim(), 0u);
    EXPECT_TRUE(a.is_available());
    const double want = t == bool_ ? 1.0 : 3.0;
    if (t == complex64) {
      EXPECT_EQ(b.item<complex64_t>(), complex64_t(3, 0));
    } else {
      EXPECT_EQ(b.item<double>(), want) << dtype_name(t);
    }
    // The same value from another C++ type: an equal constant.
    array c = scalar_operand(3.0, t);
    EXPECT_EQ(c.dtype(), t);
    if (t != complex64) EXPECT_EQ(c.item<double>(), want) << dtype_name(t);
  }
  // A later hit still holds the value after other scalars went through.
  for (int k = 0; k < 20; ++k) scalar_operand(static_cast<float>(k) + 0.5f);
  EXPECT_EQ(scalar_operand(3, float32).item<float>(), 3.0f);
}

TEST(ScalarOperands, DistinctValuesDoNotAlias) {
  array one = scalar_operand(1.0f);
  array two = scalar_operand(2.0f);
  EXPECT_FALSE(one.is_same(two));
  EXPECT_EQ(one.item<float>(), 1.0f);
  EXPECT_EQ(two.item<float>(), 2.0f);
  // Same value, other dtype; the sign of zero; values that one dtype rounds together.
  EXPECT_FALSE(scalar_operand(1, int32).is_same(scalar_operand(1, float32)));
  EXPECT_FALSE(scalar_operand(1, int32).is_same(scalar_operand(1, int64)));
  array pz = scalar_operand(0.0f), nz = scalar_operand(-0.0f);
  EXPECT_FALSE(pz.is_same(nz));
  EXPECT_FALSE(std::signbit(pz.item<float>()));
  EXPECT_TRUE(std::signbit(nz.item<float>()));
  EXPECT_FALSE(scalar_operand(16777217, int32).is_same(scalar_operand(16777216, int32)));
  // float32 cannot tell 2^24 + 1 from 2^24: equal constants.
  EXPECT_EQ(scalar_operand(16777217.0, float32).item<float>(),
            scalar_operand(16777216.0, float32).item<float>());
  EXPECT_EQ(scalar_operand(16777217.0, float32).item<float>(), 16777216.0f);
  float nan = std::nanf("");
  EXPECT_TRUE(std::isnan(scalar_operand(nan).item<float>()));
  // More distinct values than the cache holds: each still reads back its own.
  std::vector<array> held;
  for (int k = 0; k < 200; ++k) held.push_back(scalar_operand(k, int32));
  for (int k = 0; k < 200; ++k) {
    EXPECT_EQ(held[k].item<int32_t>(), k);
    EXPECT_EQ(scalar_operand(k, int32).item<int32_t>(), k);
  }
  EXPECT_EQ(one.item<float>(), 1.0f);
}

TEST(ScalarOperands, CachedConstantIsNeverWrittenInPlace) {
  // Each op below has an input that only its task and the cache hold; a
  // donating kernel would write its result into that buffer.
  array x = copy(array(10.0f));
  eval(x);
  array y = add(scalar_operand(2.0f), x);   // scalar-scalar: a donation candidate
  array z = multiply(scalar_operand(3.0f), copy(array({1.f, 2.f, 3.f, 4.f})));
  array w = subtract(broadcast_to(scalar_operand(4.0f), {4}), array({1.f, 1.f, 1.f, 1.f}));
  eval(y, z, w);
  EXPECT_EQ(y.item<float>(), 12.0f);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(z.data<float>()[k], 3.0f * (k + 1));
    EXPECT_EQ(w.data<float>()[k], 3.0f);
  }
  EXPECT_EQ(scalar_operand(2.0f).item<float>(), 2.0f);
  EXPECT_EQ(scalar_operand(3.0f).item<float>(), 3.0f);
  EXPECT_EQ(scalar_operand(4.0f).item<float>(), 4.0f);

  // A chain in which every step donates the previous result's buffer.
  array c = scalar_operand(1.0f);
  array acc = copy(array(0.0f));
  for (int k = 0; k < 300; ++k) acc = acc + 1.0f;
  eval(acc);
  EXPECT_EQ(acc.item<float>(), 300.0f);
  EXPECT_EQ(c.item<float>(), 1.0f);
  EXPECT_TRUE(scalar_operand(1.0f).is_same(c));
  // The constant handed to both operands of one op.
  array twice = add(scalar_operand(5, int32), scalar_operand(5, int32));
  eval(twice);
  EXPECT_EQ(twice.item<int32_t>(), 10);
  EXPECT_EQ(scalar_operand(5, int32).item<int32_t>(), 5);
  // Neither the constant nor a view of it can be donated while it is cached.
  array v = broadcast_to(scalar_operand(6.0f), {3});
  eval(v);
  EXPECT_FALSE(v.is_donatable());
}

TEST(ScalarOperands, OperatorsTakeTheCachedConstant) {
  array x(2.0f);
  array y = x * 0.25f;
  ASSERT_EQ(y.inputs().size(), 2u);
  EXPECT_TRUE(y.inputs()[1].is_same(scalar_operand(0.25f)));
  // Broadcast: a view of the constant, made at once (Note [Views of evaluated
  // arrays] in core/array.cpp).
  array v = array({1.f, 2.f}) * 0.25f;
  EXPECT_FALSE(v.inputs()[1].has_primitive());
  EXPECT_EQ(v.inputs()[1].data<float>(), scalar_operand(0.25f).data<float>());
  array z = 2 - x;  // an int32 scalar (C++ rule), promoted with float32
  eval(y, v, z);
  EXPECT_EQ(y.item<float>(), 0.5f);
  EXPECT_EQ(v.data<float>()[1], 0.5f);
  EXPECT_EQ(z.dtype(), float32);
  EXPECT_EQ(z.item<float>(), 0.0f);
}

TEST(ScalarOperands, ResultsMatchAHandComputation) {
  // ((x * 2 + 1) - 0.5) / 4 with x = 1..4, float32.
  array x({1.f, 2.f, 3.f, 4.f});
  array f = (x * 2.0f + 1.0f - 0.5f) / 4.0f;
  eval(f);
  const float want_f[] = {0.625f, 1.125f, 1.625f, 2.125f};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(f.data<float>()[k], want_f[k]);

  // int32 with int32 scalars: 7 * x - 3, then maximum with 0.
  array i({-1, 0, 1, 2}, int32);
  array r = maximum(i * 7 - 3, scalar_operand(0, int32));
  eval(r);
  EXPECT_EQ(r.dtype(), int32);
  const int32_t want_i[] = {0, 0, 4, 11};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(r.data<int32_t>()[k], want_i[k]);

  // float16 with a float16 scalar stays float16; with a float32 one it promotes.
  array h = astype(array({1.f, 2.f, 3.f}), float16);
  array h16 = multiply(h, scalar_operand(0.5, float16));
  array h32 = h * 0.5f;
  eval(h16, h32);
  EXPECT_EQ(h16.dtype(), float16);
  EXPECT_EQ(h32.dtype(), float32);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(static_cast<float>(h16.data<float16_t>()[k]), 0.5f * (k + 1));
    EXPECT_EQ(h32.data<float>()[k], 0.5f * (k + 1));
  }

  // A 0-d chain of mixed scalars: ((0 + 3) * 2 - 1) / 5 = 1, 100 times over.
  array s = copy(array(0.0f));
  for (int k = 0; k < 100; ++k) s = ((s * 0.0f + 3.0f) * 2.0f - 1.0f) / 5.0f + s;
  eval(s);
  EXPECT_EQ(s.item<float>(), 100.0f);

  // Comparisons and a bool scalar.
  array m = logical_and(x > 2.5f, scalar_operand(true));
  eval(m);
  EXPECT_EQ(m.dtype(), bool_);
  EXPECT_FALSE(m.data<bool>()[1]);
  EXPECT_TRUE(m.data<bool>()[2]);
}

TEST(ScalarOperands, OneElementOperandsOnEveryPathMatchTheCpu) {
  // On the GPU a one-element operand valid on the host travels by value (the
  // tiny-op batch for few elements, the contiguous kernel for many), one
  // valid only on the device by address. Both, against the CPU.
  for (Dtype t : {float32, float16, bfloat16, float64, int32, uint32, int64}) {
    for (int n : {37, 10000}) {
      array x = astype(remainder(arange(0, n), array(13)), t);
      array held = copy(array(3, t));  // on the GPU: valid on the device only
      eval(x, held);
      auto chain = [&](StreamOrDevice s) {
        array r = add(multiply(x, scalar_operand(2, t), s), held, s);  // x*2 + 3
        r = subtract(scalar_operand(100, t), r, s);                     // 97 - 2x
        r = maximum(r, scalar_operand(80, t), s);
        r = add(r, add(held, scalar_operand(1, t), s), s);              // + 4
        array big = astype(greater(r, scalar_operand(90, t), s), t, s);  // bool out
        return add(r, big, s);
      };
      array on_default = chain(default_device());
      eval(on_default);
      array on_cpu = chain(Device::cpu);
      eval(on_cpu);
      ASSERT_TRUE(array_equal(on_default, on_cpu).item<bool>()) << dtype_name(t) << " " << n;
      // By hand: max(97 - 2x, 80) + 4, plus 1 above 90.
      array f = astype(on_cpu, float64);
      eval(f);
      for (int i = 0; i < n; i += 7) {
        double v = std::max(97.0 - 2.0 * (i % 13), 80.0) + 4.0;
        v += v > 90.0;
        ASSERT_EQ(f.data<double>()[i], v) << dtype_name(t) << " " << i;
      }
    }
  }
}
