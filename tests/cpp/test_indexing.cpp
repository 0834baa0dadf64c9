// Gathers and scatters: values against float64 references computed here by
// plain loops, on every dtype, with views as inputs (transposed, strided and
// broadcast data and indices), negative and out-of-range indices (zeros from
// gathers, dropped scatter updates: see tessera/ops/indexing.h), empty index
// arrays and errors, on every device.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "harness.h"

using namespace tessera;
using namespace harness;

namespace {

// Row-major float64 values of a shape: the reference side.
struct Ref {
  Shape shape;
  std::vector<double> v;
};

int64_t flat_of(const Shape& shape, const std::vector<int>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

// Calls f(multi-index) for every position of shape in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const std::vector<int>&)>& f) {
  size_t n = shape_size(shape);
  std::vector<int> idx(shape.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    f(idx);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// The documented index rule: v + n when negative; in range when the window
// of w fits; -1 otherwise.
int64_t wrapped(int64_t v, int64_t n, int64_t w = 1) {
  if (v < 0) v += n;
  return (v >= 0 && v <= n - w) ? v : -1;
}

// v as dtype t stores it (the reference combines in float64, then casts).
double stored(double v, Dtype t) {
  if (t == bool_) return v != 0;
  return wrap_int(v, t);
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Shape shape_concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Random integer index values in [lo, hi].
std::vector<double> index_values(size_t n, int lo, int hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Data of dtype t with values in a small range (products stay exact).
std::vector<double> data_values(size_t n, Dtype t, uint64_t seed, double lo = -4, double hi = 4) {
  return random_values(n, t, t == bool_ ? 0 : lo, hi, seed);
}

// Layouts an input can take: all but broadcast (which needs rows repeated).
std::vector<Layout> view_layouts() {
  return {Layout::contiguous, Layout::transposed, Layout::strided};
}

void expect_ref(const array& got, const Ref& want, Dtype t, const std::string& ctx) {
  EXPECT_EQ(got.dtype(), t) << ctx;
  ASSERT_EQ(got.shape(), want.shape) << ctx;
  std::vector<double> w = want.v;
  for (auto& x : w) x = stored(x, t);
  expect_values(got, w, ctx, rtol_for(t), rtol_for(t));
}

// Runs body once per device, with that device the default.
void on_devices(const std::function<void(const std::string&)>& body) {
  for (auto d : devices()) {
    StreamContext ctx(d);
    body(d == Device::cpu ? "cpu" : "gpu");
  }
}

// ---- references ----

Ref ref_take(const Ref& a, const Ref& idx, int axis) {
  Shape out(a.shape.begin(), a.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), a.shape.begin() + axis + 1, a.shape.end());
  Ref r{out, {}};
  int k = static_cast<int>(idx.shape.size());
  for_each_index(out, [&](const std::vector<int>& o) {
    std::vector<int> ii(o.begin() + axis, o.begin() + axis + k);
    int64_t v = wrapped(static_cast<int64_t>(idx.v[flat_of(idx.shape, ii)]), a.shape[axis]);
    if (v < 0) {
      r.v.push_back(0);
      return;
    }
    std::vector<int> pos(o.begin(), o.begin() + axis);
    pos.push_back(static_cast<int>(v));
    pos.insert(pos.end(), o.begin() + axis + k, o.end());
    r.v.push_back(a.v[flat_of(a.shape, pos)]);
  });
  return r;
}

// take_along_axis with a and idx already of one shape off the axis.
Ref ref_take_along(const Ref& a, const Ref& idx, int axis) {
  Ref r{idx.shape, {}};
  for_each_index(idx.shape, [&](const std::vector<int>& o) {
    int64_t v = wrapped(static_cast<int64_t>(idx.v[flat_of(idx.shape, o)]), a.shape[axis]);
    std::vector<int> pos = o;
    pos[axis] = static_cast<int>(v);
    r.v.push_back(v < 0 ? 0 : a.v[flat_of(a.shape, pos)]);
  });
  return r;
}

using Combine = std::function<double(double, double)>;

Ref ref_scatter_along(const Ref& a, const Ref& idx, const Ref& vals, int axis, const Combine& f) {
  Ref r = a;
  for_each_index(idx.shape, [&](const std::vector<int>& o) {
    int64_t v = wrapped(static_cast<int64_t>(idx.v[flat_of(idx.shape, o)]), a.shape[axis]);
    if (v < 0) return;
    std::vector<int> pos = o;
    pos[axis] = static_cast<int>(v);
    double& dst = r.v[flat_of(a.shape, pos)];
    dst = f(dst, vals.v[flat_of(vals.shape, o)]);
  });
  return r;
}

// The start of index tuple i's window in a (per axis), or empty when out of range.
std::vector<int> window_start(const Shape& a_shape, const std::vector<Ref>& idx,
                              const std::vector<int>& axes, const Shape& window, int64_t i) {
  std::vector<int> start(a_shape.size(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    int ax = axes[k] < 0 ? axes[k] + static_cast<int>(a_shape.size()) : axes[k];
    int64_t v = wrapped(static_cast<int64_t>(idx[k].v[i]), a_shape[ax], window[ax]);
    if (v < 0) return {};
    start[ax] = static_cast<int>(v);
  }
  return start;
}

Ref ref_gather(const Ref& a, const std::vector<Ref>& idx, const std::vector<int>& axes,
               const Shape& sizes) {
  Shape ishape = idx.empty() ? Shape{} : idx[0].shape;
  Ref r{shape_concat(ishape, sizes), {}};
  for (int64_t i = 0; i < static_cast<int64_t>(shape_size(ishape)); ++i) {
    auto start = window_start(a.shape, idx, axes, sizes, i);
    for_each_index(sizes, [&](const std::vector<int>& j) {
      if (start.empty()) {
        r.v.push_back(0);
        return;
      }
      std::vector<int> pos(j.size());
      for (size_t d = 0; d < j.size(); ++d) pos[d] = start[d] + j[d];
      r.v.push_back(a.v[flat_of(a.shape, pos)]);
    });
  }
  return r;
}

Ref ref_scatter(const Ref& a, const std::vector<Ref>& idx, const Ref& upd,
                const std::vector<int>& axes, const Combine& f) {
  Shape ishape = idx.empty() ? Shape{} : idx[0].shape;
  Shape window(upd.shape.begin() + ishape.size(), upd.shape.end());
  Ref r = a;
  int64_t w = shape_size(window);
  for (int64_t i = 0; i < static_cast<int64_t>(shape_size(ishape)); ++i) {
    auto start = window_start(a.shape, idx, axes, window, i);
    if (start.empty()) continue;
    int64_t j = 0;
    for_each_index(window, [&](const std::vector<int>& jj) {
      std::vector<int> pos(jj.size());
      for (size_t d = 0; d < jj.size(); ++d) pos[d] = start[d] + jj[d];
      double& dst = r.v[flat_of(a.shape, pos)];
      dst = f(dst, upd.v[i * w + j++]);
    });
  }
  return r;
}

const Combine kAssign = [](double, double b) { return b; };
const Combine kAdd = [](double a, double b) { return a + b; };
const Combine kMul = [](double a, double b) { return a * b; };
const Combine kMax = [](double a, double b) { return std::max(a, b); };
const Combine kMin = [](double a, double b) { return std::min(a, b); };

// Distinct in-range positions of an axis of n (k <= n), some written as
// negative indices, followed by `oob` out-of-range ones.
std::vector<double> distinct_indices(int k, int n, int oob, uint64_t seed) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 gen(seed);
  std::shuffle(p.begin(), p.end(), gen);
  std::vector<double> v;
  for (int i = 0; i < k; ++i) v.push_back(i % 2 ? p[i] - n : p[i]);
  for (int i = 0; i < oob; ++i) v.push_back(i % 2 ? n + i : -n - 1 - i);
  return v;
}

}  // namespace

TEST(Indexing, TakeAlongEveryAxis) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 1;
    Shape shape{4, 5, 3};
    for (Dtype t : all_types()) {
      for (Layout la : view_layouts()) {
        for (Layout li : view_layouts()) {
          auto av = data_values(shape_size(shape), t, seed++);
          array a = with_layout(av, shape, t, la);
          for (int axis : {0, 1, 2, -1}) {
            int ax = axis < 0 ? axis + 3 : axis;
            int n = shape[ax];
            // Negative and out-of-range values included.
            auto iv = index_values(6, -n - 2, n + 1, seed++);
            array idx = with_layout(iv, {2, 3}, int32, li);
            std::string ctx = dev + " take " + dtype_name(t) + " " + layout_name(la) + "/" +
                              layout_name(li) + " axis " + std::to_string(axis);
            expect_ref(take(a, idx, axis), ref_take({shape, av}, {{2, 3}, iv}, ax), t, ctx);
          }
        }
      }
    }
  });
}

