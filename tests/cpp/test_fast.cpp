// fast::rms_norm, layer_norm, rope and scaled_dot_product_attention against
// loops in double over the inputs, on every device and in float32, float16,
// bfloat16 (and float64); derivatives against finite differences, vmap
// against a loop; the primitive's node (forced with a PrimitiveScope) against
// the fallback graph; the fused kernels of the norms and rope, and their fused
// derivatives, against the fallback graph (a FallbackScope), loops in double
// and finite differences; and the errors of bad arguments. cross_entropy (a
// plain composition) against a double loop, its gradient against
// softmax - one_hot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "grad_check.h"
#include "harness.h"
#include "tessera/ops/primitives/fast.h"
#include "tessera/tessera.h"

using namespace tessera;
using grad_check::check_derivatives;
using grad_check::check_vmap;
using grad_check::random_f64;
using grad_check::values;

namespace {

using Values = std::vector<double>;

// Tolerances of a result of dtype t against the double reference.
double tol(Dtype t) {
  if (t == float16) return 8e-3;
  if (t == bfloat16) return 6e-2;
  if (t == float32) return 2e-5;
  return 1e-11;
}

std::vector<Dtype> value_dtypes() { return {float32, float16, bfloat16, float64}; }

std::string dname(Dtype t) { return dtype_name(t); }

struct Input {
  Values v;
  array a;
};

// Random values exact in dtype t, and their array on the current device.
Input input(const Shape& shape, Dtype t, uint64_t seed, double lo = -2, double hi = 2) {
  Values v = harness::random_values(shape_size(shape), t, lo, hi, seed);
  return {v, harness::from_doubles(v, shape, t)};
}

// ---- references

Values ref_rms_norm(const Values& x, int d, const Values& w, double eps) {
  Values out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += x[r * d + i] * x[r * d + i];
    double inv = 1 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; ++i) out[r * d + i] = x[r * d + i] * inv * (w.empty() ? 1 : w[i]);
  }
  return out;
}

Values ref_layer_norm(const Values& x, int d, const Values& w, const Values& b, double eps) {
  Values out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mu = 0, var = 0;
    for (int i = 0; i < d; ++i) mu += x[r * d + i];
    mu /= d;
    for (int i = 0; i < d; ++i) var += (x[r * d + i] - mu) * (x[r * d + i] - mu);
    double inv = 1 / std::sqrt(var / d + eps);
    for (int i = 0; i < d; ++i) {
      out[r * d + i] =
          (x[r * d + i] - mu) * inv * (w.empty() ? 1 : w[i]) + (b.empty() ? 0 : b[i]);
    }
  }
  return out;
}

// x (B, *, T, D); offsets: one value, or one per batch element.
Values ref_rope(const Values& x, const Shape& shape, int dims, bool traditional,
                std::optional<double> base, double scale, const Values& offsets,
                const Values& freqs) {
  int nd = static_cast<int>(shape.size());
  int batch = shape[0], t_len = shape[nd - 2], d = shape[nd - 1], half = dims / 2;
  size_t per_batch = x.size() / batch;
  Values out = x;
  for (size_t row = 0; row < x.size() / d; ++row) {
    int b = static_cast<int>(row * d / per_batch);
    int t = static_cast<int>(row % t_len);
    double pos = (t + offsets[offsets.size() == 1 ? 0 : b]) * scale;
    for (int i = 0; i < half; ++i) {
      double freq = freqs.empty() ? std::pow(*base, -static_cast<double>(i) / half) : 1 / freqs[i];
      double c = std::cos(pos * freq), s = std::sin(pos * freq);
      size_t i1 = row * d + (traditional ? 2 * i : i);
      size_t i2 = row * d + (traditional ? 2 * i + 1 : i + half);
      out[i1] = x[i1] * c - x[i2] * s;
      out[i2] = x[i1] * s + x[i2] * c;
    }
  }
  return out;
}

enum class MaskKind { none, causal, boolean, additive };

// q (B, Nq, Tq, D), k (B, Nkv, Tkv, D), v (B, Nkv, Tkv, Dv); mask values of
// mask_shape (at most 4 dims) broadcast to (B, Nq, Tq, Tkv).
Values ref_attention(const Values& q, const Shape& qs, const Values& k, const Shape& ks,
                     const Values& v, int dv, double scale, MaskKind kind, const Values& mask,
                     const Shape& mask_shape, const Values& sinks) {
  int B = qs[0], nq = qs[1], tq = qs[2], d = qs[3], nkv = ks[1], tkv = ks[2];
  Shape full{B, nq, tq, tkv};
  auto mask_at = [&](int b, int h, int i, int j) {
    int idx[4] = {b, h, i, j};
    size_t off = 0, stride = 1;
    for (int dim = static_cast<int>(mask_shape.size()) - 1; dim >= 0; --dim) {
      int full_dim = 4 - static_cast<int>(mask_shape.size()) + dim;
      if (mask_shape[dim] != 1) off += idx[full_dim] * stride;
      stride *= mask_shape[dim];
    }
    return mask[off];
  };
  Values out(static_cast<size_t>(B) * nq * tq * dv);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < nq; ++h) {
      int hk = h / (nq / nkv);
      for (int i = 0; i < tq; ++i) {
        std::vector<double> s(tkv);
        std::vector<bool> keep(tkv, true);
        for (int j = 0; j < tkv; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e) {
            dot += q[((b * nq + h) * tq + i) * d + e] * k[((b * nkv + hk) * tkv + j) * d + e];
          }
          s[j] = scale * dot;
          if (kind == MaskKind::causal) keep[j] = j <= i + tkv - tq;
          if (kind == MaskKind::boolean) keep[j] = mask_at(b, h, i, j) != 0;
          if (kind == MaskKind::additive) s[j] += mask_at(b, h, i, j);
        }
        double top = sinks.empty() ? -INFINITY : sinks[h];
        for (int j = 0; j < tkv; ++j) {
          if (keep[j]) top = std::max(top, s[j]);
        }
        double z = sinks.empty() ? 0 : std::exp(sinks[h] - top);
        std::vector<double> p(tkv, 0);
        for (int j = 0; j < tkv; ++j) {
          if (keep[j]) z += p[j] = std::exp(s[j] - top);
        }
        for (int e = 0; e < dv; ++e) {
          double acc = 0;
          for (int j = 0; j < tkv; ++j) acc += p[j] / z * v[((b * nkv + hk) * tkv + j) * dv + e];
          out[((b * nq + h) * tq + i) * dv + e] = acc;
        }
      }
    }
  }
  return out;
}

// The message of an invalid_argument thrown by f names op in brackets.
void expect_invalid(const std::function<void()>& f, const std::string& op,
                    const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << op << ": no exception (expected '" << fragment << "')";
  } catch (const std::invalid_argument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("[" + op + "]"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

// The name of the primitive behind a (empty when a has none).
std::string primitive_of(const array& a) { return a.has_primitive() ? a.primitive().name() : ""; }

// f on the fallback's graph and on the forced primitive node: the node is
// there, and values, vjp, jvp and vmap through it equal the fallback's.
void check_primitive_path(const std::string& name, const std::string& prim, const VecFn& f,
                          const std::vector<array>& primals, const std::vector<int>& in_axes) {
  auto forced = [f](const std::vector<array>& x) {
    fast::PrimitiveScope scope;
    return f(x);
  };
  EXPECT_NE(primitive_of(f(primals)[0]), prim) << name << ": the fallback makes no node";
  EXPECT_EQ(primitive_of(forced(primals)[0]), prim) << name;
  auto same = [&](const std::vector<array>& a, const std::vector<array>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size()) << name << " " << what;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].shape(), b[i].shape()) << name << " " << what << " " << i;
      EXPECT_EQ(a[i].dtype(), b[i].dtype()) << name << " " << what << " " << i;
      auto va = values(a[i]), vb = values(b[i]);
      for (size_t j = 0; j < va.size(); ++j) {
        EXPECT_NEAR(va[j], vb[j], 1e-12 * (1 + std::abs(vb[j])))
            << name << " " << what << " " << i << " element " << j;
      }
    }
  };
  same(forced(primals), f(primals), "values");
  std::vector<array> cot;
  for (auto& o : f(primals)) cot.push_back(random_f64(o.shape(), 91));
  same(vjp(forced, primals, cot).second, vjp(f, primals, cot).second, "vjp");
  std::vector<array> tan;
  for (size_t i = 0; i < primals.size(); ++i) tan.push_back(random_f64(primals[i].shape(), 92 + i));
  same(jvp(forced, primals, tan).second, jvp(f, primals, tan).second, "jvp");
  std::vector<array> batched;
  for (size_t i = 0; i < primals.size(); ++i) {
    if (in_axes[i] < 0) {
      batched.push_back(primals[i]);
      continue;
    }
    Shape s = primals[i].shape();
    s.insert(s.begin() + in_axes[i], 3);
    batched.push_back(random_f64(s, 93 + i));
  }
  same(vmap(forced, in_axes)(batched), vmap(f, in_axes)(batched), "vmap");
  // Derivatives through the node against finite differences.
  check_derivatives(name + " (primitive)", forced, primals);
}

}  // namespace

