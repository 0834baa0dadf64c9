// compile's fusion of elementwise chains: every op of the op table on every
// dtype and device, compiled against uncompiled (bit for bit on the CPU, whose
// fused interpreter runs the unfused kernels' functors; within the op's
// tolerance on the GPU, whose generated kernel may contract a multiply and an
// add), broadcast and strided inputs, scalar constants, what is fused (counted
// through detail::graph_primitives), and derivatives and vmap through a fused
// node against the uncompiled function.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>

#include "grad_check.h"
#include "harness.h"
#include "op_table.h"
#include "tessera/backend/common/fused_layout.h"
#include "tessera/ops/primitives/compiled.h"
#include "tessera/transforms/compile.h"
#if defined(TESSERA_CUDA) && TESSERA_CUDA
#include "tessera/backend/cuda/fused_source.h"
#include "tessera/backend/cuda/jit.h"
#endif

using namespace tessera;

namespace {

struct ModeGuard {
  CompileMode saved = compile_mode();
  ModeGuard() { enable_compile(); }
  ~ModeGuard() { set_compile_mode(saved); }
};

size_t count_fused(const std::vector<array>& outputs) {
  size_t n = 0;
  for (const auto& name : detail::graph_primitives(outputs)) n += name.rfind("Compiled(", 0) == 0;
  return n;
}

bool on_gpu() { return default_device() == Device::gpu; }

// got == want: bit for bit on the CPU (NaN equal to NaN), within tol on the GPU.
void expect_same(const array& got, const array& want, double tol, const std::string& ctx) {
  ASSERT_EQ(got.shape(), want.shape()) << ctx;
  ASSERT_EQ(got.dtype(), want.dtype()) << ctx;
  const double rtol = on_gpu() ? tol : 0;
  if (got.dtype() == complex64) {
    auto g = harness::to_complex(got), w = harness::to_complex(want);
    int failures = 0;
    for (size_t i = 0; i < g.size() && failures < 5; ++i) {
      bool nan = std::isnan(w[i].real()) || std::isnan(w[i].imag());
      bool ok = nan ? (std::isnan(g[i].real()) || std::isnan(g[i].imag()))
                    : (g[i] == w[i] || std::abs(g[i] - w[i]) <= rtol * (1 + std::abs(w[i])));
      if (!ok) {
        ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", uncompiled " << w[i];
        ++failures;
      }
    }
    return;
  }
  auto g = harness::to_doubles(got), w = harness::to_doubles(want);
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    bool ok = (std::isnan(w[i]) && std::isnan(g[i])) || g[i] == w[i] ||
              std::abs(g[i] - w[i]) <= rtol * (1 + std::abs(w[i]));
    if (!ok) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", uncompiled " << w[i];
      ++failures;
    }
  }
}

array input_for(const op_table::Op& op, int k, Dtype t, const Shape& shape,
                harness::Layout layout, uint64_t seed) {
  const auto& d = op.domain[k];
  Dtype dt = op.input_dtype(k, t);
  size_t n = 1;
  for (auto e : shape) n *= e;
  if (dt == complex64) {
    auto re = harness::random_values(n, float32, op.complex_re.lo, op.complex_re.hi, seed);
    auto im = harness::random_values(n, float32, op.complex_im.lo, op.complex_im.hi, seed + 7);
    std::vector<std::complex<double>> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = {re[i], im[i]};
    if (layout == harness::Layout::broadcast) v = harness::rows_repeated(v, shape);
    return harness::with_layout(v, shape, dt, layout);
  }
  auto v = harness::random_values(n, dt, d.lo, d.hi, seed);
  if (layout == harness::Layout::broadcast) v = harness::rows_repeated(v, shape);
  return harness::with_layout(v, shape, dt, layout);
}

// stop_gradient's primitive is not fused: it only cuts the derivative.
bool unfusable(const std::string& name) { return name == "stop_gradient"; }

}  // namespace

