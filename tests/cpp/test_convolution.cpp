// The convolutions against their definitions computed here in float64 by
// direct loops: conv1d/2d/3d and conv_general over an explicitly dilated and
// padded input (strides, asymmetric and negative padding, kernel and input
// dilation, groups, flip), the transposed convolutions by scattering each
// input element (output_padding, groups), convolve by its sum; every float
// dtype with its tolerance, strided operands, empty arrays, on every device;
// derivatives against finite differences, vmap against a loop; errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/tessera.h"

using namespace tessera;

namespace {

// ---- references ------------------------------------------------------------

struct Params {
  std::vector<int> stride, lo, hi, kdil, idil;
  int groups = 1;
  bool flip = false;
};

Params plain(int n, int groups = 1) {
  return {std::vector<int>(n, 1), std::vector<int>(n, 0), std::vector<int>(n, 0),
          std::vector<int>(n, 1), std::vector<int>(n, 1), groups, false};
}

std::vector<int> unravel(int64_t flat, const Shape& shape) {
  std::vector<int> idx(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    idx[d] = int(flat % shape[d]);
    flat /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

struct Result {
  std::vector<double> values;
  Shape shape;
};

// conv_general by its definition: the input dilated and padded explicitly
// (negative padding crops), then each output the sum over taps and channels.
Result ref_conv(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                const Shape& ws, const Params& p) {
  const int n = int(xs.size()) - 2;
  const int N = xs[0], C = xs.back(), O = ws[0], Cg = ws.back(), Og = O / p.groups;
  Shape ps{N};
  for (int i = 0; i < n; ++i) {
    const int dilated = xs[i + 1] == 0 ? 0 : (xs[i + 1] - 1) * p.idil[i] + 1;
    ps.push_back(dilated + p.lo[i] + p.hi[i]);
  }
  ps.push_back(C);
  std::vector<double> padded(shape_size(ps), 0.0);
  for (size_t e = 0; e < x.size(); ++e) {
    auto idx = unravel(e, xs);
    bool inside = true;
    for (int i = 0; i < n; ++i) {
      idx[i + 1] = idx[i + 1] * p.idil[i] + p.lo[i];
      inside = inside && idx[i + 1] >= 0 && idx[i + 1] < ps[i + 1];
    }
    if (inside) padded[ravel(idx, ps)] = x[e];
  }
  Shape os{N}, kernel(ws.begin() + 1, ws.end() - 1);
  for (int i = 0; i < n; ++i) {
    os.push_back((ps[i + 1] - ((kernel[i] - 1) * p.kdil[i] + 1)) / p.stride[i] + 1);
  }
  os.push_back(O);
  std::vector<double> y(shape_size(os), 0.0);
  for (size_t e = 0; e < y.size(); ++e) {
    const auto out = unravel(e, os);
    const int oc = out.back(), g = oc / Og;
    double acc = 0;
    for (size_t t = 0; t < shape_size(kernel); ++t) {
      const auto k = unravel(t, kernel);
      std::vector<int> at{out[0]}, wat{oc};
      for (int i = 0; i < n; ++i) {
        at.push_back(out[i + 1] * p.stride[i] + (p.flip ? kernel[i] - 1 - k[i] : k[i]) * p.kdil[i]);
        wat.push_back(k[i]);
      }
      at.push_back(0);
      wat.push_back(0);
      for (int c = 0; c < Cg; ++c) {
        at.back() = g * Cg + c;
        wat.back() = c;
        acc += padded[ravel(at, ps)] * w[ravel(wat, ws)];
      }
    }
    y[e] = acc;
  }
  return {y, os};
}

// The transposed convolution by its definition: y[i s + j d - p] += x[i] w[j],
// over a full length with output_padding at its end, cropped by p on each side.
Result ref_conv_transpose(const std::vector<double>& x, const Shape& xs,
                          const std::vector<double>& w, const Shape& ws,
                          const std::vector<int>& s, const std::vector<int>& p,
                          const std::vector<int>& d, const std::vector<int>& op, int groups) {
  const int n = int(xs.size()) - 2;
  const int N = xs[0], O = ws[0], Cg = ws.back(), Og = O / groups;
  Shape full{N}, os{N}, kernel(ws.begin() + 1, ws.end() - 1);
  for (int i = 0; i < n; ++i) {
    full.push_back((xs[i + 1] - 1) * s[i] + d[i] * (kernel[i] - 1) + 1 + op[i]);
    os.push_back(full.back() - 2 * p[i]);
  }
  full.push_back(O);
  os.push_back(O);
  std::vector<double> yf(shape_size(full), 0.0);
  for (size_t e = 0; e < x.size(); ++e) {
    const auto idx = unravel(e, xs);
    const int ch = idx.back(), g = ch / Cg;
    for (size_t t = 0; t < shape_size(kernel); ++t) {
      const auto j = unravel(t, kernel);
      std::vector<int> at{idx[0]}, wat{0};
      for (int i = 0; i < n; ++i) {
        at.push_back(idx[i + 1] * s[i] + j[i] * d[i]);
        wat.push_back(j[i]);
      }
      at.push_back(0);
      wat.push_back(ch % Cg);
      for (int oc = g * Og; oc < (g + 1) * Og; ++oc) {
        at.back() = oc;
        wat[0] = oc;
        yf[ravel(at, full)] += x[e] * w[ravel(wat, ws)];
      }
    }
  }
  std::vector<double> y(shape_size(os));
  for (size_t e = 0; e < y.size(); ++e) {
    auto idx = unravel(e, os);
    for (int i = 0; i < n; ++i) idx[i + 1] += p[i];
    y[e] = yf[ravel(idx, full)];
  }
  return {y, os};
}

// ---- comparisons -----------------------------------------------------------

// Per-dtype tolerance relative to the largest reference magnitude (sums of
// many products lose precision against it, not against each element).
double tolerance(Dtype t) {
  if (t == float16) return 4e-3;
  if (t == bfloat16) return 3e-2;
  if (t == float32) return 1e-5;
  return 1e-12;
}

void expect_result(const array& got, const Result& want, Dtype dtype, const std::string& ctx) {
  ASSERT_EQ(got.shape(), want.shape) << ctx;
  EXPECT_EQ(got.dtype(), dtype) << ctx;
  double scale = 1;
  for (double v : want.values) scale = std::max(scale, std::abs(v));
  const double tol = tolerance(dtype);
  harness::expect_values(got, want.values, ctx, tol, tol * scale);
}

struct Operands {
  std::vector<double> xv, wv;
  array x, w;
};

Operands operands(const Shape& xs, const Shape& ws, Dtype t, uint64_t seed) {
  auto xv = harness::random_values(shape_size(xs), t, -1, 1, seed);
  auto wv = harness::random_values(shape_size(ws), t, -1, 1, seed + 1);
  return {xv, wv, harness::from_doubles(xv, xs, t), harness::from_doubles(wv, ws, t)};
}

std::string context(const std::string& op, const Shape& xs, const Shape& ws, Device d) {
  return op + " x " + shape_str(xs) + " w " + shape_str(ws) + (d == Device::cpu ? " cpu" : " gpu");
}

}  // namespace

// ---- values ------------------------------------------------------------------

TEST(Convolution, test_conv1d_2d_3d_match_the_definition_on_every_device) {
  struct Case {
    Shape xs, ws;
    std::vector<int> stride, padding, dilation;
    int groups;
  };
  const std::vector<Case> cases = {
      {{2, 9, 6}, {4, 3, 6}, {1}, {0}, {1}, 1},
      {{2, 9, 6}, {4, 3, 6}, {2}, {1}, {2}, 1},
      {{2, 9, 6}, {4, 3, 3}, {1}, {2}, {1}, 2},
      {{1, 7, 6}, {6, 2, 1}, {3}, {1}, {1}, 6},  // depthwise
      {{2, 9, 8, 6}, {4, 3, 2, 6}, {1, 1}, {0, 0}, {1, 1}, 1},
      {{2, 9, 8, 6}, {4, 3, 2, 6}, {2, 1}, {1, 2}, {1, 2}, 1},
      {{2, 9, 8, 6}, {6, 3, 2, 2}, {2, 2}, {1, 1}, {1, 1}, 3},
      {{2, 6, 5, 4, 3}, {4, 3, 2, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1},
      {{1, 7, 6, 5, 2}, {3, 3, 2, 2, 2}, {1, 2, 1}, {0, 1, 0}, {2, 1, 1}, 1},
  };
  uint64_t seed = 1;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (const auto& c : cases) {
      const int n = int(c.stride.size());
      auto [xv, wv, x, w] = operands(c.xs, c.ws, float32, seed += 2);
      array got = n == 1 ? conv1d(x, w, c.stride[0], c.padding[0], c.dilation[0], c.groups)
                  : n == 2 ? conv2d(x, w, {c.stride[0], c.stride[1]}, {c.padding[0], c.padding[1]},
                                    {c.dilation[0], c.dilation[1]}, c.groups)
                           : conv3d(x, w, {c.stride[0], c.stride[1], c.stride[2]},
                                    {c.padding[0], c.padding[1], c.padding[2]},
                                    {c.dilation[0], c.dilation[1], c.dilation[2]}, c.groups);
      Params p{c.stride, c.padding, c.padding, c.dilation, std::vector<int>(n, 1), c.groups};
      expect_result(got, ref_conv(xv, c.xs, wv, c.ws, p), float32,
                    context("conv" + std::to_string(n) + "d", c.xs, c.ws, dev));
    }
  }
}

TEST(Convolution, test_conv_general_asymmetric_and_negative_padding_dilations_flip_groups) {
  struct Case {
    Shape xs, ws;
    Params p;
  };
  const std::vector<Case> cases = {
      {{2, 7, 6, 4}, {5, 3, 2, 4}, {{2, 1}, {1, 0}, {2, 3}, {1, 2}, {2, 1}, 1, true}},
      {{2, 7, 6, 4}, {4, 3, 2, 2}, {{1, 2}, {0, 2}, {1, 0}, {2, 1}, {1, 3}, 2, false}},
      {{2, 7, 6, 4}, {4, 3, 2, 2}, {{1, 1}, {-1, 1}, {2, -2}, {1, 1}, {2, 2}, 2, true}},
      {{3, 10, 3}, {2, 4, 3}, {{3}, {5}, {0}, {1}, {1}, 1, true}},
      {{3, 10, 3}, {2, 4, 3}, {{2}, {-2}, {-1}, {2}, {1}, 1, false}},
      {{1, 4, 5, 3, 2}, {2, 2, 3, 2, 2}, {{1, 2, 1}, {1, 0, 2}, {0, 3, 1}, {1, 1, 2}, {2, 1, 1}, 1, true}},
  };
  uint64_t seed = 100;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (const auto& c : cases) {
      auto [xv, wv, x, w] = operands(c.xs, c.ws, float32, seed += 2);
      const Params& p = c.p;
      array got = conv_general(x, w, p.stride, p.lo, p.hi, p.kdil, p.idil, p.groups, p.flip);
      expect_result(got, ref_conv(xv, c.xs, wv, c.ws, p), float32,
                    context("conv_general", c.xs, c.ws, dev));
    }
    // The symmetric overload, and one value broadcast to every spatial axis.
    Shape xs{2, 6, 5, 3}, ws{2, 2, 3, 3};
    auto [xv, wv, x, w] = operands(xs, ws, float32, 150);
    Params p{{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false};
    expect_result(conv_general(x, w, std::vector<int>{2}, std::vector<int>{1},
                               std::vector<int>{1}, std::vector<int>{1}, 1, false),
                  ref_conv(xv, xs, wv, ws, p), float32, context("conv_general symmetric", xs, ws, dev));
  }
}

TEST(Convolution, test_conv_transpose_matches_scattering_with_output_padding) {
  struct Case {
    Shape xs, ws;
    std::vector<int> stride, padding, dilation, output_padding;
    int groups;
  };
  const std::vector<Case> cases = {
      {{2, 5, 3}, {4, 3, 3}, {1}, {0}, {1}, {0}, 1},
      {{2, 5, 3}, {4, 3, 3}, {2}, {1}, {1}, {1}, 1},
      {{2, 5, 3}, {4, 3, 3}, {3}, {2}, {2}, {0}, 1},
      {{2, 5, 4}, {4, 3, 2}, {2}, {1}, {1}, {1}, 2},
      {{2, 5, 4, 3}, {4, 3, 2, 3}, {2, 1}, {1, 0}, {1, 2}, {1, 0}, 1},
      {{1, 4, 4, 4}, {6, 2, 3, 2}, {2, 2}, {0, 1}, {1, 1}, {1, 1}, 2},
      {{2, 3, 4, 3, 3}, {4, 3, 2, 2, 3}, {2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {0, 1, 0}, 1},
  };
  uint64_t seed = 200;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (const auto& c : cases) {
      const int n = int(c.stride.size());
      auto [xv, wv, x, w] = operands(c.xs, c.ws, float32, seed += 2);
      const auto &s = c.stride, &p = c.padding, &d = c.dilation, &op = c.output_padding;
      array got = n == 1   ? conv_transpose1d(x, w, s[0], p[0], d[0], op[0], c.groups)
                  : n == 2 ? conv_transpose2d(x, w, {s[0], s[1]}, {p[0], p[1]}, {d[0], d[1]},
                                              {op[0], op[1]}, c.groups)
                           : conv_transpose3d(x, w, {s[0], s[1], s[2]}, {p[0], p[1], p[2]},
                                              {d[0], d[1], d[2]}, {op[0], op[1], op[2]});
      expect_result(got, ref_conv_transpose(xv, c.xs, wv, c.ws, s, p, d, op, c.groups), float32,
                    context("conv_transpose" + std::to_string(n) + "d", c.xs, c.ws, dev));
    }
  }
}

TEST(Convolution, test_every_float_dtype_with_its_tolerance_and_promotion) {
  Shape xs{2, 8, 7, 6}, ws{6, 3, 3, 2};
  Params p{{2, 1}, {1, 2}, {0, 1}, {1, 2}, {1, 1}, 3, true};
  uint64_t seed = 300;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : harness::float_types()) {
      auto [xv, wv, x, w] = operands(xs, ws, t, seed += 2);
      expect_result(conv_general(x, w, p.stride, p.lo, p.hi, p.kdil, p.idil, p.groups, p.flip),
                    ref_conv(xv, xs, wv, ws, p), t,
                    context("conv_general " + dtype_name(t), xs, ws, dev));
    }
    // float16 with float32 promotes to float32; an integer input with a float weight too.
    auto [xv, wv, x, w] = operands({1, 6, 4}, {3, 2, 4}, float16, 320);
    expect_result(conv1d(x, astype(w, float32), 1, 1), ref_conv(xv, {1, 6, 4}, wv, {3, 2, 4},
                  {{1}, {1}, {1}, {1}, {1}, 1, false}), float32, "float16 with float32");
    auto iv = harness::random_values(24, int32, -5, 5, 330);
    array xi = harness::from_doubles(iv, {1, 6, 4}, int32);
    expect_result(conv1d(xi, astype(w, float32)), ref_conv(iv, {1, 6, 4}, wv, {3, 2, 4},
                  plain(1)), float32, "int32 with float32");
  }
}