// ---- rms_norm, layer_norm

namespace {

const float kEps = 1e-5f;

// f(x values, x, dtype, context) for x of shape (.., 16) in every layout and
// value dtype, on every device.
void for_each_norm_case(const std::string& op, const Shape& shape, uint64_t seed,
                        const std::function<void(const Values&, const array&, Dtype,
                                                 const std::string&)>& f) {
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : value_dtypes()) {
      for (auto layout : harness::all_layouts()) {
        Values xv = harness::random_values(shape_size(shape), t, -2, 2, seed);
        xv = harness::rows_repeated(xv, shape);
        f(xv, harness::with_layout(xv, shape, t, layout), t,
          op + " " + dname(t) + " " + harness::layout_name(layout));
      }
    }
  }
}

}  // namespace

TEST(Fast, test_rms_norm_values_dtypes_layouts_and_devices) {
  for_each_norm_case("rms_norm", {2, 3, 16}, 1, [](const Values& xv, const array& x, Dtype t,
                                                   const std::string& c) {
    Input w = input({16}, t, 2);
    array y = fast::rms_norm(x, w.a, kEps);
    EXPECT_EQ(y.dtype(), t) << c;
    EXPECT_EQ(y.shape(), (Shape{2, 3, 16})) << c;
    harness::expect_values(y, ref_rms_norm(xv, 16, w.v, kEps), c, tol(t), tol(t));
    harness::expect_values(fast::rms_norm(x, std::nullopt, 1e-3f),
                           ref_rms_norm(xv, 16, {}, double(1e-3f)), c + " no weight", tol(t),
                           tol(t));
  });
}

TEST(Fast, test_rms_norm_weight_dtype_promotes_and_stream_argument) {
  Input x = input({4, 8}, float16, 3);
  Input w = input({8}, float32, 4);
  array y = fast::rms_norm(x.a, w.a, kEps, Device::cpu);
  EXPECT_EQ(y.dtype(), float32);
  // Normalised in float32, rounded to float16, then scaled in float32.
  Values n = ref_rms_norm(x.v, 8, {}, kEps);
  Values want(n.size());
  for (size_t i = 0; i < n.size(); ++i) {
    want[i] = static_cast<float>(float16_t(static_cast<float>(n[i]))) * w.v[i % 8];
  }
  harness::expect_values(y, want, "rms_norm float16 x float32 weight", 1e-6, 1e-6);
}

TEST(Fast, test_layer_norm_values_dtypes_layouts_and_devices) {
  for_each_norm_case("layer_norm", {3, 4, 16}, 5, [](const Values& xv, const array& x, Dtype t,
                                                     const std::string& c) {
    Input w = input({16}, t, 6), b = input({16}, t, 7);
    auto check = [&](const std::optional<Input>& w, const std::optional<Input>& b,
                     const std::string& what) {
      array y = fast::layer_norm(x, w ? std::optional(w->a) : std::nullopt,
                                 b ? std::optional(b->a) : std::nullopt, kEps);
      EXPECT_EQ(y.dtype(), t) << c << what;
      harness::expect_values(y, ref_layer_norm(xv, 16, w ? w->v : Values{}, b ? b->v : Values{},
                                               kEps),
                             c + what, tol(t), tol(t));
    };
    check(w, b, "");
    check(std::nullopt, std::nullopt, " plain");
    check(w, std::nullopt, " weight only");
    check(std::nullopt, b, " bias only");
  });
}

// ---- rope

TEST(Fast, test_rope_values_layouts_offsets_and_freqs) {
  const Shape shape{2, 3, 5, 12};
  Values freqs{1.0, 3.0, 10.0, 30.0};
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : value_dtypes()) {
      Input x = input(shape, t, 8);
      for (bool traditional : {false, true}) {
        std::string c = "rope " + dname(t) + (traditional ? " traditional" : "");
        for (auto [dims, offset, scale] :
             std::vector<std::tuple<int, int, float>>{{12, 0, 1.0f}, {8, 3, 0.5f}}) {
          array y = fast::rope(x.a, dims, traditional, 10000.0f, scale, offset);
          EXPECT_EQ(y.dtype(), t) << c;
          harness::expect_values(
              y, ref_rope(x.v, shape, dims, traditional, 10000.0, scale, {double(offset)}, {}),
              c + " dims " + std::to_string(dims), tol(t), tol(t));
        }
        array per_batch = fast::rope(x.a, 12, traditional, 10000.0f, 1.0f, array({2, 7}, int32));
        harness::expect_values(
            per_batch, ref_rope(x.v, shape, 12, traditional, 10000.0, 1.0, {2, 7}, {}),
            c + " offsets per batch", tol(t), tol(t));
        array scalar_offset = fast::rope(x.a, 12, traditional, 500.0f, 2.0f, array(4));
        harness::expect_values(
            scalar_offset, ref_rope(x.v, shape, 12, traditional, 500.0, 2.0, {4}, {}),
            c + " 0-d offset array", tol(t), tol(t));
        array with_freqs =
            fast::rope(x.a, 8, traditional, std::nullopt, 1.0f, 1, array({1.f, 3.f, 10.f, 30.f}));
        harness::expect_values(
            with_freqs, ref_rope(x.v, shape, 8, traditional, std::nullopt, 1.0, {1}, freqs),
            c + " freqs", tol(t), tol(t));
      }
    }
    // A transposed input (B, T, H, D) viewed as (B, H, T, D), and a 3-D input.
    Values v = harness::random_values(2 * 5 * 3 * 8, float32, -2, 2, 9);
    array stored = harness::from_doubles(v, {2, 5, 3, 8}, float32);
    array x = transpose(stored, {0, 2, 1, 3});
    Values xv = values(contiguous(x));
    harness::expect_values(fast::rope(x, 8, false, 10000.0f, 1.0f, 2),
                           ref_rope(xv, {2, 3, 5, 8}, 8, false, 10000.0, 1.0, {2}, {}),
                           "rope transposed", tol(float32), tol(float32));
    Values v3 = harness::random_values(4 * 6 * 8, float32, -2, 2, 10);
    harness::expect_values(
        fast::rope(harness::from_doubles(v3, {4, 6, 8}, float32), 6, true, 100.0f, 1.0f,
                   array({0, 1, 2, 3})),
        ref_rope(v3, {4, 6, 8}, 6, true, 100.0, 1.0, {0, 1, 2, 3}, {}), "rope 3-D",
        tol(float32), tol(float32));
  }
}

// ---- scaled_dot_product_attention

TEST(Fast, test_attention_heads_masks_and_sinks) {
  const Shape qs{2, 4, 3, 8};
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : value_dtypes()) {
      // The probabilities are rounded to the input dtype before multiplying v.
      double tl = t == float16 ? 1.5e-2 : t == bfloat16 ? 8e-2 : tol(t);
      for (int n_kv : {4, 2, 1}) {
        std::string c = "attention " + dname(t) + " n_kv " + std::to_string(n_kv);
        const Shape ks{2, n_kv, 5, 8}, vs{2, n_kv, 5, 6};
        Input q = input(qs, t, 11, -1, 1), k = input(ks, t, 12, -1, 1), v = input(vs, t, 13);
        auto ref = [&](MaskKind kind, const Values& m, const Shape& ms, const Values& sinks) {
          return ref_attention(q.v, qs, k.v, ks, v.v, 6, double(0.3f), kind, m, ms, sinks);
        };
        array plain = fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.3f);
        EXPECT_EQ(plain.shape(), (Shape{2, 4, 3, 6})) << c;
        EXPECT_EQ(plain.dtype(), t) << c;
        harness::expect_values(plain, ref(MaskKind::none, {}, {}, {}), c, tl, tl);
        harness::expect_values(
            fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.3f, "causal"),
            ref(MaskKind::causal, {}, {}, {}), c + " causal", tl, tl);
        Values keep = harness::random_values(15, bool_, 0, 1, 14);
        for (int i = 0; i < 3; ++i) keep[i * 5] = 1;  // no row fully masked
        array bool_mask = astype(array(keep.begin(), {3, 5}, float64), bool_);
        harness::expect_values(
            fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.3f, "array", bool_mask),
            ref(MaskKind::boolean, keep, {3, 5}, {}), c + " boolean mask", tl, tl);
        Input add = input({1, 4, 3, 5}, t, 15);
        harness::expect_values(
            fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.3f, "array", add.a),
            ref(MaskKind::additive, add.v, {1, 4, 3, 5}, {}), c + " additive mask", tl, tl);
        Input sinks = input({4}, t, 16);
        harness::expect_values(
            fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.3f, "", std::nullopt, sinks.a),
            ref(MaskKind::none, {}, {}, sinks.v), c + " sinks", tl, tl);
        harness::expect_values(
            fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.3f, "causal", std::nullopt,
                                               sinks.a),
            ref(MaskKind::causal, {}, {}, sinks.v), c + " causal and sinks", tl, tl);
      }
    }
  }
}

