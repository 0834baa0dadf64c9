// Binary elementwise ops beyond the suites of test_elementwise.cpp (which run
// every op of op_table.h on every dtype, layout and device): broadcasting;
// promotion of every dtype pair; views; integer semantics; float specials;
// divmod; where / clip / isclose / allclose / array_equal; operators; large
// arrays; buffer donation; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>

#include "harness.h"

using namespace tessera;
using harness::wrap_int;

TEST(Binary, Broadcasting) {
  harness::on_each_device([] {
    struct Pair {
      Shape a, b, out;
    };
    std::vector<Pair> pairs = {{{3, 1}, {1, 4}, {3, 4}},   {{}, {2, 3}, {2, 3}},
                               {{2, 3}, {}, {2, 3}},       {{4}, {3, 4}, {3, 4}},
                               {{2, 1, 3}, {4, 1}, {2, 4, 3}}, {{0, 3}, {1, 3}, {0, 3}},
                               {{1}, {5}, {5}},            {{}, {}, {}},
                               {{5, 1}, {5, 7}, {5, 7}},
                               // A row down many rows, either side (a dense input
                               // beside a broadcast row has its own GPU kernel).
                               {{37, 1024}, {1024}, {37, 1024}}, {{1024}, {37, 1024}, {37, 1024}},
                               {{3, 9, 64}, {64}, {3, 9, 64}},    {{41}, {6, 41}, {6, 41}}};
    uint64_t seed = 7;
    for (Dtype t : {float32, int32, float16, uint8}) {
      for (auto& p : pairs) {
        auto va = harness::random_values(shape_size(p.a), t, 0, 9, seed++);
        auto vb = harness::random_values(shape_size(p.b), t, 0, 9, seed++);
        array a = harness::from_doubles(va, p.a, t);
        array b = harness::from_doubles(vb, p.b, t);
        auto ba = harness::broadcast_values(va, p.a, p.out),
             bb = harness::broadcast_values(vb, p.b, p.out);
        std::string ctx = dtype_name(t) + " " + shape_str(p.a) + " with " + shape_str(p.b);
        array sum = add(a, b);
        ASSERT_EQ(sum.shape(), p.out) << ctx;
        std::vector<double> want_sum(ba.size()), want_max(ba.size()), want_less(ba.size()),
            want_diff(ba.size());
        for (size_t i = 0; i < ba.size(); ++i) {
          want_sum[i] = wrap_int(ba[i] + bb[i], t);
          want_diff[i] = wrap_int(ba[i] - bb[i], t);
          want_max[i] = std::max(ba[i], bb[i]);
          want_less[i] = ba[i] < bb[i];
        }
        harness::expect_values(sum, want_sum, ctx + " add");
        harness::expect_values(maximum(a, b), want_max, ctx + " maximum");
        harness::expect_values(less(a, b), want_less, ctx + " less");
        harness::expect_values(add(b, a), want_sum, ctx + " add swapped");
        harness::expect_values(subtract(a, b), want_diff, ctx + " subtract");
      }
    }
    // A 0-d array with a 0-d array stays 0-d.
    array s = multiply(array(3.0f), array(4.0f));
    EXPECT_EQ(s.ndim(), 0u);
    EXPECT_EQ(s.item<float>(), 12.0f);
  });
}

TEST(Binary, PromotionOfEveryDtypePair) {
  harness::on_each_device([] {
    for (Dtype ta : harness::all_types()) {
      for (Dtype tb : harness::all_types()) {
        array a = astype(array({0, 1, 1}), ta);
        array b = astype(array({1, 1, 0}), tb);
        Dtype t = promote_types(ta, tb);
        std::string ctx = dtype_name(ta) + " + " + dtype_name(tb);
        array c = add(a, b);
        ASSERT_EQ(c.dtype(), t) << ctx;
        if (t == bool_) {
          harness::expect_values(c, {1, 1, 1}, ctx);
        } else {
          harness::expect_values(c, {1, 2, 1}, ctx);
        }
        EXPECT_EQ(multiply(a, b).dtype(), t) << ctx;
        EXPECT_EQ(maximum(a, b).dtype(), t) << ctx;
        EXPECT_EQ(divide(a, b).dtype(), inexact_type(t)) << ctx;
        EXPECT_EQ(less(a, b).dtype(), bool_) << ctx;
        EXPECT_EQ(logical_or(a, b).dtype(), bool_) << ctx;
        harness::expect_values(logical_or(a, b), {1, 1, 1}, ctx + " logical_or");
        harness::expect_values(equal(a, b), {0, 1, 0}, ctx + " equal");
      }
    }
  });
}

