// Transform rules of the indexing primitives: jvp and vjp against finite
// differences, vmap against a loop over the batch, and the zero gradients of
// index inputs.
#include <gtest/gtest.h>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::integers_f64;
using grad_check::on_each_device;
using grad_check::random_f64;
using grad_check::values;
using grad_check::vec;

namespace {

array ints(std::initializer_list<int> v, Shape shape) { return array(v, std::move(shape), int32); }

}  // namespace

TEST(GradIndexing, test_take) {
  on_each_device([] {
    // Repeated, negative and out-of-range indices.
    array idx = ints({0, -1, 2, 2, 7, -5}, {2, 3});
    auto along = vec([idx](const std::vector<array>& x) { return take(x[0], idx, 1); });
    auto flat = vec([idx](const std::vector<array>& x) { return take(x[0], idx); });
    check_derivatives("take axis 1", along, {random_f64({3, 4}, 1)});
    check_derivatives("take flattened", flat, {random_f64({3, 4}, 2)});
    check_derivatives("take transposed", along, {transpose(random_f64({4, 3}, 3))});
    check_vmap("take a batched", along, {integers_f64({2, 3, 4}, 4)}, {0});
    check_vmap("take a batched axis 2", along, {integers_f64({3, 4, 2}, 5)}, {2});
    auto both = vec([](const std::vector<array>& x) { return take(x[0], x[1], 0); });
    array bidx = ints({0, 2, -1, 1, 5, 0}, {3, 2});
    check_vmap("take indices batched", both, {integers_f64({4, 2}, 6), bidx}, {-1, 0});
    check_vmap("take both batched", both, {integers_f64({3, 4, 2}, 7), bidx}, {0, 0});
    check_vmap("take both batched, indices on axis 1", both,
               {integers_f64({4, 3, 2}, 8), transpose(bidx)}, {1, 1});
  });
}

TEST(GradIndexing, test_take_along_axis) {
  on_each_device([] {
    array idx = ints({0, 3, -1, 1, 1, 9}, {2, 3});
    auto f = vec([idx](const std::vector<array>& x) { return take_along_axis(x[0], idx, 1); });
    check_derivatives("take_along_axis", f, {random_f64({2, 4}, 10)});
    // Indices broadcast against a.
    array row = ints({2, 0}, {1, 2});
    auto g = vec([row](const std::vector<array>& x) { return take_along_axis(x[0], row, 1); });
    check_derivatives("take_along_axis broadcast", g, {random_f64({3, 4}, 11)});
    check_vmap("take_along_axis a batched", f, {integers_f64({3, 2, 4}, 12)}, {0});
    auto both = vec([](const std::vector<array>& x) { return take_along_axis(x[0], x[1], 0); });
    array bidx = ints({0, 1, 1, 0, -1, 0, 2, 1, 0, 0, 1, 1}, {3, 2, 2});
    check_vmap("take_along_axis indices batched", both, {integers_f64({3, 2}, 13), bidx}, {-1, 0});
    check_vmap("take_along_axis both batched", both, {integers_f64({2, 3, 2}, 14), bidx}, {1, 0});
  });
}

TEST(GradIndexing, test_put_along_axis_and_scatter_add_axis) {
  on_each_device([] {
    array idx = ints({1, -1, 0, 2, 7, 3}, {2, 3});
    auto put = vec([idx](const std::vector<array>& x) { return put_along_axis(x[0], idx, x[1], 1); });
    check_derivatives("put_along_axis", put, {random_f64({2, 4}, 20), random_f64({2, 3}, 21)});
    array dup = ints({1, 1, -3, 0, 0, 0}, {2, 3});
    auto add = vec([dup](const std::vector<array>& x) {
      return scatter_add_axis(x[0], dup, x[1], 1);
    });
    check_derivatives("scatter_add_axis", add, {random_f64({2, 4}, 22), random_f64({2, 3}, 23)});
    check_vmap("put_along_axis a batched", put,
               {integers_f64({3, 2, 4}, 24), integers_f64({2, 3}, 25)}, {0, -1});
    check_vmap("scatter_add_axis values batched", add,
               {integers_f64({2, 4}, 26), integers_f64({2, 3, 3}, 27)}, {-1, 2});
    auto both = vec([](const std::vector<array>& x) { return scatter_add_axis(x[0], x[1], x[2], 0); });
    array bidx = ints({0, 1, 1, 1, 2, 0}, {3, 2, 1});
    check_vmap("scatter_add_axis all batched", both,
               {integers_f64({3, 3, 1}, 28), bidx, integers_f64({3, 2, 1}, 29)}, {0, 0, 0});
  });
}

TEST(GradIndexing, test_gather) {
  on_each_device([] {
    array i0 = ints({0, 3, -1}, {3});
    array i1 = ints({1, 0, 2}, {3});
    auto f = vec([i0, i1](const std::vector<array>& x) {
      return gather(x[0], {i0, i1}, {0, 1}, {1, 2, 3});
    });
    check_derivatives("gather", f, {random_f64({4, 4, 3}, 30)});
    check_vmap("gather a batched", f, {integers_f64({4, 4, 2, 3}, 31)}, {2});
    auto both = vec([](const std::vector<array>& x) { return gather(x[0], x[1], 1, {2, 1}); });
    array bidx = ints({0, 2, -1, 1, 1, 0}, {2, 3});
    check_vmap("gather indices batched", both, {integers_f64({2, 3}, 32), bidx}, {-1, 0});
    check_vmap("gather both batched", both, {integers_f64({2, 3, 2}, 33), bidx}, {2, 0});
  });
}

