// Transform rules of the shape primitives: jvp and vjp against finite
// differences, vmap against a loop over the batch.
#include <gtest/gtest.h>

#include "grad_check.h"
#include "harness.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;
using grad_check::values;
using grad_check::on_each_device;
using grad_check::vec;

namespace {

array ints(std::initializer_list<int> v, Shape shape) { return array(v, std::move(shape), int32); }

}  // namespace

TEST(GradShape, test_transpose) {
  on_each_device([] {
    auto f = vec([](const std::vector<array>& x) { return transpose(x[0], {2, 0, 1}); });
    check_derivatives("transpose", f, {random_f64({2, 3, 4}, 1)});
    check_vmap("transpose axis 0", f, {random_f64({3, 2, 3, 4}, 2)}, {0});
    check_vmap("transpose axis 2", f, {random_f64({2, 3, 5, 4}, 3)}, {2});
    check_vmap("transpose last axis", f, {random_f64({2, 3, 4, 2}, 3)}, {3});
  });
}

TEST(GradShape, test_slice) {
  on_each_device([] {
    auto strided = vec([](const std::vector<array>& x) {
      return slice(x[0], {1, 0}, {5, 6}, {2, 3});
    });
    check_derivatives("slice strided", strided, {random_f64({5, 6}, 4)});
    // Negative strides whose stops clamp to "before the first element".
    auto reversed = vec([](const std::vector<array>& x) {
      return slice(x[0], {4, 5}, {-10, -10}, {-1, -2});
    });
    check_derivatives("slice reversed", reversed, {random_f64({5, 6}, 5)});
    check_derivatives("flip", vec([](const std::vector<array>& x) { return flip(x[0]); }),
                      {random_f64({3, 4}, 6)});
    check_vmap("slice axis 0", strided, {random_f64({3, 5, 6}, 7)}, {0});
    check_vmap("slice axis 1", strided, {random_f64({5, 3, 6}, 8)}, {1});
    check_vmap("slice reversed axis 2", reversed, {random_f64({5, 6, 2}, 9)}, {2});
  });
}

TEST(GradShape, test_slice_vjp_is_zero_outside_the_slice) {
  array x = random_f64({4}, 10);
  auto [out, g] = vjp([](const array& a) { return slice(a, {1}, {3}); }, x, array({5.0, 7.0}));
  EXPECT_EQ(g.dtype(), float64);
  EXPECT_EQ(values(g), (std::vector<double>{0, 5, 7, 0}));
}

TEST(GradShape, test_reshape) {
  on_each_device([] {
    auto f = vec([](const std::vector<array>& x) { return reshape(x[0], {3, 4}); });
    check_derivatives("reshape", f, {random_f64({2, 6}, 11)});
    // A non-contiguous input (a transpose) makes the reshape copy.
    auto g = vec([](const std::vector<array>& x) { return reshape(transpose(x[0]), {12}); });
    check_derivatives("reshape of a transpose", g, {random_f64({2, 6}, 12)});
    check_vmap("reshape axis 0", f, {random_f64({3, 2, 6}, 13)}, {0});
    check_vmap("reshape axis 2", f, {random_f64({2, 6, 3}, 14)}, {2});
    check_vmap("reshape of a transpose axis 1", g, {random_f64({2, 3, 6}, 15)}, {1});
  });
}

TEST(GradShape, test_dynamic_slice) {
  on_each_device([] {
    auto at = [](array start) {
      return vec([start](const std::vector<array>& x) {
        return slice(x[0], start, {0, 1}, {2, 3});
      });
    };
    check_derivatives("dynamic slice", at(ints({1, 2}, {2})), {random_f64({5, 6}, 16)});
    // Starts past the end (and negative ones) are clamped.
    check_derivatives("dynamic slice clamped", at(ints({9, -2}, {2})), {random_f64({5, 6}, 17)});
    auto f = vec([](const std::vector<array>& x) { return slice(x[0], x[1], {1}, {2, 3}); });
    array starts = ints({0, 3, 1}, {3, 1});
    check_vmap("dynamic slice a batched", f, {random_f64({3, 2, 6}, 18), ints({2}, {1})}, {0, -1});
    check_vmap("dynamic slice a batched on axis 2", f,
               {random_f64({2, 6, 3}, 19), ints({1}, {1})}, {2, -1});
    check_vmap("dynamic slice start batched", f, {random_f64({2, 6}, 20), starts}, {-1, 0});
    check_vmap("dynamic slice both batched", f,
               {random_f64({2, 3, 6}, 21), transpose(starts)}, {1, 1});
    // Starts past either end are clamped per batch element; two sliced axes.
    check_vmap("dynamic slice start batched and clamped", f,
               {random_f64({2, 6}, 22), ints({5, -2, -9}, {3, 1})}, {-1, 0});
    auto g = vec([](const std::vector<array>& x) { return slice(x[0], x[1], {0, 1}, {2, 3}); });
    check_vmap("dynamic slice start batched on two axes", g,
               {random_f64({3, 5, 6}, 23), ints({1, 2, 4, 0, -1, 9}, {3, 2})}, {0, 0});
  });
}

