// Creation ops (arange, linspace, full, zeros, ones, eye, tri, tril, triu,
// meshgrid, view, as_strided) and printing.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "harness.h"
#include "tessera/core/print.h"

using namespace tessera;
using harness::expect_values;
using harness::to_doubles;

namespace {

std::string dtype_ctx(Dtype t) { return "dtype " + dtype_name(t); }

std::string str(const array& a) {
  std::ostringstream os;
  os << a;
  return os.str();
}

// Row-major values of an R x C matrix (batched) with elements outside
// lo <= j - i <= hi set to zero.
std::vector<double> band_ref(const std::vector<double>& v, const Shape& shape, int64_t lo,
                             int64_t hi) {
  int R = shape[shape.size() - 2], C = shape.back();
  std::vector<double> out(v);
  for (size_t idx = 0; idx < v.size(); ++idx) {
    int64_t j = idx % C, i = (idx / C) % R;
    if (j - i < lo || j - i > hi) out[idx] = 0;
  }
  return out;
}

}  // namespace

// ---- arange -----------------------------------------------------------------

TEST(Arange, IntegerOverloadsGiveInt32) {
  array a = arange(5);
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.shape(), Shape{5});
  expect_values(a, {0, 1, 2, 3, 4}, "arange(5)");
  expect_values(arange(2, 10, 3), {2, 5, 8}, "arange(2, 10, 3)");
  expect_values(arange(10, 0, -3), {10, 7, 4, 1}, "arange(10, 0, -3)");
  expect_values(arange(3, 6), {3, 4, 5}, "arange(3, 6)");
  EXPECT_EQ(arange(0, -1).size(), 0u);
  EXPECT_EQ(arange(2, 10, 3).dtype(), int32);
}

TEST(Arange, DoubleOverloadsGiveFloat32) {
  array a = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(a.dtype(), float32);
  expect_values(a, {0, 0.25, 0.5, 0.75}, "arange(0, 1, 0.25)");
  expect_values(arange(3.0), {0, 1, 2}, "arange(3.0)");
  EXPECT_EQ(arange(3.0).dtype(), float32);
  expect_values(arange(1.0, 3.5), {1, 2, 3}, "arange(1, 3.5)");
  expect_values(arange(1.0, 2.0, float64), {1}, "arange(1, 2, float64)");
  EXPECT_EQ(arange(1.0, 2.0, float64).dtype(), float64);
  expect_values(arange(4.0, int16), {0, 1, 2, 3}, "arange(4, int16)");
  EXPECT_EQ(arange(4.0, int16).dtype(), int16);
  // Length ceil((stop - start) / step).
  EXPECT_EQ(arange(0.0, 1.0, 0.3).size(), 4u);
  EXPECT_EQ(arange(0.0, 0.9, 0.3).size(), 3u);
}

TEST(Arange, EveryDtypeUsesTheEffectiveIncrement) {
  for (Dtype t : harness::numeric_types()) {
    array a = arange(0.0, 6.0, 1.5, t);
    EXPECT_EQ(a.dtype(), t);
    ASSERT_EQ(a.shape(), Shape{4});
    // The increment is dtype(start + step) - dtype(start): 1 for integers.
    std::vector<double> want = is_integer(t) ? std::vector<double>{0, 1, 2, 3}
                                             : std::vector<double>{0, 1.5, 3, 4.5};
    expect_values(a, want, dtype_ctx(t));
  }
  // Fractional start on integers: start 0, increment int(1.5) - int(0.5) = 1.
  expect_values(arange(0.5, 3.0, 1.0, int32), {0, 1, 2}, "int32 from 0.5");
  // Negative increments wrap like the dtype does.
  expect_values(arange(10.0, 0.0, -2.0, uint8), {10, 8, 6, 4, 2}, "uint8 descending");
  expect_values(arange(-3.0, 3.0, 2.0, int8), {-3, -1, 1}, "int8");
  // int64 beyond float64's exact range.
  array big = arange(9007199254740993.0, 9007199254740999.0, 2.0, int64);
  eval(big);
  EXPECT_EQ(big.data<int64_t>()[0] + 2, big.data<int64_t>()[1]);
}