TEST(Indexing, GathersFromViewsWithNegativeStrides) {
  // a[::-1] and a[:, ::-2] start at their last element: window offsets below
  // the view's start are negative and still in range.
  on_devices([](const std::string& dev) {
    std::vector<double> v(20);
    for (int i = 0; i < 20; ++i) v[i] = i + 1;
    array a = from_doubles(v, {4, 5}, float32);
    array rows = slice(a, {3, 0}, {-5, 5}, {-1, 1});       // rows 3, 2, 1, 0
    array cols = slice(a, {0, 4}, {4, -6}, {1, -2});       // columns 4, 2, 0
    array idx = array({0, 2, -1}, int32);
    auto r = to_doubles(take(rows, idx, 0));  // rows 3, 1, 0 of a
    std::vector<double> want_r;
    for (int row : {3, 1, 0}) {
      for (int c = 0; c < 5; ++c) want_r.push_back(v[row * 5 + c]);
    }
    EXPECT_EQ(r, want_r) << dev << " take rows of a[::-1]";
    auto c = to_doubles(take(cols, array({1, 2}, int32), 1));  // columns 2, 0 of a
    std::vector<double> want_c;
    for (int row = 0; row < 4; ++row) {
      for (int col : {2, 0}) want_c.push_back(v[row * 5 + col]);
    }
    EXPECT_EQ(c, want_c) << dev << " take columns of a[:, ::-2]";
    auto g = to_doubles(take_along_axis(rows, reshape(array({4, 0, 1, 3}, int32), {4, 1}), 1));
    EXPECT_EQ(g, (std::vector<double>{20, 11, 7, 4})) << dev << " take_along_axis of a[::-1]";
  });
}

