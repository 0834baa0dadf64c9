// Sorting and selection: sort, argsort, partition, argpartition, topk and
// searchsorted, checked by properties (ordered, a permutation of the input,
// stable on ties, kth in place) and against std:: algorithms on float64
// values, on every real dtype, layout, axis and device; sort's derivatives
// against finite differences, vmap against a loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "grad_check.h"
#include "harness.h"
#include "tessera/ops/array_api.h"

using namespace tessera;
using harness::Layout;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// NumPy's order: NaNs last.
bool before(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

struct Rows {
  int64_t outer, n, inner;
};
Rows rows_of(const Shape& shape, int axis) {
  Rows r{1, shape[axis], 1};
  for (int d = 0; d < axis; ++d) r.outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) r.inner *= shape[d];
  return r;
}
std::vector<double> row(const std::vector<double>& v, const Rows& r, int64_t o, int64_t j) {
  std::vector<double> out(r.n);
  for (int64_t i = 0; i < r.n; ++i) out[i] = v[(o * r.n + i) * r.inner + j];
  return out;
}

// Values with ties (rounded to a coarse grid) and, for floats, NaNs.
std::vector<double> tie_values(const Shape& shape, Dtype t, uint64_t seed) {
  auto v = harness::random_values(shape_size(shape), t, -4, 4, seed);
  for (size_t i = 0; i < v.size(); ++i) {
    if (is_floating_point(t)) {
      v[i] = std::round(v[i] * 2) / 2;
      if (i % 7 == 3) v[i] = kNaN;
    }
  }
  return v;
}

std::vector<Dtype> sortable() { return harness::real_types(); }

}  // namespace

