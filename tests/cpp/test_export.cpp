// export_function / import_function / exporter / export_to_dot: imported
// functions against the functions themselves and hand-written references, on
// every device, for every family of primitives (the elementwise ones from their
// table); several traces, shapeless traces, keyword inputs, metadata, the
// callback, and the errors (bad, truncated and newer files, wrong signatures,
// primitives that cannot be exported).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "grad_check.h"
#include "harness.h"
#include "tessera/io/export.h"
#include "tessera/ops/elementwise_table.h"
#include "tessera/ops/primitives/fast.h"

using namespace tessera;
using grad_check::random_f64;
using grad_check::values;

namespace {

using Fn = std::function<std::vector<array>(const Args&)>;

// A file name under the test's temporary directory.
std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + "tessera_export_" + name + ".mlxfn";
}

bool exists(const std::string& path) { return std::ifstream(path).good(); }

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

array random_f32(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  return astype(random_f64(shape, seed, lo, hi), float32);
}

// got equals want: shape, dtype and every element (NaNs equal).
void expect_same(const array& got, const array& want, const std::string& ctx) {
  ASSERT_EQ(got.shape(), want.shape()) << ctx;
  ASSERT_EQ(got.dtype(), want.dtype()) << ctx;
  EXPECT_TRUE(array_equal(got, want, /*equal_nan=*/true).item<bool>()) << ctx;
}

// fun exported on `example`, imported, and called on `inputs`: the same as fun
// itself (the imported graph holds the same primitives, so the same bits).
std::vector<array> expect_round_trip(const std::string& name, const Fn& fun, const Args& example,
                                     const Args& inputs) {
  const std::string path = temp_file(name);
  export_function(path, fun, example);
  ImportedFunction imported = import_function(path);
  std::vector<array> got = imported(inputs);
  std::vector<array> want = fun(inputs);
  EXPECT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    expect_same(got[i], want[i], name + " output " + std::to_string(i));
  }
  std::remove(path.c_str());
  return got;
}

}  // namespace

TEST(Export, ImportedArithmeticMatchesAReference) {
  harness::on_each_device([] {
    Fn fun = [](const Args& x) {
      return std::vector<array>{exp(x[0]) * x[1] + 2.0f, sum(x[0] * x[1], 1)};
    };
    array a = random_f32({2, 3}, 1), b = random_f32({2, 3}, 2);
    auto got = expect_round_trip("arithmetic", fun, {zeros({2, 3}), zeros({2, 3})}, {a, b});
    auto va = values(a), vb = values(b);
    std::vector<double> want0, want1(2, 0.0);
    for (size_t i = 0; i < va.size(); ++i) {
      want0.push_back(std::exp(va[i]) * vb[i] + 2.0);
      want1[i / 3] += va[i] * vb[i];
    }
    harness::expect_values(got[0], want0, "exp(a) * b + 2");
    harness::expect_values(got[1], want1, "sum(a * b, 1)");
  });
}