// Each op between fused identities (maximum(x, x) is x for every dtype), so
// that it runs inside a fused program, in every layout of its inputs. On the
// GPU, where each new program and layout costs an NVRTC compile, on four
// dtypes and two layouts (GeneratedSourceOfEveryOpCompiles compiles every
// dtype's program).
TEST(CompileFusion, EveryOpAndDtypeMatchesUncompiled) {
  ModeGuard guard;
  harness::on_each_device([&] {
    const bool gpu = on_gpu();
    const std::vector<Dtype> gpu_dtypes{float32, float16, int32, bool_};
    const std::vector<Shape> shapes =
        gpu ? std::vector<Shape>{{37, 129}} : std::vector<Shape>{{3, 5}, {2, 3, 4}, {37, 129}};
    for (const auto& op : op_table::ops()) {
      VecFn f = [&op](const std::vector<array>& x) {
        std::vector<array> y;
        for (const auto& xi : x) y.push_back(maximum(xi, xi));
        array r = op.fn(y);
        return std::vector<array>{maximum(r, r)};
      };
      VecFn cf = compile(f);
      for (Dtype t : op.dtypes) {
        if (gpu && std::find(gpu_dtypes.begin(), gpu_dtypes.end(), t) == gpu_dtypes.end()) {
          continue;
        }
        for (auto layout : op.layouts) {
          if (gpu && layout != harness::Layout::contiguous && layout != harness::Layout::transposed) {
            continue;
          }
          for (const Shape& shape : shapes) {
            std::string ctx = op.name + " " + dtype_name(t) + " " + harness::layout_name(layout) +
                              " " + std::to_string(shape.size()) + "-d";
            std::vector<array> in;
            for (int k = 0; k < op.arity(); ++k) {
              in.push_back(input_for(op, k, t, shape, layout, 11 * k + 3));
            }
            array want = f(in)[0];
            array got = cf(in)[0];
            if (!unfusable(op.name)) EXPECT_GE(count_fused({got}), 1u) << ctx;
            expect_same(got, want, op.tol(want.dtype()) + 1e-6, ctx);
          }
        }
      }
    }
  });
}

TEST(CompileFusion, AChainIsOneNode) {
  ModeGuard guard;
  harness::on_each_device([] {
    enable_compile();  // the previous device's pass ended in no_fuse
    auto f = [](const std::vector<array>& x) {
      array h = tanh(x[0] * x[1] + 1.0f) * 0.5f;
      return std::vector<array>{where(h > 0.1f, h, -h) - exp(x[1])};
    };
    array a = astype(grad_check::random_f64({64, 33}, 1), float32);
    array b = astype(grad_check::random_f64({64, 33}, 2), float32);
    eval({a, b});
    VecFn cf = compile(f);
    eval(cf({a, b}));  // evaluates the constants the trace recorded (the scalars)
    auto got = cf({a, b});
    EXPECT_EQ(detail::graph_primitives(got).size(), 1u);
    EXPECT_EQ(count_fused(got), 1u);
    expect_same(got[0], f({a, b})[0], 2e-6, "chain");

    // No fusion in the no_fuse mode: the same values from one node per op.
    set_compile_mode(CompileMode::no_fuse);
    auto plain = compile(f)({a, b});
    EXPECT_EQ(count_fused(plain), 0u);
    EXPECT_GT(detail::graph_primitives(plain).size(), 5u);
    expect_same(got[0], plain[0], 2e-6, "no_fuse");
  });
}

TEST(CompileFusion, BroadcastAndStridedInputs) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto f = [](const std::vector<array>& x) {
      return std::vector<array>{sqrt(abs(x[0] * x[1] - x[2])) + x[3] * 2.0f};
    };
    array a = astype(grad_check::random_f64({5, 1, 7}, 1), float32);   // broadcast middle
    array b = astype(grad_check::random_f64({3, 1}, 2), float32);       // broadcast rows
    array c = transpose(astype(grad_check::random_f64({7, 3, 5}, 3), float32));  // (5, 3, 7)
    array wide = astype(grad_check::random_f64({5, 3, 14}, 4), float32);
    array d = slice(wide, {0, 0, 1}, {5, 3, 14}, {1, 1, 2});            // every other column
    std::vector<array> in{a, b, c, d};
    auto got = compile(f)(in);
    EXPECT_EQ(count_fused(got), 1u);
    ASSERT_EQ(got[0].shape(), (Shape{5, 3, 7}));
    // Reference written out element by element.
    auto va = grad_check::values(a), vb = grad_check::values(b);
    auto vc = grad_check::values(c), vd = grad_check::values(d);
    std::vector<double> want;
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 7; ++k) {
          float x = float(va[i * 7 + k]) * float(vb[j]) - float(vc[(i * 3 + j) * 7 + k]);
          want.push_back(std::sqrt(std::fabs(x)) + float(vd[(i * 3 + j) * 7 + k]) * 2.0f);
        }
      }
    }
    harness::expect_values(got[0], want, "broadcast and strided", 1e-6, 1e-6);
  });
}