TEST(Sort, SortArgsortEveryDtypeLayoutAndAxis) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : sortable()) {
      for (const Shape& shape : harness::sweep_shapes()) {
        const int nd = static_cast<int>(shape.size());
        if (nd == 0) continue;
        auto values = harness::rows_repeated(tie_values(shape, t, 5), shape);
        for (Layout layout : harness::all_layouts()) {
          array x = harness::with_layout(values, shape, t, layout);
          for (int axis = -nd; axis < nd; ++axis) {
            int ax = axis < 0 ? axis + nd : axis;
            std::string what = dtype_name(t) + " " + shape_str(shape) + " " +
                               harness::layout_name(layout) + " axis=" + std::to_string(axis) +
                               (dev == Device::cpu ? " cpu" : " gpu");
            array s = sort(x, axis);
            array i = argsort(x, axis);
            EXPECT_EQ(s.dtype(), t) << what;
            EXPECT_EQ(i.dtype(), uint32) << what;
            EXPECT_EQ(s.shape(), shape) << what;
            EXPECT_EQ(i.shape(), shape) << what;
            auto sv = harness::to_doubles(s), iv = harness::to_doubles(i);
            Rows r = rows_of(shape, ax);
            int failures = 0;
            for (int64_t o = 0; o < r.outer && failures < 3; ++o) {
              for (int64_t j = 0; j < r.inner && failures < 3; ++j) {
                auto in = row(values, r, o, j), got = row(sv, r, o, j), idx = row(iv, r, o, j);
                auto want = in;
                std::stable_sort(want.begin(), want.end(), before);
                std::vector<int64_t> widx(r.n);
                std::iota(widx.begin(), widx.end(), 0);
                std::stable_sort(widx.begin(), widx.end(),
                                 [&](int64_t a, int64_t b) { return before(in[a], in[b]); });
                for (int64_t k = 0; k < r.n; ++k) {
                  if (!same(got[k], want[k]) || idx[k] != double(widx[k])) {
                    ADD_FAILURE() << what << ": row (" << o << "," << j << ") position " << k
                                  << " sort " << got[k] << " (want " << want[k] << "), argsort "
                                  << idx[k] << " (want " << widx[k] << ")";
                    ++failures;
                    break;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(Sort, OrderedPermutationAndStableProperties) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    // Long rows (vqsort or radix path) with many ties, -0.0 and NaNs.
    const int n = 5000;
    std::vector<double> v(2 * n);
    for (int i = 0; i < 2 * n; ++i) v[i] = (i * 7919 % 13) - 6.0;
    v[10] = kNaN;
    v[n + 3] = -0.0;
    for (Dtype t : {float32, float64, float16, bfloat16, int16, int64, uint8}) {
      std::vector<double> vt = v;
      for (auto& e : vt) {
        if (!is_floating_point(t) && std::isnan(e)) e = 1;
        if (is_unsigned(t)) e = std::abs(e);
      }
      array x = harness::from_doubles(vt, {2, n}, t);
      auto s = harness::to_doubles(sort(x, 1));
      auto idx = harness::to_doubles(argsort(x, 1));
      for (int rr = 0; rr < 2; ++rr) {
        std::vector<double> in(vt.begin() + rr * n, vt.begin() + (rr + 1) * n);
        std::vector<double> got(s.begin() + rr * n, s.begin() + (rr + 1) * n);
        for (int k = 1; k < n; ++k) {
          ASSERT_FALSE(before(got[k], got[k - 1])) << dtype_name(t) << " not ordered at " << k;
        }
        auto a = in, b = got;
        std::sort(a.begin(), a.end(), before);
        std::sort(b.begin(), b.end(), before);
        for (int k = 0; k < n; ++k) ASSERT_TRUE(same(a[k], b[k])) << dtype_name(t) << " not a permutation";
        for (int k = 1; k < n; ++k) {
          double i0 = idx[rr * n + k - 1], i1 = idx[rr * n + k];
          ASSERT_FALSE(before(in[i1], in[i0])) << dtype_name(t) << " argsort not ordered";
          if (same(in[i0], in[i1])) ASSERT_LT(i0, i1) << dtype_name(t) << " argsort not stable";
        }
      }
    }
  }
}

TEST(Sort, OneLongRowSortedByAllThreads) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    const int n = 300000;
    std::vector<double> v(n);
    for (int i = 0; i < n; ++i) v[i] = static_cast<double>((i * 7919LL) % 1001) / 8 - 60;
    v[17] = kNaN;
    for (Dtype t : {float32, int32, float64}) {
      auto vt = v;
      if (!is_floating_point(t)) {
        vt[17] = 3;
        for (auto& e : vt) e = std::round(e);
      }
      array x = harness::from_doubles(vt, {n}, t);
      auto s = harness::to_doubles(sort(x));
      auto idx = harness::to_doubles(argsort(x));
      auto want = vt;
      std::stable_sort(want.begin(), want.end(), before);
      std::vector<int64_t> widx(n);
      std::iota(widx.begin(), widx.end(), 0);
      std::stable_sort(widx.begin(), widx.end(), [&](int64_t a, int64_t b) { return before(vt[a], vt[b]); });
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(same(s[i], want[i])) << dtype_name(t) << " sort at " << i;
        ASSERT_EQ(idx[i], double(widx[i])) << dtype_name(t) << " argsort at " << i;
      }
    }
  }
}

// Float rows long enough for vqsort, compared bit for bit with a stable sort
// by NumPy's order: -0.0 before +0.0, infinities at the ends of the numbers
// (beyond the largest finite values),
// NaNs last; rows contiguous (axis 1) and strided (axis 0).
template <typename F, typename U>
void check_float_bits(Dtype t) {
  const int64_t n = 1000, rows = 3;
  std::vector<F> v(n * rows);
  for (int64_t i = 0; i < n * rows; ++i) {
    switch (i % 9) {
      case 0: v[i] = F(-0.0); break;
      case 1: v[i] = F(0.0); break;
      case 2: v[i] = std::numeric_limits<F>::infinity(); break;
      case 3: v[i] = -std::numeric_limits<F>::infinity(); break;
      case 4: {
        U b;
        F q = std::numeric_limits<F>::quiet_NaN();
        memcpy(&b, &q, sizeof(b));
        b |= U(i % 5);  // distinct payloads
        if (i % 2) b |= U(1) << (8 * sizeof(U) - 1);
        memcpy(&v[i], &b, sizeof(b));
        break;
      }
      case 5: v[i] = (i / 9) % 2 ? std::numeric_limits<F>::max() : std::numeric_limits<F>::lowest(); break;
      default: v[i] = F((i * 7919 % 23) - 11) / 4;
    }
  }
  auto bits = [](F x) {
    U b;
    memcpy(&b, &x, sizeof(b));
    return b;
  };
  auto less = [](F a, F b) {
    if (a != a) return false;
    if (b != b) return true;
    return a < b || (a == b && std::signbit(a) && !std::signbit(b));
  };
  for (int axis : {1, 0}) {
    Shape shape = axis == 1 ? Shape{int(rows), int(n)} : Shape{int(n), int(rows)};
    array x(v.begin(), shape, t);
    array s = copy(sort(x, axis));
    eval(s);
    const F* got = s.data<F>();
    auto at = [&](int64_t r, int64_t i) { return axis == 1 ? r * n + i : i * rows + r; };
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<F> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = v[at(r, i)];
      std::stable_sort(want.begin(), want.end(), less);
      for (int64_t i = 0; i < n; ++i) {
        // NaNs come back as NaNs, their payloads kept only by vqsort
        // (docs/differences.md): the key sorts return one canonical NaN.
        if (want[i] != want[i]) {
          ASSERT_TRUE(got[at(r, i)] != got[at(r, i)]) << dtype_name(t) << " axis " << axis << " at " << i;
          continue;
        }
        ASSERT_EQ(bits(got[at(r, i)]), bits(want[i]))
            << dtype_name(t) << " axis " << axis << " row " << r << " at " << i << ": " << got[at(r, i)]
            << " (want " << want[i] << ")";
      }
    }
  }
}

TEST(Sort, LongFloatRowsZerosInfinitiesAndNaNBits) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    check_float_bits<float, uint32_t>(float32);
    check_float_bits<double, uint64_t>(float64);
  }
}