TEST(Binary, ViewsOfOneBuffer) {
  harness::on_each_device([] {
    array x({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3});
    eval(x);
    harness::expect_values(add(x, x), {0, 2, 4, 6, 8, 10}, "x + x");
    array xt = transpose(x);
    harness::expect_values(add(xt, reshape(array({0.f, 10.f, 20.f, 30.f, 40.f, 50.f}), {3, 2})),
                           {0, 13, 21, 34, 42, 55}, "transposed + contiguous");
    array rev = slice(x, {1, 2}, {-3, -4}, {-1, -1});  // both axes reversed
    harness::expect_values(subtract(rev, x), {5, 3, 1, -1, -3, -5}, "reversed - x");
    array offset = slice(x, {1, 1}, {2, 3}, {1, 1});  // [[4, 5]]
    harness::expect_values(multiply(offset, slice(x, {0, 0}, {2, 2}, {1, 1})), {0, 5, 12, 20},
                           "offset view broadcast");
    array stepped = slice(x, {0, 0}, {2, 3}, {1, 2});  // [[0, 2], [3, 5]]
    harness::expect_values(maximum(stepped, array(2.5f)), {2.5, 2.5, 3, 5}, "stepped view");
    harness::expect_values(x, {0, 1, 2, 3, 4, 5}, "x unchanged");
  });
}

TEST(Binary, IntegerSemantics) {
  harness::on_each_device([] {
    // Division and remainder by zero give 0; INT_MIN / -1 wraps.
    array a({7, -7, 0, 5}, int32);
    harness::expect_values(floor_divide(a, array(0)), {0, 0, 0, 0}, "x // 0");
    harness::expect_values(remainder(a, array(0)), {0, 0, 0, 0}, "x % 0");
    harness::expect_values(floor_divide(array({7u, 0u}, uint32), array(0u)), {0, 0}, "uint // 0");
    int32_t min32 = std::numeric_limits<int32_t>::min();
    EXPECT_EQ(floor_divide(array(min32), array(-1)).item<int32_t>(), min32);
    EXPECT_EQ(remainder(array(min32), array(-1)).item<int32_t>(), 0);
    // floor_divide of integers floors (Python's and MLX's -7 // 2 == -4);
    // remainder has the sign of the divisor.
    harness::expect_values(floor_divide(array({7, -7, 7, -7, -8, 8}), array({2, 2, -2, -2, 4, -4})),
                           {3, -4, -4, 3, -2, -2}, "int //");
    harness::expect_values(floor_divide(array({-7, 7}, int8), array({2, -2}, int8)), {-4, -4},
                           "int8 //");
    harness::expect_values(remainder(array({7, -7, 7, -7}), array({3, 3, -3, -3})), {1, 2, -2, -1},
                           "int %");
    harness::expect_values(floor_divide(array({7.f, -7.f}), array(2.f)), {3, -4}, "float //");
    harness::expect_values(remainder(array({-7.5f, 7.5f, 6.f}), array({2.f, -2.f, 3.f})),
                           {0.5, -0.5, 0}, "float %");
    harness::expect_values(remainder(array({1.f}), array(0.f)), {NAN}, "float % 0");
    // Overflow wraps.
    harness::expect_values(add(array({127, -128}, int8), array(1, int8)), {-128, -127},
                           "int8 wraps");
    harness::expect_values(add(array({255}, uint8), array(1, uint8)), {0}, "uint8 wraps");
    EXPECT_EQ(add(array(std::numeric_limits<int32_t>::max()), array(1)).item<int32_t>(), min32);
    EXPECT_EQ(
        multiply(array(std::numeric_limits<int64_t>::max()), array(int64_t{2})).item<int64_t>(),
        int64_t{-2});
    EXPECT_EQ(
        multiply(array(uint16_t{65535}, uint16), array(uint16_t{65535}, uint16)).item<uint16_t>(),
        1);
    EXPECT_EQ(subtract(array(0u), array(1u)).item<uint32_t>(),
              std::numeric_limits<uint32_t>::max());
    // Exact integer powers; a negative exponent gives 0 (MLX's result).
    EXPECT_EQ(power(array(int64_t{3}), array(int64_t{39})).item<int64_t>(), 4052555153018976267LL);
    EXPECT_EQ(power(array(2), array(31)).item<int32_t>(), min32);
    harness::expect_values(power(array({2, 1, -1, -1, 0}), array({-1, -5, -3, -2, -1})),
                           {0, 0, 0, 0, 0}, "negative exponents");
    harness::expect_values(power(array({0, 5}), array({0, 0})), {1, 1}, "x ** 0");
    // Shifts.
    harness::expect_values(left_shift(array({1, 1, 1, -1}), array({3, 31, 32, -1})),
                           {8, double(min32), 0, 0}, "<<");
    harness::expect_values(right_shift(array({-8, -8, 8, 8}), array({1, 100, 100, -2})),
                           {-4, -1, 0, 0}, ">>");
    harness::expect_values(right_shift(array({200}, uint8), array(3, uint8)), {25}, "uint8 >>");
    array bs = left_shift(array({true, false}), array(true));
    EXPECT_EQ(bs.dtype(), uint8);
    harness::expect_values(bs, {2, 0}, "bool << bool");
  });
}

