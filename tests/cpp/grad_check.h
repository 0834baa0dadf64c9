// Checks of transform rules against independent references:
//   check_derivatives  jvp and vjp against central finite differences in float64
//   check_vmap         vmap against a loop over the batch, stacked (exactly)
//
//   check_derivatives("exp", [](const std::vector<array>& x) { return std::vector{exp(x[0])}; },
//                     {random_f64({3, 4}, 1)});
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "tessera/tessera.h"
#include "tessera/transforms/transforms.h"

namespace grad_check {

using namespace tessera;

// float64 values uniform in [lo, hi).
inline array random_f64(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) x = dist(gen);
  return array(v.begin(), shape, float64);
}

inline std::vector<double> values(const array& a) {
  array c = astype(a, float64);
  eval(c);
  array d = copy(c);
  eval(d);
  const double* p = d.data<double>();
  return std::vector<double>(p, p + d.size());
}

inline double dot(const std::vector<array>& a, const std::vector<array>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    auto va = values(a[i]), vb = values(b[i]);
    for (size_t j = 0; j < va.size(); ++j) s += va[j] * vb[j];
  }
  return s;
}

using harness::on_each_device;

// A function of one array, or of a list returning one array, as a VecFn.
inline VecFn lift(const std::function<array(const array&)>& f) {
  return [f](const std::vector<array>& x) { return std::vector<array>{f(x[0])}; };
}
inline VecFn vec(const std::function<array(const std::vector<array>&)>& f) {
  return [f](const std::vector<array>& x) { return std::vector<array>{f(x)}; };
}

// Small integers stored as float64: sums of them are exact in any order, so a
// batched kernel and the loop over the batch agree exactly.
inline array integers_f64(const Shape& shape, uint64_t seed, int lo = -4, int hi = 4) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<double> v(shape_size(shape));
  for (auto& x : v) x = dist(gen);
  return array(v.begin(), shape, float64);
}

// jvp(t) == (f(x + eps t) - f(x - eps t)) / (2 eps) elementwise, and
// <c, jvp(t)> == <vjp(c), t> for random tangents t and cotangents c. Primals
// must be float64; `rtol` is relative to the largest magnitude compared.
inline void check_derivatives(const std::string& name, const VecFn& f,
                              const std::vector<array>& primals, double rtol = 1e-6,
                              double eps = 1e-6, uint64_t seed = 17) {
  std::vector<array> tangents;
  for (size_t i = 0; i < primals.size(); ++i) {
    tangents.push_back(random_f64(primals[i].shape(), seed + i));
  }
  auto [outs, jvps] = jvp(f, primals, tangents);
  ASSERT_EQ(jvps.size(), outs.size()) << name;
  std::vector<array> plus, minus;
  for (size_t i = 0; i < primals.size(); ++i) {
    plus.push_back(add(primals[i], multiply(tangents[i], array(eps, float64))));
    minus.push_back(subtract(primals[i], multiply(tangents[i], array(eps, float64))));
  }
  auto fp = f(plus), fm = f(minus);
  for (size_t o = 0; o < outs.size(); ++o) {
    auto got = values(jvps[o]), a = values(fp[o]), b = values(fm[o]);
    ASSERT_EQ(got.size(), a.size()) << name << ": jvp " << o << " has the wrong size";
    double scale = 1e-3;
    for (size_t j = 0; j < a.size(); ++j) scale = std::max(scale, std::abs((a[j] - b[j]) / (2 * eps)));
    int failures = 0;
    for (size_t j = 0; j < a.size() && failures < 3; ++j) {
      double fd = (a[j] - b[j]) / (2 * eps);
      if (!(std::abs(got[j] - fd) <= rtol * scale)) {
        ADD_FAILURE() << name << ": jvp of output " << o << " element " << j << " is " << got[j]
                      << ", finite differences give " << fd;
        ++failures;
      }
    }
  }
  std::vector<array> cotangents;
  for (size_t o = 0; o < outs.size(); ++o) {
    cotangents.push_back(astype(random_f64(outs[o].shape(), seed + 100 + o), outs[o].dtype()));
  }
  auto [outs2, vjps] = vjp(f, primals, cotangents);
  ASSERT_EQ(vjps.size(), primals.size()) << name;
  for (size_t i = 0; i < primals.size(); ++i) {
    EXPECT_EQ(vjps[i].shape(), primals[i].shape()) << name << ": vjp " << i << " shape";
  }
  double lhs = dot(cotangents, jvps), rhs = dot(vjps, tangents);
  double scale = std::max({1e-3, std::abs(lhs), std::abs(rhs)});
  EXPECT_LE(std::abs(lhs - rhs), rtol * scale)
      << name << ": <c, jvp(t)> = " << lhs << " but <vjp(c), t> = " << rhs;
}