TEST(Convolution, test_strided_and_transposed_operands) {
  Shape xs{2, 7, 6, 4}, ws{4, 3, 2, 2};
  Params p{{1, 2}, {1, 0}, {0, 1}, {1, 1}, {2, 1}, 2, false};
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto lx : {harness::Layout::transposed, harness::Layout::strided}) {
      for (auto lw : {harness::Layout::contiguous, harness::Layout::transposed,
                      harness::Layout::strided}) {
        auto xv = harness::random_values(shape_size(xs), float32, -1, 1, 400);
        auto wv = harness::random_values(shape_size(ws), float32, -1, 1, 401);
        array x = harness::with_layout(xv, xs, float32, lx);
        array w = harness::with_layout(wv, ws, float32, lw);
        expect_result(conv_general(x, w, p.stride, p.lo, p.hi, p.kdil, p.idil, p.groups, p.flip),
                      ref_conv(xv, xs, wv, ws, p), float32,
                      context(std::string("layouts ") + harness::layout_name(lx) + "/" +
                                  harness::layout_name(lw), xs, ws, dev));
      }
    }
    // A broadcast batch and the channels of a sliced input.
    auto rv = harness::random_values(6 * 4, float32, -1, 1, 402);
    array row = harness::from_doubles(rv, {1, 6, 4}, float32);
    array xb = broadcast_to(row, {3, 6, 4});
    std::vector<double> xbv;
    for (int b = 0; b < 3; ++b) xbv.insert(xbv.end(), rv.begin(), rv.end());
    auto wv = harness::random_values(2 * 2 * 4, float32, -1, 1, 403);
    array w = harness::from_doubles(wv, {2, 2, 4}, float32);
    expect_result(conv1d(xb, w), ref_conv(xbv, {3, 6, 4}, wv, {2, 2, 4}, plain(1)), float32,
                  "broadcast batch");
  }
}

