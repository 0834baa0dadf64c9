// Transform rules of the copy primitives (AsType, Copy, Broadcast, Contiguous)
// and of the creation primitives with an input (Band, View, AsStrided):
// derivatives against finite differences in float64, vmap against a loop over
// the batch (batch axis first and inside), zero derivatives through integer
// dtypes, and the error of a view that has no derivative.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;
using grad_check::values;
using grad_check::lift;
using grad_check::check_on_devices;
using grad_check::check_vmap_axes;

namespace {

using Unary = std::function<array(const array&)>;

// The vjp of f at x for cotangent c, checked to have x's shape and dtype.
array vjp_at(const Unary& f, const array& x, const array& c) {
  auto [outs, vjps] = vjp(lift(f), {x}, {c});
  EXPECT_EQ(vjps[0].shape(), x.shape());
  EXPECT_EQ(vjps[0].dtype(), x.dtype());
  return vjps[0];
}

array jvp_at(const Unary& f, const array& x, const array& t) {
  auto [outs, jvps] = jvp(lift(f), {x}, {t});
  EXPECT_EQ(jvps[0].shape(), outs[0].shape());
  EXPECT_EQ(jvps[0].dtype(), outs[0].dtype());
  return jvps[0];
}

std::vector<complex64_t> complex_values(const array& a) {
  array c = copy(astype(a, complex64));
  eval(c);
  return std::vector<complex64_t>(c.data<complex64_t>(), c.data<complex64_t>() + c.size());
}

}  // namespace

// ---- AsType

TEST(GradCopy, test_astype_between_inexact_dtypes_casts_the_cotangent) {
  array x = random_f64({2, 3}, 1);
  auto to32 = [](const array& a) { return astype(a, float32); };
  array g = vjp_at(to32, x, full({2, 3}, 0.25f));
  EXPECT_EQ(values(g), std::vector<double>(6, 0.25));
  array t = jvp_at(to32, x, full({2, 3}, 0.5, float64));
  EXPECT_EQ(values(t), std::vector<double>(6, 0.5));
  // float64 -> complex64: the vjp keeps the real part of the cotangent.
  auto to_complex = [](const array& a) { return astype(a, complex64); };
  g = vjp_at(to_complex, x, full({2, 3}, array(complex64_t{2, 3})));
  EXPECT_EQ(values(g), std::vector<double>(6, 2.0));
  // complex64 -> float32: the vjp is the real cotangent as a complex one.
  array z = astype(x, complex64);
  g = vjp_at([](const array& a) { return astype(a, float32); }, z, full({2, 3}, 1.5f));
  for (auto v : complex_values(g)) EXPECT_EQ(v, (complex64_t{1.5f, 0.f}));
  check_vmap_axes("astype", to32, random_f64({2, 3, 4}, 2), 2);
  // Through float32 and back: the identity up to float32 rounding, so a wide
  // step and a loose tolerance.
  auto round_trip = [](const array& a) { return astype(astype(a, float32), float64); };
  check_derivatives("astype round trip", lift(round_trip), {x}, 1e-4, 1e-2);
}

TEST(GradCopy, test_astype_to_or_from_integers_has_zero_derivatives) {
  array x = random_f64({2, 3}, 3, -5, 5);
  auto to_int = [](const array& a) { return astype(a, int32); };
  EXPECT_EQ(values(vjp_at(to_int, x, ones({2, 3}, int32))), std::vector<double>(6, 0.0));
  EXPECT_EQ(values(jvp_at(to_int, x, ones({2, 3}, float64))), std::vector<double>(6, 0.0));
  array i = astype(x, int32);
  auto to_float = [](const array& a) { return astype(a, float64); };
  EXPECT_EQ(values(vjp_at(to_float, i, ones({2, 3}, float64))), std::vector<double>(6, 0.0));
  EXPECT_EQ(values(jvp_at(to_float, i, ones({2, 3}, int32))), std::vector<double>(6, 0.0));
  check_vmap_axes("astype to int", to_int, random_f64({2, 3, 4}, 4, -5, 5), 1);
}

// ---- Copy, Contiguous

TEST(GradCopy, test_copy_and_contiguous_are_identities) {
  array x = random_f64({3, 4}, 5);
  check_on_devices("copy", [](const array& a) { return copy(a); }, x);
  check_on_devices("contiguous", [](const array& a) { return contiguous(a); }, x);
  check_on_devices("contiguous col major", [](const array& a) { return contiguous(a, true); }, x);
  array b = random_f64({2, 3, 4}, 6);
  check_vmap_axes("copy", [](const array& a) { return copy(a); }, b, 1);
  check_vmap_axes("contiguous", [](const array& a) { return contiguous(a); }, b, 2);
}

// ---- Broadcast