// A transposed input of 18 dimensions that no two merge: the strided reads
// walk every dimension.
TEST(CompileFusion, ManyDimensions) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto f = [](const std::vector<array>& x) {
      return std::vector<array>{sin(x[0]) * 2.0f + x[1]};
    };
    Shape shape(18, 2);
    array a = transpose(reshape(astype(arange(1 << 18), float32), shape));
    array b = astype(grad_check::random_f64({2}, 3), float32);
    eval({a, b});
    auto got = compile(f)({a, b});
    EXPECT_EQ(count_fused(got), 1u);
    // The unfused GPU kernels take at most 8 dimensions that do not merge:
    // there the reference is the CPU's.
    array want = [&] {
      StreamContext cpu(Device::cpu);
      return f({a, b})[0];
    }();
    expect_same(got[0], want, 2e-6, "18 dimensions");
  });
}

TEST(CompileFusion, CastsAndScalarConstants) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto f = [](const std::vector<array>& x) {
      array y = astype(x[0], float32) * 0.25f + astype(x[1], float32);
      return std::vector<array>{astype(where(y > 1.0f, y, y * y), float16)};
    };
    array i = array({-4, 3, 9, 12, 0, 7}, {2, 3}, int32);
    array u = array({1, 0, 1, 1, 0, 0}, {2, 3}, uint8);
    auto got = compile(f)({i, u});
    EXPECT_EQ(count_fused(got), 1u);
    EXPECT_EQ(got[0].dtype(), float16);
    std::vector<double> want;
    std::vector<int> vi{-4, 3, 9, 12, 0, 7}, vu{1, 0, 1, 1, 0, 0};
    for (int k = 0; k < 6; ++k) {
      float y = vi[k] * 0.25f + vu[k];
      want.push_back(float(float16_t(y > 1 ? y : y * y)));
    }
    harness::expect_values(got[0], want, "casts", 0, 0);
  });
}

// A value needed outside the chain is computed once and read by the fused rest.
TEST(CompileFusion, IntermediatesUsedOutsideStayOutputs) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto f = [](const std::vector<array>& x) {
      array e = exp(x[0]);
      array y = (e * 2.0f + 1.0f) / (e + 3.0f);
      return std::vector<array>{y, sum(e)};
    };
    array a = astype(grad_check::random_f64({300}, 5), float32);
    auto got = compile(f)({a});
    auto want = f({a});
    EXPECT_EQ(count_fused(got), 1u);
    expect_same(got[0], want[0], 2e-6, "fused output");
    expect_same(got[1], want[1], 2e-6, "reduced intermediate");
  });
}