TEST(Convolution, test_empty_arrays_and_zero_channels) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array y = conv2d(zeros({0, 5, 5, 3}), ones({4, 3, 3, 3}), {1, 1}, {1, 1});
    EXPECT_EQ(y.shape(), (Shape{0, 5, 5, 4}));
    eval(y);
    y = conv1d(ones({2, 5, 3}), zeros({0, 2, 3}));
    EXPECT_EQ(y.shape(), (Shape{2, 4, 0}));
    eval(y);
    // No input channels: every sum is empty.
    y = conv1d(ones({2, 5, 0}), ones({3, 2, 0}));
    EXPECT_EQ(y.shape(), (Shape{2, 4, 3}));
    harness::expect_values(y, std::vector<double>(24, 0.0), "zero channels");
    // An empty spatial axis reads padding only.
    y = conv1d(ones({1, 0, 2}), ones({1, 1, 2}), 1, 1);
    EXPECT_EQ(y.shape(), (Shape{1, 2, 1}));
    harness::expect_values(y, {0.0, 0.0}, "empty spatial axis");
  }
}

TEST(Convolution, test_many_rows_span_several_window_chunks) {
  // 256 x 256 outputs of 9 taps x 8 channels: window matrices of 18 MiB per
  // 100k rows, built in several chunks on the CPU.
  Shape xs{2, 256, 256, 8}, ws{3, 3, 3, 8};
  Params p{{1, 1}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, false};
  auto [xv, wv, x, w] = operands(xs, ws, float32, 500);
  Result want = ref_conv(xv, xs, wv, ws, p);
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    expect_result(conv2d(x, w, {1, 1}, {1, 1}), want, float32, context("conv2d", xs, ws, dev));
  }
}