TEST(Indexing, TakeIndexDtypesAndBroadcastIndices) {
  on_devices([](const std::string& dev) {
    Shape shape{6, 4};
    auto av = data_values(24, float32, 3);
    array a = with_layout(av, shape, float32, Layout::contiguous);
    for (Dtype it : int_types()) {
      auto iv = random_values(6, it, -7, 6, 4);
      array idx = with_layout(iv, {2, 3}, it, Layout::contiguous);
      expect_ref(take(a, idx, 0), ref_take({shape, av}, {{2, 3}, iv}, 0), float32,
                 dev + " take with " + dtype_name(it) + " indices");
    }
    // Broadcast indices (rows repeated) and a broadcast data array.
    auto iv = rows_repeated(index_values(6, -6, 5, 5), {3, 2});
    array idx = with_layout(iv, {3, 2}, int64, Layout::broadcast);
    expect_ref(take(a, idx, 0), ref_take({shape, av}, {{3, 2}, iv}, 0), float32,
               dev + " take broadcast indices");
    auto rv = rows_repeated(data_values(24, int16, 6), shape);
    array b = with_layout(rv, shape, int16, Layout::broadcast);
    expect_ref(take(b, idx, 1), ref_take({shape, rv}, {{3, 2}, iv}, 1), int16,
               dev + " take from broadcast data");
  });
}

TEST(Indexing, TakeFlattenedAndScalarIndex) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 10;
    for (Dtype t : all_types()) {
      auto av = data_values(12, t, seed++);
      array a = with_layout(av, {3, 4}, t, Layout::transposed);
      auto iv = index_values(7, -14, 13, seed++);
      array idx = with_layout(iv, {7}, int32, Layout::strided);
      Ref flat{{12}, av};
      expect_ref(take(a, idx), ref_take(flat, {{7}, iv}, 0), t, dev + " take flat " + dtype_name(t));
      array s = take(a, -1);
      EXPECT_EQ(s.shape(), Shape{}) << dev;
      expect_ref(s, Ref{{}, {av[11]}}, t, dev + " take -1 " + dtype_name(t));
      expect_ref(take(a, 2, 1), ref_take({{3, 4}, av}, {{}, {2}}, 1), t,
                 dev + " take int axis " + dtype_name(t));
    }
  });
}