TEST(Binary, FloatSpecials) {
  harness::on_each_device([] {
    const double inf = INFINITY, nan = NAN;
    for (Dtype t : harness::float_types()) {
      std::string ctx = dtype_name(t);
      array a = harness::from_doubles({nan, 1, inf, -inf, 2, 1000}, {6}, t);
      array b = harness::from_doubles({1, nan, 1, -inf, 2, 1000}, {6}, t);
      harness::expect_values(maximum(a, b), {nan, nan, inf, -inf, 2, 1000}, ctx + " maximum");
      harness::expect_values(minimum(a, b), {nan, nan, 1, -inf, 2, 1000}, ctx + " minimum");
      double big = static_cast<double>(harness::to_doubles(a)[5]);
      harness::expect_values(logaddexp(a, b),
                             {nan, nan, inf, -inf, 2 + std::log(2.0), big + std::log(2.0)},
                             ctx + " logaddexp");
      harness::expect_values(equal(a, b), {0, 0, 0, 1, 1, 1}, ctx + " equal");
      harness::expect_values(not_equal(a, b), {1, 1, 1, 0, 0, 0}, ctx + " not_equal");
      harness::expect_values(less(a, b), {0, 0, 0, 0, 0, 0}, ctx + " less");
      harness::expect_values(divide(harness::from_doubles({1, -1, 0}, {3}, t), array(0.f, t)),
                             {inf, -inf, nan}, ctx + " / 0");
      harness::expect_values(logical_and(a, b), {1, 1, 1, 1, 1, 1}, ctx + " NaN is true");
    }
  });
}

TEST(Binary, DivModIsOneNodeWithTwoOutputs) {
  harness::on_each_device([] {
    array a({7, -7, 9, 4}, int32);
    array b({2, 2, 0, -3}, int32);
    auto qr = divmod(a, b);
    ASSERT_EQ(qr.size(), 2u);
    EXPECT_EQ(qr[0].dtype(), int32);
    EXPECT_EQ(qr[1].dtype(), int32);
    EXPECT_EQ(&qr[0].primitive(), &qr[1].primitive());
    eval(qr);
    harness::expect_values(qr[0], {3, -4, 0, -2}, "quotient");
    harness::expect_values(qr[1], {1, 1, 0, -2}, "remainder");
    auto f = divmod(array({7.5f, -7.5f}), array(2.0f));
    harness::expect_values(f[1], {1.5, 0.5}, "float remainder alone");
    harness::expect_values(f[0], {3, -4}, "float quotient");
    // Temporaries as inputs (donatable): both outputs still right.
    auto t = divmod(add(a, array(0)), add(b, array(0)));
    harness::expect_values(t[1], {1, 1, 0, -2}, "remainder of temporaries");
    harness::expect_values(t[0], {3, -4, 0, -2}, "quotient of temporaries");
    auto bc = divmod(array({5, 6}, {2, 1}, int32), array({1, 2, 3}));
    EXPECT_EQ(bc[0].shape(), (Shape{2, 3}));
    harness::expect_values(bc[1], {0, 1, 2, 0, 0, 0}, "broadcast divmod");
    EXPECT_THROW(divmod(array(complex64_t(1, 1)), array(1.f)), std::invalid_argument);
  });
}