TEST(Convolution, test_convolve_matches_its_sum_in_every_mode) {
  auto ref = [](const std::vector<double>& a, const std::vector<double>& v) {
    std::vector<double> y(a.size() + v.size() - 1, 0.0);
    for (size_t i = 0; i < a.size(); ++i) {
      for (size_t j = 0; j < v.size(); ++j) y[i + j] += a[i] * v[j];
    }
    return y;
  };
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (auto [la, lv] : std::vector<std::pair<int, int>>{{10, 3}, {10, 4}, {3, 10}, {7, 7}, {5, 1}}) {
      auto av = harness::random_values(la, float32, -1, 1, 600 + la);
      auto vv = harness::random_values(lv, float32, -1, 1, 700 + lv);
      array a = harness::from_doubles(av, {la}, float32), v = harness::from_doubles(vv, {lv}, float32);
      auto full = ref(av, vv);
      const int L = std::max(la, lv), K = std::min(la, lv);
      std::vector<double> same(full.begin() + (K - 1) / 2, full.begin() + (K - 1) / 2 + L);
      std::vector<double> valid(full.begin() + K - 1, full.end() - (K - 1));
      const std::string c = std::to_string(la) + "/" + std::to_string(lv);
      harness::expect_values(convolve(a, v), full, "full " + c, 1e-5, 1e-5);
      harness::expect_values(convolve(a, v, "same"), same, "same " + c, 1e-5, 1e-5);
      harness::expect_values(convolve(a, v, "valid"), valid, "valid " + c, 1e-5, 1e-5);
    }
    std::vector<double> av, vv{3, -1, 7, 2};
    for (int i = -20; i < 30; ++i) av.push_back(i * 1000);
    array got = convolve(harness::from_doubles(av, {50}, int32), harness::from_doubles(vv, {4}, int32));
    EXPECT_EQ(got.dtype(), int32);
    harness::expect_values(got, ref(av, vv), "integers", 0, 0);
  }
}