TEST(Indexing, OutOfRangeIndicesGatherZerosAndScattersDrop) {
  on_devices([](const std::string& dev) {
    array a({1.f, 2.f, 3.f});
    array idx({-1, 3, -4, 5, 0, -3}, int32);
    expect_values(take(a, idx), {3, 0, 0, 0, 1, 1}, dev + " take out of range");
    expect_values(scatter_add(a, idx, reshape(array({10.f, 20.f, 30.f, 40.f, 50.f, 60.f}), {6, 1}), 0),
                  {1 + 50 + 60, 2, 3 + 10}, dev + " scatter_add drops out of range");
    // A gather window that would not fit is out of range as a whole.
    array m = reshape(arange(0.f, 6.f, 1.f), {2, 3});
    expect_values(gather(m, array({0, 1, 2, -2}, int32), 1, {2, 2}),
                  {0, 1, 3, 4, 1, 2, 4, 5, 0, 0, 0, 0, 1, 2, 4, 5}, dev + " gather windows");
    array big({int64_t(1) << 40, -(int64_t(1) << 40)}, int64);
    expect_values(take(a, big), {0, 0}, dev + " take int64 out of range");
    array u64({uint64_t(1) << 63, uint64_t(2)}, uint64);
    expect_values(take(a, u64), {0, 3}, dev + " take uint64 huge");
  });
}

TEST(Indexing, TakeAlongAxis) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 20;
    for (Dtype t : all_types()) {
      for (Layout la : view_layouts()) {
        for (Layout li : view_layouts()) {
          Shape shape{4, 5};
          auto av = data_values(20, t, seed++);
          array a = with_layout(av, shape, t, la);
          auto iv = index_values(12, -7, 6, seed++);
          array idx = with_layout(iv, {4, 3}, int32, li);
          std::string ctx = dev + " take_along_axis " + dtype_name(t) + " " + layout_name(la) +
                            "/" + layout_name(li);
          expect_ref(take_along_axis(a, idx, 1), ref_take_along({shape, av}, {{4, 3}, iv}, 1), t,
                     ctx + " axis 1");
          auto iv0 = index_values(30, -6, 5, seed++);
          array idx0 = with_layout(iv0, {6, 5}, int64, li);
          expect_ref(take_along_axis(a, idx0, -2), ref_take_along({shape, av}, {{6, 5}, iv0}, 0),
                     t, ctx + " axis 0");
        }
      }
    }
    // Indices broadcast against a off the axis: (1, 3) against (4, 5).
    auto av = data_values(20, float64, 30);
    array a = array(av.begin(), {4, 5}, float64);
    std::vector<double> iv{4, -1, 0};
    Ref ib{{4, 3}, {}};
    for (int r = 0; r < 4; ++r) ib.v.insert(ib.v.end(), iv.begin(), iv.end());
    expect_ref(take_along_axis(a, array({4, -1, 0}, {1, 3}, int32), 1),
               ref_take_along({{4, 5}, av}, ib, 1), float64, dev + " take_along_axis broadcast");
  });
}

TEST(Indexing, PutAlongAxisAndScatterAddAxis) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 40;
    for (Dtype t : all_types()) {
      for (Layout la : view_layouts()) {
        Shape shape{3, 6};
        auto av = data_values(18, t, seed++);
        array a = with_layout(av, shape, t, la);
        // put: distinct positions per row (one write each) plus out-of-range ones.
        std::vector<double> iv;
        for (int r = 0; r < 3; ++r) {
          auto row = distinct_indices(3, 6, 1, seed++);
          iv.insert(iv.end(), row.begin(), row.end());
        }
        array idx = with_layout(iv, {3, 4}, int32, Layout::transposed);
        auto vv = data_values(12, t, seed++);
        array vals = with_layout(vv, {3, 4}, t, Layout::strided);
        std::string ctx = dev + " " + dtype_name(t) + " " + layout_name(la);
        expect_ref(put_along_axis(a, idx, vals, 1),
                   ref_scatter_along({shape, av}, {{3, 4}, iv}, {{3, 4}, vv}, 1, kAssign), t,
                   ctx + " put_along_axis");
        // A scalar value broadcast to every index.
        std::vector<double> one(12, stored(2, t));
        expect_ref(put_along_axis(a, idx, array(2, t), 1),
                   ref_scatter_along({shape, av}, {{3, 4}, iv}, {{3, 4}, one}, 1, kAssign), t,
                   ctx + " put_along_axis scalar");
        // add: repeated indices (negative and out-of-range ones too) accumulate.
        auto bv = data_values(24, t, seed++);
        array b = with_layout(bv, {4, 6}, t, la);
        auto sv = index_values(18, -5, 4, seed++);
        array sidx = with_layout(sv, {3, 6}, int32, Layout::strided);
        auto wv = data_values(18, t, seed++);
        array w = with_layout(wv, {3, 6}, t, Layout::transposed);
        expect_ref(scatter_add_axis(b, sidx, w, 0),
                   ref_scatter_along({{4, 6}, bv}, {{3, 6}, sv}, {{3, 6}, wv}, 0, kAdd), t,
                   ctx + " scatter_add_axis");
      }
    }
  });
}