TEST(GradShape, test_dynamic_slice_start_gets_zero_gradient) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{slice(x[0], x[1], {0}, {2})};
  };
  auto [out, g] = vjp(f, {random_f64({5}, 22), ints({1}, {1})}, {array({1.0, 2.0})});
  EXPECT_EQ(values(g[0]), (std::vector<double>{0, 1, 2, 0, 0}));
  EXPECT_EQ(g[1].dtype(), int32);
  EXPECT_EQ(g[1].shape(), Shape{1});
  EXPECT_EQ(values(g[1]), (std::vector<double>{0}));
  auto [outs, t] = jvp(f, {random_f64({5}, 23), ints({1}, {1})},
                       {zeros({5}, float64), ones({1}, int32)});
  EXPECT_EQ(values(t[0]), (std::vector<double>{0, 0}));
}

TEST(GradShape, test_slice_update) {
  on_each_device([] {
    auto f = vec([](const std::vector<array>& x) {
      return slice_update(x[0], x[1], {0, 1}, {4, 5}, {2, 2});
    });
    check_derivatives("slice_update", f, {random_f64({4, 5}, 24), random_f64({2, 2}, 25)});
    auto reversed = vec([](const std::vector<array>& x) {
      return slice_update(x[0], x[1], {3, 4}, {-9, -9}, {-1, -3});
    });
    check_derivatives("slice_update reversed", reversed,
                      {random_f64({4, 5}, 26), random_f64({4, 2}, 27)});
    check_vmap("slice_update both batched", f,
               {random_f64({3, 4, 5}, 28), random_f64({3, 2, 2}, 29)}, {0, 0});
    check_vmap("slice_update src batched", f,
               {random_f64({4, 3, 5}, 30), random_f64({2, 2}, 31)}, {1, -1});
    check_vmap("slice_update update batched", reversed,
               {random_f64({4, 5}, 32), random_f64({4, 2, 3}, 33)}, {-1, 2});
  });
}

TEST(GradShape, test_slice_update_vjp_values) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{slice_update(x[0], x[1], Shape{1}, Shape{3})};
  };
  auto [out, g] = vjp(f, {random_f64({4}, 34), random_f64({2}, 35)},
                      {array({1.0, 2.0, 3.0, 4.0})});
  EXPECT_EQ(values(g[0]), (std::vector<double>{1, 0, 0, 4}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{2, 3}));
  // An update of another dtype gets a cotangent of its own dtype.
  auto [out2, g2] = vjp(f, {random_f64({4}, 36), array({1.f, 2.f})}, {array({1.0, 2.0, 3.0, 4.0})});
  EXPECT_EQ(g2[1].dtype(), float32);
  EXPECT_EQ(values(g2[1]), (std::vector<double>{2, 3}));
}

