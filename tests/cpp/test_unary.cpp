// Unary elementwise ops beyond the suites of test_elementwise.cpp (which run
// every op of op_table.h on every dtype, layout and device): result dtypes,
// special values, rounding, integer edge cases, complex specials, large
// arrays, buffer donation, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>

#include "harness.h"

using namespace tessera;

namespace {

using cd = std::complex<double>;

}  // namespace

// bitwise_invert of bool is logical not.
TEST(Unary, BitwiseInvertOfBoolIsLogicalNot) {
  harness::on_each_device([] {
    harness::expect_values(bitwise_invert(array({true, false})), {0, 1}, "bool");
    harness::expect_values(~array({true, false}), {0, 1}, "operator~");
  });
}

TEST(Unary, ResultDtypes) {
  for (Dtype t : harness::all_types()) {
    array x = astype(array({1, 2}), t);
    EXPECT_EQ(exp(x).dtype(), inexact_type(t)) << t;
    EXPECT_EQ(sqrt(x).dtype(), inexact_type(t)) << t;
    EXPECT_EQ(isnan(x).dtype(), bool_) << t;
    EXPECT_EQ(logical_not(x).dtype(), bool_) << t;
    EXPECT_EQ(abs(x).dtype(), t == complex64 ? float32 : t) << t;
    EXPECT_EQ(real(x).dtype(), t == complex64 ? float32 : t) << t;
    EXPECT_EQ(imag(x).dtype(), t == complex64 ? float32 : t) << t;
    EXPECT_EQ(square(x).dtype(), t) << t;
    EXPECT_EQ(sign(x).dtype(), t) << t;
  }
}

TEST(Unary, SpecialFloatValues) {
  harness::on_each_device([] {
    const double inf = INFINITY, nan = NAN;
    for (Dtype t : {float16, bfloat16, float32, float64}) {
      array x = harness::from_doubles({nan, inf, -inf, -0.0, 0.0, -1.0}, {6}, t);
      std::string ctx = dtype_name(t);
      harness::expect_values(exp(x), {nan, inf, 0, 1, 1, std::exp(-1.0)}, ctx + " exp");
      harness::expect_values(log(x), {nan, inf, nan, -inf, -inf, nan}, ctx + " log");
      harness::expect_values(sqrt(x), {nan, inf, nan, 0, 0, nan}, ctx + " sqrt");
      harness::expect_values(abs(x), {nan, inf, inf, 0, 0, 1}, ctx + " abs");
      harness::expect_values(sign(x), {nan, 1, -1, 0, 0, -1}, ctx + " sign");
      harness::expect_values(reciprocal(x), {nan, 0, 0, -inf, inf, -1}, ctx + " reciprocal");
      harness::expect_values(isnan(x), {1, 0, 0, 0, 0, 0}, ctx + " isnan");
      harness::expect_values(isinf(x), {0, 1, 1, 0, 0, 0}, ctx + " isinf");
      harness::expect_values(isfinite(x), {0, 0, 0, 1, 1, 1}, ctx + " isfinite");
      harness::expect_values(isposinf(x), {0, 1, 0, 0, 0, 0}, ctx + " isposinf");
      harness::expect_values(isneginf(x), {0, 0, 1, 0, 0, 0}, ctx + " isneginf");
      harness::expect_values(sigmoid(x), {nan, 1, 0, 0.5, 0.5, 1 / (1 + std::exp(1.0))},
                             ctx + " sigmoid");
      harness::expect_values(erfinv(harness::from_doubles({1, -1, 2, 0}, {4}, t)),
                             {inf, -inf, nan, 0}, ctx + " erfinv");
      double big = finfo(t).max;
      harness::expect_values(nan_to_num(x), {0, big, -big, 0, 0, -1}, ctx + " nan_to_num");
      harness::expect_values(nan_to_num(x, 5.0f, 7.0f, -9.0f), {5, 7, -9, 0, 0, -1},
                             ctx + " nan_to_num(5, 7, -9)");
      harness::expect_values(logical_not(x), {0, 0, 0, 1, 1, 0}, ctx + " logical_not");
    }
    // -0.0 keeps its sign through negative, floor and ceil.
    array z = negative(array(0.0f));
    EXPECT_TRUE(std::signbit(z.item<float>()));
    EXPECT_TRUE(std::signbit(ceil(array(-0.5f)).item<float>()));
    EXPECT_TRUE(std::signbit(floor(array(-0.0f)).item<float>()));
  });
}