TEST(Fast, test_attention_causal_aligns_to_the_end_and_one_query) {
  // T_q < T_kv (decoding): query i sees keys j <= i + T_kv - T_q.
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (int t_q : {1, 2, 6}) {
      const Shape qs{1, 2, t_q, 4}, ks{1, 2, 6, 4};
      Input q = input(qs, float32, 17), k = input(ks, float32, 18), v = input(ks, float32, 19);
      harness::expect_values(
          fast::scaled_dot_product_attention(q.a, k.a, v.a, 0.5f, "causal"),
          ref_attention(q.v, qs, k.v, ks, v.v, 4, 0.5, MaskKind::causal, {}, {}, {}),
          "causal t_q " + std::to_string(t_q), tol(float32), tol(float32));
    }
  }
}

// ---- the fused attention kernels (GPU, bfloat16 and float16)

namespace {

struct KernelCase {
  std::string name;
  int b, n_q, n_kv, t_q, t_kv, d;
  MaskKind mask;
  bool sinks;
  bool heads_inner;  // q, k, v views of (B, T, N, D) storage
};

// ||a - b|| / ||b|| over the values of two arrays of one shape.
double relative_error(const array& a, const array& b) {
  auto va = values(a), vb = values(b);
  double num = 0, den = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(va[i])) return INFINITY;
    num += (va[i] - vb[i]) * (va[i] - vb[i]);
    den += vb[i] * vb[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

// Each case the kernels cover (on a GPU; elsewhere the same calls take the
// fallback) against the fallback's graph in float32 on the CPU: values, and
// the gradients of q, k, v (and sinks) of a random linear function of the
// output.
TEST(Fast, test_attention_kernel_cases_against_the_fallback_in_float32) {
  const std::vector<KernelCase> cases = {
      {"no mask d64", 1, 2, 2, 7, 63, 64, MaskKind::none, false, false},
      {"causal d128", 2, 4, 4, 63, 63, 128, MaskKind::causal, false, false},
      {"causal d128 t_q < t_kv gqa", 1, 4, 2, 7, 1000, 128, MaskKind::causal, false, false},
      {"causal d64 t_q > t_kv (rows without keys)", 1, 2, 1, 63, 7, 64, MaskKind::causal, false,
       false},
      {"causal one query gqa 4", 1, 8, 2, 1, 4097, 128, MaskKind::causal, false, false},
      {"d80 gqa, heads-inner views", 2, 6, 2, 33, 129, 80, MaskKind::none, false, true},
      {"d96 sinks", 1, 4, 2, 63, 100, 96, MaskKind::none, true, false},
      {"causal d128 sinks", 1, 2, 1, 130, 130, 128, MaskKind::causal, true, false},
      {"boolean mask d64", 2, 2, 2, 70, 90, 64, MaskKind::boolean, false, false},
      {"additive mask d128 gqa", 1, 4, 2, 64, 64, 128, MaskKind::additive, false, false},
      {"additive mask d64 sinks gqa 4", 1, 4, 1, 33, 257, 64, MaskKind::additive, true, true},
      {"causal d256 gqa", 1, 4, 2, 100, 100, 256, MaskKind::causal, false, false},
      // Query rows of a group in one tile and long keys: the split-key kernels.
      {"decode boolean mask sinks d64 gqa 4", 2, 4, 1, 2, 700, 64, MaskKind::boolean, true,
       false},
      {"decode additive mask d128 gqa 8", 1, 8, 1, 2, 1500, 128, MaskKind::additive, false,
       true},
  };
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : {bfloat16, float16}) {
      // Probabilities and outputs are rounded to t: a few units of its last place.
      const double tol = t == bfloat16 ? 2e-2 : 4e-3, grad_tol = t == bfloat16 ? 3e-2 : 6e-3;
      uint64_t seed = 100;
      for (const auto& c : cases) {
        const std::string name = c.name + " " + dname(t) + " on " +
                                 (dev == Device::gpu ? "gpu" : "cpu");
        auto heads = [&](int n, int len, uint64_t sd, double lo, double hi) {
          Shape stored = c.heads_inner ? Shape{c.b, len, n, c.d} : Shape{c.b, n, len, c.d};
          array a = input(stored, t, sd, lo, hi).a;
          return c.heads_inner ? swapaxes(a, 1, 2) : a;
        };
        std::vector<array> in = {heads(c.n_q, c.t_q, ++seed, -1.5, 1.5),
                                 heads(c.n_kv, c.t_kv, ++seed, -1.5, 1.5),
                                 heads(c.n_kv, c.t_kv, ++seed, -1, 1)};
        std::string mode = c.mask == MaskKind::causal ? "causal" : "";
        std::optional<array> mask;
        if (c.mask == MaskKind::boolean) {
          mode = "array";
          Values keep = harness::random_values(c.b * c.t_q * c.t_kv, bool_, 0, 1, ++seed);
          mask = reshape(astype(array(keep.begin(), {c.b * c.t_q * c.t_kv}, float64), bool_),
                         {c.b, 1, c.t_q, c.t_kv});
        } else if (c.mask == MaskKind::additive) {
          mode = "array";
          mask = input({c.n_q, c.t_q, c.t_kv}, t, ++seed, -2, 2).a;
        }
        const int sinks_at = c.sinks ? 3 : -1;
        if (c.sinks) in.push_back(input({c.n_q}, float32, ++seed, -1, 2).a);
        // f(q, k, v, sinks?) with the mask in dtype mask_t.
        auto attend_with = [&](Dtype mask_t) {
          std::optional<array> m;
          if (mask) m = mask->dtype() == bool_ ? *mask : astype(*mask, mask_t);
          return [mode, m, sinks_at, d = c.d](const std::vector<array>& a) {
            std::optional<array> sk;
            if (sinks_at >= 0) sk = a[sinks_at];
            return std::vector{fast::scaled_dot_product_attention(
                a[0], a[1], a[2], 1.0f / std::sqrt(float(d)), mode, m, sk)};
          };
        };
        auto attend = attend_with(t);
        // The reference: the fallback on float32 copies, on the CPU.
        auto reference = [&, f32_attend = attend_with(float32)](const std::vector<array>& a) {
          fast::FallbackScope plain;
          std::vector<array> f32;
          for (const auto& x : a) f32.push_back(astype(x, float32));
          return f32_attend(f32);
        };
        array out = attend(in)[0];
        EXPECT_EQ(out.dtype(), t) << name;
        const bool fused = dev == Device::gpu;
        EXPECT_EQ(primitive_of(out) == "ScaledDotProductAttention", fused) << name;
        array cot = input(out.shape(), t, ++seed, -1, 1).a;
        std::vector<array> want, want_grads;
        {
          StreamContext cpu(Device::cpu);
          want = reference(in);
          want_grads = vjp(reference, in, {astype(cot, float32)}).second;
        }
        EXPECT_LT(relative_error(out, want[0]), tol) << name;
        auto grads = vjp(attend, in, {cot}).second;
        for (int i = 0; i < static_cast<int>(in.size()); ++i) {
          EXPECT_EQ(grads[i].dtype(), in[i].dtype()) << name << " gradient " << i;
          EXPECT_LT(relative_error(grads[i], want_grads[i]), i == sinks_at ? 3 * grad_tol : grad_tol)
              << name << " gradient " << i;
        }
      }
    }
  }
}

// ---- the primitive's node