TEST(Export, FamiliesOfPrimitivesRoundTrip) {
  harness::on_each_device([] {
    array x = random_f32({4, 6}, 3), w = random_f32({6, 5}, 4);
    array sq = random_f32({3, 3}, 5) + 3.0f * eye(3);
    array idx = array({2, 0, 3, 1}, {4}, int32);
    std::vector<std::pair<std::string, Fn>> cases = {
        {"matmul",
         [](const Args& a) {
           return Args{matmul(a[0], a[1]), addmm(matmul(a[0], a[1]), a[0], a[1], 0.5f, 2.0f)};
         }},
        {"reductions",
         [](const Args& a) {
           return Args{sum(a[0], {0}),
                       mean(a[0], 1, true),
                       max(a[0]),
                       argmax(a[0], 1),
                       var(a[0], {1}, false, 1),
                       logsumexp(a[0], {1}),
                       prod(a[0], {0}),
                       all(greater(a[0], array(-2.0f)))};
         }},
        {"softmax and scans",
         [](const Args& a) {
           return Args{softmax(a[0], -1), cumsum(a[0], 1), cummax(a[0], 0, true),
                       logcumsumexp(a[0], 1)};
         }},
        {"shapes",
         [](const Args& a) {
           return Args{transpose(a[0]),
                       reshape(a[0], {2, 12}),
                       slice(a[0], {1, 0}, {4, 6}, {2, 3}),
                       concatenate({a[0], a[0] * 2.0f}, 0),
                       pad(a[0], {{1, 0}, {0, 2}}),
                       expand_dims(a[0], 0),
                       flatten(a[0]),
                       diagonal(a[0]),
                       trace(a[0]),
                       slice_update(a[0], ones({2, 2}), Shape{0, 0}, Shape{2, 2}),
                       tril(a[0], 1),
                       broadcast_to(sum(a[0], 0), {3, 6}),
                       astype(a[0], float16)};
         }},
        {"indexing",
         [idx](const Args& a) {
           array ix = astype(argsort(a[0], 1), int32);
           return Args{take(a[0], idx, 0), take_along_axis(a[0], ix, 1),
                       put_along_axis(a[0], ix, a[0] * 10.0f, 1),
                       scatter_add(a[0], idx, expand_dims(a[0], 1), 0),
                       slice(a[0], array({1}, int32), {0}, {2, 6})};
         }},
        {"sorting",
         [](const Args& a) {
           return Args{sort(a[0], 1), argsort(a[0], 0), partition(a[0], 2, 1),
                       argpartition(a[0], 1, 0), searchsorted(sort(flatten(a[0])), a[0])};
         }},
        {"elementwise with parameters",
         [](const Args& a) {
           return Args{round(a[0] * 100.0f, 1),
                       nan_to_num(log(a[0]), 0.5f, 7.0f, -7.0f),
                       isclose(a[0], a[0] + 1e-7f),
                       array_equal(a[0], a[0] * 1.0f, true),
                       divmod(a[0], array(0.3f))[0],
                       divmod(a[0], array(0.3f))[1],
                       where(greater(a[0], array(0.0f)), a[0], -a[0]),
                       stop_gradient(a[0])};
         }},
        {"fft",
         [](const Args& a) {
           return Args{fft::rfft(a[0]), fft::ifft(fft::fft(a[0], 1), 1)};
         }},
    };
    for (auto& [name, fun] : cases) {
      SCOPED_TRACE(name);
      expect_round_trip(name, fun, {x, w}, {x * 2.0f, w - 1.0f});
    }
    expect_round_trip("linalg",
                      [](const Args& a) {
                        auto [q, r] = linalg::qr(a[0]);
                        auto [eigenvalues, eigenvectors] =
                            linalg::eigh(matmul(a[0], transpose(a[0])));
                        return Args{linalg::inv(a[0]),
                                    linalg::solve(a[0], a[1]),
                                    q,
                                    r,
                                    eigenvalues,
                                    linalg::cholesky(matmul(a[0], transpose(a[0])))};
                      },
                      {sq, ones({3, 2})}, {sq * 2.0f, random_f32({3, 2}, 6)});
  });
}

TEST(Export, FastOpsAndConvolutionRoundTrip) {
  harness::on_each_device([] {
    array x = random_f32({2, 3, 8}, 7), w = random_f32({8}, 8), bias = random_f32({8}, 9);
    expect_round_trip("norms",
                      [](const Args& a) {
                        return Args{fast::rms_norm(a[0], a[1], 1e-5f),
                                    fast::layer_norm(a[0], a[1], a[2], 1e-5f),
                                    fast::layer_norm(a[0], std::nullopt, a[2], 1e-5f),
                                    fast::rms_norm(a[0], std::nullopt, 1e-5f)};
                      },
                      {x, w, bias}, {x * 3.0f, w + 1.0f, bias});
    array q = random_f32({1, 4, 5, 8}, 10), k = random_f32({1, 2, 5, 8}, 11);
    expect_round_trip(
        "rope and attention",
        [](const Args& a) {
          array r = fast::rope(a[0], 8, false, 10000.0f, 1.0f, 3);
          array t =
              fast::rope(a[0], 4, true, std::nullopt, 0.5f, array(2, int32), array({1.0f, 2.0f}));
          return Args{r, t, fast::scaled_dot_product_attention(a[0], a[1], a[1], 0.35f, "causal"),
                      fast::scaled_dot_product_attention(a[0], a[1], a[1], 0.35f, "array",
                                                         greater(a[2], array(0.0f)))};
        },
        {q, k, random_f32({5, 5}, 12)}, {q * 2.0f, k, random_f32({5, 5}, 13)});
    array image = random_f32({2, 7, 7, 3}, 14), kernel = random_f32({4, 3, 3, 3}, 15);
    expect_round_trip("convolution",
                      [](const Args& a) {
                        return Args{conv2d(a[0], a[1], {2, 1}, {1, 0}),
                                    conv1d(reshape(a[0], {2, 49, 3}), reshape(a[1], {4, 9, 3}))};
                      },
                      {image, kernel}, {image * 0.5f, kernel});
  });
}