TEST(Unary, RoundHalfToEven) {
  harness::on_each_device([] {
    array x({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f});
    harness::expect_values(round(x), {0, 2, 2, 0, -2, -2, 3}, "round");
    harness::expect_values(round(array({1.25, 1.35, -2.25}, float64), 1), {1.2, 1.4, -2.2},
                           "round(1)");
    harness::expect_values(round(array({1234.5f}), -2), {1200}, "round(-2)");
    harness::expect_values(round(array({15, 25, -35, 44}, int32), -1), {20, 20, -40, 40},
                           "int round(-1)");
    EXPECT_EQ(round(array({15, 25}, int32), -1).dtype(), int32);
    harness::expect_values(round(array({true, false}), -1), {0, 0}, "bool round(-1)");
    harness::expect_values(round(array({true, false}), 2), {1, 0}, "bool round(2)");
    auto c = harness::to_complex(round(array(complex64_t(2.5f, -1.5f))));
    EXPECT_EQ(c[0], cd(2, -2));
  });
}

TEST(Unary, IntegerEdgeCases) {
  harness::on_each_device([] {
    harness::expect_values(abs(array({-128, 127, -5}, int8)), {-128, 127, 5}, "abs int8 wraps");
    harness::expect_values(negative(array({1, 0, 255}, uint8)), {255, 0, 1}, "negative uint8");
    array big(std::numeric_limits<int32_t>::min());
    EXPECT_EQ(negative(big).item<int32_t>(), std::numeric_limits<int32_t>::min());
    EXPECT_EQ(abs(array(std::numeric_limits<int64_t>::min())).item<int64_t>(),
              std::numeric_limits<int64_t>::min());
    harness::expect_values(square(array({16, -12}, int8)), {0, -112}, "square int8 wraps");
    harness::expect_values(bitwise_invert(array({0, 5, 255}, uint8)), {255, 250, 0}, "~uint8");
    harness::expect_values(bitwise_invert(array({0, 5, -1}, int32)), {-1, -6, 0}, "~int32");
    EXPECT_EQ(bitwise_invert(array(uint64_t{0})).item<uint64_t>(),
              std::numeric_limits<uint64_t>::max());
    harness::expect_values(sign(array({-7, 0, 9}, int64)), {-1, 0, 1}, "sign int64");
    harness::expect_values(sign(array({0, 9}, uint16)), {0, 1}, "sign uint16");
    harness::expect_values(floor(array({-3, 4}, int16)), {-3, 4}, "floor int16 unchanged");
    EXPECT_EQ(floor(array({-3, 4}, int16)).dtype(), int16);
    harness::expect_values(exp(array({0, 1}, int64)), {1, std::exp(1.0)}, "exp int64");
    harness::expect_values(sqrt(array({true, false})), {1, 0}, "sqrt bool");
    harness::expect_values(nan_to_num(array({1, 2}, int32)), {1, 2}, "nan_to_num int32");
  });
}

TEST(Unary, ComplexSpecials) {
  harness::on_each_device([] {
    array z(complex64_t(3, -4));
    EXPECT_EQ(abs(z).item<float>(), 5.0f);
    EXPECT_EQ(real(z).item<float>(), 3.0f);
    EXPECT_EQ(imag(z).item<float>(), -4.0f);
    EXPECT_EQ(conjugate(z).item<complex64_t>(), complex64_t(3, 4));
    EXPECT_EQ(sign(array(complex64_t(0, 0))).item<complex64_t>(), complex64_t(0, 0));
    array n(complex64_t(NAN, 1));
    EXPECT_TRUE(isnan(n).item<bool>());
    EXPECT_FALSE(isfinite(n).item<bool>());
    array i(complex64_t(1, INFINITY));
    EXPECT_TRUE(isinf(i).item<bool>());
    auto c = harness::to_complex(nan_to_num(array(complex64_t(NAN, -INFINITY))));
    EXPECT_EQ(c[0], cd(0, -std::numeric_limits<float>::max()));
  });
}