TEST(Fast, test_primitive_node_equals_the_fallback_with_its_transforms) {
  array x = random_f64({2, 3, 8}, 20), w = random_f64({8}, 21), b = random_f64({8}, 22);
  check_primitive_path("rms_norm", "RMSNorm", [](const std::vector<array>& a) {
    return std::vector{fast::rms_norm(a[0], a[1], 1e-5f)};
  }, {x, w}, {0, -1});
  check_primitive_path("layer_norm", "LayerNorm", [](const std::vector<array>& a) {
    return std::vector{fast::layer_norm(a[0], a[1], a[2], 1e-5f)};
  }, {x, w, b}, {0, 0, -1});
  array r = random_f64({2, 2, 5, 8}, 23);
  check_primitive_path("rope", "RoPE", [](const std::vector<array>& a) {
    return std::vector{fast::rope(a[0], 6, false, 10000.0f, 1.0f, array({1, 4}, int32))};
  }, {r}, {1});
  check_primitive_path("rope freqs", "RoPE", [](const std::vector<array>& a) {
    return std::vector{fast::rope(a[0], 8, true, std::nullopt, 0.5f, 2, a[1])};
  }, {r, random_f64({4}, 24, 1, 3)}, {0, -1});
  array q = random_f64({2, 4, 3, 8}, 25), k = random_f64({2, 2, 5, 8}, 26),
        v = random_f64({2, 2, 5, 6}, 27), sinks = random_f64({4}, 28);
  check_primitive_path("attention", "ScaledDotProductAttention",
                       [](const std::vector<array>& a) {
                         return std::vector{fast::scaled_dot_product_attention(
                             a[0], a[1], a[2], 0.4f, "causal", std::nullopt, a[3])};
                       },
                       {q, k, v, sinks}, {0, 0, -1, -1});
  array additive = random_f64({3, 5}, 29);
  check_primitive_path("attention additive mask", "ScaledDotProductAttention",
                       [](const std::vector<array>& a) {
                         return std::vector{fast::scaled_dot_product_attention(
                             a[0], a[1], a[2], 0.4f, "array", a[3])};
                       },
                       {q, k, v, additive}, {0, -1, 0, -1});
}

TEST(Fast, test_primitive_node_runs_on_stream_workers_and_under_compile) {
  fast::PrimitiveScope scope;
  Input x = input({4, 16}, float32, 30), w = input({16}, float32, 31);
  Values want = ref_rms_norm(x.v, 16, w.v, kEps);
  // An input from another stream: the graph spans two streams, so the node
  // runs on its stream's worker thread, and its fallback nested there.
  Stream other = new_stream(Device::cpu);
  array moved = multiply(x.a, array(1.0f), other);
  array y = fast::rms_norm(moved, w.a, 1e-5f);
  EXPECT_EQ(primitive_of(y), "RMSNorm");
  harness::expect_values(y, want, "rms_norm node on a worker", tol(float32), tol(float32));
  array z = fast::rms_norm(x.a, w.a, 1e-5f);
  async_eval({z});
  harness::expect_values(z, want, "rms_norm node by async_eval", tol(float32), tol(float32));
  // Two equal nodes in a compiled function merge; the result stays right.
  auto f = [](const std::vector<array>& a) {
    fast::PrimitiveScope inner;
    return std::vector{add(fast::rms_norm(a[0], a[1], 1e-5f), fast::rms_norm(a[0], a[1], 1e-5f))};
  };
  Values twice(want.size());
  for (size_t i = 0; i < want.size(); ++i) twice[i] = 2 * want[i];
  auto compiled = compile(f);
  harness::expect_values(compiled({x.a, w.a})[0], twice, "compiled", tol(float32), tol(float32));
  harness::expect_values(compiled({x.a, w.a})[0], twice, "compiled again", tol(float32),
                         tol(float32));
}

// ---- derivatives and vmap (through the fallback's graph)

TEST(Fast, test_derivatives_against_finite_differences) {
  grad_check::on_each_device([] {
    array x = random_f64({2, 3, 8}, 40), w = random_f64({8}, 41), b = random_f64({8}, 42);
    check_derivatives("rms_norm", [](const std::vector<array>& a) {
      return std::vector{fast::rms_norm(a[0], a[1], 1e-5f)};
    }, {x, w});
    check_derivatives("layer_norm", [](const std::vector<array>& a) {
      return std::vector{fast::layer_norm(a[0], a[1], a[2], 1e-5f)};
    }, {x, w, b});
    for (bool traditional : {false, true}) {
      check_derivatives("rope", [traditional](const std::vector<array>& a) {
        return std::vector{fast::rope(a[0], 6, traditional, 100.0f, 1.0f, 3)};
      }, {random_f64({2, 2, 4, 8}, 43)});
      check_derivatives("rope freqs", [traditional](const std::vector<array>& a) {
        return std::vector{fast::rope(a[0], 8, traditional, std::nullopt, 1.0f, 1, a[1])};
      }, {random_f64({2, 2, 4, 8}, 44), random_f64({4}, 45, 1, 4)});
    }
    array q = random_f64({2, 4, 3, 8}, 46), k = random_f64({2, 2, 5, 8}, 47),
          v = random_f64({2, 2, 5, 6}, 48);
    check_derivatives("attention", [](const std::vector<array>& a) {
      return std::vector{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.5f)};
    }, {q, k, v});
    check_derivatives("attention causal, additive mask and sinks",
                      [](const std::vector<array>& a) {
                        return std::vector{fast::scaled_dot_product_attention(
                            a[0], a[1], a[2], 0.5f, "array", a[3], a[4])};
                      },
                      {q, k, v, random_f64({4, 3, 5}, 49), random_f64({4}, 50)});
    check_derivatives("attention causal", [](const std::vector<array>& a) {
      return std::vector{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.5f, "causal")};
    }, {q, k, v});
  });
}

TEST(Fast, test_vmap_against_a_loop) {
  grad_check::on_each_device([] {
    // A GPU reduction picks its order of addition from the layout.
    const double ulps = default_device() == Device::gpu ? 64 : 0;
    array x = random_f64({3, 2, 8}, 60), w = random_f64({3, 8}, 61), b = random_f64({8}, 62);
    check_vmap("rms_norm", [](const std::vector<array>& a) {
      return std::vector{fast::rms_norm(a[0], a[1], 1e-5f)};
    }, {x, w}, {0, 0}, ulps);
    check_vmap("layer_norm over an inner axis", [](const std::vector<array>& a) {
      return std::vector{fast::layer_norm(a[0], std::nullopt, a[1], 1e-5f)};
    }, {moveaxis(x, 0, 1), b}, {1, -1}, ulps);
    check_vmap("rope", [](const std::vector<array>& a) {
      return std::vector{fast::rope(a[0], 6, true, 100.0f, 1.0f, array({0, 5}, int32))};
    }, {random_f64({3, 2, 2, 4, 8}, 63)}, {0}, ulps);
    check_vmap("attention", [](const std::vector<array>& a) {
      return std::vector{fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.5f, "causal",
                                                            std::nullopt, a[3])};
    }, {random_f64({3, 1, 4, 2, 8}, 64), random_f64({1, 2, 3, 8}, 65),
        random_f64({3, 1, 2, 3, 4}, 66), random_f64({3, 4}, 67)}, {0, -1, 0, 0}, ulps);
  });
}

// ---- the fused kernels of the norms and rope

