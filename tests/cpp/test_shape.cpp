// Shape manipulation, slicing and joining: values against a float64 reference
// computed here, on every dtype and layout, plus views, 0-d, empty and errors.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "grad_check.h"
#include "harness.h"
#include "tessera/ops/array_api.h"
#include "tessera/backend/cpu/copy.h"

using namespace tessera;
using namespace harness;

namespace {

// A row-major float64 array: the reference side.
struct Ref {
  Shape shape;
  std::vector<double> v;
  double at(const std::vector<int>& idx) const {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
    return v[flat];
  }
};

// The reference of shape `shape` whose element at idx is f(idx).
Ref build(const Shape& shape, const std::function<double(const std::vector<int>&)>& f) {
  Ref r{shape, {}};
  size_t n = shape_size(shape);
  std::vector<int> idx(shape.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    r.v.push_back(f(idx));
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

int mod(int64_t a, int n) { return static_cast<int>(((a % n) + n) % n); }

// Runs op on inputs of shape `shape` in every dtype and layout and compares
// with ref applied to the input's values (exactly: these ops only move data).
void check(const std::string& name, const Shape& shape, const std::function<array(const array&)>& op,
           const std::function<Ref(const Ref&)>& ref, std::vector<Dtype> types = all_types()) {
  uint64_t seed = 1;
  for (Dtype t : types) {
    for (Layout layout : all_layouts()) {
      // harness::with_layout cannot broadcast into a leading axis of size 0.
      if (layout == Layout::broadcast && !shape.empty() && shape[0] == 0) continue;
      auto v = random_values(shape_size(shape), t, -50, 50, seed++);
      if (layout == Layout::broadcast) v = rows_repeated(v, shape);
      array x = with_layout(v, shape, t, layout);
      array y = op(x);
      Ref want = ref(Ref{shape, v});
      std::string ctx = name + " " + dtype_name(t) + " " + layout_name(layout) + " " +
                        shape_str(shape);
      EXPECT_EQ(y.dtype(), t) << ctx;
      EXPECT_EQ(y.shape(), want.shape) << ctx;
      expect_values(y, want.v, ctx, 0, 0);
    }
  }
}

// Same values, new shape.
std::function<Ref(const Ref&)> same_values(Shape shape) {
  return [shape](const Ref& r) { return Ref{shape, r.v}; };
}

const void* ptr(const array& a) {
  array(a).eval();
  return a.raw_data();
}

}  // namespace

TEST(Shape, FlattenUnflatten) {
  check("flatten", {2, 3, 4}, [](const array& x) { return flatten(x); }, same_values({24}));
  check("flatten 1..2", {2, 3, 4}, [](const array& x) { return flatten(x, 1, 2); },
        same_values({2, 12}));
  check("flatten -3..-2", {2, 3, 4}, [](const array& x) { return flatten(x, -3, -2); },
        same_values({6, 4}));
  check("flatten 0-d", {}, [](const array& x) { return flatten(x); }, same_values({1}));
  check("flatten empty", {0, 3}, [](const array& x) { return flatten(x); }, same_values({0}));
  check("unflatten", {2, 12}, [](const array& x) { return unflatten(x, -1, {3, -1}); },
        same_values({2, 3, 4}));
  check("unflatten 0", {6, 2}, [](const array& x) { return unflatten(x, 0, {2, 1, 3}); },
        same_values({2, 1, 3, 2}));
  array x = with_layout(random_values(24, float32, -1, 1, 3), {2, 3, 4}, float32,
                        Layout::contiguous);
  EXPECT_EQ(flatten(x, -5, 7).shape(), (Shape{24}));  // clamped
  EXPECT_EQ(flatten(x, 1, 1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(ptr(flatten(x)), ptr(x));  // a view
  EXPECT_THROW(flatten(x, 2, 1), std::invalid_argument);
  EXPECT_THROW(flatten(x, 3, 3), std::invalid_argument);
  EXPECT_THROW(flatten(x, 0, -4), std::invalid_argument);
  EXPECT_THROW(unflatten(x, 1, {2, 2}), std::invalid_argument);
  EXPECT_THROW(unflatten(x, 1, {-1, -1}), std::invalid_argument);
  EXPECT_THROW(unflatten(x, 1, {2, -1}), std::invalid_argument);
  EXPECT_THROW(unflatten(x, 1, {}), std::invalid_argument);
  EXPECT_THROW(unflatten(x, 3, {3}), std::out_of_range);
  EXPECT_THROW(unflatten(x, 1, {0, -1}), std::invalid_argument);
}

TEST(Shape, SqueezeExpandDims) {
  check("squeeze", {1, 3, 1}, [](const array& x) { return squeeze(x); }, same_values({3}));
  check("squeeze axis", {1, 3, 1}, [](const array& x) { return squeeze(x, -1); },
        same_values({1, 3}));
  check("squeeze axes", {1, 3, 1}, [](const array& x) { return squeeze(x, {0, 2}); },
        same_values({3}));
  check("squeeze 0-d", {}, [](const array& x) { return squeeze(x); }, same_values({}));
  check("squeeze empty", {0, 1}, [](const array& x) { return squeeze(x, 1); }, same_values({0}));
  check("expand_dims", {3, 5}, [](const array& x) { return expand_dims(x, {0, -1}); },
        same_values({1, 3, 5, 1}));
  check("expand_dims 1", {3, 5}, [](const array& x) { return expand_dims(x, 1); },
        same_values({3, 1, 5}));
  check("expand_dims 0-d", {}, [](const array& x) { return expand_dims(x, 0); },
        same_values({1}));
  // Squeezing or expanding a non-contiguous view is still a view.
  array base = with_layout(random_values(6, float32, -1, 1, 4), {2, 3}, float32,
                           Layout::contiguous);
  array t = expand_dims(transpose(base), {0, 2});
  EXPECT_EQ(t.shape(), (Shape{1, 3, 1, 2}));
  EXPECT_EQ(ptr(t), ptr(base));
  EXPECT_EQ(ptr(squeeze(t)), ptr(base));
  array x = array({1.f, 2.f, 3.f}, {1, 3});
  EXPECT_THROW(squeeze(x, 1), std::invalid_argument);
  EXPECT_THROW(squeeze(x, 2), std::out_of_range);
  EXPECT_THROW(squeeze(x, {0, 0}), std::invalid_argument);
  EXPECT_THROW(expand_dims(x, 3), std::out_of_range);
  EXPECT_THROW(expand_dims(x, {1, 1}), std::invalid_argument);
  EXPECT_THROW(expand_dims(x, -4), std::out_of_range);
}

TEST(Shape, ReshapeViewsAndCopies) {
  // A transposed input split along one axis stays a view; merging across the
  // transpose needs a copy.
  check("reshape split", {4, 6}, [](const array& x) { return reshape(transpose(x), {2, 3, 4}); },
        [](const Ref& r) {
          Ref t = build({6, 4}, [&](auto& i) { return r.at({i[1], i[0]}); });
          return Ref{{2, 3, 4}, t.v};
        });
  array base = with_layout(random_values(24, int32, -9, 9, 5), {4, 6}, int32,
                           Layout::contiguous);
  EXPECT_EQ(ptr(reshape(transpose(base), {2, 3, 4})), ptr(base));
  EXPECT_NE(ptr(reshape(transpose(base), {24})), ptr(base));
  check("reshape merge", {4, 6}, [](const array& x) { return reshape(transpose(x), {24}); },
        [](const Ref& r) {
          return Ref{{24}, build({6, 4}, [&](auto& i) { return r.at({i[1], i[0]}); }).v};
        });
}

TEST(Shape, TransposeSwapMove) {
  Shape s{2, 3, 4};
  auto permuted = [](std::vector<int> axes) {
    return [axes](const Ref& r) {
      Shape out;
      for (int a : axes) out.push_back(r.shape[a]);
      return build(out, [&](auto& i) {
        std::vector<int> src(axes.size());
        for (size_t k = 0; k < axes.size(); ++k) src[axes[k]] = i[k];
        return r.at(src);
      });
    };
  };
  check("transpose", s, [](const array& x) { return transpose(x); }, permuted({2, 1, 0}));
  check("transpose axes", s, [](const array& x) { return transpose(x, {1, -1, 0}); },
        permuted({1, 2, 0}));
  check("swapaxes", s, [](const array& x) { return swapaxes(x, 0, -1); }, permuted({2, 1, 0}));
  check("moveaxis", s, [](const array& x) { return moveaxis(x, 0, -1); }, permuted({1, 2, 0}));
  check("moveaxis back", s, [](const array& x) { return moveaxis(x, -1, 0); },
        permuted({2, 0, 1}));
  check("transpose 0-d", {}, [](const array& x) { return transpose(x); }, same_values({}));
  array x = array({1.f, 2.f}, {1, 2});
  EXPECT_THROW(transpose(x, {0}), std::invalid_argument);
  EXPECT_THROW(transpose(x, {0, 0}), std::invalid_argument);
  EXPECT_THROW(transpose(x, {0, 2}), std::out_of_range);
  EXPECT_THROW(swapaxes(x, 0, 2), std::out_of_range);
  EXPECT_THROW(moveaxis(x, -3, 0), std::out_of_range);
  EXPECT_THROW(moveaxis(x, 0, 2), std::out_of_range);
}

TEST(Shape, TransposedCopiesAllSizes) {
  // The tiled path (Note [Transposed copies]): sizes off the tile grid, 2-D and
  // 3-D permutations, every element size; and writing into a transposed
  // destination.
  for (Shape s : {Shape{37, 70}, Shape{64, 64}, Shape{3, 33, 9}, Shape{8, 8}, Shape{100, 5}}) {
    int nd = static_cast<int>(s.size());
    std::vector<int> axes(nd);
    std::iota(axes.rbegin(), axes.rend(), 0);
    for (Dtype t : all_types()) {
      auto v = random_values(shape_size(s), t, -100, 100, 7);
      array x = from_doubles(v, s, t);
      array y = copy(transpose(x, axes));
      Shape out(s.rbegin(), s.rend());
      Ref r{s, v};
      Ref want = build(out, [&](auto& i) {
        std::vector<int> src(i.rbegin(), i.rend());
        return r.at(src);
      });
      expect_values(y, want.v, "copy(transpose) " + dtype_name(t) + shape_str(s), 0, 0);
      if (nd == 3) {
        array z = copy(transpose(x, {0, 2, 1}));
        Ref w = build({s[0], s[2], s[1]}, [&](auto& i) { return r.at({i[0], i[2], i[1]}); });
        expect_values(z, w.v, "copy(transpose 021) " + dtype_name(t), 0, 0);
      }
    }
  }
  // Destination column-major, source row-major.
  std::vector<double> v(40 * 24);
  std::iota(v.begin(), v.end(), 0.0);
  array src = from_doubles(v, {40, 24}, float32);
  array dst_t = transpose(contiguous(transpose(from_doubles(std::vector<double>(v.size(), 0),
                                                            {40, 24}, float32))));
  eval(src, dst_t);
  cpu::copy_into(src, dst_t);
  expect_values(dst_t, v, "copy_into a column-major destination", 0, 0);
}

TEST(Shape, DynamicSlice) {
  Shape s{5, 6};
  auto window = [](int r0, int c0, Shape size) {
    return [=](const Ref& r) { return build(size, [&](auto& i) { return r.at({i[0] + r0, i[1] + c0}); }); };
  };
  check("dynamic slice", s,
        [](const array& x) { return slice(x, array({1, 2}), {0, 1}, {3, 2}); }, window(1, 2, {3, 2}));
  // Clamped into bounds; negative counts from the end; one axis only.
  check("dynamic slice clamp", s,
        [](const array& x) { return slice(x, array({7, -100}, int64), {0, 1}, {3, 2}); },
        window(2, 0, {3, 2}));
  check("dynamic slice negative", s,
        [](const array& x) { return slice(x, array({-2}, int8), {-1}, {5, 2}); },
        window(0, 4, {5, 2}));
  check("dynamic slice uint axis order", s,
        [](const array& x) {
          return slice(x, array({3, 1}, uint32), {1, 0}, {2, 2});
        },
        window(1, 3, {2, 2}));
  check("dynamic slice empty", s,
        [](const array& x) { return slice(x, array({1}), {0}, {0, 6}); }, window(0, 0, {0, 6}));
  array x = array({1.f, 2.f, 3.f, 4.f}, {2, 2});
  EXPECT_THROW(slice(x, array({1.f}), {0}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(slice(x, array({true}), {0}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(slice(x, array({1, 1}), {0}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(slice(x, array({1, 1}), {0, 0}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(slice(x, array({1}), {2}, {1, 1}), std::out_of_range);
  EXPECT_THROW(slice(x, array({1}), {0}, {1}), std::invalid_argument);
  EXPECT_THROW(slice(x, array({1}), {0}, {3, 1}), std::invalid_argument);
  EXPECT_THROW(slice(x, array({1}), {0}, {-1, 1}), std::invalid_argument);
}

TEST(Shape, SliceUpdateStatic) {
  Shape s{4, 6};
  // Strided region rows 0,2 and columns 5,3,1 (negative step), broadcast update.
  auto in_region = [](const std::vector<int>& i) {
    return (i[0] == 0 || i[0] == 2) && (i[1] == 5 || i[1] == 3 || i[1] == 1);
  };
  check("slice_update strided", s,
        [](const array& x) {
          return slice_update(x, array({7, 8, 9}), {0, 5}, {4, 0}, {2, -2});
        },
        [&](const Ref& r) {
          return build(r.shape, [&](auto& i) {
            if (!in_region(i)) return r.at(i);
            return i[1] == 5 ? 7.0 : i[1] == 3 ? 8.0 : 9.0;
          });
        },
        numeric_types());
  // The update is cast to src's dtype (2.75 -> 2 for integers, true for bool).
  for (Dtype t : all_types()) {
    array x = with_layout(std::vector<double>(6, 0), {2, 3}, t, Layout::transposed);
    array y = slice_update(x, array(2.75f), Shape{1, 1}, Shape{2, 3});
    double v = t == bool_ ? 1.0 : is_integer(t) ? 2.0 : t == bfloat16 ? 2.75 : 2.75;
    EXPECT_EQ(y.dtype(), t);
    expect_values(y, {0, 0, 0, 0, v, v}, "slice_update cast " + dtype_name(t), 0, 0);
  }
  // An update that is a view of src (flipped row) reads the old values.
  array m = array({1, 2, 3, 4, 5, 6}, {2, 3});
  array f = slice_update(m, slice(m, {0, 2}, {1, -4}, {1, -1}), Shape{1, 0}, Shape{2, 3});
  expect_values(f, {1, 2, 3, 3, 2, 1}, "slice_update from a view of src", 0, 0);
  // Empty region: src unchanged.
  EXPECT_TRUE(slice_update(m, array({1}), Shape{0, 3}, Shape{2, 3}).is_same(m));
  // 0-d src.
  expect_values(slice_update(array(5), array(9), Shape{}, Shape{}), {9}, "slice_update 0-d", 0, 0);
  // A last-use src of the same size is updated in place.
  array src = copy(m);
  eval(src);
  const void* p = src.raw_data();
  array u = slice_update(src, array({0}), Shape{0, 0}, Shape{1, 1});
  src = array(0);
  eval(u);
  EXPECT_EQ(u.raw_data(), p);
  expect_values(u, {0, 2, 3, 4, 5, 6}, "slice_update donated", 0, 0);
  EXPECT_THROW(slice_update(m, array({1, 2}), Shape{0, 0}, Shape{2, 3}), std::invalid_argument);
  EXPECT_THROW(slice_update(m, array({1, 2, 3}, {1, 1, 3}), Shape{0, 0}, Shape{1, 3}),
               std::invalid_argument);
  EXPECT_THROW(slice_update(m, array(1), Shape{0}, Shape{1}), std::invalid_argument);
  EXPECT_THROW(slice_update(m, array(1), {0, 0}, {1, 1}, {1, 0}), std::invalid_argument);
}

TEST(Shape, SliceUpdateDynamic) {
  Shape s{4, 5};
  auto put = [](int r0, int c0, Shape size, double val) {
    return [=](const Ref& r) {
      return build(r.shape, [&](auto& i) {
        bool in = i[0] >= r0 && i[0] < r0 + size[0] && i[1] >= c0 && i[1] < c0 + size[1];
        return in ? val : r.at(i);
      });
    };
  };
  check("dynamic slice_update", s,
        [](const array& x) {
          return slice_update(x, broadcast_to(array(3), {2, 2}), array({1, 2}), {0, 1});
        },
        put(1, 2, {2, 2}, 3), numeric_types());
  check("dynamic slice_update clamp", s,
        [](const array& x) {
          return slice_update(x, broadcast_to(array(3), {2, 2}), array({9, -1}, int16), {0, 1});
        },
        put(2, 3, {2, 2}, 3), numeric_types());
  // An update with fewer dimensions spans the leading axes not sliced.
  check("dynamic slice_update rank", s,
        [](const array& x) { return slice_update(x, array({1, 1}), array({2}), {1}); },
        put(0, 2, {4, 2}, 1));
  check("dynamic slice_update row", s,
        [](const array& x) {
          return slice_update(x, broadcast_to(array(1), {5}), array({3}), {0});
        },
        put(3, 0, {1, 5}, 1));
  array m = array({1, 2, 3, 4}, {2, 2});
  EXPECT_THROW(slice_update(m, array({1}), array({0.5f}), {0}), std::invalid_argument);
  EXPECT_THROW(slice_update(m, array({1}), array({0, 0}), {0}), std::invalid_argument);
  EXPECT_THROW(slice_update(m, array({1}), array({0}), {2}), std::out_of_range);
  EXPECT_THROW(slice_update(m, array({1, 2, 3}), array({0}), {0}), std::invalid_argument);
  EXPECT_THROW(slice_update(m, array({1}, {1, 1, 1}), array({0}), {0}), std::invalid_argument);
}

TEST(Shape, Concatenate) {
  Shape s{3, 4};
  // x joined with itself transposed-and-flipped variants of the same layout.
  check("concatenate axis 0", s,
        [](const array& x) { return concatenate({x, flip(x, 0), x}, 0); },
        [](const Ref& r) {
          return build({9, 4}, [&](auto& i) {
            int k = i[0] / 3, row = i[0] % 3;
            return r.at({k == 1 ? 2 - row : row, i[1]});
          });
        });
  check("concatenate axis -1", s,
        [](const array& x) { return concatenate({x, slice(x, {0, 0}, {3, 1})}, -1); },
        [](const Ref& r) {
          return build({3, 5}, [&](auto& i) { return r.at({i[0], i[1] == 4 ? 0 : i[1]}); });
        });
  check("concatenate flattened", s,
        [](const array& x) { return concatenate({x, reshape(x, {12, 1})}); },
        [](const Ref& r) {
          return build({24}, [&](auto& i) { return r.v[i[0] % 12]; });
        });
  check("concatenate with empty", {0, 4},
        [](const array& x) { return concatenate({x, x}, 0); },
        [](const Ref& r) { return Ref{{0, 4}, {}}; });
  // Mixed dtypes promote.
  array a = array({1, 2}, int8), b = array({3.5f});
  array c = concatenate({a, b}, 0);
  EXPECT_EQ(c.dtype(), float32);
  expect_values(c, {1, 2, 3.5}, "concatenate promotes", 0, 0);
  EXPECT_EQ(concatenate({array({1, 2}, uint8), array({-1}, int8)}, 0).dtype(), int16);
  EXPECT_EQ(concatenate({a}, 0).dtype(), int8);
  // Complex values (imaginary parts included) survive.
  std::vector<complex64_t> cv{{1, 2}, {3, -4}};
  array z(cv.begin(), {2}, complex64);
  auto got = to_complex(concatenate({z, flip(z)}, 0));
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[3], std::complex<double>(1, 2));
  EXPECT_EQ(got[1], std::complex<double>(3, -4));
  EXPECT_THROW(concatenate(std::vector<array>{}, 0), std::invalid_argument);
  EXPECT_THROW(concatenate({array(1), array(2)}, 0), std::out_of_range);
  EXPECT_THROW(concatenate({array({1, 2}), array({1, 2}, {1, 2})}, 0), std::invalid_argument);
  EXPECT_THROW(concatenate({array({1, 2}, {1, 2}), array({1, 2, 3}, {1, 3})}, 0),
               std::invalid_argument);
  EXPECT_THROW(concatenate({array({1, 2}), array({1, 2})}, 1), std::out_of_range);
  EXPECT_EQ(concatenate({array(1), array({2, 3})}).shape(), (Shape{3}));
}

TEST(Shape, StackSplitUnstack) {
  Shape s{2, 3};
  check("stack 0", s, [](const array& x) { return stack({x, x}); },
        [](const Ref& r) { return build({2, 2, 3}, [&](auto& i) { return r.at({i[1], i[2]}); }); });
  check("stack -1", s, [](const array& x) { return stack({x, flip(x, 1)}, -1); },
        [](const Ref& r) {
          return build({2, 3, 2}, [&](auto& i) {
            return r.at({i[0], i[2] == 0 ? i[1] : 2 - i[1]});
          });
        });
  check("stack 0-d", {}, [](const array& x) { return stack({x, x, x}); },
        [](const Ref& r) { return Ref{{3}, {r.v[0], r.v[0], r.v[0]}}; });
  EXPECT_THROW(stack({}), std::invalid_argument);
  EXPECT_THROW(stack({array({1, 2}), array({1, 2, 3})}), std::invalid_argument);
  EXPECT_THROW(stack({array({1, 2})}, 2), std::out_of_range);

  Shape t{6, 4};
  for (int k = 0; k < 3; ++k) {
    check("split count " + std::to_string(k), t,
          [k](const array& x) { return split(x, 3, 0)[k]; },
          [k](const Ref& r) {
            return build({2, 4}, [&](auto& i) { return r.at({i[0] + 2 * k, i[1]}); });
          });
  }
  // Split points: in order, negative, past the end and out of order.
  array x = from_doubles({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}, int32);
  auto parts = split(x, Shape{2, -3, 12, 5});
  ASSERT_EQ(parts.size(), 5u);
  expect_values(parts[0], {0, 1}, "split 0", 0, 0);
  expect_values(parts[1], {2, 3, 4, 5, 6}, "split 1", 0, 0);
  expect_values(parts[2], {7, 8, 9}, "split 2", 0, 0);
  EXPECT_EQ(parts[3].size(), 0u);
  expect_values(parts[4], {5, 6, 7, 8, 9}, "split 4", 0, 0);
  auto cols = split(with_layout(random_values(24, float16, -5, 5, 9), t, float16,
                                Layout::transposed), Shape{1}, -1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(cols[0].shape(), (Shape{6, 1}));
  EXPECT_EQ(cols[1].shape(), (Shape{6, 3}));
  EXPECT_EQ(split(x, 1).size(), 1u);
  EXPECT_THROW(split(x, 3), std::invalid_argument);
  EXPECT_THROW(split(x, 0), std::invalid_argument);
  EXPECT_THROW(split(x, 2, 1), std::out_of_range);
  EXPECT_THROW(split(array(1), 1), std::out_of_range);

  for (int k = 0; k < 4; ++k) {
    check("unstack -1", t, [k](const array& x) { return unstack(x, -1)[k]; },
          [k](const Ref& r) { return build({6}, [&](auto& i) { return r.at({i[0], k}); }); });
  }
  EXPECT_EQ(unstack(x).size(), 10u);
  EXPECT_EQ(unstack(x)[3].shape(), Shape{});
  EXPECT_TRUE(unstack(from_doubles({}, {0, 2}, float32)).empty());
  EXPECT_THROW(unstack(array(1)), std::out_of_range);
  EXPECT_THROW(unstack(x, 1), std::out_of_range);
}

TEST(Shape, RepeatTile) {
  Shape s{2, 3};
  check("repeat axis 1", s, [](const array& x) { return repeat(x, 2, 1); },
        [](const Ref& r) { return build({2, 6}, [&](auto& i) { return r.at({i[0], i[1] / 2}); }); });
  check("repeat axis -2", s, [](const array& x) { return repeat(x, 3, -2); },
        [](const Ref& r) { return build({6, 3}, [&](auto& i) { return r.at({i[0] / 3, i[1]}); }); });
  check("repeat flat", s, [](const array& x) { return repeat(x, 2); },
        [](const Ref& r) { return build({12}, [&](auto& i) { return r.v[i[0] / 2]; }); });
  check("repeat 0", s, [](const array& x) { return repeat(x, 0, 0); },
        [](const Ref& r) { return Ref{{0, 3}, {}}; });
  check("repeat 0-d", {}, [](const array& x) { return repeat(x, 3); },
        [](const Ref& r) { return Ref{{3}, {r.v[0], r.v[0], r.v[0]}}; });
  check("tile", s, [](const array& x) { return tile(x, {2, 2}); },
        [](const Ref& r) {
          return build({4, 6}, [&](auto& i) { return r.at({i[0] % 2, i[1] % 3}); });
        });
  check("tile more reps", s, [](const array& x) { return tile(x, {2, 1, 3}); },
        [](const Ref& r) {
          return build({2, 2, 9}, [&](auto& i) { return r.at({i[1], i[2] % 3}); });
        });
  check("tile fewer reps", s, [](const array& x) { return tile(x, {2}); },
        [](const Ref& r) { return build({2, 6}, [&](auto& i) { return r.at({i[0], i[1] % 3}); }); });
  check("tile 0-d", {}, [](const array& x) { return tile(x, {2, 2}); },
        [](const Ref& r) { return Ref{{2, 2}, std::vector<double>(4, r.v[0])}; });
  check("tile ones", s, [](const array& x) { return tile(x, {1, 1, 1}); },
        same_values({1, 2, 3}));
  array x = array({1, 2});
  EXPECT_EQ(tile(x, {0}).shape(), (Shape{0}));
  EXPECT_THROW(repeat(x, -1), std::invalid_argument);
  EXPECT_THROW(repeat(x, 2, 1), std::out_of_range);
  EXPECT_THROW(tile(x, {-1}), std::invalid_argument);
}

TEST(Shape, Pad) {
  Shape s{3, 4};
  auto padded = [](std::vector<std::pair<int, int>> w, double value, bool edge) {
    return [=](const Ref& r) {
      Shape out = r.shape;
      for (size_t d = 0; d < out.size(); ++d) out[d] += w[d].first + w[d].second;
      return build(out, [&](auto& i) {
        std::vector<int> src(i.size());
        for (size_t d = 0; d < i.size(); ++d) {
          int k = i[d] - w[d].first;
          if (k < 0 || k >= r.shape[d]) {
            if (!edge) return value;
            k = std::clamp(k, 0, r.shape[d] - 1);
          }
          src[d] = k;
        }
        return r.at(src);
      });
    };
  };
  check("pad constant", s, [](const array& x) { return pad(x, {{1, 2}, {0, 3}}, array(7)); },
        padded({{1, 2}, {0, 3}}, 7, false), numeric_types());
  check("pad int", s, [](const array& x) { return pad(x, 2); }, padded({{2, 2}, {2, 2}}, 0, false));
  check("pad pair", s, [](const array& x) { return pad(x, {0, 1}, array(1)); },
        padded({{0, 1}, {0, 1}}, 1, false));
  check("pad axes", s,
        [](const array& x) { return pad(x, {-1}, {2}, {1}, array(3)); },
        padded({{0, 0}, {2, 1}}, 3, false), numeric_types());
  check("pad edge", s, [](const array& x) { return pad(x, {{2, 1}, {1, 3}}, array(0), "edge"); },
        padded({{2, 1}, {1, 3}}, 0, true));
  check("pad edge axes", {2, 3, 2},
        [](const array& x) { return pad(x, {2, 0}, {1, 1}, {2, 0}, array(0), "edge"); },
        padded({{1, 0}, {0, 0}, {1, 2}}, 0, true));
  check("pad constant empty", {0, 3}, [](const array& x) { return pad(x, 1, array(4)); },
        padded({{1, 1}, {1, 1}}, 4, false), numeric_types());
  check("pad 0-d", {}, [](const array& x) { return pad(x, 3); }, same_values({}));
  check("pad zero widths", s, [](const array& x) { return pad(x, 0); }, same_values(s));
  // The value is cast to the input's dtype.
  array xi = pad(array({1, 2}, int16), 1, array(2.9f));
  EXPECT_EQ(xi.dtype(), int16);
  expect_values(xi, {2, 1, 2, 2}, "pad value cast", 0, 0);
  expect_values(pad(array({1.5f}, float16), 1, array(true)), {1, 1.5, 1}, "pad bool value", 0, 0);
  // Complex edge padding keeps imaginary parts.
  std::vector<complex64_t> cv{{1, 2}, {3, -4}};
  auto got = to_complex(pad(array(cv.begin(), {2}, complex64), {1, 2}, array(0), "edge"));
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0], std::complex<double>(1, 2));
  EXPECT_EQ(got[4], std::complex<double>(3, -4));
  array x = array({1, 2, 3}, {1, 3});
  EXPECT_THROW(pad(x, -1), std::invalid_argument);
  EXPECT_THROW(pad(x, {{0, 0}, {1, -1}}), std::invalid_argument);
  EXPECT_THROW(pad(x, {{0, 0}, {1, 1}, {1, 1}}), std::invalid_argument);
  EXPECT_THROW(pad(x, {0}, {1, 1}, {1}), std::invalid_argument);
  EXPECT_THROW(pad(x, {2}, {1}, {1}), std::invalid_argument);
  EXPECT_THROW(pad(x, std::vector<int>{1, -1}, Shape{1, 1}, Shape{1, 1}), std::invalid_argument);
  EXPECT_THROW(pad(x, 1, array({1, 2})), std::invalid_argument);
  EXPECT_THROW(pad(x, 1, array(0), "wrap"), std::invalid_argument);
  EXPECT_THROW(pad(from_doubles({}, {0}, float32), 1, array(0), "edge"), std::invalid_argument);
}

TEST(Shape, Flip) {
  Shape s{3, 4};
  check("flip all", s, [](const array& x) { return flip(x); },
        [](const Ref& r) { return build(r.shape, [&](auto& i) { return r.at({2 - i[0], 3 - i[1]}); }); });
  check("flip -1", s, [](const array& x) { return flip(x, -1); },
        [](const Ref& r) { return build(r.shape, [&](auto& i) { return r.at({i[0], 3 - i[1]}); }); });
  check("flip axes", s, [](const array& x) { return flip(x, std::vector<int>{0}); },
        [](const Ref& r) { return build(r.shape, [&](auto& i) { return r.at({2 - i[0], i[1]}); }); });
  check("flip 0-d", {}, [](const array& x) { return flip(x); }, same_values({}));
  check("flip empty", {0, 3}, [](const array& x) { return flip(x); }, same_values({0, 3}));
  array x = with_layout(random_values(12, int64, -9, 9, 2), s, int64, Layout::contiguous);
  array f = flip(x);
  eval(f);
  EXPECT_EQ(f.buffer().raw_ptr(), x.buffer().raw_ptr());  // a view
  EXPECT_THROW(flip(x, 2), std::out_of_range);
  EXPECT_THROW(flip(x, {0, -2}), std::invalid_argument);
}

TEST(Shape, Roll) {
  Shape s{3, 4};
  auto rolled = [](int s0, int s1) {
    return [=](const Ref& r) {
      return build(r.shape, [&](auto& i) { return r.at({mod(i[0] - s0, 3), mod(i[1] - s1, 4)}); });
    };
  };
  auto rolled_flat = [](int64_t k) {
    return [=](const Ref& r) {
      return build(r.shape, [&](auto& i) { return r.v[mod(i[0] * 4 + i[1] - k, 12)]; });
    };
  };
  check("roll flat", s, [](const array& x) { return roll(x, 5); }, rolled_flat(5));
  check("roll flat negative big", s, [](const array& x) { return roll(x, -29); }, rolled_flat(-29));
  check("roll flat shape", s, [](const array& x) { return roll(x, Shape{2, 3}); }, rolled_flat(5));
  check("roll axis", s, [](const array& x) { return roll(x, -1, 1); }, rolled(0, -1));
  check("roll axis big", s, [](const array& x) { return roll(x, 10, -2); }, rolled(10, 0));
  check("roll axes", s, [](const array& x) { return roll(x, 1, std::vector<int>{0, 1}); },
        rolled(1, 1));
  check("roll shapes axis", s, [](const array& x) { return roll(x, Shape{1, 2}, 1); }, rolled(0, 3));
  check("roll shapes axes", s,
        [](const array& x) { return roll(x, Shape{2, -5}, std::vector<int>{0, 1}); },
        rolled(2, -5));
  check("roll one shift many axes", s,
        [](const array& x) { return roll(x, Shape{7}, std::vector<int>{1, 0}); }, rolled(7, 7));
  check("roll 0-d", {}, [](const array& x) { return roll(x, 3); }, same_values({}));
  check("roll empty", {0, 3}, [](const array& x) { return roll(x, 2, 0); }, same_values({0, 3}));
  array x = array({1, 2, 3});
  EXPECT_THROW(roll(x, 1, 1), std::out_of_range);
  EXPECT_THROW(roll(x, Shape{1, 2}, std::vector<int>{0, 0, 0}), std::invalid_argument);
  EXPECT_THROW(roll(array(1), 1, 0), std::out_of_range);
}

TEST(Shape, AtLeast) {
  array s = array(3.f), v = array({1.f, 2.f}), m = array({1.f, 2.f}, {1, 2});
  EXPECT_EQ(atleast_1d(s).shape(), (Shape{1}));
  EXPECT_EQ(atleast_2d(s).shape(), (Shape{1, 1}));
  EXPECT_EQ(atleast_3d(s).shape(), (Shape{1, 1, 1}));
  EXPECT_EQ(atleast_1d(v).shape(), (Shape{2}));
  EXPECT_EQ(atleast_2d(v).shape(), (Shape{1, 2}));
  EXPECT_EQ(atleast_3d(v).shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(atleast_2d(m).shape(), (Shape{1, 2}));
  EXPECT_EQ(atleast_3d(m).shape(), (Shape{1, 2, 1}));
  EXPECT_EQ(atleast_3d(array({1.f}, {1, 1, 1, 1})).shape(), (Shape{1, 1, 1, 1}));
  auto all = atleast_2d(std::vector<array>{s, v, m});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].shape(), (Shape{1, 1}));
  EXPECT_EQ(atleast_1d(std::vector<array>{s})[0].shape(), (Shape{1}));
  EXPECT_EQ(atleast_3d(std::vector<array>{v})[0].shape(), (Shape{1, 2, 1}));
  check("atleast_3d values", {2, 3}, [](const array& x) { return atleast_3d(x); },
        same_values({2, 3, 1}));
}

TEST(Shape, Diagonal) {
  Shape s{3, 4};
  auto diag_ref = [](int k) {
    return [=](const Ref& r) {
      int len = std::max(0, k >= 0 ? std::min(3, 4 - k) : std::min(3 + k, 4));
      return build({len}, [&](auto& i) { return k >= 0 ? r.at({i[0], i[0] + k}) : r.at({i[0] - k, i[0]}); });
    };
  };
  for (int k : {0, 1, 3, 4, 9, -1, -2, -3, -7}) {
    check("diagonal " + std::to_string(k), s, [k](const array& x) { return diagonal(x, k); },
          diag_ref(k));
    check("diag 2-D " + std::to_string(k), s, [k](const array& x) { return diag(x, k); },
          diag_ref(k));
  }
  // Swapped axes: the transpose's diagonals.
  check("diagonal 1,0", s, [](const array& x) { return diagonal(x, 1, 1, 0); },
        [](const Ref& r) { return build({2}, [&](auto& i) { return r.at({i[0] + 1, i[0]}); }); });
  // 3-D: the other axis first, the diagonal last.
  check("diagonal 3-D", {2, 3, 4}, [](const array& x) { return diagonal(x, -1, 2, 0); },
        [](const Ref& r) {
          return build({3, 2}, [&](auto& i) { return r.at({i[1], i[0], i[1] + 1}); });
        });
  array x = with_layout(random_values(12, float64, -9, 9, 2), s, float64, Layout::contiguous);
  array d = diagonal(x, 1);
  eval(d);
  EXPECT_EQ(d.buffer().raw_ptr(), x.buffer().raw_ptr());  // a view
  EXPECT_EQ(d.strides(), (Strides{5}));
  EXPECT_THROW(diagonal(array({1, 2})), std::invalid_argument);
  EXPECT_THROW(diagonal(x, 0, 1, 1), std::invalid_argument);
  EXPECT_THROW(diagonal(x, 0, -1, 1), std::invalid_argument);
  EXPECT_THROW(diagonal(x, 0, 0, 2), std::out_of_range);
}

TEST(Shape, DiagFromVector) {
  for (int k : {0, 2, -1}) {
    check("diag 1-D " + std::to_string(k), {3}, [k](const array& x) { return diag(x, k); },
          [k](const Ref& r) {
            int m = 3 + std::abs(k);
            return build({m, m}, [&](auto& i) {
              int j = k >= 0 ? i[0] : i[1];
              return i[1] - i[0] == k ? r.v[j] : 0.0;
            });
          });
  }
  check("diag empty", {0}, [](const array& x) { return diag(x, -2); },
        [](const Ref&) { return Ref{{2, 2}, std::vector<double>(4, 0)}; });
  EXPECT_THROW(diag(array(1)), std::invalid_argument);
  EXPECT_THROW(diag(array({1}, {1, 1, 1})), std::invalid_argument);
}

TEST(Shape, ArrayIteration) {
  array m = array({1, 2, 3, 4, 5, 6}, {3, 2});
  std::vector<std::vector<double>> rows;
  for (auto row : transpose(m)) {
    EXPECT_EQ(row.shape(), (Shape{3}));
    rows.push_back(to_doubles(row));
  }
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<double>{1, 3, 5}));
  EXPECT_EQ(rows[1], (std::vector<double>{2, 4, 6}));
  int n = 0;
  for (auto x : array({7, 8, 9})) {
    EXPECT_EQ(x.ndim(), 0u);
    EXPECT_EQ(x.item<int>(), 7 + n++);
  }
  EXPECT_EQ(n, 3);
}

// ---- slice_update_add/prod/max/min, matrix_transpose, pad modes ------------

TEST(SliceUpdateReduce, CombinesTheRegionWithTheUpdate) {
  on_each_device([] {
    array src({1.f, 2.f, 3.f, 4.f, 5.f, 6.f});
    array up({10.f, 0.5f});
    expect_values(slice_update_add(src, up, {1}, {5}, {2}), {1, 12, 3, 4.5, 5, 6}, "add strided");
    expect_values(slice_update_prod(src, up, {0}, {2}), {10, 1, 3, 4, 5, 6}, "prod");
    expect_values(slice_update_max(src, up, {4}, {6}), {1, 2, 3, 4, 10, 6}, "max");
    expect_values(slice_update_min(src, up, {4}, {6}), {1, 2, 3, 4, 5, 0.5}, "min");
    // The update is cast to src's dtype and broadcast over the region.
    array i({1, 2, 3, 4}, {2, 2}, int32);
    expect_values(slice_update_add(i, array(2.7f), {0, 1}, {2, 2}), {1, 4, 3, 6}, "int src");
    EXPECT_THROW(slice_update_add(src, array({1.f, 2.f, 3.f}), {0}, {2}), std::invalid_argument);
  });
}

TEST(SliceUpdateReduce, Derivatives) {
  auto f = [](const std::vector<array>& x) {
    return std::vector{slice_update_add(x[0], x[1], {1, 0}, {3, 3}),
                       slice_update_prod(x[0], x[1], {0, 0}, {2, 3})};
  };
  grad_check::check_derivatives("slice_update_add/prod", f,
                                {grad_check::random_f64({3, 3}, 1), grad_check::random_f64({2, 3}, 2)});
}

TEST(MatrixTranspose, SwapsTheLastTwoAxes) {
  array a = reshape(arange(6), {1, 2, 3});
  array t = matrix_transpose(a);
  EXPECT_EQ(t.shape(), (Shape{1, 3, 2}));
  expect_values(t, {0, 3, 1, 4, 2, 5}, "matrix_transpose");
  EXPECT_THROW(matrix_transpose(arange(3)), std::invalid_argument);
}

TEST(Pad, ReflectAndSymmetricModes) {
  on_each_device([] {
    array x({1, 2, 3, 4}, int32);
    expect_values(pad(x, 2, array(0), "reflect"), {3, 2, 1, 2, 3, 4, 3, 2}, "reflect");
    expect_values(pad(x, 2, array(0), "symmetric"), {2, 1, 1, 2, 3, 4, 4, 3}, "symmetric");
    // Widths beyond the axis mirror again (NumPy's and MLX's result).
    array y({1, 2, 3}, int32);
    expect_values(pad(y, 5, array(0), "reflect"), {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2},
                  "reflect wide");
    expect_values(pad(y, 5, array(0), "symmetric"), {2, 3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1, 2},
                  "symmetric wide");
    array m = reshape(arange(6), {2, 3});
    expect_values(pad(m, {{1, 1}, {2, 2}}, array(0), "reflect"),
                  {5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0, 5, 4, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 1, 0},
                  "reflect 2-D");
    EXPECT_THROW(pad(x, 1, array(0), "wrap"), std::invalid_argument);
    EXPECT_THROW(pad(zeros({0}), 1, array(0), "reflect"), std::invalid_argument);
  });
  auto f = [](const std::vector<array>& x) {
    return std::vector{pad(x[0], {{1, 2}, {3, 0}}, array(0.0), "reflect"),
                       pad(x[0], 4, array(0.0), "symmetric")};
  };
  grad_check::check_derivatives("pad mirrored", f, {grad_check::random_f64({3, 4}, 5)});
}