TEST(Indexing, Gather) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 60;
    Shape shape{5, 6, 4};
    for (Dtype t : all_types()) {
      for (Layout la : view_layouts()) {
        auto av = data_values(shape_size(shape), t, seed++);
        array a = with_layout(av, shape, t, la);
        auto i0 = index_values(6, -6, 5, seed++);
        auto i2 = index_values(3, -5, 4, seed++);
        // (2, 3) and (3,) broadcast to (2, 3).
        array x0 = with_layout(i0, {2, 3}, int32, Layout::transposed);
        array x2 = with_layout(i2, {3}, int64, Layout::contiguous);
        Ref r2{{2, 3}, {}};
        for (int r = 0; r < 2; ++r) r2.v.insert(r2.v.end(), i2.begin(), i2.end());
        Shape sizes{2, 3, 1};
        std::string ctx = dev + " gather " + dtype_name(t) + " " + layout_name(la);
        expect_ref(gather(a, {x0, x2}, {0, -1}, sizes),
                   ref_gather({shape, av}, {{{2, 3}, i0}, r2}, {0, 2}, sizes), t, ctx);
        expect_ref(gather(a, x0, 1, {5, 1, 4}),
                   ref_gather({shape, av}, {{{2, 3}, i0}}, {1}, {5, 1, 4}), t, ctx + " one axis");
        // No index arrays: the window at the origin.
        expect_ref(gather(a, std::vector<array>{}, std::vector<int>{}, {2, 2, 2}),
                   ref_gather({shape, av}, {}, {}, {2, 2, 2}), t, ctx + " no indices");
      }
    }
  });
}

TEST(Indexing, ScatterAndReductions) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 80;
    Shape shape{6, 4};
    struct Case {
      const char* name;
      std::function<array(const array&, const std::vector<array>&, const array&,
                          const std::vector<int>&)>
          op;
      Combine ref;
    };
    std::vector<Case> cases{
        {"scatter_add", [](auto& a, auto& i, auto& u, auto& ax) { return scatter_add(a, i, u, ax); }, kAdd},
        {"scatter_prod", [](auto& a, auto& i, auto& u, auto& ax) { return scatter_prod(a, i, u, ax); }, kMul},
        {"scatter_max", [](auto& a, auto& i, auto& u, auto& ax) { return scatter_max(a, i, u, ax); }, kMax},
        {"scatter_min", [](auto& a, auto& i, auto& u, auto& ax) { return scatter_min(a, i, u, ax); }, kMin},
    };
    for (Dtype t : all_types()) {
      for (Layout la : view_layouts()) {
        auto av = data_values(24, t, seed++, -3, 3);
        array a = with_layout(av, shape, t, la);
        std::string ctx = dev + " " + dtype_name(t) + " " + layout_name(la);
        // Assignment: distinct rows (negative ones too) and out-of-range ones.
        auto di = distinct_indices(4, 6, 2, seed++);
        array idx = with_layout(di, {6}, int32, Layout::strided);
        auto uv = data_values(24, t, seed++, -3, 3);
        array upd = with_layout(uv, {6, 1, 4}, t, Layout::transposed);
        expect_ref(scatter(a, idx, upd, 0),
                   ref_scatter({shape, av}, {{{6}, di}}, {{6, 1, 4}, uv}, {0}, kAssign), t,
                   ctx + " scatter");
        // Reductions: repeated indices on two axes, a (1, 2) window.
        auto r0 = index_values(5, -7, 6, seed++);
        auto r1 = index_values(5, -4, 3, seed++);
        array x0 = with_layout(r0, {5}, int64, Layout::contiguous);
        array x1 = with_layout(r1, {5}, int16, Layout::strided);
        auto wv = data_values(10, t, seed++, -3, 3);
        array w = with_layout(wv, {5, 1, 2}, t, Layout::contiguous);
        for (auto& c : cases) {
          std::string name = c.name;
          if (is_complex(t) && (name == "scatter_max" || name == "scatter_min")) {
            EXPECT_THROW(c.op(a, {x0, x1}, w, {0, 1}), std::invalid_argument) << ctx << name;
            continue;
          }
          expect_ref(c.op(a, {x0, x1}, w, {0, 1}),
                     ref_scatter({shape, av}, {{{5}, r0}, {{5}, r1}}, {{5, 1, 2}, wv}, {0, 1}, c.ref),
                     t, ctx + " " + c.name);
        }
      }
    }
  });
}