TEST(Binary, Where) {
  harness::on_each_device([] {
    array cond({true, false, true, false});
    harness::expect_values(where(cond, array({1, 2, 3, 4}), array({10, 20, 30, 40})),
                           {1, 20, 3, 40}, "same shapes");
    array w = where(array({1, 0, 2}), array(1.5f), array({7, 8, 9}));
    EXPECT_EQ(w.dtype(), float32);
    harness::expect_values(w, {1.5, 8, 1.5}, "broadcast scalar, int condition, promotion");
    array cm = reshape(array({true, false}), {2, 1});
    array r = where(cm, array({1.0, 2.0, 3.0}, float64),
                    transpose(array({10, 20, 30, 40, 50, 60}, {3, 2}, int64)));
    EXPECT_EQ(r.shape(), (Shape{2, 3}));
    EXPECT_EQ(r.dtype(), float64);
    harness::expect_values(r, {1, 2, 3, 20, 40, 60}, "column condition with transposed y");
    array big = where(greater(array({0.f, 1.f}), array(0.5f)), array(1.f), array(-1.f));
    harness::expect_values(big, {-1, 1}, "scalar branches");
    for (Dtype t : harness::all_types()) {
      array x = astype(array({1, 0}), t), y = astype(array({0, 1}), t);
      harness::expect_values(where(array({false, true}), x, y), {0, 0}, dtype_name(t));
    }
    EXPECT_THROW(where(array({true, false}), array({1, 2, 3}), array(0)), std::invalid_argument);
    array e = where(array({true}), slice(array({1.f}), {0}, {0}, {1}), array(0.f));
    eval(e);
    EXPECT_EQ(e.size(), 0u);
  });
}

TEST(Binary, Clip) {
  harness::on_each_device([] {
    array a({-3.f, 0.5f, 4.f});
    harness::expect_values(clip(a, array(0.f), array(1.f)), {0, 0.5, 1}, "both");
    harness::expect_values(clip(a, array(0.f)), {0, 0.5, 4}, "min only");
    harness::expect_values(clip(a, std::nullopt, array(1.f)), {-3, 0.5, 1}, "max only");
    harness::expect_values(clip(a, array({-4.f, 1.f, 0.f})), {-3, 1, 4}, "array bound");
    array ci = clip(array({-5, 5}), array(-1), array(2));
    EXPECT_EQ(ci.dtype(), int32);
    harness::expect_values(ci, {-1, 2}, "int");
    EXPECT_THROW(clip(a), std::invalid_argument);
  });
}

TEST(Binary, IsCloseAllCloseArrayEqual) {
  harness::on_each_device([] {
    const float inf = INFINITY, nan = NAN;
    array a({1.f, 1.f + 1e-6f, inf, -inf, nan, 1e10f, 0.f});
    array b({1.f, 1.f, inf, inf, nan, 1.000001e10f, 1e-9f});
    harness::expect_values(isclose(a, b), {1, 1, 1, 0, 0, 1, 1}, "isclose");
    harness::expect_values(isclose(a, b, 1e-5, 1e-8, true), {1, 1, 1, 0, 1, 1, 1}, "equal_nan");
    harness::expect_values(isclose(a, b, 0, 0), {1, 0, 1, 0, 0, 0, 0}, "exact");
    harness::expect_values(isclose(array(1.f), array(inf)), {0}, "finite vs inf");
    EXPECT_EQ(isclose(a, b).dtype(), bool_);
    EXPECT_TRUE(allclose(array({1.f, 2.f}), array({1.f, 2.000001f})).item<bool>());
    EXPECT_FALSE(allclose(array({1.f, 2.f}), array({1.f, 2.1f})).item<bool>());
    EXPECT_TRUE(allclose(array({1.f, 2.f}, {2, 1}), array(1.0f), 2.0).item<bool>());  // broadcast
    EXPECT_FALSE(allclose(array({nan}), array({nan})).item<bool>());
    EXPECT_TRUE(allclose(array({nan}), array({nan}), 1e-5, 1e-8, true).item<bool>());
    array ac = allclose(array({1, 2}), array({1, 2}));
    EXPECT_EQ(ac.ndim(), 0u);
    EXPECT_EQ(ac.dtype(), bool_);
    EXPECT_TRUE(ac.item<bool>());
    EXPECT_TRUE(allclose(slice(array({1.f}), {0}, {0}, {1}), array(2.f)).item<bool>());  // empty

    EXPECT_TRUE(array_equal(array({1, 2, 3}), array({1.f, 2.f, 3.f})).item<bool>());
    EXPECT_FALSE(array_equal(array({1, 2, 3}), array({1, 2, 4})).item<bool>());
    EXPECT_FALSE(array_equal(array({1, 2}), array({1, 2}, {1, 2}, int32)).item<bool>());
    EXPECT_FALSE(array_equal(array({1.f, 2.f, 3.f}, {3, 1}), array({1.f, 2.f, 3.f})).item<bool>());
    EXPECT_FALSE(array_equal(array({nan}), array({nan})).item<bool>());
    EXPECT_TRUE(array_equal(array({nan, 1.f}), array({nan, 1.f}), true).item<bool>());
    EXPECT_TRUE(array_equal(array({1, 2}), array({1, 2}), true).item<bool>());
    array m({0.f, 1.f, 2.f, 3.f}, {2, 2});
    EXPECT_TRUE(array_equal(transpose(m), array({0.f, 2.f, 1.f, 3.f}, {2, 2})).item<bool>());
    EXPECT_FALSE(array_equal(transpose(m), m).item<bool>());
    EXPECT_TRUE(array_equal(array(complex64_t(1, 2)), array(complex64_t(1, 2))).item<bool>());
    EXPECT_FALSE(array_equal(array(complex64_t(1, 2)), array(complex64_t(1, 3))).item<bool>());
  });
}