// Rows long enough for the MSD level of the radix sort (Note [Radix sort] in
// backend/cpu/sort.cpp): keys over many exponents, few distinct values, NaNs;
// rows contiguous and strided (the transposed array along axis 0), and one row
// long enough to be split across threads.
TEST(Sort, LongRowsEveryDtypeAgainstStableSort) {
  auto check = [](const array& x, int axis, const std::string& what) {
    const int64_t rows = x.shape(1 - axis), n = x.shape(axis);
    auto in = harness::to_doubles(x);
    auto s = harness::to_doubles(sort(x, axis));
    auto idx = harness::to_doubles(argsort(x, axis));
    auto at = [&](int64_t r, int64_t i) { return axis == 1 ? r * n + i : i * rows + r; };
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> v(n);
      for (int64_t i = 0; i < n; ++i) v[i] = in[at(r, i)];
      std::vector<int64_t> widx(n);
      std::iota(widx.begin(), widx.end(), 0);
      std::stable_sort(widx.begin(), widx.end(), [&](int64_t a, int64_t b) { return before(v[a], v[b]); });
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(same(s[at(r, i)], v[widx[i]])) << what << " row " << r << " sort at " << i << ": "
                                                   << s[at(r, i)] << " (want " << v[widx[i]] << ")";
        ASSERT_EQ(idx[at(r, i)], double(widx[i])) << what << " row " << r << " argsort at " << i;
      }
    }
  };
  auto values = [](int64_t count, Dtype t) {
    std::vector<double> v(count);
    for (int64_t i = 0; i < count; ++i) {
      const uint64_t h = (uint64_t(i) * 2654435761ull) >> 7;
      if (t == int8) {
        v[i] = double(h % 200) - 100;
      } else if (t == uint8) {
        v[i] = double(h % 250);
      } else if (is_unsigned(t)) {
        v[i] = double(h % 2001);
      } else if (is_floating_point(t)) {
        v[i] = i % 97 == 5 ? kNaN : (double(h % 2001) - 1000) * std::ldexp(1.0, int(h % 23) - 11);
      } else {
        v[i] = double(h % 2001) - 1000;
      }
    }
    return v;
  };
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    const int64_t n = 150000;
    for (Dtype t : {float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, uint32, uint64}) {
      const std::string what = dtype_name(t) + (dev == Device::cpu ? " cpu" : " gpu");
      array x = harness::from_doubles(values(3 * n, t), {3, static_cast<int>(n)}, t);
      check(x, 1, what + " contiguous rows");
      check(transpose(x), 0, what + " strided rows");
    }
    for (Dtype t : {float32, float64, int32}) {
      const int64_t m = 600000;
      array x = harness::from_doubles(values(m, t), {1, static_cast<int>(m)}, t);
      check(x, 1, dtype_name(t) + " one row of 600000");
    }
  }
}