// Outputs of the function that only the chain reads join it as outputs of the
// one fused node: an Adam step writes the parameter and both moments in one
// pass. An output also read outside the chain stays a node of its own.
TEST(CompileFusion, OutputsOfTheFunctionJoinTheChain) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto adam = [](const std::vector<array>& x) {
      const array &p = x[0], &g = x[1], &m = x[2], &v = x[3], &lr = x[4];
      array m1 = 0.9f * m + 0.1f * g;
      array v1 = 0.999f * v + 0.001f * square(g);
      array p1 = p - lr * m1 / (sqrt(v1) + 1e-8f);
      return std::vector<array>{p1, m1, v1};
    };
    const int n = (1 << 16) + 5;
    std::vector<array> in;
    for (int k = 0; k < 4; ++k) in.push_back(astype(grad_check::random_f64({n}, 20 + k), float32));
    in[3] = abs(in[3]);
    in.push_back(array(0.01f));
    eval(in);
    VecFn cadam = compile(adam);
    eval(cadam(in));  // evaluates the constants the trace recorded (the scalars)
    auto got = cadam(in);
    auto want = adam(in);
    EXPECT_EQ(detail::graph_primitives(got).size(), 1u);
    EXPECT_EQ(count_fused(got), 1u);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].primitive_ptr(), got[1].primitive_ptr());
    EXPECT_EQ(got[1].primitive_ptr(), got[2].primitive_ptr());
    expect_same(got[0], want[0], 2e-6, "parameter");
    expect_same(got[1], want[1], 2e-6, "first moment");
    expect_same(got[2], want[2], 2e-6, "second moment");

    // The same outputs in another order, one of them twice.
    auto reorder = [&adam](const std::vector<array>& x) {
      auto r = adam(x);
      return std::vector<array>{r[2], r[0], r[2]};
    };
    VecFn creorder = compile(reorder);
    eval(creorder(in));
    auto got2 = creorder(in);
    EXPECT_EQ(count_fused(got2), 1u);
    expect_same(got2[0], want[2], 2e-6, "reordered v");
    expect_same(got2[1], want[0], 2e-6, "reordered p");
    expect_same(got2[2], want[2], 2e-6, "repeated v");

    // m1 read outside the chain (by a sum): it is computed by a node of its
    // own, the rest fused.
    auto outside = [&adam](const std::vector<array>& x) {
      auto r = adam(x);
      return std::vector<array>{r[0], r[1], r[2], sum(r[1])};
    };
    auto got3 = compile(outside)(in);
    expect_same(got3[0], want[0], 2e-6, "p beside a read of m");
    expect_same(got3[3], sum(want[1]), 1e-5, "the sum of m");

    // Derivatives and vmap through the node of three outputs.
    std::vector<array> small;
    for (int k = 0; k < 4; ++k) small.push_back(grad_check::random_f64({5}, 30 + k, 0.5, 2));
    small.push_back(array(0.1));
    auto loss = [](VecFn f) {
      return [f](const std::vector<array>& x) {
        auto r = f(x);
        return sum(r[0]) + 2.0 * sum(r[1] * r[1]) - sum(r[2]);
      };
    };
    auto g = grad(loss(cadam), {0, 1, 2, 3, 4})(small);
    auto gw = grad(loss(adam), {0, 1, 2, 3, 4})(small);
    for (int k = 0; k < 5; ++k) {
      harness::expect_values(g[k], grad_check::values(gw[k]), "grad " + std::to_string(k), 1e-12,
                             1e-12);
    }
    grad_check::check_derivatives("compiled adam", cadam, small);
    std::vector<array> rows;
    for (int k = 0; k < 4; ++k) rows.push_back(grad_check::random_f64({3, 5}, 40 + k, 0.5, 2));
    rows.push_back(array(0.1));
    auto batched = vmap(cadam, {0, 0, 0, 0, -1}, {0, 0, 0})(rows);
    auto plain = adam(rows);
    for (int k = 0; k < 3; ++k) {
      harness::expect_values(batched[k], grad_check::values(plain[k]), "vmap " + std::to_string(k),
                             1e-12, 1e-12);
    }
  });
}

// Chains of one shape whose inputs are ready at an earlier chain's end join
// its node (siblings); a chain that reads that node's result cannot.
TEST(CompileFusion, SiblingChainsShareANode) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto f = [](const std::vector<array>& x) {
      array a = exp(x[0]) * 2.0f + x[1];         // read by a sum and by c: a node's root
      array b = sin(x[1]) * 3.0f - x[0];         // ready where a is: joins a's node
      array c = (a * a + 1.0f) * cos(x[0]);      // reads a: a node of its own
      return std::vector<array>{sum(a), b, c};
    };
    array x = astype(grad_check::random_f64({33, 17}, 50), float32);
    array y = astype(grad_check::random_f64({33, 17}, 51), float32);
    eval({x, y});
    VecFn cf = compile(f);
    eval(cf({x, y}));
    auto got = cf({x, y});
    auto want = f({x, y});
    EXPECT_EQ(count_fused(got), 2u);
    EXPECT_EQ(got[1].primitive_ptr(), got[0].inputs()[0].primitive_ptr());
    expect_same(got[0], want[0], 1e-5, "sum of a");
    expect_same(got[1], want[1], 2e-6, "b");
    expect_same(got[2], want[2], 2e-6, "c");
  });
}

// Many blocks on several threads, with a ragged end.
TEST(CompileFusion, LargeArrays) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto f = [](const std::vector<array>& x) {
      array y = x[0];
      for (int k = 0; k < 5; ++k) y = sin(y) * 1.5f + x[1];
      return std::vector<array>{y};
    };
    const int n = (1 << 19) + 123;
    array a = astype(grad_check::random_f64({n}, 6), float32);
    array b = astype(grad_check::random_f64({1}, 7), float32);
    auto got = compile(f)({a, b});
    EXPECT_EQ(count_fused(got), 1u);
    expect_same(got[0], f({a, b})[0], 1e-5, "large");
  });
}