namespace {

std::vector<Dtype> kernel_dtypes() { return {float32, float16, bfloat16}; }

// Tolerance of a fused result against the fallback's, each rounded to t
// once or twice: the kernels add in another order, so a rounding may land
// one unit in the last place apart.
double fused_tol(Dtype t) { return t == float32 ? 1e-5 : t == float16 ? 2e-3 : 1.6e-2; }

// ||got - want|| / max(||want||, floor) within rtol (NaN fails).
void expect_normwise(const array& got, const array& want, double rtol, const std::string& c,
                     double floor = 0) {
  ASSERT_EQ(got.shape(), want.shape()) << c;
  EXPECT_EQ(got.dtype(), want.dtype()) << c;
  auto g = values(got), w = values(want);
  double num = 0, den = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  double err = std::sqrt(num) / std::max({std::sqrt(den), floor, 1e-300});
  EXPECT_LE(err, rtol) << c << ": normwise error " << err;
}

// f on the inputs, and under a FallbackScope.
std::vector<array> on_fallback(const VecFn& f, const std::vector<array>& inputs) {
  fast::FallbackScope scope;
  return f(inputs);
}

// The vjp of f at float32 primals against central differences of f at the
// same values in float64 (where the fallback computes): <vjp(c), t> against
// (<c, f(x + eps t)> - <c, f(x - eps t)>) / (2 eps), for argnums' primals.
void check_vjp_by_differences(const std::string& name, const VecFn& f,
                              const std::vector<array>& primals, const std::vector<int>& argnums,
                              double rtol = 2e-4) {
  auto outs = f(primals);
  std::vector<array> cot;
  for (size_t o = 0; o < outs.size(); ++o) {
    cot.push_back(astype(random_f64(outs[o].shape(), 70 + o), outs[o].dtype()));
  }
  auto grads = vjp(f, primals, cot).second;
  std::vector<array> plus, minus, tangents;
  const double eps = 1e-4;
  double lhs = 0;
  for (size_t i = 0; i < primals.size(); ++i) {
    array p = astype(primals[i], float64);
    bool moved = std::find(argnums.begin(), argnums.end(), static_cast<int>(i)) != argnums.end();
    array t = moved ? random_f64(primals[i].shape(), 80 + i) : zeros_like(p);
    if (moved) lhs += grad_check::dot({grads[i]}, {t});
    plus.push_back(moved ? add(p, multiply(t, array(eps))) : primals[i]);
    minus.push_back(moved ? subtract(p, multiply(t, array(eps))) : primals[i]);
  }
  std::vector<array> cot64;
  for (auto& c : cot) cot64.push_back(astype(c, float64));
  double rhs = (grad_check::dot(cot64, f(plus)) - grad_check::dot(cot64, f(minus))) / (2 * eps);
  EXPECT_LE(std::abs(lhs - rhs), rtol * std::max({1.0, std::abs(lhs), std::abs(rhs)}))
      << name << ": <vjp(c), t> = " << lhs << ", finite differences give " << rhs;
}

// Shapes of the norm tests: rows of 1, 7, 16, 100, 4097, 8192 and 9001
// elements (the GPU kernels keep a row of up to 8192 odd or 16384 aligned
// elements; longer rows take the fallback there).
// On the GPU also 5000 rows of 512, which the staged kernels visit in several
// steps per block (Note [Staged norms] in backend/cuda/fast.cuh).
std::vector<Shape> norm_shapes(Device dev) {
  std::vector<Shape> shapes{{1, 1}, {7, 7}, {3, 4, 16}, {33, 100}, {3, 4097}, {2, 8192}, {2, 9001}};
  if (dev == Device::gpu) shapes.push_back({5000, 512});
  return shapes;
}

// Whether the fused kernel covers rows of d elements of dtype t on the current device.
bool norm_fused(int64_t d, Dtype t) {
  return default_device() == Device::cpu || fast::gpu_norm_row_fits(d, t.size);
}

}  // namespace

TEST(Fast, test_fused_norms_against_the_fallback_and_a_float64_loop) {
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : kernel_dtypes()) {
      for (const Shape& shape : norm_shapes(dev)) {
        const int d = shape.back();
        Values xv = harness::random_values(shape_size(shape), t, -3, 3, 100 + d);
        Input w = input({d}, t, 101), b = input({d}, t, 102);
        for (bool transposed : {false, true}) {
          // A non-contiguous x: the transpose of a stored (d, rows) array.
          array x = harness::from_doubles(xv, shape, t);
          if (transposed) {
            Shape flipped{d, static_cast<int>(shape_size(shape) / d)};
            Values tv(xv.size());
            for (int64_t r = 0; r < flipped[1]; ++r) {
              for (int i = 0; i < d; ++i) tv[i * flipped[1] + r] = xv[r * d + i];
            }
            x = reshape(transpose(harness::from_doubles(tv, flipped, t)), shape);
          }
          std::string c = dev == Device::cpu ? "cpu " : "gpu ";
          c += dname(t) + " " + shape_str(shape) + (transposed ? " transposed" : "");
          auto check = [&](const std::string& what, const std::string& prim, const VecFn& f,
                           const std::vector<array>& in, const Values& want) {
            array y = f(in)[0];
            EXPECT_EQ(primitive_of(y) == prim, norm_fused(d, t)) << c << what;
            harness::expect_values(y, values(on_fallback(f, in)[0]), c + what + " vs fallback",
                                   fused_tol(t), fused_tol(t));
            harness::expect_values(y, want, c + what, tol(t), tol(t));
          };
          check(" rms_norm", "RMSNorm", [](const std::vector<array>& a) {
            return std::vector{fast::rms_norm(a[0], a[1], 1e-5f)};
          }, {x, w.a}, ref_rms_norm(xv, d, w.v, 1e-5f));
          check(" rms_norm no weight", "RMSNorm", [](const std::vector<array>& a) {
            return std::vector{fast::rms_norm(a[0], std::nullopt, 1e-4f)};
          }, {x}, ref_rms_norm(xv, d, {}, double(1e-4f)));
          check(" layer_norm", "LayerNorm", [](const std::vector<array>& a) {
            return std::vector{fast::layer_norm(a[0], a[1], a[2], 1e-5f)};
          }, {x, w.a, b.a}, ref_layer_norm(xv, d, w.v, b.v, 1e-5f));
          check(" layer_norm weight only", "LayerNorm", [](const std::vector<array>& a) {
            return std::vector{fast::layer_norm(a[0], a[1], std::nullopt, 1e-5f)};
          }, {x, w.a}, ref_layer_norm(xv, d, w.v, {}, 1e-5f));
          check(" layer_norm bias only", "LayerNorm", [](const std::vector<array>& a) {
            return std::vector{fast::layer_norm(a[0], std::nullopt, a[1], 1e-5f)};
          }, {x, b.a}, ref_layer_norm(xv, d, {}, b.v, 1e-5f));
          check(" layer_norm plain", "LayerNorm", [](const std::vector<array>& a) {
            return std::vector{fast::layer_norm(a[0], std::nullopt, std::nullopt, 1e-5f)};
          }, {x}, ref_layer_norm(xv, d, {}, {}, 1e-5f));
        }
      }
    }
  }
}

TEST(Fast, test_fused_norm_gradients_against_the_fallback_and_finite_differences) {
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : kernel_dtypes()) {
      // Gradients are compared normwise: the fallback rounds to t at more steps.
      const double gtol = t == float32 ? 1e-5 : t == float16 ? 4e-3 : 3e-2;
      std::vector<Shape> shapes{{1, 1}, {7, 7}, {5, 3, 100}, {3, 4097}, {4, 8192}, {300, 16}};
      if (dev == Device::gpu) shapes.push_back({5000, 512});
      for (const Shape& shape : shapes) {
        const int d = shape.back();
        Input x = input(shape, t, 110 + d), w = input({d}, t, 111), b = input({d}, t, 112);
        std::string c = std::string(dev == Device::cpu ? "cpu " : "gpu ") + dname(t) + " " +
                        shape_str(shape);
        struct Case {
          std::string name, vjp_name;
          VecFn f;
          std::vector<array> in;
        };
        std::vector<Case> cases{
            {"rms_norm", "RMSNormVJP",
             [](const std::vector<array>& a) {
               return std::vector{fast::rms_norm(a[0], a[1], 1e-5f)};
             },
             {x.a, w.a}},
            {"rms_norm no weight", "RMSNormVJP",
             [](const std::vector<array>& a) {
               return std::vector{fast::rms_norm(a[0], std::nullopt, 1e-5f)};
             },
             {x.a}},
            {"layer_norm", "LayerNormVJP",
             [](const std::vector<array>& a) {
               return std::vector{fast::layer_norm(a[0], a[1], a[2], 1e-5f)};
             },
             {x.a, w.a, b.a}},
            {"layer_norm weight only", "LayerNormVJP",
             [](const std::vector<array>& a) {
               return std::vector{fast::layer_norm(a[0], a[1], std::nullopt, 1e-5f)};
             },
             {x.a, w.a}},
            {"layer_norm bias only", "LayerNormVJP",
             [](const std::vector<array>& a) {
               return std::vector{fast::layer_norm(a[0], std::nullopt, a[1], 1e-5f)};
             },
             {x.a, b.a}},
            {"layer_norm plain", "LayerNormVJP",
             [](const std::vector<array>& a) {
               return std::vector{fast::layer_norm(a[0], std::nullopt, std::nullopt, 1e-5f)};
             },
             {x.a}},
        };
        for (auto& k : cases) {
          std::vector<array> cot{input(shape, t, 113).a};
          auto fused = vjp(k.f, k.in, cot).second;
          std::vector<array> reference;
          {
            fast::FallbackScope scope;
            reference = vjp(k.f, k.in, cot).second;
          }
          ASSERT_EQ(fused.size(), reference.size());
          // Names first: evaluating one output evaluates its siblings too.
          for (size_t i = 0; i < fused.size(); ++i) {
            EXPECT_EQ(primitive_of(fused[i]), k.vjp_name) << c << " " << k.name << " grad " << i;
          }
          for (size_t i = 0; i < fused.size(); ++i) {
            // dx of rows of one element cancels to nearly 0: compared absolutely.
            expect_normwise(fused[i], reference[i], gtol,
                            c + " " + k.name + " grad " + std::to_string(i),
                            i == 0 && d == 1 ? 1.0 : 0.0);
          }
          if (t == float32 && d > 1) {
            std::vector<int> all(k.in.size());
            for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
            check_vjp_by_differences(c + " " + k.name, k.f, k.in, all);
          }
        }
      }
    }
  }
}