TEST(Sort, PartitionArgpartitionAndTopk) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : sortable()) {
      for (const Shape& shape : std::vector<Shape>{{9}, {4, 7}, {3, 4, 5}}) {
        const int nd = static_cast<int>(shape.size());
        auto values = harness::rows_repeated(tie_values(shape, t, 9), shape);
        for (Layout layout : harness::all_layouts()) {
          array x = harness::with_layout(values, shape, t, layout);
          for (int ax = 0; ax < nd; ++ax) {
            Rows r = rows_of(shape, ax);
            for (int kth : {0, static_cast<int>(r.n) / 2, -1}) {
              int k = kth < 0 ? kth + static_cast<int>(r.n) : kth;
              std::string what = dtype_name(t) + " " + shape_str(shape) + " " +
                                 harness::layout_name(layout) + " axis=" + std::to_string(ax) +
                                 " kth=" + std::to_string(kth);
              array p = partition(x, kth, ax);
              array pi = argpartition(x, kth, ax);
              EXPECT_EQ(p.dtype(), t);
              EXPECT_EQ(pi.dtype(), uint32);
              auto pv = harness::to_doubles(p), piv = harness::to_doubles(pi);
              for (int64_t o = 0; o < r.outer; ++o) {
                for (int64_t j = 0; j < r.inner; ++j) {
                  auto in = row(values, r, o, j), got = row(pv, r, o, j), idx = row(piv, r, o, j);
                  auto sorted = in;
                  std::sort(sorted.begin(), sorted.end(), before);
                  ASSERT_TRUE(same(got[k], sorted[k])) << what << " kth element";
                  for (int64_t i = 0; i < r.n; ++i) {
                    if (i < k) ASSERT_FALSE(before(got[k], got[i])) << what << " left part";
                    if (i > k) ASSERT_FALSE(before(got[i], got[k])) << what << " right part";
                    ASSERT_TRUE(same(in[static_cast<int64_t>(idx[i])], got[i]))
                        << what << " partition != x[argpartition]";
                  }
                  auto b = got;
                  std::sort(b.begin(), b.end(), before);
                  for (int64_t i = 0; i < r.n; ++i) ASSERT_TRUE(same(b[i], sorted[i])) << what;
                }
              }
            }
            // topk matches the last k of a sort.
            int kk = std::min<int>(3, r.n);
            array tk = topk(x, kk, ax);
            Shape want_shape = shape;
            want_shape[ax] = kk;
            EXPECT_EQ(tk.shape(), want_shape);
            auto tv = harness::to_doubles(sort(tk, ax));
            auto sv = harness::to_doubles(sort(x, ax));
            Rows rt = rows_of(want_shape, ax);
            for (int64_t o = 0; o < r.outer; ++o) {
              for (int64_t j = 0; j < r.inner; ++j) {
                auto a = row(tv, rt, o, j), b = row(sv, r, o, j);
                for (int i = 0; i < kk; ++i) ASSERT_TRUE(same(a[i], b[r.n - kk + i])) << "topk";
              }
            }
          }
        }
      }
    }
  }
}