TEST(Export, RemainingPrimitivesRoundTrip) {
  harness::on_each_device([] {
    array x = random_f32({4, 8}, 80), key = random::key(7);
    std::vector<std::pair<std::string, Fn>> cases = {
        {"views",
         [](const Args& a) {
           return Args{view(a[0], int32), as_strided(a[0], {3, 2}, {2, 1}, 1)};
         }},
        {"depends", [](const Args& a) { return depends({a[0] * 2.0f}, {a[0] + 1.0f}); }},
        {"masked and dynamic updates",
         [](const Args& a) {
           return Args{masked_scatter(a[0], greater(a[0], array(0.0f)), flatten(a[0]) * 3.0f),
                       slice_update(a[0], ones({2, 2}), array({1, 2}, int32), {0, 1})};
         }},
        {"made inside the function",
         [key](const Args& a) {
           return Args{a[0] * linspace(0.0, 1.0, 8), random::normal({4, 8}, float32, key) + a[0]};
         }},
        {"the vjp of sort",
         [](const Args& a) {
           auto f = [](const std::vector<array>& p) { return std::vector<array>{sort(p[0], 1)}; };
           return vjp(f, {a[0]}, {a[0] * a[0]}).second;
         }},
    };
    for (auto& [name, fun] : cases) {
      SCOPED_TRACE(name);
      expect_round_trip(name, fun, {x}, {x * 2.0f});
    }
    array w = random_f32({8, 64}, 81), v = random_f32({4, 64}, 82);
    expect_round_trip("quantized",
                      [](const Args& a) {
                        auto q = quantize(a[0], 64, 4);
                        return Args{q[0], dequantize(q[0], q[1], q[2], 64, 4),
                                    quantized_matmul(a[1], q[0], q[1], q[2], true, 64, 4)};
                      },
                      {w, v}, {w * 2.0f, v});
    array sq = random_f32({3, 3}, 83);
    expect_round_trip("factorizations",
                      [](const Args& a) {
                        Args out = linalg::svd(a[0]);
                        for (auto& f : linalg::lu(a[0])) out.push_back(f);
                        return out;
                      },
                      {sq}, {sq * 2.0f});
    if (default_device() == Device::cpu) {  // eig runs on the CPU only (as in MLX)
      expect_round_trip("eig",
                        [](const Args& a) {
                          auto [values, vectors] = linalg::eig(a[0]);
                          return Args{values, vectors};
                        },
                        {sq}, {sq * 2.0f});
    }
  });
}

// The fast primitives as nodes (a PrimitiveScope makes them where a fallback
// graph would do) and their vjp nodes: made again by their ops, outside the
// scope, the values agree.
TEST(Export, FastPrimitiveNodesAndTheirVjps) {
  harness::on_each_device([] {
    Fn grads = [](const Args& a) {
      auto loss = [](const std::vector<array>& p) {
        array h = fast::layer_norm(fast::rms_norm(p[0], p[3], 1e-5f), p[3], std::nullopt, 1e-5f);
        array o = fast::scaled_dot_product_attention(h, p[1], p[2], 0.5f, "array",
                                                     greater(p[4], array(0.0f)));
        return std::vector<array>{sum(o * o)};
      };
      auto [value, g] = value_and_grad(loss, std::vector<int>{0, 1, 2, 3})(a);
      g.push_back(fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.25f, "causal"));
      return g;
    };
    Args in = {random_f32({1, 4, 5, 8}, 90), random_f32({1, 2, 5, 8}, 91),
               random_f32({1, 2, 5, 8}, 92), random_f32({8}, 93), random_f32({5, 5}, 94)};
    const std::string path = temp_file("fast_nodes");
    std::set<std::string> names;
    {
      fast::PrimitiveScope nodes;
      export_function(
          [&](const ExportCallbackInput& item) {
            if (std::get<std::string>(item.at("type")) == "primitive") {
              names.insert(std::get<std::string>(item.at("name")));
            }
          },
          grads, in);
      export_function(path, grads, in);
    }
    for (const char* name :
         {"RMSNorm", "RMSNormVJP", "LayerNorm", "LayerNormVJP", "ScaledDotProductAttention"}) {
      EXPECT_TRUE(names.count(name)) << name;
    }
    Args other = in;
    other[0] = other[0] * 2.0f;
    auto got = import_function(path)(other);
    auto want = grads(other);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape());
      EXPECT_TRUE(allclose(got[i], want[i], 1e-4, 1e-5).item<bool>()) << "output " << i;
    }
    std::remove(path.c_str());
  });
}