TEST(Indexing, ScatterUpdatesBroadcastAndSingleAxisForm) {
  on_devices([](const std::string& dev) {
    array a = zeros({4, 3}, int32);
    array idx({1, -1, 1}, int32);
    // Updates (1, 1, 3) broadcast over the 3 indices.
    array upd = reshape(array({1, 2, 3}, int32), {1, 1, 3});
    expect_values(scatter_add(a, idx, upd, 0), {0, 0, 0, 2, 4, 6, 0, 0, 0, 1, 2, 3},
                  dev + " scatter_add broadcast updates");
    expect_values(scatter_max(a, idx, upd, 0), {0, 0, 0, 1, 2, 3, 0, 0, 0, 1, 2, 3},
                  dev + " scatter_max");
    // NaN wins in max and min, as in NumPy's maximum.at.
    array f = zeros({2}, float32);
    array nan_upd = reshape(array({std::nanf(""), 1.f}), {2, 1});
    auto got = to_doubles(scatter_max(f, array({0, 0}, int32), nan_upd, 0));
    EXPECT_TRUE(std::isnan(got[0])) << dev;
    EXPECT_EQ(got[1], 0) << dev;
  });
}

TEST(Indexing, MaskedScatter) {
  on_devices([](const std::string& dev) {
    uint64_t seed = 100;
    for (Dtype t : all_types()) {
      for (Layout la : view_layouts()) {
        Shape shape{3, 4};
        auto av = data_values(12, t, seed++);
        array a = with_layout(av, shape, t, la);
        auto mv = random_values(12, bool_, 0, 1, seed++);
        array mask = with_layout(mv, shape, bool_, Layout::transposed);
        int count = static_cast<int>(std::count(mv.begin(), mv.end(), 1.0));
        for (int extra : {2, -1}) {
          int m = std::max(0, count + extra);
          auto sv = data_values(m, t, seed++);
          array src = with_layout(sv, {m}, t, Layout::strided);
          Ref want{shape, av};
          int k = 0;
          for (int i = 0; i < 12; ++i) {
            if (mv[i] != 0) {
              if (k < m) want.v[i] = sv[k];
              ++k;
            }
          }
          expect_ref(masked_scatter(a, mask, src), want, t,
                     dev + " masked_scatter " + dtype_name(t) + " " + layout_name(la) +
                         (extra > 0 ? " long src" : " short src"));
        }
      }
    }
    // A broadcast mask (one row) and a 2-D src read row-major.
    array a = zeros({2, 3}, float32);
    array mask = array({true, false, true}, {1, 3}, bool_);
    array src = reshape(array({1.f, 2.f, 3.f, 4.f}), {2, 2});
    expect_values(masked_scatter(a, mask, src), {1, 0, 2, 3, 0, 4}, dev + " broadcast mask");
  });
}