TEST(Binary, OperatorsWithScalars) {
  harness::on_each_device([] {
    array a({1, 2, 3});
    EXPECT_EQ((a + 1).dtype(), int32);
    harness::expect_values(a + 1, {2, 3, 4}, "a + 1");
    EXPECT_EQ((a + 1.5f).dtype(), float32);
    harness::expect_values(a * 2.0, {2, 4, 6}, "a * 2.0 (double -> float32)");
    EXPECT_EQ((a * 2.0).dtype(), float32);
    harness::expect_values(10 - a, {9, 8, 7}, "10 - a");
    harness::expect_values(a / 2, {0.5, 1, 1.5}, "a / 2");
    harness::expect_values(7 % a, {0, 1, 1}, "7 % a");
    harness::expect_values(a == 2, {0, 1, 0}, "==");
    harness::expect_values(a != 2, {1, 0, 1}, "!=");
    harness::expect_values(a < 2, {1, 0, 0}, "<");
    harness::expect_values(a <= 2, {1, 1, 0}, "<=");
    harness::expect_values(2 > a, {1, 0, 0}, ">");
    harness::expect_values(a >= 2, {0, 1, 1}, ">=");
    harness::expect_values((a > 1) && (a < 3), {0, 1, 0}, "&&");
    harness::expect_values((a < 2) || (a > 2), {1, 0, 1}, "||");
    harness::expect_values(a & 1, {1, 0, 1}, "&");
    harness::expect_values(a | 4, {5, 6, 7}, "|");
    harness::expect_values(a ^ 3, {2, 1, 0}, "^");
    harness::expect_values(a << 2, {4, 8, 12}, "<<");
    harness::expect_values(a >> 1, {0, 1, 1}, ">>");
    harness::expect_values(a - a, {0, 0, 0}, "a - a");
    harness::expect_values(array(uint8_t{200}, uint8) + a, {201, 202, 203}, "uint8 + int32");
    EXPECT_EQ((array(uint8_t{200}, uint8) + a).dtype(), int32);
    harness::expect_values(array({true, false}) + true, {1, 1}, "bool + bool is or");
    EXPECT_EQ((array({true, false}) + true).dtype(), bool_);
  });
}