// Attention's vjp node, which the GPU's backward kernel makes (and the CPU's
// vjp does not), made here as its rule makes it: it reads both outputs of the
// forward node, {o, lse}, and the cotangent of lse, or none where it is zero.
TEST(Export, AttentionVjpNodeRoundTrips) {
  for (bool with_d_lse : {true, false}) {
    Fn grads = [with_d_lse](const Args& a) {
      fast::PrimitiveScope nodes;
      array o = fast::scaled_dot_product_attention(a[0], a[1], a[2], 0.5f, "causal");
      auto attention = std::dynamic_pointer_cast<fast::Custom>(o.primitive_ptr());
      auto forward = attention->fallback();
      auto fallback = [forward](std::vector<array> in) {
        array d_lse = in.size() > 6 ? in[6] : zeros_like(in[4]);
        auto g = vjp(forward, {in[0], in[1], in[2]}, {in[5], d_lse}).second;
        return std::vector<array>{g[0], g[1], g[2]};
      };
      std::vector<array> outs = o.outputs();
      std::vector<array> in = {a[0], a[1], a[2], outs[0], outs[1], a[3]};
      if (with_d_lse) in.push_back(zeros_like(outs[1]));
      return array::make_arrays(
          {a[0].shape(), a[1].shape(), a[2].shape()}, {float32, float32, float32},
          std::make_shared<fast::ScaledDotProductAttentionVJP>(
              to_stream({}), fallback, 0.5f, fast::ScaledDotProductAttention::Mask::causal, false),
          in);
    };
    Args in = {random_f32({1, 2, 4, 8}, 95), random_f32({1, 2, 4, 8}, 96),
               random_f32({1, 2, 4, 8}, 97), random_f32({1, 2, 4, 8}, 98)};
    const std::string path = temp_file("attention_vjp");
    export_function(path, grads, in);
    Args other = in;
    other[3] = other[3] * 3.0f;
    auto got = import_function(path)(other);
    auto want = grads(other);
    ASSERT_EQ(got.size(), 3u);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), want[i].shape());
      EXPECT_TRUE(allclose(got[i], want[i], 1e-4, 1e-5).item<bool>())
          << "gradient " << i << (with_d_lse ? " with" : " without") << " d_lse";
    }
    std::remove(path.c_str());
  }
}

// The forward pass of a two-layer network whose weights are constants of the
// export, against the same pass written out by hand.
TEST(Export, ModuleForwardWithCapturedWeights) {
  harness::on_each_device([] {
    array w1 = random_f32({8, 4}, 20), b1 = random_f32({8}, 21), w2 = random_f32({3, 8}, 22);
    Fn forward = [=](const Args& x) {
      array h = maximum(addmm(b1, x[0], transpose(w1)), array(0.0f));
      return Args{softmax(matmul(h, transpose(w2)), -1)};
    };
    array x = random_f32({5, 4}, 23);
    auto got = expect_round_trip("module", forward, {zeros({5, 4})}, {x});
    auto vx = values(x), v1 = values(w1), vb = values(b1), v2 = values(w2);
    std::vector<double> want;
    for (int r = 0; r < 5; ++r) {
      double h[8], logits[3], total = 0;
      for (int j = 0; j < 8; ++j) {
        h[j] = vb[j];
        for (int i = 0; i < 4; ++i) h[j] += vx[r * 4 + i] * v1[j * 4 + i];
        h[j] = std::max(h[j], 0.0);
      }
      for (int c = 0; c < 3; ++c) {
        logits[c] = 0;
        for (int j = 0; j < 8; ++j) logits[c] += h[j] * v2[c * 8 + j];
        total += std::exp(logits[c]);
      }
      for (int c = 0; c < 3; ++c) want.push_back(std::exp(logits[c]) / total);
    }
    harness::expect_values(got[0], want, "softmax(relu(x w1^T + b1) w2^T)");
  });
}