TEST(GradShape, test_dynamic_slice_update) {
  on_each_device([] {
    auto at = [](array start) {
      return vec([start](const std::vector<array>& x) {
        return slice_update(x[0], x[1], start, {0, 1});
      });
    };
    check_derivatives("dynamic slice_update", at(ints({3, 1}, {2})),
                      {random_f64({5, 6}, 37), random_f64({2, 3}, 38)});
    check_derivatives("dynamic slice_update clamped", at(ints({-1, 7}, {2})),
                      {random_f64({5, 6}, 39), random_f64({2, 3}, 40)});
    auto f = vec([](const std::vector<array>& x) { return slice_update(x[0], x[1], x[2], {1}); });
    array start = ints({2}, {1});
    array starts = ints({0, 4, 2}, {3, 1});
    check_vmap("dynamic slice_update src, update batched", f,
               {random_f64({3, 4, 6}, 41), random_f64({3, 4, 2}, 42), start}, {0, 0, -1});
    check_vmap("dynamic slice_update src batched on axis 1", f,
               {random_f64({4, 3, 6}, 43), random_f64({4, 2}, 44), start}, {1, -1, -1});
    check_vmap("dynamic slice_update update batched", f,
               {random_f64({4, 6}, 45), random_f64({4, 2, 3}, 46), start}, {-1, 2, -1});
    check_vmap("dynamic slice_update start batched", f,
               {random_f64({4, 6}, 47), random_f64({4, 2}, 48), starts}, {-1, -1, 0});
    check_vmap("dynamic slice_update all batched", f,
               {random_f64({4, 6, 3}, 49), random_f64({3, 4, 2}, 50), transpose(starts)},
               {2, 0, 1});
    // Starts past either end are clamped per batch element; two sliced axes;
    // an update shorter than src on an axis without a start.
    check_vmap("dynamic slice_update start batched and clamped", f,
               {random_f64({4, 6}, 51), random_f64({4, 2}, 52), ints({5, -1, -9}, {3, 1})},
               {-1, -1, 0});
    auto g = vec([](const std::vector<array>& x) {
      return slice_update(x[0], x[1], x[2], {0, 1});
    });
    check_vmap("dynamic slice_update start batched on two axes", g,
               {random_f64({5, 6}, 53), random_f64({3, 2, 3}, 54),
                ints({1, 2, 4, 0, -1, 9}, {3, 2})}, {-1, 0, 0});
    check_vmap("dynamic slice_update shorter update", f,
               {random_f64({4, 6}, 55), random_f64({2, 2}, 56), ints({3, 0, 4}, {3, 1})},
               {-1, -1, 0});
  });
}

TEST(GradShape, test_dynamic_slice_update_start_gets_zero_gradient) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{slice_update(x[0], x[1], x[2], {0})};
  };
  auto [out, g] = vjp(f, {random_f64({4}, 51), random_f64({2}, 52), ints({1}, {1})},
                      {array({1.0, 2.0, 3.0, 4.0})});
  EXPECT_EQ(values(g[0]), (std::vector<double>{1, 0, 0, 4}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{2, 3}));
  EXPECT_EQ(g[2].dtype(), int32);
  EXPECT_EQ(values(g[2]), (std::vector<double>{0}));
}

TEST(GradShape, test_concatenate) {
  on_each_device([] {
    auto f = vec([](const std::vector<array>& x) { return concatenate({x[0], x[1], x[2]}, 1); });
    check_derivatives("concatenate", f,
                      {random_f64({2, 3}, 53), random_f64({2, 1}, 54), random_f64({2, 2}, 55)});
    check_derivatives("stack", vec([](const std::vector<array>& x) { return stack({x[0], x[1]}); }),
                      {random_f64({3}, 56), random_f64({3}, 57)});
    std::vector<array> in{random_f64({4, 2, 3}, 58), random_f64({4, 2, 1}, 59),
                          random_f64({4, 2, 2}, 60)};
    check_vmap("concatenate all batched", f, in, {0, 0, 0});
    check_vmap("concatenate some batched", f,
               {random_f64({2, 4, 3}, 61), random_f64({2, 1}, 62), random_f64({2, 2, 4}, 63)},
               {1, -1, 2});
  });
}

TEST(GradShape, test_concatenate_vjp_keeps_each_dtype) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{concatenate({x[0], x[1]}, 0)};
  };
  auto [out, g] = vjp(f, {array({1.f, 2.f}), array({3.0}, float64)}, {array({4.0, 5.0, 6.0})});
  EXPECT_EQ(g[0].dtype(), float32);
  EXPECT_EQ(g[1].dtype(), float64);
  EXPECT_EQ(values(g[0]), (std::vector<double>{4, 5}));
  EXPECT_EQ(values(g[1]), (std::vector<double>{6}));
}

TEST(GradShape, test_pad_constant) {
  on_each_device([] {
    auto f = vec([](const std::vector<array>& x) {
      return pad(x[0], {0, 1}, {1, 0}, {2, 3}, x[1]);
    });
    check_derivatives("pad constant", f, {random_f64({3, 4}, 64), random_f64({}, 65)});
    auto g = vec([](const std::vector<array>& x) { return pad(x[0], {{0, 0}, {2, 1}}); });
    check_derivatives("pad zeros", g, {random_f64({3, 4}, 66)});
    check_vmap("pad constant x batched", f, {random_f64({2, 3, 4}, 67), random_f64({}, 68)},
               {0, -1});
    check_vmap("pad constant both batched", f, {random_f64({3, 2, 4}, 69), random_f64({2}, 70)},
               {1, 0});
    check_vmap("pad constant value batched", f, {random_f64({3, 4}, 71), random_f64({3}, 72)},
               {-1, 0});
    check_vmap("pad zeros axis 2", g, {random_f64({3, 4, 2}, 73)}, {2});
  });
}