TEST(Convolution, test_primitive_shape_rule_and_equivalence) {
  array x = ones({2, 9, 3}), w = ones({4, 3, 3});
  array a = conv_general(x, w, {2}, {1}, {2}, {2}, {1}, 1, true);
  array b = conv_general(x, w, {2}, {1}, {2}, {2}, {1}, 1, true);
  array c = conv_general(x, w, {2}, {1}, {2}, {2}, {1}, 1, false);
  EXPECT_EQ(a.primitive().output_shapes(a.inputs())[0], a.shape());
  EXPECT_TRUE(a.primitive().is_equivalent(b.primitive()));
  EXPECT_FALSE(a.primitive().is_equivalent(c.primitive()));
  EXPECT_STREQ(a.primitive().name(), "Convolution");
}

// ---- transforms --------------------------------------------------------------

namespace {

using grad_check::check_derivatives;
using grad_check::random_f64;

void check_conv_derivatives(const std::string& name, const Shape& xs, const Shape& ws,
                            const Params& p, uint64_t seed) {
  auto f = [p](const std::vector<array>& a) {
    return std::vector<array>{
        conv_general(a[0], a[1], p.stride, p.lo, p.hi, p.kdil, p.idil, p.groups, p.flip)};
  };
  array x = random_f64(xs, seed), w = random_f64(ws, seed + 1);
  grad_check::on_each_device([&] { check_derivatives(name, f, {x, w}); });
}

}  // namespace