// Every row of the elementwise tables, exported and imported, on inputs in
// the ops' domains; rows that refuse the dtype refuse it before any export.
TEST(Export, EveryElementwiseRowRoundTrips) {
  harness::on_each_device([] {
    std::vector<std::pair<std::string, Fn>> rows = {
#define TESSERA_UNARY_ROW(NAME, FN, RULE) {#NAME, [](const Args& a) { return Args{FN(a[0])}; }},
        TESSERA_UNARY_OPS(TESSERA_UNARY_ROW)
#undef TESSERA_UNARY_ROW
#define TESSERA_BINARY_ROW(NAME, FN, RULE) \
  {#NAME, [](const Args& a) { return Args{FN(a[0], a[1])}; }},
        TESSERA_BINARY_OPS(TESSERA_BINARY_ROW)
#undef TESSERA_BINARY_ROW
    };
    array x = random_f32({3, 4}, 30, 0.1, 0.9), y = random_f32({4}, 31, 0.1, 0.9);
    array i = array({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}, int32);
    array j = array({1, 2, 3, 1}, {4}, int32);
    for (auto& [name, fun] : rows) {
      SCOPED_TRACE(name);
      int exported = 0;
      for (const auto& [a, b] : {std::pair{x, y}, std::pair{i, j}}) {
        try {
          fun({a, b});
        } catch (const std::invalid_argument&) {
          continue;  // the op refuses the dtype
        }
        expect_round_trip(name, fun, {a, b}, {a * a, b});
        ++exported;
      }
      EXPECT_GT(exported, 0);
    }
  });
}

TEST(Export, KeywordInputsMatchByName) {
  ExportFn fun = [](const Args& args, const Kwargs& kwargs) {
    return std::vector<array>{args[0] * kwargs.at("scale") + kwargs.at("shift")};
  };
  const std::string path = temp_file("keywords");
  array x = random_f32({3}, 40);
  export_function(path, fun, {x}, {{"scale", ones({3})}, {"shift", zeros({3})}});
  ImportedFunction f = import_function(path);
  array scale = array({1.0f, 2.0f, 3.0f}), shift = array({10.0f, 20.0f, 30.0f});
  auto got = f({x}, {{"shift", shift}, {"scale", scale}});
  harness::expect_values(got[0], {values(x)[0] + 10, values(x)[1] * 2 + 20, values(x)[2] * 3 + 30},
                         "x * scale + shift");
  EXPECT_THROW(f({x}, {{"scale", scale}, {"offset", shift}}), std::invalid_argument);
  EXPECT_THROW(f({x, scale, shift}), std::invalid_argument);

  // Keyword inputs alone.
  std::function<std::vector<array>(const Kwargs&)> only = [](const Kwargs& k) {
    return std::vector<array>{k.at("a") - k.at("b")};
  };
  export_function(path, only, Kwargs{{"a", ones({2})}, {"b", ones({2})}});
  auto diff = import_function(path)(Kwargs{{"a", array({5.0f, 6.0f})}, {"b", array({1.0f, 1.0f})}});
  harness::expect_values(diff[0], {4, 5}, "a - b");
  std::remove(path.c_str());
}

TEST(Export, ExporterKeepsOneTracePerSignature) {
  const std::string path = temp_file("exporter");
  int traces = 0;
  Fn fun = [&](const Args& x) {
    ++traces;
    return Args{sum(x[0] * x[0])};
  };
  {
    FunctionExporter ex = exporter(path, fun, false, "three traces");
    ex({zeros({2})});
    ex({zeros({3})});
    ex({zeros({2, 2}, int32)});
    EXPECT_FALSE(exists(path)) << "the file appears only once closed";
  }  // closed by the destructor
  EXPECT_EQ(traces, 3);
  ImportedFunction f = import_function(path);
  EXPECT_EQ(f.metadata(), "three traces");
  harness::expect_values(f({array({1.0f, 2.0f})})[0], {5}, "trace of (2,)");
  harness::expect_values(f({array({1.0f, 2.0f, 3.0f})})[0], {14}, "trace of (3,)");
  array ints = array({1, 2, 3, 4}, {2, 2}, int32);
  expect_same(f({ints})[0], array(30, int32), "trace of (2,2) int32");
  EXPECT_EQ(traces, 3) << "importing and calling never runs fun";
  try {
    f({zeros({4})});
    ADD_FAILURE() << "no trace matches (4,)";
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("(4"), std::string::npos) << what;
    EXPECT_NE(what.find("(3"), std::string::npos) << what;
    EXPECT_NE(what.find("float32"), std::string::npos) << what;
  }
  EXPECT_THROW(f({zeros({2}, float16)}), std::invalid_argument);

  FunctionExporter closed = exporter(path, fun);
  closed.close();
  EXPECT_THROW(closed({zeros({2})}), std::runtime_error);
  EXPECT_THROW(import_function(path)({zeros({2})}), std::invalid_argument) << "no trace at all";
  std::remove(path.c_str());
}