TEST(GradIndexing, test_scatters) {
  on_each_device([] {
    array distinct = ints({2, 0, -3, 9}, {4});
    array dup = ints({1, 1, -2, 0}, {4});
    auto assign = vec([distinct](const std::vector<array>& x) {
      return scatter(x[0], distinct, x[1], 0);
    });
    check_derivatives("scatter", assign, {random_f64({4, 3}, 40), random_f64({4, 1, 3}, 41)});
    auto add = vec([dup](const std::vector<array>& x) { return scatter_add(x[0], dup, x[1], 0); });
    check_derivatives("scatter_add", add, {random_f64({4, 3}, 42), random_f64({4, 1, 3}, 43)});
    auto prod = vec([dup](const std::vector<array>& x) { return scatter_prod(x[0], dup, x[1], 0); });
    check_derivatives("scatter_prod", prod,
                      {random_f64({4, 3}, 44, 0.5, 1.5), random_f64({4, 1, 3}, 45, 0.5, 1.5)});
    auto mx = vec([dup](const std::vector<array>& x) { return scatter_max(x[0], dup, x[1], 0); });
    auto mn = vec([dup](const std::vector<array>& x) { return scatter_min(x[0], dup, x[1], 0); });
    check_derivatives("scatter_max", mx, {random_f64({4, 3}, 46), random_f64({4, 1, 3}, 47)});
    check_derivatives("scatter_min", mn, {random_f64({4, 3}, 48), random_f64({4, 1, 3}, 49)});
    check_vmap("scatter a batched", assign,
               {integers_f64({4, 2, 3}, 50), integers_f64({4, 1, 3}, 51)}, {1, -1});
    check_vmap("scatter_add updates batched", add,
               {integers_f64({4, 3}, 52), integers_f64({2, 4, 1, 3}, 53)}, {-1, 0});
    check_vmap("scatter_max both batched", mx,
               {integers_f64({4, 3, 2}, 54), integers_f64({4, 1, 3, 2}, 55)}, {2, 3});
    auto all = vec([](const std::vector<array>& x) { return scatter_add(x[0], x[1], x[2], 0); });
    array bidx = ints({0, 1, 1, 2, 2, 2}, {3, 2});
    check_vmap("scatter_add all batched", all,
               {integers_f64({3, 3, 2}, 56), bidx, integers_f64({3, 2, 1, 2}, 57)}, {0, 0, 0});
    check_vmap("scatter_prod indices batched", vec([](const std::vector<array>& x) {
                 return scatter_prod(x[0], x[1], x[2], 0);
               }),
               {integers_f64({3, 2}, 58), bidx, integers_f64({2, 1, 2}, 59)}, {-1, 0, -1});
  });
}

TEST(GradIndexing, test_masked_scatter) {
  on_each_device([] {
    array mask = array({true, false, true, true, false, true}, {2, 3}, bool_);
    auto f = vec([mask](const std::vector<array>& x) { return masked_scatter(x[0], mask, x[1]); });
    check_derivatives("masked_scatter", f, {random_f64({2, 3}, 60), random_f64({5}, 61)});
    check_derivatives("masked_scatter short src", f, {random_f64({2, 3}, 62), random_f64({3}, 63)});
    check_vmap("masked_scatter a batched", f, {integers_f64({2, 2, 3}, 64), integers_f64({4}, 65)},
               {0, -1});
    auto g = vec([](const std::vector<array>& x) { return masked_scatter(x[0], x[1], x[2]); });
    array masks = array({true, false, false, true, true, true}, {2, 3}, bool_);
    check_vmap("masked_scatter all batched", g,
               {integers_f64({2, 3}, 66), masks, integers_f64({2, 3}, 67)}, {0, 0, 0});
  });
}

TEST(GradIndexing, test_indices_get_zero_gradients) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{take(x[0], x[1], 0)};
  };
  auto [out, g] = vjp(f, {random_f64({4}, 70), ints({1, 1, -1}, {3})}, {array({1.0, 2.0, 3.0})});
  EXPECT_EQ(values(g[0]), (std::vector<double>{0, 3, 0, 3}));
  EXPECT_EQ(g[1].dtype(), int32);
  EXPECT_EQ(values(g[1]), (std::vector<double>{0, 0, 0}));
  auto [outs, t] = jvp(f, {random_f64({4}, 71), ints({1, 1, -1}, {3})},
                       {zeros({4}, float64), ones({3}, int32)});
  EXPECT_EQ(values(t[0]), (std::vector<double>{0, 0, 0}));
}

TEST(GradIndexing, test_as_strided_overlapping_windows) {
  on_each_device([] {
    // Windows of 3 with step 1 over 6 elements: each element is seen up to 3 times.
    auto f = vec([](const std::vector<array>& x) { return as_strided(x[0], {4, 3}, {1, 1}, 0); });
    check_derivatives("as_strided overlapping", f, {random_f64({6}, 80)});
    auto [out, g] = vjp([](const array& x) { return as_strided(x, {4, 3}, {1, 1}, 0); },
                        random_f64({6}, 81), ones({4, 3}, float64));
    EXPECT_EQ(values(g), (std::vector<double>{1, 2, 3, 3, 2, 1}));
  });
}