TEST(Convolution, test_derivatives_match_finite_differences) {
  check_conv_derivatives("1-D plain", {2, 7, 3}, {4, 3, 3}, plain(1), 1);
  check_conv_derivatives("1-D stride with a remainder", {2, 8, 3}, {2, 3, 3},
                         {{3}, {1}, {0}, {1}, {1}, 1, false}, 3);
  check_conv_derivatives("1-D asymmetric and negative padding", {1, 9, 2}, {2, 2, 2},
                         {{2}, {-2}, {3}, {2}, {1}, 1, false}, 5);
  check_conv_derivatives("1-D input dilation, flip", {2, 5, 2}, {3, 3, 2},
                         {{2}, {2}, {1}, {1}, {3}, 1, true}, 7);
  check_conv_derivatives("2-D groups, dilations, flip", {2, 6, 5, 4}, {6, 2, 3, 2},
                         {{2, 1}, {1, 0}, {0, 2}, {2, 1}, {1, 2}, 2, true}, 9);
  check_conv_derivatives("2-D depthwise stride 2", {1, 7, 6, 3}, {3, 3, 3, 1},
                         {{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3, false}, 11);
  check_conv_derivatives("3-D", {1, 4, 5, 3, 2}, {2, 2, 3, 2, 2},
                         {{1, 2, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 2}, {2, 1, 1}, 1, true}, 13);
  auto xt = random_f64({2, 4, 3}, 15), wt = random_f64({4, 3, 3}, 16);
  grad_check::on_each_device([&] {
    check_derivatives("conv_transpose1d", [](const std::vector<array>& a) {
      return std::vector<array>{conv_transpose1d(a[0], a[1], 2, 1, 2, 1)};
    }, {xt, wt});
  });
  // The gradient of the gradient (a convolution of convolutions).
  array x2 = random_f64({1, 6, 2}, 17), w2 = random_f64({2, 3, 2}, 18);
  grad_check::on_each_device([&] {
    check_derivatives("grad of conv", [](const std::vector<array>& a) {
      auto g = grad([](const std::vector<array>& b) {
        return sum(square(conv1d(b[0], b[1], 2, 1)));
      }, std::vector<int>{0, 1})(a);
      return std::vector<array>{g[0], g[1]};
    }, {x2, w2}, 1e-5);
  });
}

TEST(Convolution, test_vmap_matches_a_loop) {
  using grad_check::check_vmap;
  using grad_check::integers_f64;
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int groups : {1, 2}) {
      Params p{{2, 1}, {1, 0}, {0, 1}, {1, 2}, {1, 1}, groups, true};
      auto f = [p](const std::vector<array>& a) {
        return std::vector<array>{
            conv_general(a[0], a[1], p.stride, p.lo, p.hi, p.kdil, p.idil, p.groups, p.flip)};
      };
      const std::string c = "groups " + std::to_string(groups);
      array xb = integers_f64({3, 2, 6, 5, 4}, 20), x = integers_f64({2, 6, 5, 4}, 21);
      array wb = integers_f64({3, 4, 2, 3, 4 / groups}, 22), w = integers_f64({4, 2, 3, 4 / groups}, 23);
      check_vmap("input batched " + c, f, {xb, w}, {0, -1});
      check_vmap("input batched at axis 2 " + c, f, {moveaxis(xb, 0, 2), w}, {2, -1});
      check_vmap("weight batched " + c, f, {x, wb}, {-1, 0});
      check_vmap("weight batched at axis 4 " + c, f, {x, moveaxis(wb, 0, 4)}, {-1, 4});
      check_vmap("both batched " + c, f, {xb, moveaxis(wb, 0, 1)}, {0, 1});
    }
    auto g = [](const std::vector<array>& a) {
      return std::vector<array>{conv_transpose1d(a[0], a[1], 2, 1, 1, 1)};
    };
    check_vmap("conv_transpose1d both batched", g,
               {integers_f64({2, 1, 4, 3}, 30), integers_f64({2, 2, 3, 3}, 31)}, {0, 0});
    // The gradient of a batched convolution.
    auto h = [](const std::vector<array>& a) {
      auto gw = grad([](const std::vector<array>& b) { return sum(conv1d(b[0], b[1], 2)); },
                     1)(a);
      return std::vector<array>{gw[0]};
    };
    check_vmap("grad of conv1d", h, {integers_f64({3, 2, 7, 2}, 32), integers_f64({3, 3, 2}, 33)},
               {0, -1});
  }
}