// Constants that several traces read are written once.
TEST(Export, TracesShareTheirConstants) {
  array big = random_f32({256, 256}, 41);
  Fn fun = [big](const Args& x) { return Args{matmul(x[0], big)}; };
  const std::string one = temp_file("one_trace"), two = temp_file("two_traces");
  export_function(one, fun, {zeros({1, 256})});
  {
    auto ex = exporter(two, fun);
    ex({zeros({1, 256})});
    ex({zeros({2, 256})});
  }
  size_t bytes = big.nbytes();
  EXPECT_LT(read_all(two).size(), read_all(one).size() + bytes / 2);
  array x = random_f32({2, 256}, 42);
  expect_same(import_function(two)({x})[0], matmul(x, big), "second trace");
  std::remove(one.c_str());
  std::remove(two.c_str());
}

TEST(Export, ShapelessInfersShapesAgain) {
  harness::on_each_device([] {
    array w = random_f32({4, 3}, 50), bias = random_f32({3}, 51);
    Fn fun = [=](const Args& x) {
      array h = matmul(x[0], w) + bias;                               // a matmul, a broadcast bias
      array y = reshape(h * 2.0f, {-1, 3});                           // merges the leading axes
      array tail = slice(h, {0, 0, 1}, {h.shape(0), h.shape(1), 3});  // whole leading axes
      return Args{softmax(y, -1), sum(h, {-1}), exp(x[0]) - 1.0f, tail};
    };
    const std::string path = temp_file("shapeless");
    export_function(path, fun, {zeros({2, 5, 4})}, /*shapeless=*/true);
    ImportedFunction f = import_function(path);
    for (Shape shape : {Shape{2, 5, 4}, Shape{3, 7, 4}, Shape{1, 1, 4}}) {
      array x = random_f32(shape, 52);
      auto got = f({x});
      auto want = fun({x});
      for (size_t i = 0; i < got.size(); ++i) {
        expect_same(got[i], want[i], "output " + std::to_string(i) + " for " + shape_str(shape));
      }
    }
    EXPECT_THROW(f({zeros({2, 4})}), std::invalid_argument) << "another number of dimensions";
    EXPECT_THROW(f({zeros({2, 5, 4}, float16)}), std::invalid_argument) << "another dtype";

    // A slice cannot infer its shape: the call raises, naming it.
    Fn sliced = [](const Args& x) { return Args{slice(x[0], {1}, {3})}; };
    export_function(path, sliced, {zeros({5})}, true);
    ImportedFunction g = import_function(path);
    expect_same(g({arange(5.0f)})[0], array({1.0f, 2.0f}), "the traced shape");
    try {
      g({zeros({7})});
      ADD_FAILURE() << "a shapeless slice of another shape";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("Slice"), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  });
}

TEST(Export, CompiledAndCustomFunctionsExportTheirGraphs) {
  harness::on_each_device([] {
    VecFn compiled = compile(
        [](const std::vector<array>& x) { return std::vector<array>{exp(x[0]) * 2.0f + x[0]}; });
    VecFn custom = custom_function(
        [](const std::vector<array>& x) { return std::vector<array>{sin(x[0]) * x[0]}; });
    array x = random_f32({3, 3}, 60);
    expect_round_trip("compiled", [&](const Args& a) { return Args{compiled(a)[0] + 1.0f}; }, {x},
                      {x * 3.0f});
    expect_round_trip("custom_function", [&](const Args& a) { return custom(a); }, {x}, {x * 3.0f});
  });
}

// The gradient of a function with fused norms and attention: their vjp nodes
// are exported too.
TEST(Export, GradientsRoundTrip) {
  harness::on_each_device([] {
    Fn loss_grad = [](const Args& a) {
      auto loss = [](const std::vector<array>& p) {
        array h = fast::rms_norm(p[0], p[1], 1e-5f);
        array g = fast::layer_norm(h, p[1], std::nullopt, 1e-5f);
        array o = fast::scaled_dot_product_attention(g, g, g, 0.5f, "causal");
        return std::vector<array>{sum(o * o)};
      };
      return value_and_grad(loss, std::vector<int>{0, 1})(a).second;
    };
    array x = random_f32({1, 2, 4, 8}, 70), w = random_f32({8}, 71);
    expect_round_trip("gradients", loss_grad, {x, w}, {x * 2.0f, w});
  });
}

TEST(Export, MetadataRoundTrips) {
  const std::string path = temp_file("metadata");
  const std::string metadata = std::string("{\"layers\": 2}\0binary", 20);
  export_function(path, Fn([](const Args& x) { return Args{x[0] + 1.0f}; }), {zeros({1})}, false,
                  metadata);
  EXPECT_EQ(import_function(path).metadata(), metadata);
  export_function(path, Fn([](const Args& x) { return Args{x[0]}; }), {zeros({1})});
  EXPECT_EQ(import_function(path).metadata(), "");
  std::remove(path.c_str());
}

TEST(Export, BadFilesRaiseRuntimeErrors) {
  const std::string path = temp_file("bad");
  auto expect_error = [&](const std::string& contains, const std::string& ctx) {
    try {
      import_function(path);
      ADD_FAILURE() << ctx << ": no error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(contains), std::string::npos) << ctx << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("[import_function]", 0), 0u) << e.what();
    }
  };
  std::remove(path.c_str());
  expect_error("cannot open", "a missing file");
  write_all(path, "not an export at all");
  expect_error("bad magic", "garbage");
  write_all(path, std::string("\x06\0\0\0\0\0\0\0"
                              "0.32.4",
                              14));
  expect_error("MLX", "an MLX export");

  Fn fun = [](const Args& x) { return Args{exp(x[0]) + array({1.0f, 2.0f})}; };
  export_function(path, fun, {zeros({2})});
  const std::string good = read_all(path);
  for (size_t cut : {size_t{18}, size_t{30}, good.size() / 2, good.size() - 1}) {
    write_all(path, good.substr(0, cut));
    expect_error("truncated", "cut at " + std::to_string(cut));
  }
  std::string newer = good;
  newer[16] = 2;  // the format version after the 16 bytes of magic
  write_all(path, newer);
  expect_error("newer", "a newer format");
  write_all(path, good + "x");
  expect_error("corrupt", "bytes after the end");
  std::string unknown = good;
  auto at = unknown.find("Exp");
  unknown.replace(at, 3, "Zzz");
  write_all(path, unknown);
  expect_error("Zzz", "an unknown primitive");
  std::remove(path.c_str());
}

namespace {

// A primitive that export does not know.
class Opaque : public UnaryPrimitive {
 public:
  using UnaryPrimitive::UnaryPrimitive;
  void eval_cpu(const std::vector<array>& inputs, array& out) override {
    out.copy_shared_buffer(inputs[0]);
  }
  const char* name() const override { return "Opaque"; }
};

}  // namespace

TEST(Export, UnexportablePrimitivesAndFailedTracesLeaveNoFile) {
  const std::string path = temp_file("unexportable");
  std::remove(path.c_str());
  Fn opaque = [](const Args& x) {
    return Args{array(x[0].shape(), x[0].dtype(), std::make_shared<Opaque>(to_stream({})), {x[0]})};
  };
  try {
    export_function(path, opaque, {zeros({2})});
    ADD_FAILURE() << "Opaque was exported";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("Opaque"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(exists(path));
  Fn reads_values = [](const Args& x) { return Args{x[0] * sum(x[0]).item<float>()}; };
  EXPECT_THROW(export_function(path, reads_values, {zeros({2})}), std::invalid_argument);
  EXPECT_FALSE(exists(path));
  EXPECT_THROW(export_function("/nonexistent-dir/f.mlxfn", opaque, {zeros({2})}),
               std::runtime_error);
}

TEST(Export, CallbackSeesInputsConstantsAndNodes) {
  std::vector<ExportCallbackInput> items;
  ExportFn fun = [](const Args& a, const Kwargs& k) {
    return std::vector<array>{sum(a[0] * k.at("y") + array(2.0f), 0)};
  };
  export_function([&](const ExportCallbackInput& in) { items.push_back(in); }, fun, {zeros({2, 3})},
                  {{"y", zeros({2, 3})}});
  auto type_of = [](const ExportCallbackInput& in) { return std::get<std::string>(in.at("type")); };
  ASSERT_GE(items.size(), 5u);
  EXPECT_EQ(type_of(items[0]), "inputs");
  using Typed = std::vector<std::tuple<std::string, Shape, Dtype>>;
  const auto& inputs = std::get<Typed>(items[0].at("inputs"));
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(std::get<0>(inputs[0]), "A");
  EXPECT_EQ(std::get<1>(inputs[1]), (Shape{2, 3}));
  EXPECT_EQ(type_of(items[1]), "keyword_inputs");
  auto keywords =
      std::get<std::vector<std::pair<std::string, std::string>>>(items[1].at("keywords"));
  EXPECT_EQ(keywords, (std::vector<std::pair<std::string, std::string>>{{"y", "B"}}));
  EXPECT_EQ(type_of(items[2]), "outputs");
  EXPECT_EQ(std::get<1>(std::get<Typed>(items[2].at("outputs"))[0]), (Shape{3}));
  EXPECT_EQ(type_of(items[3]), "constants");
  const auto& constants =
      std::get<std::vector<std::pair<std::string, array>>>(items[3].at("constants"));
  ASSERT_EQ(constants.size(), 1u);
  EXPECT_EQ(constants[0].second.item<float>(), 2.0f);
  std::vector<std::string> names;
  for (size_t i = 4; i < items.size(); ++i) {
    EXPECT_EQ(type_of(items[i]), "primitive");
    names.push_back(std::get<std::string>(items[i].at("name")));
  }
  EXPECT_EQ(names.front(), "Multiply");
  EXPECT_EQ(names.back(), "Reduce");
  const auto& reduce_args = std::get<std::vector<ExportValue>>(items.back().at("arguments"));
  ASSERT_EQ(reduce_args.size(), 3u);  // type, axes, keepdims
  const auto& axes = std::get<std::vector<ExportValue>>(reduce_args[1].value);
  ASSERT_EQ(axes.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(axes[0].value), 0);
}

TEST(Export, DotNamesNodesAndEdges) {
  array x = array({1.0f, 2.0f}), y = array({3.0f, 4.0f});
  array z = exp(x) * y;
  array w = sum(z);
  NodeNamer namer;
  namer.set_name(x, "x");
  namer.set_name(z, "z");
  std::ostringstream os;
  export_to_dot(os, namer, {w});
  std::string dot = os.str();
  EXPECT_EQ(dot.rfind("digraph {", 0), 0u) << dot;
  for (const char* part : {"rank=source; \"x\"", "label =\"Exp\"", "label =\"Multiply\"",
                           "\"x\" -> n0", "n1 -> \"z\"", "\"z\" -> n2", "rank=sink"}) {
    EXPECT_NE(dot.find(part), std::string::npos) << part << " in\n" << dot;
  }
  std::ostringstream plain;
  export_to_dot(plain, {w});
  EXPECT_NE(plain.str().find("\"A\" -> n0"), std::string::npos) << plain.str();
}