TEST(GradShape, test_pad_constant_value_gets_the_border_sum) {
  auto f = [](const std::vector<array>& x) {
    return std::vector<array>{pad(x[0], {0}, {1}, {2}, x[1])};
  };
  auto [out, g] = vjp(f, {random_f64({2}, 74), array(0.5)}, {array({1.0, 2.0, 3.0, 4.0, 5.0})});
  EXPECT_EQ(values(g[0]), (std::vector<double>{2, 3}));
  EXPECT_EQ(g[1].shape(), Shape{});
  EXPECT_EQ(values(g[1]), (std::vector<double>{10}));
}

TEST(GradShape, test_pad_edge) {
  on_each_device([] {
    auto f = vec([](const std::vector<array>& x) {
      return pad(x[0], {0, 1}, {2, 1}, {1, 3}, array(0), "edge");
    });
    check_derivatives("pad edge", f, {random_f64({3, 4}, 75)});
    // One element on a padded axis: it receives both borders.
    check_derivatives("pad edge length 1", f, {random_f64({1, 4}, 76)});
    auto high_only = vec([](const std::vector<array>& x) {
      return pad(x[0], {1}, {0}, {2}, array(0), "edge");
    });
    check_derivatives("pad edge high only", high_only, {random_f64({2, 3}, 77)});
    check_vmap("pad edge axis 0", f, {random_f64({2, 3, 4}, 78)}, {0});
    check_vmap("pad edge axis 1", f, {random_f64({3, 2, 4}, 79)}, {1});
  });
}

TEST(GradShape, test_pad_edge_vjp_values) {
  auto [out, g] = vjp([](const array& a) { return pad(a, {0}, {2}, {1}, array(0), "edge"); },
                      array({1.0, 2.0, 3.0}), array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}));
  EXPECT_EQ(values(g), (std::vector<double>{6, 4, 11}));
}

TEST(GradShape, test_diagonal) {
  on_each_device([] {
    for (int offset : {0, 2, -1}) {
      auto f = vec([offset](const std::vector<array>& x) { return diagonal(x[0], offset); });
      std::string name = "diagonal offset " + std::to_string(offset);
      check_derivatives(name, f, {random_f64({3, 4}, 80)});
      check_vmap(name + " axis 0", f, {random_f64({2, 3, 4}, 81)}, {0});
      check_vmap(name + " axis 2", f, {random_f64({3, 4, 2}, 82)}, {2});
    }
    auto g = vec([](const std::vector<array>& x) { return diagonal(x[0], 1, 2, 0); });
    check_derivatives("diagonal axes (2, 0)", g, {random_f64({3, 2, 4}, 83)});
    check_vmap("diagonal axes (2, 0) axis 1", g, {random_f64({3, 5, 2, 4}, 84)}, {1});
    check_vmap("diagonal axes (2, 0) axis 3", g, {random_f64({3, 2, 4, 5}, 85)}, {3});
    // Offsets past the matrix give an empty diagonal and zero gradients.
    auto empty = vec([](const std::vector<array>& x) { return diagonal(x[0], 5); });
    auto [out, gs] = vjp(empty, {random_f64({3, 4}, 86)}, {zeros({0}, float64)});
    EXPECT_EQ(gs[0].shape(), (Shape{3, 4}));
    EXPECT_EQ(values(gs[0]), std::vector<double>(12, 0.0));
  });
}

// The vjps are built from the same primitives, so they differentiate again.
TEST(GradShape, test_second_order) {
  on_each_device([] {
    auto inner = [](const std::vector<array>& x) {
      array d = diagonal(slice(x[0], {0, 1}, {3, 4}), 0);
      return std::vector<array>{concatenate({d, reshape(transpose(x[0]), {-1})}, 0)};
    };
    auto f = vec([inner](const std::vector<array>& x) { return vjp(inner, {x[0]}, {x[1]}).second[0]; });
    check_derivatives("vjp of slice, diagonal, concatenate", f,
                      {random_f64({3, 4}, 87), random_f64({15}, 88)});
    check_vmap("vmap of the vjp", f, {random_f64({2, 3, 4}, 89), random_f64({2, 15}, 90)}, {0, 0});
  });
}