TEST(Binary, LargeArraysTakeEveryKernelPath) {
  const int n = 300001;
  std::vector<double> v(n), w(n);
  for (int i = 0; i < n; ++i) {
    v[i] = i % 1000;
    w[i] = (i * 7) % 1000;
  }
  array x = harness::from_doubles(v, {n}, float32);
  array y = harness::from_doubles(w, {n}, float32);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) want[i] = v[i] + w[i];
  harness::expect_values(add(x, y), want, "vector-vector");
  for (int i = 0; i < n; ++i) want[i] = v[i] * 2;
  harness::expect_values(multiply(x, array(2.f)), want, "vector-scalar");
  harness::expect_values(multiply(array(2.f), x), want, "scalar-vector");
  // Temporaries: the kernel may reuse their buffers.
  for (int i = 0; i < n; ++i) want[i] = (v[i] + w[i]) * w[i] - v[i];
  harness::expect_values(subtract(multiply(add(x, y), y), x), want, "donated chain");
  harness::expect_values(x, v, "x unchanged");
  // General: (600,1) with (1,600), and a transposed operand.
  std::vector<double> col(600), row(600);
  for (int i = 0; i < 600; ++i) col[i] = i, row[i] = 1000 * i;
  array c = harness::from_doubles(col, {600, 1}, int32);
  array r = harness::from_doubles(row, {1, 600}, int32);
  std::vector<double> outer(600 * 600);
  for (int i = 0; i < 600; ++i)
    for (int j = 0; j < 600; ++j) outer[i * 600 + j] = col[i] + row[j];
  array o = add(c, r);
  harness::expect_values(o, outer, "outer sum");
  std::vector<double> sym(600 * 600);
  for (int i = 0; i < 600; ++i)
    for (int j = 0; j < 600; ++j) sym[i * 600 + j] = outer[i * 600 + j] + outer[j * 600 + i];
  harness::expect_values(add(o, transpose(o)), sym, "o + o^T");
}

TEST(Binary, LastUseInputBufferIsDonated) {
  array x = copy(array({1.f, 2.f, 3.f}));
  array y = copy(array({10.f, 20.f, 30.f}));
  eval(x, y);
  const void* px = x.data<float>();
  const void* py = y.data<float>();
  array s = add(x, array(1.f));  // vector-scalar: x's buffer
  array t = multiply(array(2.f), y);  // scalar-vector: y's buffer
  x = array(0);
  y = array(0);
  eval(s, t);
  EXPECT_EQ(static_cast<const void*>(s.data<float>()), px);
  EXPECT_EQ(static_cast<const void*>(t.data<float>()), py);
  harness::expect_values(s, {2, 3, 4}, "x + 1");
  harness::expect_values(t, {20, 40, 60}, "2 * y");
  // A comparison writes bool: no donation from float32, still right.
  array u = copy(array({1.f, 5.f}));
  array c = less(u, array(2.f));
  u = array(0);
  harness::expect_values(c, {1, 0}, "less of a temporary");
}

TEST(Binary, Errors) {
  array a({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  array b({1.f, 2.f, 3.f, 4.f});
  try {
    add(a, b);
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "[add] shapes (2,3) and (4,) cannot be broadcast");
  }
  try {
    multiply(a, b);
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "[multiply] shapes (2,3) and (4,) cannot be broadcast");
  }
  auto expect_message = [](const std::function<void()>& f, const std::string& op,
                           const std::string& dtype) {
    try {
      f();
      ADD_FAILURE() << op << ": expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[" + op + "]"), std::string::npos) << msg;
      EXPECT_NE(msg.find(dtype), std::string::npos) << msg;
    }
  };
  array f({1.f});
  array i({1});
  array t({true});
  array c(complex64_t(1, 1));
  expect_message([&] { bitwise_and(f, i); }, "bitwise_and", "float32");
  expect_message([&] { bitwise_or(i, c); }, "bitwise_or", "complex64");
  expect_message([&] { bitwise_xor(astype(f, bfloat16), i); }, "bitwise_xor", "bfloat16");
  expect_message([&] { (void)(f & i); }, "bitwise_and", "float32");
  expect_message([&] { left_shift(f, i); }, "left_shift", "float32");
  expect_message([&] { right_shift(i, f); }, "right_shift", "float32");
  expect_message([&] { subtract(t, t); }, "subtract", "bool");
  expect_message([&] { floor_divide(c, f); }, "floor_divide", "complex64");
  expect_message([&] { remainder(f, c); }, "remainder", "complex64");
  expect_message([&] { arctan2(c, f); }, "arctan2", "complex64");
  EXPECT_THROW(where(array({true, false}), a, b), std::invalid_argument);
  EXPECT_THROW(isclose(a, b), std::invalid_argument);
  EXPECT_THROW(allclose(a, b), std::invalid_argument);
  EXPECT_THROW(clip(a, b), std::invalid_argument);
  EXPECT_THROW(divmod(a, b), std::invalid_argument);
  // Comparisons and equal of different shapes that do not broadcast throw;
  // array_equal says false.
  EXPECT_THROW(equal(a, b), std::invalid_argument);
  EXPECT_FALSE(array_equal(a, b).item<bool>());
}