// The distance in units in the last place between two doubles.
inline double ulps_apart(double a, double b) {
  if (a == b) return 0;
  return std::abs(a - b) / std::max(std::nextafter(std::abs(a), INFINITY) - std::abs(a),
                                     std::numeric_limits<double>::denorm_min());
}

// vmap(f, in_axes)(inputs) == stack of f on each batch element, along out axis 0:
// exactly, or within `ulps` units in the last place where the batched and the
// looped op may add in different orders (a GPU reduction picks its order from
// the layout).
inline void check_vmap(const std::string& name, const VecFn& f, const std::vector<array>& inputs,
                       const std::vector<int>& in_axes, double ulps = 0) {
  auto got = vmap(f, in_axes)(inputs);
  int n = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (in_axes[i] >= 0) n = inputs[i].shape(in_axes[i]);
  }
  ASSERT_GE(n, 0) << name << ": nothing is mapped";
  std::vector<std::vector<array>> per_output;
  for (int b = 0; b < n; ++b) {
    std::vector<array> args;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (in_axes[i] < 0) {
        args.push_back(inputs[i]);
      } else {
        Shape start(inputs[i].ndim(), 0), stop = inputs[i].shape();
        start[in_axes[i]] = b;
        stop[in_axes[i]] = b + 1;
        args.push_back(squeeze(slice(inputs[i], start, stop), in_axes[i]));
      }
    }
    auto outs = f(args);
    if (per_output.empty()) per_output.resize(outs.size());
    for (size_t o = 0; o < outs.size(); ++o) per_output[o].push_back(outs[o]);
  }
  ASSERT_EQ(got.size(), per_output.size()) << name;
  for (size_t o = 0; o < got.size(); ++o) {
    array want = stack(per_output[o], 0);
    ASSERT_EQ(got[o].shape(), want.shape()) << name << ": output " << o;
    EXPECT_EQ(got[o].dtype(), want.dtype()) << name << ": output " << o;
    auto g = values(got[o]), w = values(want);
    int failures = 0;
    for (size_t j = 0; j < w.size() && failures < 3; ++j) {
      bool same = g[j] == w[j] || (std::isnan(g[j]) && std::isnan(w[j])) ||
                  (ulps > 0 && ulps_apart(g[j], w[j]) <= ulps);
      if (!same) {
        ADD_FAILURE() << name << ": vmap output " << o << " element " << j << " is " << g[j]
                      << ", the loop gives " << w[j];
        ++failures;
      }
    }
  }
}

// f's derivatives checked on x, on every device.
inline void check_on_devices(const std::string& name, const std::function<array(const array&)>& f,
                             const array& x) {
  on_each_device([&] { check_derivatives(name, lift(f), {x}); });
}

// vmap of f over axis 0 of a (B, ...) input and over axis `inner` of the same
// data with the batch axis moved there.
inline void check_vmap_axes(const std::string& name, const std::function<array(const array&)>& f,
                            const array& batched, int inner, double ulps = 0) {
  check_vmap(name + " (batch axis 0)", lift(f), {batched}, {0}, ulps);
  check_vmap(name + " (batch axis " + std::to_string(inner) + ")", lift(f),
             {moveaxis(batched, 0, inner)}, {inner}, ulps);
}

}  // namespace grad_check