TEST(Fast, test_fused_rope_against_the_fallback_and_a_float64_loop) {
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : kernel_dtypes()) {
      // (B, *, T, D): odd T, D with dims < D, 3-D, one row of 4097 positions.
      for (const Shape& shape : {Shape{2, 3, 7, 16}, Shape{2, 5, 1, 64}, Shape{3, 9, 12},
                                 Shape{1, 2, 4097, 8}, Shape{2, 2, 3, 10}}) {
        const int d = shape.back(), nd = static_cast<int>(shape.size());
        Input x = input(shape, t, 120 + d);
        for (bool traditional : {false, true}) {
          std::string c = std::string(dev == Device::cpu ? "cpu " : "gpu ") + dname(t) + " " +
                          shape_str(shape) + (traditional ? " traditional" : "");
          const int dims = d == 10 ? 6 : d;
          std::vector<double> per_batch;
          std::vector<int> offsets;
          for (int b = 0; b < shape[0]; ++b) offsets.push_back(3 * b + 1);
          for (int o : offsets) per_batch.push_back(o);
          const int half = dims / 2;
          Values fv(half);
          for (int i = 0; i < half; ++i) fv[i] = 1.0 + 2.5 * i;
          array freqs = harness::from_doubles(fv, {half}, float32);
          // Angles are float32 in the kernels and the fallback: an error of
          // a few units in the last place of angles up to 2 (T + 10).
          const double loop_tol = tol(t) + 4e-7 * 2 * (shape[nd - 2] + 10);
          auto check = [&](const std::string& what, const VecFn& f,
                           const std::vector<array>& in, const Values& want) {
            array y = f(in)[0];
            EXPECT_EQ(primitive_of(y), "RoPE") << c << what;
            harness::expect_values(y, values(on_fallback(f, in)[0]), c + what + " vs fallback",
                                   fused_tol(t), fused_tol(t));
            harness::expect_values(y, want, c + what, loop_tol, loop_tol);
          };
          check(" offset 5", [&](const std::vector<array>& a) {
            return std::vector{fast::rope(a[0], dims, traditional, 10000.0f, 1.0f, 5)};
          }, {x.a}, ref_rope(x.v, shape, dims, traditional, 10000.0, 1.0, {5}, {}));
          check(" offsets per batch", [&](const std::vector<array>& a) {
            return std::vector{fast::rope(a[0], dims, traditional, 500.0f, 0.5f, a[1])};
          }, {x.a, array(offsets.begin(), {shape[0]}, int32)},
             ref_rope(x.v, shape, dims, traditional, 500.0, 0.5, per_batch, {}));
          check(" 0-d float offset", [&](const std::vector<array>& a) {
            return std::vector{fast::rope(a[0], dims, traditional, 100.0f, 2.0f, a[1])};
          }, {x.a, array(2.5f)}, ref_rope(x.v, shape, dims, traditional, 100.0, 2.0, {2.5}, {}));
          check(" freqs", [&](const std::vector<array>& a) {
            return std::vector{fast::rope(a[0], dims, traditional, std::nullopt, 1.0f,
                                          array(int64_t{3}), a[1])};
          }, {x.a, freqs}, ref_rope(x.v, shape, dims, traditional, std::nullopt, 1.0, {3}, fv));
          if (nd == 4) {
            // A non-contiguous x: (B, T, H, D) stored, viewed as (B, H, T, D).
            Shape stored{shape[0], shape[2], shape[1], shape[3]};
            Values sv = harness::random_values(shape_size(stored), t, -2, 2, 130 + d);
            array view = transpose(harness::from_doubles(sv, stored, t), {0, 2, 1, 3});
            Values vv = values(contiguous(view));
            check(" transposed", [&](const std::vector<array>& a) {
              return std::vector{fast::rope(a[0], dims, traditional, 10000.0f, 1.0f, 1)};
            }, {view}, ref_rope(vv, shape, dims, traditional, 10000.0, 1.0, {1}, {}));
          }
        }
      }
    }
  }
}

TEST(Fast, test_fused_rope_gradient_is_the_inverse_rotation) {
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : kernel_dtypes()) {
      const double gtol = t == float32 ? 1e-5 : t == float16 ? 4e-3 : 3e-2;
      const Shape shape{2, 3, 7, 10};
      Input x = input(shape, t, 140);
      for (bool traditional : {false, true}) {
        std::string c = std::string(dev == Device::cpu ? "cpu " : "gpu ") + dname(t) +
                        (traditional ? " traditional" : "");
        VecFn f = [traditional](const std::vector<array>& a) {
          return std::vector{
              fast::rope(a[0], 6, traditional, 10000.0f, 0.75f, array({2, 9}, int32))};
        };
        VecFn with_freqs = [traditional](const std::vector<array>& a) {
          return std::vector{fast::rope(a[0], 6, traditional, std::nullopt, 1.0f, 4, a[1])};
        };
        array freqs = array({1.0f, 2.0f, 7.0f});
        for (auto& [name, g, in] :
             std::vector<std::tuple<std::string, VecFn, std::vector<array>>>{
                 {"rope", f, {x.a}}, {"rope freqs", with_freqs, {x.a, freqs}}}) {
          std::vector<array> cot{input(shape, t, 141).a};
          auto fused = vjp(g, in, cot).second;
          std::vector<array> reference;
          {
            fast::FallbackScope scope;
            reference = vjp(g, in, cot).second;
          }
          EXPECT_EQ(primitive_of(fused[0]), "RoPE") << c << " " << name;
          for (size_t i = 0; i < fused.size(); ++i) {
            expect_normwise(fused[i], reference[i], i == 0 ? gtol : 1e-5,
                            c + " " + name + " grad " + std::to_string(i));
          }
          if (t == float32) {
            std::vector<int> all(in.size());
            for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
            check_vjp_by_differences(c + " " + name, g, in, all);
          }
        }
      }
    }
  }
}

TEST(Fast, test_fused_ops_under_vmap_and_vmap_of_their_gradients) {
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    // vmap goes through the fallback's graph, the loop through the kernels.
    auto close_to_loop = [](const std::string& name, const VecFn& f,
                            const std::vector<array>& inputs, const std::vector<int>& axes) {
      auto got = vmap(f, axes)(inputs);
      int n = inputs[0].shape(axes[0]);
      for (size_t o = 0; o < got.size(); ++o) {
        std::vector<array> loop;
        for (int b = 0; b < n; ++b) {
          std::vector<array> args;
          for (size_t i = 0; i < inputs.size(); ++i) {
            if (axes[i] < 0) {
              args.push_back(inputs[i]);
              continue;
            }
            Shape start(inputs[i].ndim(), 0), stop = inputs[i].shape();
            start[axes[i]] = b;
            stop[axes[i]] = b + 1;
            args.push_back(squeeze(slice(inputs[i], start, stop), axes[i]));
          }
          loop.push_back(f(args)[o]);
        }
        expect_normwise(got[o], stack(loop, 0), 1e-5, name + " output " + std::to_string(o));
      }
    };
    Input x = input({3, 4, 16}, float32, 150), w = input({3, 16}, float32, 151),
          b = input({16}, float32, 152);
    VecFn rms = [](const std::vector<array>& a) {
      return std::vector{fast::rms_norm(a[0], a[1], 1e-5f)};
    };
    VecFn ln = [](const std::vector<array>& a) {
      return std::vector{fast::layer_norm(a[0], std::nullopt, a[1], 1e-5f)};
    };
    close_to_loop("rms_norm", rms, {x.a, w.a}, {0, 0});
    close_to_loop("layer_norm over axis 1", ln, {moveaxis(x.a, 0, 1), b.a}, {1, -1});
    Input r = input({3, 2, 2, 5, 8}, float32, 153);
    VecFn rope = [](const std::vector<array>& a) {
      return std::vector{fast::rope(a[0], 8, false, 100.0f, 1.0f, array({0, 5}, int32))};
    };
    close_to_loop("rope", rope, {r.a}, {0});
    // vmap of the fused gradients.
    auto grads = [](VecFn f, int n) {
      return VecFn([f, n](const std::vector<array>& a) {
        std::vector<array> cot{sin(multiply(f(a)[0], array(3.0f)))};
        auto g = vjp(f, a, cot).second;
        return std::vector<array>(g.begin(), g.begin() + n);
      });
    };
    close_to_loop("grad rms_norm", grads(rms, 2), {x.a, w.a}, {0, 0});
    close_to_loop("grad layer_norm", grads(ln, 2), {moveaxis(x.a, 0, 1), b.a}, {1, -1});
    close_to_loop("grad rope", grads(rope, 1), {r.a}, {0});
  }
}