TEST(Sort, FlattenedOverloadsAndErrors) {
  array x({3.f, 1.f, 2.f, 0.f}, {2, 2});
  harness::expect_values(sort(x), {0, 1, 2, 3}, "sort flattened");
  harness::expect_values(argsort(x), {3, 1, 2, 0}, "argsort flattened");
  harness::expect_values(sort(x, 0), {2, 0, 3, 1}, "sort axis 0");
  harness::expect_values(topk(x, 1), {3}, "topk flattened");
  harness::expect_values(partition(x, 1), {0, 1, 2, 3}, "partition flattened", 0, 0);
  EXPECT_EQ(topk(x, 0, 1).shape(), Shape({2, 0}));
  EXPECT_THROW(sort(x, 2), std::out_of_range);
  EXPECT_THROW(argsort(array(1.f), 0), std::out_of_range);
  EXPECT_THROW(partition(x, 2, 1), std::invalid_argument);
  EXPECT_THROW(argpartition(x, -3, 1), std::invalid_argument);
  EXPECT_THROW(topk(x, 3, 1), std::invalid_argument);
  EXPECT_THROW(topk(x, -1, 1), std::invalid_argument);
  array c = astype(x, complex64);
  EXPECT_THROW(sort(c), std::invalid_argument);
  EXPECT_THROW(argsort(c, 0), std::invalid_argument);
  EXPECT_THROW(searchsorted(x, x), std::invalid_argument);
  EXPECT_THROW(searchsorted(array({1.f}), x, "middle"), std::invalid_argument);
  EXPECT_EQ(sort(zeros({0, 3}), 0).shape(), Shape({0, 3}));
  EXPECT_EQ(argsort(zeros({2, 0}), 1).shape(), Shape({2, 0}));
}

TEST(Sort, SearchSorted) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    std::vector<double> seq = {-2, -1, -1, 0, 0.5, 3, 3, 3, 7, kNaN};
    std::vector<double> vals = {-3, -1, 0, 0.25, 3, 7, 8, kNaN, 0.5, -2, 3, 100};
    for (Dtype t : {float32, float64, float16, int32, int64, int8}) {
      auto s = seq;
      if (!is_floating_point(t)) s.pop_back();
      std::vector<double> sv = s, vv = vals;
      for (auto& e : sv) e = harness::to_doubles(harness::from_doubles({e}, {1}, t))[0];
      for (auto& e : vv) {
        if (!is_floating_point(t) && std::isnan(e)) e = 5;
        e = harness::to_doubles(harness::from_doubles({e}, {1}, t))[0];
      }
      array a = harness::from_doubles(sv, {static_cast<int>(sv.size())}, t);
      // values as a transposed 2-D view
      array v = transpose(harness::from_doubles(vv, {3, 4}, t));
      auto vt = harness::to_doubles(v);
      for (const char* side : {"left", "right"}) {
        array got = searchsorted(a, v, side);
        EXPECT_EQ(got.dtype(), uint32);
        EXPECT_EQ(got.shape(), Shape({4, 3}));
        std::vector<double> want;
        for (double e : vt) {
          auto it = std::string(side) == "left" ? std::lower_bound(sv.begin(), sv.end(), e, before)
                                                : std::upper_bound(sv.begin(), sv.end(), e, before);
          want.push_back(static_cast<double>(it - sv.begin()));
        }
        harness::expect_values(got, want, dtype_name(t) + " " + side, 0, 0);
      }
    }
    // Mixed dtypes promote.
    harness::expect_values(searchsorted(array({1, 2, 3}), array({1.5f, 3.0f}), "right"), {1, 3},
                           "promoted");
  }
}

// ---- derivatives and vmap

using grad_check::check_on_devices;
using grad_check::check_vmap;
using grad_check::check_vmap_axes;
using grad_check::random_f64;