TEST(CompileFusion, DerivativesAndVmapThroughAFusedNode) {
  ModeGuard guard;
  harness::on_each_device([] {
    auto gelu = [](const std::vector<array>& x) {
      const array& v = x[0];
      array inner = 0.7978845608f * (v + 0.044715f * v * v * v);
      return std::vector<array>{0.5f * v * (1.0f + tanh(inner)) * x[1]};
    };
    VecFn cgelu = compile(gelu);
    array x = grad_check::random_f64({4, 6}, 8, -2, 2);
    array w = grad_check::random_f64({6}, 9);
    EXPECT_EQ(count_fused(cgelu({x, w})), 1u);
    auto loss = [](VecFn f) {
      return [f](const std::vector<array>& in) { return sum(f(in)[0]); };
    };
    auto g = grad(loss(cgelu), {0, 1})({x, w});
    auto want = grad(loss(gelu), {0, 1})({x, w});
    harness::expect_values(g[0], grad_check::values(want[0]), "grad x", 1e-12, 1e-12);
    harness::expect_values(g[1], grad_check::values(want[1]), "grad w", 1e-12, 1e-12);

    // The derivatives against finite differences, and vmap against a loop.
    grad_check::check_derivatives("compiled gelu", cgelu, {x, w});
    auto [out, tangent] = jvp(cgelu, {x, w}, {ones_like(x), zeros_like(w)});
    auto [out2, tangent2] = jvp(gelu, {x, w}, {ones_like(x), zeros_like(w)});
    harness::expect_values(tangent[0], grad_check::values(tangent2[0]), "jvp", 1e-12, 1e-12);
    auto batched = vmap(cgelu, {0, -1}, {0})({x, w});
    harness::expect_values(batched[0], grad_check::values(gelu({x, w})[0]), "vmap", 1e-12,
                           1e-12);
  });
}

#if defined(TESSERA_CUDA) && TESSERA_CUDA
// NVRTC compiles the generated kernel of every op on every dtype the GPU
// fuses (no GPU needed): the functors' text, the prelude that stands in for
// the headers, and the steps' dtypes agree (the kernels assert them).
TEST(CompileFusion, GeneratedSourceOfEveryOpCompiles) {
  ModeGuard guard;
  StreamContext cpu(Device::cpu);
  std::string source = gpu::jit_header();
  int kernels = 0;
  for (const auto& op : op_table::ops()) {
    VecFn f = [&op](const std::vector<array>& x) {
      std::vector<array> y;
      for (const auto& xi : x) y.push_back(maximum(xi, xi));
      array r = op.fn(y);
      return std::vector<array>{maximum(r, r)};
    };
    VecFn cf = compile(f);
    for (Dtype t : op.dtypes) {
      if (t == complex64) continue;
      std::vector<array> in;
      for (int k = 0; k < op.arity(); ++k) {
        in.push_back(input_for(op, k, t, {3, 5}, harness::Layout::contiguous, k + 1));
      }
      for (const array& out : cf(in)) {
        auto* c = dynamic_cast<Compiled*>(&out.primitive());
        if (!c) continue;
        std::vector<Dtype> dtypes;
        for (const auto& x : out.inputs()) dtypes.push_back(x.dtype());
        FusedLayout layout = fused_layout(out.shape(), out.inputs());
        source += gpu::fused_kernel(c->program(), dtypes, layout, "k" + std::to_string(kernels++));
      }
    }
  }
  // A program of three outputs (an Adam step).
  {
    auto adam = [](const std::vector<array>& x) {
      array m1 = 0.9f * x[2] + 0.1f * x[1];
      array v1 = 0.999f * x[3] + 0.001f * square(x[1]);
      return std::vector<array>{x[0] - x[4] * m1 / (sqrt(v1) + 1e-8f), m1, v1};
    };
    std::vector<array> in;
    for (int k = 0; k < 4; ++k) in.push_back(zeros({7}, k == 0 ? float32 : bfloat16));
    in.push_back(array(0.1f));
    auto out = compile(adam)(in);
    auto* c = dynamic_cast<Compiled*>(&out[0].primitive());
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->program().output_registers().size(), 3u);
    std::vector<Dtype> dtypes;
    for (const auto& x : out[0].inputs()) dtypes.push_back(x.dtype());
    FusedLayout layout = fused_layout(out[0].shape(), out[0].inputs());
    source += gpu::fused_kernel(c->program(), dtypes, layout, "adam");
  }
  EXPECT_GT(kernels, 500);
  int arch = is_available(Device::gpu) ? -1 : 90;
  EXPECT_NO_THROW(gpu::jit::compile(source, arch > 0 ? arch : gpu::jit::device_arch(0)));
}
#endif