// ---- errors

TEST(Fast, test_bad_arguments_are_invalid_argument_naming_the_op) {
  array x = zeros({2, 3, 64});
  expect_invalid([&] { fast::rms_norm(x, zeros({32}), 1e-5f); }, "rms_norm",
                 "weight must be 1-D of size 64 (the last axis of x), got shape (32,)");
  expect_invalid([&] { fast::rms_norm(x, zeros({1, 64}), 1e-5f); }, "rms_norm", "(1,64)");
  expect_invalid([&] { fast::rms_norm(zeros({}), std::nullopt, 1e-5f); }, "rms_norm",
                 "at least 1 dimension");
  expect_invalid([&] { fast::rms_norm(zeros({4}, int32), std::nullopt, 1e-5f); }, "rms_norm",
                 "int32");
  expect_invalid([&] { fast::layer_norm(x, std::nullopt, zeros({63}), 1e-5f); }, "layer_norm",
                 "bias must be 1-D of size 64");
  expect_invalid([&] { fast::layer_norm(x, zeros({65}), std::nullopt, 1e-5f); }, "layer_norm",
                 "weight must be 1-D of size 64");

  array r = zeros({1, 2, 4, 8});
  expect_invalid([&] { fast::rope(r, 7, false, 1e4f, 1.0f, 0); }, "rope", "got 7");
  expect_invalid([&] { fast::rope(r, 10, false, 1e4f, 1.0f, 0); }, "rope", "at most 8, got 10");
  expect_invalid([&] { fast::rope(r, 0, false, 1e4f, 1.0f, 0); }, "rope", "got 0");
  expect_invalid([&] { fast::rope(zeros({2, 8}), 8, false, 1e4f, 1.0f, 0); }, "rope",
                 "at least 3 dimensions");
  expect_invalid([&] { fast::rope(zeros({1, 2, 8}, int32), 8, false, 1e4f, 1.0f, 0); }, "rope",
                 "floating");
  expect_invalid([&] { fast::rope(r, 8, false, std::nullopt, 1.0f, 0); }, "rope", "exactly one");
  expect_invalid([&] { fast::rope(r, 8, false, 1e4f, 1.0f, 0, ones({4})); }, "rope",
                 "exactly one");
  expect_invalid([&] { fast::rope(r, 8, false, std::nullopt, 1.0f, 0, ones({3})); }, "rope",
                 "freqs must be real of shape (4,)");
  expect_invalid([&] { fast::rope(r, 8, false, 1e4f, 1.0f, array({1, 2}, int32)); }, "rope",
                 "one entry per batch element (1), got shape (2,)");
  expect_invalid([&] { fast::rope(r, 8, false, 1e4f, 1.0f, zeros({1, 1}, int32)); }, "rope",
                 "scalar or 1-D");

  const std::string sdpa = "scaled_dot_product_attention";
  array q = zeros({1, 3, 2, 4}), k = zeros({1, 2, 2, 4});
  auto attend = [](const array& q, const array& k, const array& v, const std::string& mode = "",
                   std::optional<array> mask = std::nullopt,
                   std::optional<array> sinks = std::nullopt, bool force = false) {
    fast::scaled_dot_product_attention(q, k, v, 1.0f, mode, mask, sinks, force);
  };
  expect_invalid([&] { attend(q, k, k); }, sdpa, "multiple of N_kv");
  expect_invalid([&] { attend(q, zeros({1, 3, 2, 5}), zeros({1, 3, 2, 4})); }, sdpa,
                 "do not match");
  expect_invalid([&] { attend(q, q, zeros({1, 3, 3, 4})); }, sdpa, "do not match");
  expect_invalid([&] { attend(q, zeros({2, 3, 2, 4}), zeros({2, 3, 2, 4})); }, sdpa,
                 "do not match");
  expect_invalid([&] { attend(zeros({3, 2, 4}), q, q); }, sdpa, "(B, N, T, D)");
  expect_invalid([&] { attend(zeros({1, 3, 2, 4}, int32), q, q); }, sdpa, "floating");
  expect_invalid([&] { attend(q, q, q, "upper"); }, sdpa, "'upper'");
  expect_invalid([&] { attend(q, q, q, "causal", zeros({2, 2})); }, sdpa, "mask_mode 'array'");
  expect_invalid([&] { attend(q, q, q, "", zeros({2, 2})); }, sdpa, "mask_mode 'array'");
  expect_invalid([&] { attend(q, q, q, "array"); }, sdpa, "needs a mask array");
  expect_invalid([&] { attend(q, q, q, "array", zeros({3, 2})); }, sdpa,
                 "shape (3,2) does not broadcast to the scores' shape (1,3,2,2)");
  expect_invalid([&] { attend(q, q, q, "array", zeros({1, 1, 1, 2, 2})); }, sdpa,
                 "does not broadcast");
  expect_invalid([&] { attend(astype(q, float16), astype(q, float16), astype(q, float16),
                              "array", zeros({2, 2})); },
                 sdpa, "does not promote to the inputs' dtype float16");
  expect_invalid([&] { attend(q, q, q, "", std::nullopt, zeros({2})); }, sdpa,
                 "sinks must be real of shape (3,)");
  expect_invalid([&] { attend(q, q, q, "", std::nullopt, std::nullopt, true); }, sdpa,
                 "force_fused");
  // A boolean mask of any broadcastable shape and a float16 additive mask on
  // float32 inputs are fine.
  EXPECT_NO_THROW(attend(q, q, q, "array", ones({2}, bool_)));
  EXPECT_NO_THROW(attend(q, q, q, "array", zeros({3, 1, 1}, float16)));
}

// ---- cross_entropy ---------------------------------------------------------------

namespace {

// logsumexp(l) - l[target] in double over each row of l (rows of n).
Values ref_cross_entropy(const Values& l, const std::vector<int>& targets, int n) {
  Values out;
  for (size_t r = 0; r < targets.size(); ++r) {
    const double* row = l.data() + r * n;
    double m = *std::max_element(row, row + n), s = 0;
    for (int j = 0; j < n; ++j) s += std::exp(row[j] - m);
    out.push_back(m + std::log(s) - row[targets[r]]);
  }
  return out;
}

}  // namespace

TEST(Fast, test_cross_entropy_values_dtypes_and_devices) {
  const Shape shape{2, 3, 7};
  const std::vector<int> targets = {0, 6, 3, 2, 5, 1};
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    for (Dtype t : {float32, float16, bfloat16}) {
      for (Dtype it : {int32, uint8, int64}) {
        std::string c = std::string(dtype_name(t)) + " targets " + dtype_name(it);
        auto lv = harness::random_values(shape_size(shape), t, -8, 8, 61);
        array logits = harness::from_doubles(lv, shape, t);
        array tg = astype(array(targets.begin(), {2, 3}, int32), it);
        array y = fast::cross_entropy(logits, tg);
        EXPECT_EQ(y.dtype(), float32) << c;
        EXPECT_EQ(y.shape(), (Shape{2, 3})) << c;
        // The reduction runs in float32 whatever the logits' dtype.
        harness::expect_values(y, ref_cross_entropy(lv, targets, 7), c, 2e-5, 2e-5);
      }
    }
    // A transposed view, and logits far from zero.
    auto lv = harness::random_values(12, float32, 990, 1010, 62);
    array logits = transpose(harness::from_doubles(lv, {4, 3}, float32));
    Values rows;
    for (int r = 0; r < 3; ++r) {
      for (int j = 0; j < 4; ++j) rows.push_back(lv[j * 3 + r]);
    }
    harness::expect_values(fast::cross_entropy(logits, array({3, 0, 1}, {3}, int32)),
                           ref_cross_entropy(rows, {3, 0, 1}, 4), "view", 1e-5, 1e-3);
  }
}