TEST(SortGrad, SortPartitionTopk) {
  array x = random_f64({4, 6}, 13);
  for (int axis : {0, 1}) {
    check_on_devices("sort axis " + std::to_string(axis), [=](const array& a) { return sort(a, axis); }, x);
    check_on_devices("partition axis " + std::to_string(axis),
                     [=](const array& a) { return partition(a, 2, axis); }, x);
    check_on_devices("topk axis " + std::to_string(axis), [=](const array& a) { return topk(a, 2, axis); }, x);
  }
  check_on_devices("sort flattened", [](const array& a) { return sort(a); }, x);
  // By hand: the cotangent goes back to where each sorted element came from.
  auto g = vjp([](const std::vector<array>& a) { return std::vector<array>{sort(a[0])}; },
               {array({3.0, 1.0, 2.0})}, {array({10.0, 20.0, 30.0})}).second[0];
  harness::expect_values(g, {30, 10, 20}, "vjp of sort");
}

TEST(SortGrad, IndicesHaveZeroDerivatives) {
  array x = random_f64({5}, 3);
  auto f = [](const array& a) { return sum(multiply(astype(argsort(a), float64), a)); };
  // d/dx of sum(argsort(x) * x) treats the indices as constants.
  auto g = grad(f)(x);
  harness::expect_values(g, harness::to_doubles(argsort(x)), "argsort is constant");
  auto [outs, tans] = jvp([](const std::vector<array>& a) { return std::vector<array>{argpartition(a[0], 1)}; },
                          {x}, {ones_like(x)});
  harness::expect_values(tans[0], {0, 0, 0, 0, 0}, "jvp of argpartition");
  auto [o2, t2] = jvp([&](const std::vector<array>& a) {
    return std::vector<array>{searchsorted(array({0.0, 0.5}), a[0])};
  }, {x}, {ones_like(x)});
  harness::expect_values(t2[0], {0, 0, 0, 0, 0}, "jvp of searchsorted");
}

TEST(SortGrad, Vmap) {
  array b = grad_check::integers_f64({3, 4, 5}, 21);
  check_vmap_axes("sort", [](const array& a) { return sort(a, 1); }, b, 2);
  check_vmap_axes("argsort", [](const array& a) { return argsort(a, 0); }, b, 1);
  check_vmap_axes("partition", [](const array& a) { return partition(a, 1, 1); }, b, 1);
  check_vmap_axes("argpartition", [](const array& a) { return argpartition(a, 2, 0); }, b, 2);
  check_vmap_axes("topk", [](const array& a) { return topk(a, 2, -1); }, b, 1);
  check_vmap_axes("sort flattened", [](const array& a) { return sort(a); }, b, 1);
  array seq = sort(grad_check::integers_f64({3, 6}, 4), 1);
  array vals = grad_check::integers_f64({3, 5}, 5);
  auto ss = [](const std::vector<array>& a) { return std::vector<array>{searchsorted(a[0], a[1])}; };
  check_vmap("searchsorted values", ss, {squeeze(slice(seq, {0, 0}, {1, 6}), 0), vals}, {-1, 0});
  check_vmap("searchsorted both", ss, {seq, transpose(vals)}, {0, 1});
}

TEST(Unique, ValuesIndexInverseCountsAsMlx) {
  harness::on_each_device([] {
    auto r = unique(array({5, 3, 5, 9}), 6, true, true, true);
    ASSERT_EQ(r.size(), 4u);
    harness::expect_values(r[0], {3, 5, 9, 3, 3, 3}, "values padded with the first");
    harness::expect_values(r[1], {1, 0, 3, 1, 1, 1}, "index");
    harness::expect_values(r[2], {1, 0, 1, 2}, "inverse");
    harness::expect_values(r[3], {1, 2, 1, 0, 0, 0}, "counts");
    auto t = unique(array({5, 3, 5, 9, 7, 7}), 2, false, true, true);
    ASSERT_EQ(t.size(), 3u);
    harness::expect_values(t[0], {3, 5}, "truncated");
    harness::expect_values(t[1], {1, 0, 1, 1, 1, 1}, "inverse clamped");
    auto f = unique(array({2.f, 1.f, 2.f, 4.f}, {2, 2}), 4, false, false, false, array(-1.f));
    ASSERT_EQ(f.size(), 1u);
    harness::expect_values(f[0], {1, 2, 4, -1}, "fill_value");
    EXPECT_THROW(unique(array({1}), -1), std::invalid_argument);
  });
}