TEST(GradCopy, test_broadcast_derivatives_and_vmap) {
  check_on_devices("broadcast new and stretched axes",
                   [](const array& a) { return broadcast_to(a, {2, 3, 4}); },
                   random_f64({3, 1}, 7));
  check_on_devices("broadcast scalar", [](const array& a) { return broadcast_to(a, {2, 2}); },
                   random_f64({}, 8));
  // The cotangent of a broadcast input is the sum over the broadcast axes.
  array g = vjp_at([](const array& a) { return broadcast_to(a, {2, 3, 4}); },
                   random_f64({3, 1}, 9), ones({2, 3, 4}, float64));
  EXPECT_EQ(values(g), std::vector<double>(3, 8.0));
  array b = random_f64({2, 3, 1}, 10);
  check_vmap_axes("broadcast", [](const array& a) { return broadcast_to(a, {5, 3, 4}); }, b, 1);
  check_vmap_axes("broadcast", [](const array& a) { return broadcast_to(a, {5, 3, 4}); }, b, 2);
}

// ---- Band (tril, triu)

TEST(GradCopy, test_band_derivatives_and_vmap) {
  array x = random_f64({2, 4, 5}, 11);
  check_on_devices("tril", [](const array& a) { return tril(a); }, x);
  check_on_devices("tril k=-1", [](const array& a) { return tril(a, -1); }, x);
  check_on_devices("triu k=2", [](const array& a) { return triu(a, 2); }, x);
  array b = random_f64({3, 2, 4, 5}, 12);
  for (int inner : {1, 2, 3}) {
    check_vmap_axes("tril", [](const array& a) { return tril(a, 1); }, b, inner);
    check_vmap_axes("triu", [](const array& a) { return triu(a, -1); }, b, inner);
  }
  array i = astype(random_f64({3, 3}, 13, -5, 5), int32);
  EXPECT_EQ(values(vjp_at([](const array& a) { return tril(a); }, i, ones({3, 3}, int32))),
            std::vector<double>(9, 0.0));
}

// ---- View

TEST(GradCopy, test_view_of_complex_as_float_pairs_is_linear) {
  std::vector<complex64_t> zv{{1, 2}, {3, -4}, {0.5f, 6}};
  array z(zv.begin(), {3}, complex64);
  auto as_pairs = [](const array& a) { return view(a, float32); };
  array g = vjp_at(as_pairs, z, array({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}));
  EXPECT_EQ(complex_values(g), (std::vector<complex64_t>{{1, 2}, {3, 4}, {5, 6}}));
  array t = jvp_at(as_pairs, z, array(zv.begin(), {3}, complex64));
  EXPECT_EQ(values(t), (std::vector<double>{1, 2, 3, -4, 0.5, 6}));
  // And back: float32 pairs read as complex64.
  auto as_complex = [](const array& a) { return view(a, complex64); };
  array p({1.f, 2.f, 3.f, 4.f});
  g = vjp_at(as_complex, p, array(zv.begin(), {2}, complex64));
  EXPECT_EQ(values(g), (std::vector<double>{1, 2, 3, -4}));
}

TEST(GradCopy, test_view_zero_derivatives_and_errors) {
  array x = random_f64({2, 3}, 14);
  auto bits = [](const array& a) { return view(a, int64); };
  EXPECT_EQ(values(vjp_at(bits, x, ones({2, 3}, int64))), std::vector<double>(6, 0.0));
  EXPECT_EQ(values(jvp_at(bits, x, ones({2, 3}, float64))), std::vector<double>(6, 0.0));
  array h = astype(x, float16);
  auto reinterpret = [](const array& a) { return view(a, bfloat16); };
  EXPECT_THROW(vjp(lift(reinterpret), {h}, {ones({2, 3}, bfloat16)}), std::invalid_argument);
  EXPECT_THROW(jvp(lift(reinterpret), {h}, {ones({2, 3}, float16)}), std::invalid_argument);
}

TEST(GradCopy, test_view_vmap) {
  array b = random_f64({2, 3, 4}, 15);
  check_vmap_axes("view same size", [](const array& a) { return view(a, int64); }, b, 2);
  // A view that rescales the last axis, with the batch axis there.
  check_vmap_axes("view as uint32", [](const array& a) { return view(a, uint32); }, b, 1);
  check_vmap_axes("view as uint32", [](const array& a) { return view(a, uint32); }, b, 2);
}

// ---- AsStrided

TEST(GradCopy, test_as_strided_derivatives_and_vmap) {
  array x = random_f64({4, 5}, 16);
  // Overlapping windows: each input element is read by several outputs.
  check_on_devices("as_strided windows",
                   [](const array& a) { return as_strided(a, {3, 4}, {1, 2}, 3); }, x);
  check_on_devices("as_strided rows",
                   [](const array& a) { return as_strided(a, {2, 5}, {10, 1}, 0); }, x);
  array g = vjp_at([](const array& a) { return as_strided(a, {2, 2}, {1, 1}, 0); },
                   random_f64({4}, 17), ones({2, 2}, float64));
  EXPECT_EQ(values(g), (std::vector<double>{1, 2, 1, 0}));
  array b = random_f64({3, 4, 5}, 18);
  check_vmap_axes("as_strided", [](const array& a) { return as_strided(a, {3, 4}, {1, 2}, 3); },
                  b, 1);
  check_vmap_axes("as_strided", [](const array& a) { return as_strided(a, {2, 5}, {10, 1}, 0); },
                  b, 2);
}