TEST(Unary, LargeArraysRunInParallelChunks) {
  const int n = 300001;
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i % 1000) / 100.0 - 5;
  array x = harness::from_doubles(v, {n}, float32);
  std::vector<double> want(n);
  for (int i = 0; i < n; ++i) want[i] = std::exp(float(v[i]));
  harness::expect_values(exp(x), want, "exp large");
  // A large strided view: the general path, split by rows.
  array m = harness::from_doubles(v, {1, n}, float32);
  array t = slice(reshape(m, {n}), {n - 1}, {-n - 1}, {-1});  // reversed
  std::vector<double> want_rev(n);
  for (int i = 0; i < n; ++i) want_rev[i] = -float(v[n - 1 - i]);
  harness::expect_values(negative(t), want_rev, "negative reversed");
}

TEST(Unary, InputsStillHeldAreNotOverwritten) {
  array x = copy(array({1.f, 2.f, 3.f}));
  eval(x);
  array y = exp(x);
  eval(y);
  harness::expect_values(x, {1, 2, 3}, "input unchanged");
  // A temporary input may be donated; the result is right either way.
  array z = sqrt(exp(copy(array({0.f, 2.f}))));
  harness::expect_values(z, {1, std::exp(1.0)}, "chain");
}

TEST(Unary, LastUseInputBufferIsDonated) {
  array x = copy(array({1.f, 4.f, 9.f}));
  eval(x);
  const void* p = x.data<float>();
  array y = sqrt(x);
  x = array(0);  // drop the last handle to the input
  eval(y);
  EXPECT_EQ(static_cast<const void*>(y.data<float>()), p);
  harness::expect_values(y, {1, 2, 3}, "sqrt in place");
}

TEST(Unary, ZeroDimAndEmpty) {
  harness::on_each_device([] {
    array s = exp(array(0.0f));
    EXPECT_EQ(s.ndim(), 0u);
    EXPECT_EQ(s.item<float>(), 1.0f);
    array e = sin(astype(array({1.f}), float32));
    array empty = slice(array({1.f, 2.f}), {0}, {0}, {1});
    array r = isnan(empty);
    eval(r);
    EXPECT_EQ(r.shape(), (Shape{0}));
    EXPECT_EQ(r.dtype(), bool_);
    EXPECT_EQ(e.size(), 1u);
  });
}

TEST(Unary, Errors) {
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
  array b({true, false});
  array f({1.f, 2.f});
  array c(complex64_t(1, 2));
  expect_message([&] { negative(b); }, "negative", "bool");
  expect_message([&] { (void)-b; }, "negative", "bool");
  expect_message([&] { bitwise_invert(f); }, "bitwise_invert", "float32");
  expect_message([&] { bitwise_invert(c); }, "bitwise_invert", "complex64");
  expect_message([&] { bitwise_invert(astype(f, float16)); }, "bitwise_invert", "float16");
  expect_message([&] { (void)~f; }, "bitwise_invert", "float32");
  expect_message([&] { floor(c); }, "floor", "complex64");
  expect_message([&] { ceil(c); }, "ceil", "complex64");
  expect_message([&] { trunc(c); }, "trunc", "complex64");
  expect_message([&] { erf(c); }, "erf", "complex64");
  expect_message([&] { erfinv(c); }, "erfinv", "complex64");
  expect_message([&] { degrees(c); }, "degrees", "complex64");
  expect_message([&] { radians(c); }, "radians", "complex64");
  EXPECT_THROW(negative(b), std::invalid_argument);
  EXPECT_THROW(floor(c), std::invalid_argument);
}