TEST(Indexing, EmptyIndexArrays) {
  on_devices([](const std::string& dev) {
    array a = reshape(arange(0.f, 12.f, 1.f), {3, 4});
    array none = zeros({0}, int32);
    EXPECT_EQ(take(a, none, 1).shape(), (Shape{3, 0})) << dev;
    EXPECT_EQ(take(a, none).shape(), (Shape{0})) << dev;
    eval(take(a, none, 1));
    EXPECT_EQ(take_along_axis(a, zeros({3, 0}, int32), 1).shape(), (Shape{3, 0})) << dev;
    EXPECT_EQ(gather(a, none, 0, {1, 4}).shape(), (Shape{0, 1, 4})) << dev;
    auto same = to_doubles(a);
    expect_values(scatter_add(a, none, zeros({0, 1, 4}), 0), same, dev + " empty scatter_add");
    expect_values(put_along_axis(a, zeros({3, 0}, int32), array(5.f), 1), same,
                  dev + " empty put_along_axis");
    expect_values(masked_scatter(a, zeros({3, 4}, bool_), zeros({0})), same,
                  dev + " empty masked_scatter");
    // An empty axis gives an empty take when there is nothing to take.
    array e = zeros({3, 0});
    EXPECT_EQ(take(e, none, 1).shape(), (Shape{3, 0})) << dev;
    EXPECT_THROW(take(e, array({0}, int32), 1), std::out_of_range) << dev;
  });
}

TEST(Indexing, ScatterThenGatherRoundTrips) {
  on_devices([](const std::string& dev) {
    std::mt19937_64 gen(7);
    for (int trial = 0; trial < 20; ++trial) {
      int n = 3 + trial % 7, k = 1 + trial % n;
      auto di = distinct_indices(k, n, 0, trial);
      array idx = array(di.begin(), {k}, float64);
      idx = astype(idx, int32);
      auto uv = random_values(k * 3, float32, -10, 10, 200 + trial);
      array upd = array(uv.begin(), {k, 1, 3}, float32);
      array out = scatter(zeros({n, 3}, float32), idx, upd, 0);
      array back = gather(out, idx, 0, {1, 3});
      expect_values(back, uv, dev + " round trip " + std::to_string(trial), 0, 0);
      // And along an axis.
      array ia = reshape(idx, {1, k});
      array va = reshape(array(uv.begin(), {k}, float32), {1, k});
      array put = put_along_axis(zeros({1, n}, float32), ia, va, 1);
      expect_values(take_along_axis(put, ia, 1), std::vector<double>(uv.begin(), uv.begin() + k),
                    dev + " along-axis round trip " + std::to_string(trial), 0, 0);
    }
  });
}

TEST(Indexing, Errors) {
  array a = reshape(arange(0.f, 12.f, 1.f), {3, 4});
  array i = array({0, 1}, int32);
  EXPECT_THROW(take(a, array({0.5f}), 0), std::invalid_argument);
  EXPECT_THROW(take(a, array({true}), 0), std::invalid_argument);
  EXPECT_THROW(take(a, i, 2), std::out_of_range);
  EXPECT_THROW(take(array(1.f), i, 0), std::out_of_range);
  EXPECT_THROW(take_along_axis(a, i, 0), std::invalid_argument);  // rank
  EXPECT_THROW(take_along_axis(a, zeros({2, 3}, int32), 0), std::invalid_argument);
  EXPECT_THROW(put_along_axis(a, zeros({2, 3}, int32), array(1.f), 0), std::invalid_argument);
  EXPECT_THROW(put_along_axis(a, zeros({2, 4}, int32), zeros({3, 4}), 0), std::invalid_argument);
  EXPECT_THROW(gather(a, {i}, {0, 1}, {1, 4}), std::invalid_argument);
  EXPECT_THROW(gather(a, {i, i}, {0, 0}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(gather(a, i, 0, {1}), std::invalid_argument);
  EXPECT_THROW(gather(a, i, 0, {4, 4}), std::invalid_argument);
  EXPECT_THROW(scatter(a, i, zeros({2, 4}), 0), std::invalid_argument);  // rank
  EXPECT_THROW(scatter(a, i, zeros({2, 4, 4}), 0), std::invalid_argument);  // too big
  EXPECT_THROW(scatter(a, i, zeros({3, 1, 4}), 0), std::invalid_argument);  // count
  EXPECT_THROW(scatter_max(astype(a, complex64), i, zeros({2, 1, 4}), 0), std::invalid_argument);
  EXPECT_THROW(masked_scatter(a, ones({3, 4}), a), std::invalid_argument);
  EXPECT_THROW(masked_scatter(a, ones({2, 4}, bool_), a), std::invalid_argument);
  try {
    take(a, array({0.5f}), 0);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[take]"), std::string::npos) << e.what();
  }
}