TEST(Fast, test_cross_entropy_gradient_is_softmax_minus_one_hot) {
  grad_check::on_each_device([] {
    array l = random_f64({3, 5}, 63);
    array tg = array({4, 0, 2}, {3}, int32);
    array g = grad([&](const array& a) { return sum(fast::cross_entropy(a, tg)); })(l);
    auto lv = values(l), gv = values(g);
    const std::vector<int> targets = {4, 0, 2};
    for (int r = 0; r < 3; ++r) {
      double m = *std::max_element(lv.begin() + r * 5, lv.begin() + r * 5 + 5), s = 0;
      for (int j = 0; j < 5; ++j) s += std::exp(lv[r * 5 + j] - m);
      for (int j = 0; j < 5; ++j) {
        double want = std::exp(lv[r * 5 + j] - m) / s - (j == targets[r] ? 1.0 : 0.0);
        EXPECT_NEAR(gv[r * 5 + j], want, 1e-6) << r << "," << j;
      }
    }
    // float32 results: a wide step against rounding, a loose tolerance.
    check_derivatives("cross_entropy", [&](const std::vector<array>& a) {
      return std::vector{fast::cross_entropy(a[0], tg)};
    }, {l}, 2e-3, 1e-2);
  });
}

TEST(Fast, test_cross_entropy_vmap_against_a_loop) {
  for (Device dev : harness::devices()) {
    StreamContext ctx(dev);
    array l = grad_check::integers_f64({4, 3, 6}, 64);
    array tg = array({5, 0, 1, 2, 3, 4, 0, 0, 5, 1, 1, 2}, {4, 3}, int32);
    check_vmap("cross_entropy", [](const std::vector<array>& a) {
      return std::vector{fast::cross_entropy(a[0], a[1])};
    }, {l, tg}, {0, 0}, 4);
    check_vmap("cross_entropy batch axis 1", [](const std::vector<array>& a) {
      return std::vector{fast::cross_entropy(a[0], a[1])};
    }, {moveaxis(l, 0, 1), transpose(tg)}, {1, 1}, 4);
  }
}

TEST(Fast, test_cross_entropy_bad_arguments_name_the_op_and_values) {
  array l = zeros({3, 5});
  EXPECT_THROW(fast::cross_entropy(l, zeros({3})), std::invalid_argument);
  EXPECT_THROW(fast::cross_entropy(l, zeros({3}, bool_)), std::invalid_argument);
  EXPECT_THROW(fast::cross_entropy(l, zeros({2}, int32)), std::invalid_argument);
  EXPECT_THROW(fast::cross_entropy(l, zeros({3, 1}, int32)), std::invalid_argument);
  EXPECT_THROW(fast::cross_entropy(array(1.0f), array(0)), std::invalid_argument);
  EXPECT_THROW(fast::cross_entropy(zeros({3, 5}, int32), zeros({3}, int32)),
               std::invalid_argument);
  EXPECT_THROW(fast::cross_entropy(zeros({3, 0}), zeros({3}, int32)), std::invalid_argument);
  EXPECT_EQ(fast::cross_entropy(zeros({5}), array(2)).shape(), Shape{});
  try {
    fast::cross_entropy(l, zeros({4}, int32));
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[cross_entropy]"), std::string::npos) << m;
    EXPECT_NE(m.find("(4,)"), std::string::npos) << m;
    EXPECT_NE(m.find("(3,5)"), std::string::npos) << m;
  }
}

// Note [Fused pairs] (core/grouped.h): an Add and the norm of its sum, the
// rotations of queries and keys, and the two windows of a KV cache, evaluated
// together (one task, one launch on the GPU), equal the same nodes evaluated
// one by one, bit for bit; and the pairs whose kernels do not apply (a
// broadcast addend, a cache that is still referenced) too.
TEST(Fast, test_fused_pairs_equal_their_members_evaluated_alone) {
  auto same = [](const array& got, const array& want, const std::string& c) {
    ASSERT_EQ(got.shape(), want.shape()) << c;
    ASSERT_EQ(got.dtype(), want.dtype()) << c;
    EXPECT_EQ(harness::to_doubles(got), harness::to_doubles(want)) << c;
  };
  for (auto dev : harness::devices()) {
    StreamContext ctx(dev);
    const std::string on = dev == Device::cpu ? "cpu " : "gpu ";
    for (Dtype t : kernel_dtypes()) {
      for (const Shape& shape : std::vector<Shape>{{1, 1, 2048}, {3, 100}, {5, 64}}) {
        const int d = shape.back();
        const std::string c = on + dname(t) + " " + shape_str(shape);
        array a = input(shape, t, 1).a, b = input(shape, t, 2).a, w = input({d}, t, 3).a;
        array bias = input({d}, t, 4).a, row = input({d}, t, 5).a;
        eval(a, b, w, bias, row);
        using Norm = std::function<array(const array&)>;
        const std::vector<std::pair<std::string, Norm>> norms{
            {"rms_norm", [&](const array& h) { return fast::rms_norm(h, w, 1e-5f); }},
            {"rms_norm no weight", [&](const array& h) { return fast::rms_norm(h, std::nullopt, 1e-4f); }},
            {"layer_norm", [&](const array& h) { return fast::layer_norm(h, w, bias, 1e-5f); }}};
        for (const auto& [name, norm] : norms) {
          for (bool broadcast : {false, true}) {
            const array& addend = broadcast ? row : b;
            array h = add(a, addend), y = norm(h);
            eval(h, y);  // one task: the sum and its norm
            array h1 = add(a, addend);
            eval(h1);
            array y1 = norm(h1);
            same(h, h1, c + " " + name + " sum");
            same(y, y1, c + " " + name + (broadcast ? " of a broadcast sum" : ""));
          }
        }
      }
      for (int T : {1, 7}) {
        const std::string c = on + dname(t) + " T " + std::to_string(T);
        // Queries of 8 heads and keys of 2, (B, T, heads, 64) seen as (B, heads, T, 64).
        array q0 = input({2, T, 8, 64}, t, 6).a, k0 = input({2, T, 2, 64}, t, 7).a;
        array freqs = exp(linspace(0.0, 4.0, 16));
        eval(q0, k0, freqs);
        for (bool traditional : {false, true}) {
          auto rotate = [&](const array& x, int dims) {
            return fast::rope(transpose(x, {0, 2, 1, 3}), dims, traditional, 10000.f, 1.f, 5);
          };
          array q = rotate(q0, 64), k = rotate(k0, 64);
          eval(q, k);
          array q1 = rotate(q0, 64);
          eval(q1);
          array k1 = rotate(k0, 64);
          same(q, q1, c + " rope q");
          same(k, k1, c + " rope k");
          // Part of each head rotated, angles from freqs, offsets per batch element.
          array off = array({3, 9}, int32);
          auto partial = [&](const array& x) {
            return fast::rope(transpose(x, {0, 2, 1, 3}), 32, traditional, std::nullopt, 0.5f,
                              off, freqs);
          };
          array qp = partial(q0), kp = partial(k0);
          eval(qp, kp);
          array qp1 = partial(q0);
          eval(qp1);
          same(qp, qp1, c + " partial rope q");
          same(kp, partial(k0), c + " partial rope k");
        }
        // The keys and values of a cache of 16 positions written at 4..4+T.
        const Shape cache{2, 2, 16, 64};
        array kn = input({2, 2, T, 64}, t, 8).a, vn = transpose(input({2, T, 2, 64}, t, 9).a,
                                                                {0, 2, 1, 3});
        array k_init = input(cache, t, 10).a, v_init = input(cache, t, 11).a;
        eval(kn, vn, k_init, v_init);
        const Shape start{0, 0, 4, 0}, stop{2, 2, 4 + T, 64};
        for (bool held : {false, true}) {
          // Not held: each cache is a copy made in the same graph, written in place.
          array kc = held ? k_init : copy(k_init), vc = held ? v_init : copy(v_init);
          array ku = slice_update(kc, kn, start, stop), vu = slice_update(vc, vn, start, stop);
          if (!held) kc = vc = array(0.f);
          eval(ku, vu);
          same(ku, slice_update(k_init, kn, start, stop), c + " cache keys");
          same(vu, slice_update(v_init, vn, start, stop), c + " cache values");
          same(k_init, input(cache, t, 10).a, c + " the first cache is unchanged");
        }
      }
    }
  }
}