TEST(Arange, IsLazy) {
  array a = arange(0, 1000);
  EXPECT_FALSE(a.is_available());
  eval(a);
  EXPECT_TRUE(a.is_available());
  EXPECT_EQ(a.data<int32_t>()[999], 999);
}

TEST(Arange, Errors) {
  EXPECT_THROW(arange(0, 10, 0), std::invalid_argument);
  EXPECT_THROW(arange(0.0, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(arange(0.0, 4.0, 1.0, bool_), std::invalid_argument);
  EXPECT_THROW(arange(0.0, NAN, 1.0), std::invalid_argument);
  EXPECT_THROW(arange(0.0, INFINITY, 1.0), std::invalid_argument);
  EXPECT_THROW(arange(0.0, 1e12, 1.0), std::invalid_argument);
}

// ---- linspace ---------------------------------------------------------------

TEST(Linspace, ValuesAndEndpoint) {
  array a = linspace(0.0, 1.0, 5);
  EXPECT_EQ(a.dtype(), float32);
  expect_values(a, {0, 0.25, 0.5, 0.75, 1}, "endpoint");
  expect_values(linspace(0.0, 1.0, 4, false), {0, 0.25, 0.5, 0.75}, "no endpoint");
  expect_values(linspace(2.0, -2.0, 3, float64), {2, 0, -2}, "descending float64");
  EXPECT_EQ(linspace(2.0, -2.0, 3, float64).dtype(), float64);
  expect_values(linspace(3.0, 7.0, 1), {3}, "num 1");
  expect_values(linspace(3.0, 7.0, 1, false), {3}, "num 1 no endpoint");
  EXPECT_EQ(linspace(3.0, 7.0, 0).shape(), Shape{0});
  EXPECT_EQ(linspace(0.0, 1.0).size(), 50u);
  // The endpoint is exact.
  array b = linspace(0.1, 0.7, 7, float64);
  eval(b);
  EXPECT_EQ(b.data<double>()[6], 0.7);
}

TEST(Linspace, EveryDtype) {
  for (Dtype t : harness::numeric_types()) {
    array a = linspace(0.0, 10.0, 4, t);
    EXPECT_EQ(a.dtype(), t);
    // Integers truncate: 0, 3.33, 6.67, 10.
    std::vector<double> want = is_integer(t)
                                   ? std::vector<double>{0, 3, 6, 10}
                                   : std::vector<double>{0, 10.0 / 3, 20.0 / 3, 10};
    expect_values(a, want, dtype_ctx(t));
  }
  expect_values(linspace(0.0, -10.0, 4, int32), {0, -3, -6, -10}, "negative truncates");
}

TEST(Linspace, RoundsAsMlx) {
  // Note [Linspace rounding]: (1 - t) * start + t * stop in float32, t = i / 12;
  // element 1 is MLX's -2.0500001907348633, not the nearest float to -2.05.
  array a = linspace(-3.3, 11.7, 13);
  eval(a);
  for (int i = 0; i < 13; ++i) {
    const float t = static_cast<float>(i) / 12.f;
    volatile float x = (1.f - t) * -3.3f, y = t * 11.7f;
    EXPECT_EQ(a.data<float>()[i], x + y) << "element " << i;
  }
  EXPECT_EQ(a.data<float>()[1], -2.0500001907348633f);
  for (Device d : harness::devices()) {
    array g = linspace(0.1, 0.9, 50, float32, d);
    array c = linspace(0.1, 0.9, 50, float32, Device::cpu);
    eval(g, c);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(g.data<float>()[i], c.data<float>()[i]);
  }
}

TEST(Linspace, Errors) {
  EXPECT_THROW(linspace(0.0, 1.0, -1), std::invalid_argument);
  EXPECT_THROW(linspace(0.0, 1.0, 3, bool_), std::invalid_argument);
}

// ---- full, zeros, ones ------------------------------------------------------

TEST(Full, ScalarAndArrayValues) {
  array a = full({2, 3}, 7);
  EXPECT_EQ(a.dtype(), int32);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  expect_values(a, std::vector<double>(6, 7), "full 7");
  array b = full({2, 2}, array({1, 2}), float32);
  EXPECT_EQ(b.dtype(), float32);
  expect_values(b, {1, 2, 1, 2}, "full broadcast row");
  array c = full({2, 2}, array({3.f, 4.f}, {2, 1}));
  expect_values(c, {3, 3, 4, 4}, "full broadcast column");
  expect_values(full({2}, 1.75f, int32), {1, 1}, "cast to int32");
  array d = full({}, 2.5f);
  EXPECT_EQ(d.ndim(), 0u);
  EXPECT_EQ(d.item<float>(), 2.5f);
  EXPECT_EQ(full({0, 3}, 1.f).size(), 0u);
  // full always gives a new row-contiguous array.
  array e = full({3, 2}, 5.f);
  eval(e);
  EXPECT_TRUE(e.flags().row_contiguous);
  EXPECT_EQ(e.data_size(), 6u);
}

TEST(Full, EveryDtype) {
  for (Dtype t : harness::all_types()) {
    array a = full({2, 3}, array(1, t));
    EXPECT_EQ(a.dtype(), t) << dtype_ctx(t);
    expect_values(a, std::vector<double>(6, 1), dtype_ctx(t));
    array b = full({3}, array(2.0f), t);
    EXPECT_EQ(b.dtype(), t);
    expect_values(b, std::vector<double>(3, t == bool_ ? 1 : 2), dtype_ctx(t));
  }
  array c = full({2}, array(complex64_t(1, -2)));
  auto v = harness::to_complex(c);
  EXPECT_EQ(v[1], std::complex<double>(1, -2));
}

TEST(Full, FromAView) {
  // vals given as a transposed view.
  array v = transpose(array({1.f, 2.f, 3.f, 4.f}, {2, 2}));
  expect_values(full({3, 2, 2}, v), {1, 3, 2, 4, 1, 3, 2, 4, 1, 3, 2, 4}, "transposed vals");
}

TEST(Full, Errors) {
  EXPECT_THROW(full({2, 3}, array({1, 2})), std::invalid_argument);
  EXPECT_THROW(full({2, -1}, 1.f), std::invalid_argument);
  EXPECT_THROW(full({2}, array({1, 2}, {1, 2})), std::invalid_argument);
  EXPECT_THROW(zeros({-1}), std::invalid_argument);
}

TEST(ZerosOnes, EveryDtypeAndLikes) {
  EXPECT_EQ(zeros({2}).dtype(), float32);
  EXPECT_EQ(ones({2}).dtype(), float32);
  for (Dtype t : harness::all_types()) {
    array z = zeros({2, 2}, t);
    array o = ones({3}, t);
    EXPECT_EQ(z.dtype(), t);
    EXPECT_EQ(o.dtype(), t);
    expect_values(z, {0, 0, 0, 0}, dtype_ctx(t));
    expect_values(o, {1, 1, 1}, dtype_ctx(t));
  }
  array x = transpose(array({1, 2, 3, 4, 5, 6}, {2, 3}, int16));
  array zl = zeros_like(x);
  EXPECT_EQ(zl.shape(), (Shape{3, 2}));
  EXPECT_EQ(zl.dtype(), int16);
  expect_values(zl, std::vector<double>(6, 0), "zeros_like");
  array ol = ones_like(x, float64);
  EXPECT_EQ(ol.dtype(), float64);
  expect_values(ol, std::vector<double>(6, 1), "ones_like");
  array fl = full_like(x, 9);
  EXPECT_EQ(fl.dtype(), int16);
  expect_values(fl, std::vector<double>(6, 9), "full_like");
  array fl2 = full_like(x, 2.5f, float32);
  EXPECT_EQ(fl2.dtype(), float32);
  expect_values(fl2, std::vector<double>(6, 2.5), "full_like dtype");
  array fl3 = full_like(x, array({1.f, 2.f}), float16);
  EXPECT_EQ(fl3.dtype(), float16);
  expect_values(fl3, {1, 2, 1, 2, 1, 2}, "full_like array");
  array s = zeros_like(array(3.f));
  EXPECT_EQ(s.ndim(), 0u);
  EXPECT_EQ(s.item<float>(), 0.f);
  EXPECT_EQ(ones({0}, int8).size(), 0u);
}

// ---- eye, identity, tri -----------------------------------------------------

TEST(Eye, DiagonalsOfAnySign) {
  array a = eye(3);
  EXPECT_EQ(a.dtype(), float32);
  expect_values(a, {1, 0, 0, 0, 1, 0, 0, 0, 1}, "eye(3)");
  expect_values(eye(3, 4, 1), {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, "eye(3,4,1)");
  expect_values(eye(3, 4, -2), {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, "eye(3,4,-2)");
  expect_values(eye(2, 3, 5), std::vector<double>(6, 0), "eye(2,3,5)");
  expect_values(eye(2, 3), {1, 0, 0, 0, 1, 0}, "eye(2,3)");
  EXPECT_EQ(eye(0).shape(), (Shape{0, 0}));
  EXPECT_EQ(eye(0, 3).shape(), (Shape{0, 3}));
  array i = identity(2, int32);
  EXPECT_EQ(i.dtype(), int32);
  expect_values(i, {1, 0, 0, 1}, "identity int32");
  expect_values(identity(2), {1, 0, 0, 1}, "identity");
  for (Dtype t : harness::all_types()) {
    array e = eye(2, 3, 1, t);
    EXPECT_EQ(e.dtype(), t);
    expect_values(e, {0, 1, 0, 0, 0, 1}, dtype_ctx(t));
    expect_values(eye(2, t), {1, 0, 0, 1}, dtype_ctx(t));
  }
  EXPECT_THROW(eye(-1), std::invalid_argument);
  EXPECT_THROW(eye(2, -3), std::invalid_argument);
}

TEST(Tri, OnesAtAndBelowDiagonal) {
  expect_values(tri(3, 4, 0, float32), {1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0}, "tri(3,4)");
  expect_values(tri(3, 4, 1, float32), {1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}, "tri(3,4,1)");
  expect_values(tri(3, 2, -1, float32), {0, 0, 1, 0, 1, 1}, "tri(3,2,-1)");
  for (Dtype t : harness::all_types()) {
    array a = tri(2, t);
    EXPECT_EQ(a.dtype(), t);
    expect_values(a, {1, 0, 1, 1}, dtype_ctx(t));
  }
  EXPECT_THROW(tri(-2, float32), std::invalid_argument);
}

// ---- tril, triu ---------------------------------------------------------------

TEST(TrilTriu, EveryDtypeLayoutAndDiagonal) {
  Shape shape{2, 3, 4};
  for (Dtype t : harness::all_types()) {
    auto v = harness::rows_repeated(harness::random_values(24, t, -5, 5, 7), shape);
    for (auto layout : harness::all_layouts()) {
      array x = harness::with_layout(v, shape, t, layout);
      for (int k : {-4, -1, 0, 2, 5}) {
        std::string ctx = dtype_ctx(t) + " " + harness::layout_name(layout) + " k=" +
                          std::to_string(k);
        array l = tril(x, k);
        array u = triu(x, k);
        EXPECT_EQ(l.dtype(), t);
        EXPECT_EQ(u.shape(), shape);
        expect_values(l, band_ref(v, shape, -(1 << 30), k), "tril " + ctx);
        expect_values(u, band_ref(v, shape, k, 1 << 30), "triu " + ctx);
      }
    }
  }
}

TEST(TrilTriu, DonatedInputAndEmpty) {
  // The input is a temporary here: the kernel may zero it in place.
  array l = tril(copy(array({1.f, 2.f, 3.f, 4.f}, {2, 2})));
  expect_values(l, {1, 0, 3, 4}, "tril of a temporary");
  array u = triu(copy(array({1.f, 2.f, 3.f, 4.f}, {2, 2})), 1);
  expect_values(u, {0, 2, 0, 0}, "triu of a temporary");
  EXPECT_EQ(tril(zeros({0, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(triu(zeros({2, 0, 3})).shape(), (Shape{2, 0, 3}));
}

TEST(TrilTriu, Errors) {
  EXPECT_THROW(tril(array({1, 2, 3})), std::invalid_argument);
  EXPECT_THROW(triu(array(1.f)), std::invalid_argument);
}

// ---- meshgrid -------------------------------------------------------------------

TEST(Meshgrid, XyIjAndSparse) {
  array x({1, 2, 3});
  array y({10, 20});
  auto xy = meshgrid({x, y});
  ASSERT_EQ(xy.size(), 2u);
  EXPECT_EQ(xy[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(xy[0].dtype(), int32);
  expect_values(xy[0], {1, 2, 3, 1, 2, 3}, "xy X");
  expect_values(xy[1], {10, 10, 10, 20, 20, 20}, "xy Y");
  auto ij = meshgrid({x, y}, false, "ij");
  EXPECT_EQ(ij[0].shape(), (Shape{3, 2}));
  expect_values(ij[0], {1, 1, 2, 2, 3, 3}, "ij X");
  expect_values(ij[1], {10, 20, 10, 20, 10, 20}, "ij Y");
  auto sp = meshgrid({x, y}, true);
  EXPECT_EQ(sp[0].shape(), (Shape{1, 3}));
  EXPECT_EQ(sp[1].shape(), (Shape{2, 1}));
  auto sp_ij = meshgrid({x, y}, true, "ij");
  EXPECT_EQ(sp_ij[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(sp_ij[1].shape(), (Shape{1, 2}));
  // Three arrays: xy swaps only the first two axes.
  array z({5.f, 6.f, 7.f, 8.f});
  auto three = meshgrid({x, y, z});
  EXPECT_EQ(three[2].shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(three[2].dtype(), float32);
  auto zv = to_doubles(three[2]);
  EXPECT_EQ(zv[5], 6);
  auto xv = to_doubles(three[0]);
  EXPECT_EQ(xv[4], 2);  // index (0, 1, 0)
  // A single array stays 1-D; 2-D inputs are flattened.
  EXPECT_EQ(meshgrid({x})[0].shape(), Shape{3});
  auto flat = meshgrid({array({1, 2, 3, 4}, {2, 2}), y});
  EXPECT_EQ(flat[0].shape(), (Shape{2, 4}));
  EXPECT_TRUE(meshgrid(std::vector<array>{}).empty());
}

TEST(Meshgrid, Errors) {
  EXPECT_THROW(meshgrid({array({1, 2})}, false, "yx"), std::invalid_argument);
}

// ---- view -------------------------------------------------------------------------

TEST(View, SameSizeReinterpretsBits) {
  array a = view(array({1.f, -2.f}), int32);
  EXPECT_EQ(a.dtype(), int32);
  eval(a);
  EXPECT_EQ(a.data<int32_t>()[0], 0x3f800000);
  EXPECT_EQ(static_cast<uint32_t>(a.data<int32_t>()[1]), 0xc0000000u);
  array b = view(array({-1, 2}, int8), uint8);
  expect_values(b, {255, 2}, "int8 -> uint8");
  // Scalars and broadcast views keep their layout.
  EXPECT_EQ(view(array(1.f), uint32).item<uint32_t>(), 0x3f800000u);
  array c = view(broadcast_to(array({1.f, 2.f}), {3, 2}), int32);
  auto cv = to_doubles(c);
  EXPECT_EQ(cv[4], 0x3f800000);
  array same = array({1, 2});
  EXPECT_TRUE(view(same, int32).is_same(same));
  // Every dtype round-trips through a same-size view.
  for (Dtype t : harness::all_types()) {
    for (Dtype u : harness::all_types()) {
      if (t.size != u.size) continue;
      array x = harness::from_doubles({0, 1, 3}, {3}, t);
      // Viewed as bool, a byte other than 0 becomes 1 (bools hold 0 or 1).
      std::vector<double> want = to_doubles(x);
      if (u == bool_ && t != bool_) want = {0, 1, 1};
      expect_values(view(view(x, u), t), want, dtype_ctx(t) + " via " + dtype_name(u));
    }
  }
}

TEST(View, DifferentSizesRescaleTheLastAxis) {
  array a({0x04030201, 0x08070605, 0x0c0b0a09, 0x100f0e0d}, {2, 2}, int32);
  array b = view(a, uint8);
  EXPECT_EQ(b.shape(), (Shape{2, 8}));
  expect_values(b, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, "int32 -> uint8");
  array c = view(b, int16);
  EXPECT_EQ(c.shape(), (Shape{2, 4}));
  expect_values(c, {0x0201, 0x0403, 0x0605, 0x0807, 0x0a09, 0x0c0b, 0x0e0d, 0x100f}, "-> int16");
  array d = view(a, int64);
  EXPECT_EQ(d.shape(), (Shape{2, 1}));
  eval(d);
  EXPECT_EQ(d.data<int64_t>()[1], int64_t{0x100f0e0d0c0b0a09});
  // A transposed input is copied first: the view reads the logical order.
  array t = view(transpose(a), uint16);
  EXPECT_EQ(t.shape(), (Shape{2, 4}));
  expect_values(t, {0x0201, 0x0403, 0x0a09, 0x0c0b, 0x0605, 0x0807, 0x0e0d, 0x100f},
                "transposed");
  // A row slice keeps its offset when it is a whole number of output elements...
  array rows = view(slice(a, {1, 0}, {2, 2}), int64);
  eval(rows);
  EXPECT_EQ(rows.data<int64_t>()[0], int64_t{0x100f0e0d0c0b0a09});
  // ...and is copied when it is not.
  array odd = view(slice(array({1, 2, 3, 4, 5}, uint32), {1}, {5}), uint64);
  EXPECT_EQ(odd.shape(), Shape{2});
  eval(odd);
  EXPECT_EQ(odd.data<uint64_t>()[0], (uint64_t{3} << 32) | 2);
  EXPECT_EQ(odd.data<uint64_t>()[1], (uint64_t{5} << 32) | 4);
  // Stepped slices along the last axis are copied.
  array stepped = view(slice(array({1, 2, 3, 4}, uint16), {0}, {4}, {2}), uint32);
  eval(stepped);
  EXPECT_EQ(stepped.data<uint32_t>()[0], (3u << 16) | 1u);
  EXPECT_EQ(view(zeros({0, 4}, int8), int32).shape(), (Shape{0, 1}));
}

TEST(View, Errors) {
  EXPECT_THROW(view(array({1, 2, 3}, int8), int32), std::invalid_argument);
  EXPECT_THROW(view(array(1.f), float64), std::invalid_argument);
}

// ---- as_strided -----------------------------------------------------------------

TEST(AsStrided, WindowsOffsetsAndViews) {
  array a = arange(12);
  expect_values(as_strided(a, {3, 4}, {4, 1}, 0), to_doubles(a), "reshape");
  expect_values(as_strided(arange(6), {4, 3}, {1, 1}, 0),
                {0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5}, "sliding windows");
  expect_values(as_strided(a, {2, 2}, {1, 4}, 2), {2, 6, 3, 7}, "offset, column order");
  expect_values(as_strided(a, {3}, {-2}, 5), {5, 3, 1}, "negative stride");
  expect_values(as_strided(a, {2, 3}, {0, 1}, 1), {1, 2, 3, 1, 2, 3}, "stride 0");
  // Over the row-contiguous data of a transposed input.
  array t = transpose(array({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3}));
  expect_values(as_strided(t, {6}, {1}, 0), {0, 3, 1, 4, 2, 5}, "transposed input");
  // A sliced input with an offset.
  array s = slice(arange(10), {4}, {10});
  expect_values(as_strided(s, {2, 2}, {2, 1}, 1), {5, 6, 7, 8}, "sliced input");
  array v = as_strided(a, {4}, {3}, 0);
  eval(v);
  EXPECT_FALSE(v.flags().contiguous);
  EXPECT_EQ(as_strided(a, {0, 5}, {100, 100}, 50).size(), 0u);
}

TEST(AsStrided, Errors) {
  array a = arange(6);
  EXPECT_THROW(as_strided(a, {2, 3}, {3}, 0), std::invalid_argument);
  EXPECT_THROW(as_strided(a, {2, 4}, {3, 1}, 0), std::invalid_argument);
  EXPECT_THROW(as_strided(a, {3}, {-1}, 1), std::invalid_argument);
  EXPECT_THROW(as_strided(a, {-1}, {1}, 0), std::invalid_argument);
  EXPECT_THROW(as_strided(a, {1}, {1}, 6), std::invalid_argument);
}

// ---- printing -----------------------------------------------------------------

TEST(Print, IntegerArrays) {
  EXPECT_EQ(str(array({1, 2, 3, 4}, {2, 2})), "array([[1, 2],\n       [3, 4]], dtype=int32)");
  EXPECT_EQ(str(array({1, -2}, int8)), "array([1, -2], dtype=int8)");
  EXPECT_EQ(str(array({200, 3}, uint8)), "array([200, 3], dtype=uint8)");
  EXPECT_EQ(str(array({uint64_t{18446744073709551615ull}})),
            "array([18446744073709551615], dtype=uint64)");
  EXPECT_EQ(str(array(7)), "array(7, dtype=int32)");
  EXPECT_EQ(str(reshape(arange(8), {2, 2, 2})),
            "array([[[0, 1],\n        [2, 3]],\n       [[4, 5],\n        [6, 7]]], dtype=int32)");
  // Views print in logical order.
  EXPECT_EQ(str(transpose(array({1, 2, 3, 4}, {2, 2}))),
            "array([[1, 3],\n       [2, 4]], dtype=int32)");
  EXPECT_EQ(str(slice(arange(6), {5}, {-7}, {-2})), "array([5, 3, 1], dtype=int32)");
}

TEST(Print, FloatBoolComplex) {
  EXPECT_EQ(str(array({1.f, 2.5f, -0.125f})), "array([1, 2.5, -0.125], dtype=float32)");
  EXPECT_EQ(str(array({1.0 / 3, 1e-7, 123456789.0}, float64)),
            "array([0.333333, 1e-07, 1.23457e+08], dtype=float64)");
  EXPECT_EQ(str(array({NAN, INFINITY, -INFINITY})), "array([nan, inf, -inf], dtype=float32)");
  EXPECT_EQ(str(array({1.5f, 2.f}, float16)), "array([1.5, 2], dtype=float16)");
  EXPECT_EQ(str(array({0.5f}, bfloat16)), "array([0.5], dtype=bfloat16)");
  EXPECT_EQ(str(array({true, false})), "array([True, False], dtype=bool)");
  EXPECT_EQ(str(array({complex64_t(1, 2), complex64_t(3, -4)})),
            "array([1+2j, 3-4j], dtype=complex64)");
  // MLX's form: no parentheses, and "+" before a zero imaginary part of either sign.
  EXPECT_EQ(str(array({complex64_t(-1.5f, -0.f)})), "array([-1.5+0j], dtype=complex64)");
  EXPECT_EQ(str(array(2.5f)), "array(2.5, dtype=float32)");
}

TEST(Print, EmptyAndSummarised) {
  EXPECT_EQ(str(zeros({0})), "array([], dtype=float32)");
  // MLX's layout: brackets down to the first empty axis.
  EXPECT_EQ(str(zeros({2, 0}, int32)), "array([[],\n       []], dtype=int32)");
  EXPECT_EQ(str(zeros({0, 3})), "array([], dtype=float32)");
  EXPECT_EQ(str(zeros({2, 3, 0})),
            "array([[[],\n        [],\n        []],\n       [[],\n        [],\n        []]], "
            "dtype=float32)");
  EXPECT_EQ(str(arange(1000)).find("..."), std::string::npos);
  EXPECT_EQ(str(arange(2000)), "array([0, 1, 2, ..., 1997, 1998, 1999], dtype=int32)");
  EXPECT_EQ(str(reshape(arange(1010), {101, 10})),
            "array([[0, 1, 2, ..., 7, 8, 9],\n"
            "       [10, 11, 12, ..., 17, 18, 19],\n"
            "       [20, 21, 22, ..., 27, 28, 29],\n"
            "       ...,\n"
            "       [980, 981, 982, ..., 987, 988, 989],\n"
            "       [990, 991, 992, ..., 997, 998, 999],\n"
            "       [1000, 1001, 1002, ..., 1007, 1008, 1009]], dtype=int32)");
}

TEST(Print, Precision) {
  EXPECT_EQ(get_printoptions().precision, -1);
  set_printoptions(2);
  EXPECT_EQ(get_printoptions().precision, 2);
  std::string s = str(array({1.f, 2.5f, 1.0f / 3}));
  std::string c = str(array({complex64_t(1, -0.5f)}));
  set_printoptions(-1);
  EXPECT_EQ(s, "array([1.00, 2.50, 0.33], dtype=float32)");
  EXPECT_EQ(c, "array([1.00-0.50j], dtype=complex64)");
  EXPECT_EQ(str(array({3})), "array([3], dtype=int32)");
  EXPECT_EQ(get_printoptions().precision, -1);
}