// ---- errors ------------------------------------------------------------------

namespace {

void expect_message(const std::function<void()>& f, const std::string& op,
                    const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no exception for " << op << " (" << fragment << ")";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("[" + op + "]"), std::string::npos) << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
  }
}

}  // namespace

TEST(Convolution, test_errors_name_the_op_and_values) {
  array x = zeros({1, 8, 3});
  EXPECT_THROW(conv1d(x, zeros({4, 3, 2})), std::invalid_argument);
  expect_message([&] { conv1d(x, zeros({4, 3, 2})); }, "conv1d", "3 channels");
  expect_message([&] { conv2d(x, zeros({4, 3, 3})); }, "conv2d", "4 dimensions");
  expect_message([&] { conv1d(x, zeros({4, 3, 1}), 1, 0, 1, 2); }, "conv1d", "groups=2");
  expect_message([&] { conv1d(x, zeros({4, 3, 3}), 1, 0, 1, 0); }, "conv1d", "groups=0");
  expect_message([&] { conv1d(x, zeros({4, 9, 3})); }, "conv1d", "larger than the padded input (8)");
  expect_message([&] { conv1d(x, zeros({4, 3, 3}), 1, -3); }, "conv1d",
                 "padding must be non-negative, got (-3,)");
  expect_message([&] { conv1d(x, zeros({4, 3, 3}), 0); }, "conv1d", "stride must be positive");
  expect_message([&] { conv2d(zeros({1, 5, 5, 3}), zeros({1, 2, 2, 3}), {1, 1}, {0, 0}, {1, -1}); },
                 "conv2d", "dilation must be positive, got (1,-1)");
  expect_message([&] { conv1d(x, zeros({4, 0, 3})); }, "conv1d", "kernel sizes must be positive");
  expect_message([&] { conv1d(zeros({1, 8, 3}, int32), zeros({4, 3, 3}, int32)); }, "conv1d",
                 "int32");
  expect_message([&] { conv1d(zeros({1, 8, 3}, complex64), zeros({4, 3, 3})); }, "conv1d",
                 "complex64");
  expect_message([&] { conv3d(zeros({1, 4, 4, 4, 2}), zeros({2, 1, 1, 1, 1}), {1, 1, 1},
                              {0, 0, 0}, {1, 1, 1}, 2); }, "conv3d", "only groups=1");
  expect_message([&] { conv_transpose3d(zeros({1, 4, 4, 4, 2}), zeros({2, 1, 1, 1, 1}),
                                        {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {0, 0, 0}, 2); },
                 "conv_transpose3d", "only groups=1");
  expect_message([&] { conv_transpose1d(x, zeros({2, 3, 3}), 2, 0, 1, -1); }, "conv_transpose1d",
                 "output_padding must be non-negative");
  expect_message([&] { conv_transpose1d(x, zeros({2, 3, 3}), 1, 5); }, "conv_transpose1d",
                 "larger");
  expect_message([&] { conv_general(x, zeros({4, 3}), std::vector<int>{1}, std::vector<int>{0},
                                    std::vector<int>{0}, std::vector<int>{1}, std::vector<int>{1}); },
                 "conv_general", "at least 3 dimensions");
  expect_message([&] { conv_general(zeros({1, 5, 5, 3}), zeros({2, 2, 2, 3}), {1, 2, 3}, {0},
                                    {0}, {1}, {1}, 1, false); }, "conv_general",
                 "stride must be an int or 2 ints, got (1,2,3)");
  expect_message([&] { conv_general(x, zeros({4, 3, 3}), {1}, {0}, {0}, {1}, {0}, 1, false); },
                 "conv_general", "input_dilation must be positive");
  expect_message([&] { conv_general(zeros(Shape(11, 1)), zeros(Shape(11, 1)), {1}, {0}, {0},
                                    {1}, {1}, 1, false); }, "conv_general", "at most 8");
  expect_message([&] { convolve(zeros({4}), zeros({2}), "wide"); }, "convolve", "mode");
  expect_message([&] { convolve(zeros({4, 1}), zeros({2})); }, "convolve", "1-D");
  expect_message([&] { convolve(zeros({0}), zeros({2})); }, "convolve", "empty");
  // A valid call after the failed ones.
  EXPECT_EQ(conv1d(x, zeros({4, 3, 3})).shape(), (Shape{1, 6, 4}));
}
