// The suites every elementwise op of op_table.h passes, on every device of
// harness::devices():
//   Values       every accepted dtype, every layout of every input (contiguous,
//                transposed, strided, broadcast), the swept shapes (0-d and
//                empty among them) and broadcast shapes, against the float64 or
//                complex<double> reference; on the GPU also against the CPU
//   Derivatives  jvp and vjp against finite differences in float64, exact zeros
//                of piecewise-constant ops and of integer and bool results, the
//                dtypes of 16-bit and float32 derivatives, complex64 derivatives;
//                on the GPU also against the CPU
//   Vmap         vmap against a loop over the batch, the batch axis in several
//                places and inputs left unmapped, in float64, int32 and bool
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "grad_check.h"
#include "harness.h"
#include "op_table.h"

using namespace tessera;
using harness::Layout;
using op_table::cd;
using op_table::Domain;
using op_table::Grad;
using op_table::Op;

namespace {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "gpu"; }

// ---- values -----------------------------------------------------------------

struct Shapes {
  std::vector<Shape> in;
  Shape out;
};

// Every input of each swept shape; with two or more inputs, also each input in
// turn of shape (3, 1), the next of (2, 1, 4) and the rest of (2, 3, 4).
std::vector<Shapes> shape_cases(int arity) {
  std::vector<Shapes> cases;
  for (const Shape& s : harness::sweep_shapes()) cases.push_back({std::vector<Shape>(arity, s), s});
  for (int r = 0; arity > 1 && r < arity; ++r) {
    std::vector<Shape> in(arity, Shape{2, 3, 4});
    in[r] = {3, 1};
    in[(r + 1) % arity] = {2, 1, 4};
    cases.push_back({in, {2, 3, 4}});
  }
  return cases;
}

// The layout that gives the same array: a 0-d array has one, and a
// transposed vector is the vector.
Layout distinct_layout(Layout l, const Shape& s) {
  if (s.empty() || (s.size() == 1 && l == Layout::transposed)) return Layout::contiguous;
  return l;
}

// n values of input k of op for dtype t.
std::vector<cd> draw(const Op& op, int k, Dtype t, size_t n, uint64_t seed) {
  std::vector<cd> v(n);
  const Domain& d = op.domain[k];
  if (t == complex64) {
    auto re = harness::random_values(n, float32, op.complex_re.lo, op.complex_re.hi, seed);
    auto im = harness::random_values(n, float32, op.complex_im.lo, op.complex_im.hi, seed + 1);
    for (size_t i = 0; i < n; ++i) v[i] = cd(re[i], im[i]);
  } else {
    auto re = harness::random_values(n, t, d.lo, d.hi, seed);
    for (size_t i = 0; i < n; ++i) v[i] = cd(re[i] + 0.0, 0);  // integers rounded to -0: 0
  }
  return v;
}

std::vector<double> real_parts(const std::vector<cd>& v) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = v[i].real();
  return r;
}

array make_input(const std::vector<cd>& v, const Shape& shape, Dtype t, Layout layout) {
  if (t == complex64) return harness::with_layout(v, shape, t, layout);
  return harness::with_layout(real_parts(v), shape, t, layout);
}

// The op on inputs of swept dtype t, shapes `sh` and the given layouts,
// against the reference on every device, and on the GPU against the CPU.
void check_case(const Op& op, Dtype t, const Shapes& sh, const std::vector<Layout>& layouts,
                uint64_t seed) {
  const int n = op.arity();
  std::vector<std::vector<cd>> v(n);
  for (int k = 0; k < n; ++k) {
    v[k] = draw(op, k, op.input_dtype(k, t), shape_size(sh.in[k]), seed + 2 * k);
  }
  // Equal pairs, where the inputs share a domain: ties for comparisons,
  // maximum, x - x, x / x.
  if (n > 1 && op.domain[0] == op.domain[1] && sh.in[0] == sh.in[1]) {
    for (size_t i = 1; i < v[1].size(); i += 3) v[1][i] = v[0][i];
  }
  for (int k = 0; k < n; ++k) {
    if (layouts[k] == Layout::broadcast) v[k] = harness::rows_repeated(v[k], sh.in[k]);
  }
  const size_t m = shape_size(sh.out);
  const Dtype out_t = harness::out_dtype(op.rule, t);
  std::vector<std::vector<cd>> at(n);
  for (int k = 0; k < n; ++k) at[k] = harness::broadcast_values(v[k], sh.in[k], sh.out);
  std::vector<double> want(m);
  std::vector<cd> want_c(m);
  std::vector<double> x(n);
  std::vector<cd> z(n);
  for (size_t i = 0; i < m; ++i) {
    for (int k = 0; k < n; ++k) z[k] = at[k][i], x[k] = at[k][i].real();
    if (t == complex64) {
      want_c[i] = op.cref(z);
    } else {
      want[i] = harness::wrap_int(op.ref(x, t), out_t);
    }
  }
  const double tol = t == complex64 ? op.tol.c64 : op.tol(out_t);

  std::ostringstream where;
  where << op.name << " " << t;
  for (int k = 0; k < n; ++k) {
    where << (k ? ", " : " ") << shape_str(sh.in[k]) << " " << harness::layout_name(layouts[k]);
  }
  const auto devices = harness::devices();
  std::vector<double> on_cpu;
  std::vector<cd> on_cpu_c;
  for (Device d : devices) {
    StreamContext on(d);
    std::string ctx = where.str() + " on the " + device_name(d);
    std::vector<array> in;
    for (int k = 0; k < n; ++k) {
      in.push_back(make_input(v[k], sh.in[k], op.input_dtype(k, t), layouts[k]));
    }
    array y = op.fn(in);
    ASSERT_EQ(y.dtype(), out_t) << ctx;
    ASSERT_EQ(y.shape(), sh.out) << ctx;
    if (t == complex64) {
      harness::expect_complex(y, want_c, ctx, tol);
    } else {
      harness::expect_values(y, want, ctx, tol, tol);
    }
    if (devices.size() == 1) break;
    if (d == Device::cpu) {
      if (t == complex64) {
        on_cpu_c = harness::to_complex(y);
      } else {
        on_cpu = harness::to_doubles(y);
      }
    } else if (t == complex64) {
      harness::expect_complex(y, on_cpu_c, ctx + " against the cpu", tol);
    } else {
      harness::expect_values(y, on_cpu, ctx + " against the cpu", tol, tol);
    }
  }
}

void check_values(const Op& op) {
  uint64_t seed = 1;
  const int n = op.arity();
  for (Dtype t : op.dtypes) {
    for (const Shapes& sh : shape_cases(n)) {
      // Broadcast shapes (inputs of different shapes) take every other pairing.
      const bool broadcasting = sh.in[0] != sh.out || sh.in.back() != sh.out;
      std::set<std::vector<Layout>> seen;
      for (size_t li = 0; li < op.layouts.size(); li += broadcasting ? 2 : 1) {
        // Input k takes the layout after input k - 1's.
        std::vector<Layout> layouts(n), distinct(n);
        for (int k = 0; k < n; ++k) {
          layouts[k] = op.layouts[(li + k) % op.layouts.size()];
          distinct[k] = distinct_layout(layouts[k], sh.in[k]);
        }
        if (!seen.insert(distinct).second) continue;
        check_case(op, t, sh, layouts, seed);
        seed += 2 * n;
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// ---- derivatives ------------------------------------------------------------

// Inputs of one shape: those of the swept dtype t, and all of them (an input
// of a fixed dtype, such as where's condition, among them).
struct Inputs {
  std::vector<array> swept, all;
};

Inputs draw_inputs(const Op& op, const std::vector<Domain>& domain, Dtype t, const Shape& shape,
                   uint64_t seed) {
  Inputs in;
  for (int k = 0; k < op.arity(); ++k) {
    Dtype tk = op.input_dtype(k, t);
    auto v = harness::random_values(shape_size(shape), tk, domain[k].lo, domain[k].hi, seed + k);
    array a = harness::from_doubles(v, shape, tk);
    eval(a);
    in.all.push_back(a);
    if (!op.domain[k].dtype) in.swept.push_back(a);
  }
  return in;
}

// The op as a function of its inputs of the swept dtype; the others keep their
// values in `all`.
VecFn of_swept(const Op& op, const std::vector<array>& all) {
  return [&op, all](const std::vector<array>& x) {
    std::vector<array> in = all;
    for (int k = 0, j = 0; k < op.arity(); ++k) {
      if (!op.domain[k].dtype) in[k] = x[j++];
    }
    return std::vector<array>{op.fn(in)};
  };
}

std::vector<array> ones_like_each(const std::vector<array>& xs) {
  std::vector<array> out;
  for (auto& x : xs) out.push_back(ones_like(x));
  return out;
}

bool all_equal(const array& a, double v) {
  auto e = grad_check::values(a);
  return std::all_of(e.begin(), e.end(), [v](double x) { return x == v; });
}

// With tangents and cotangents of ones, vjp and jvp are exactly v everywhere,
// of the inputs' and the output's dtypes: 0 for zero derivatives, 1 for an
// identity.
void expect_derivatives_equal(const std::string& name, const VecFn& f, const std::vector<array>& x,
                              double v) {
  auto out = f(x);
  auto [outs, g] = vjp(f, x, ones_like_each(out));
  ASSERT_EQ(g.size(), x.size()) << name;
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_EQ(g[k].dtype(), x[k].dtype()) << name << ": vjp " << k;
    EXPECT_TRUE(all_equal(g[k], v)) << name << ": vjp " << k << " is not " << v;
  }
  auto [outs2, t] = jvp(f, x, ones_like_each(x));
  EXPECT_EQ(t[0].dtype(), outs2[0].dtype()) << name << ": jvp";
  EXPECT_TRUE(all_equal(t[0], v)) << name << ": jvp is not " << v;
}

// The GPU's jvp and vjp against the CPU's, for the same tangents and cotangents.
void expect_derivatives_match_cpu(const std::string& name, const VecFn& f,
                                  const std::vector<array>& x) {
  std::vector<array> t;
  for (size_t k = 0; k < x.size(); ++k) t.push_back(grad_check::random_f64(x[k].shape(), 40 + k));
  array c = grad_check::random_f64(f(x)[0].shape(), 50);
  auto run = [&] {
    auto tangent = jvp(f, x, t).second[0];
    auto cotangents = vjp(f, x, {astype(c, f(x)[0].dtype())}).second;
    std::vector<std::vector<double>> v{grad_check::values(tangent)};
    for (auto& g : cotangents) v.push_back(grad_check::values(g));
    return v;
  };
  auto here = run();
  std::vector<std::vector<double>> cpu;
  {
    StreamContext on(Device::cpu);
    cpu = run();
  }
  for (size_t j = 0; j < here.size(); ++j) {
    ASSERT_EQ(here[j].size(), cpu[j].size()) << name;
    for (size_t i = 0; i < here[j].size(); ++i) {
      EXPECT_TRUE(harness::close(here[j][i], cpu[j][i], 1e-12, 1e-12))
          << name << (j == 0 ? ": jvp" : ": vjp") << " element " << i << " is " << here[j][i]
          << " here and " << cpu[j][i] << " on the cpu";
    }
  }
}

// Derivatives of 16-bit and float32 inputs keep the dtype, and (smooth ops)
// are those of float64 to the dtype's precision.
void check_low_precision(const Op& op) {
  for (Dtype t : {float16, bfloat16, float32}) {
    if (!op.accepts(t)) continue;
    std::string name = op.name + " " + dtype_name(t);
    Inputs in = draw_inputs(op, op.smooth_domain, t, {4}, 500);
    VecFn f = of_swept(op, in.all);
    auto [outs, g] = vjp(f, in.swept, ones_like_each(f(in.swept)));
    for (size_t k = 0; k < g.size(); ++k) EXPECT_EQ(g[k].dtype(), t) << name << ": vjp " << k;
    auto [outs2, tangent] = jvp(f, in.swept, ones_like_each(in.swept));
    EXPECT_EQ(tangent[0].dtype(), outs2[0].dtype()) << name << ": jvp";
    if (op.grad != Grad::smooth) continue;
    std::vector<array> x64;
    for (auto& x : in.swept) x64.push_back(astype(x, float64));
    auto [outs3, g64] = vjp(f, x64, ones_like_each(f(x64)));
    double tol = t == float32 ? 1e-5 : 2e-2;
    for (size_t k = 0; k < g.size(); ++k) {
      auto got = grad_check::values(g[k]), want = grad_check::values(g64[k]);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
            << name << ": vjp " << k << " element " << i;
      }
    }
  }
}

// Integer and bool inputs with integer or bool results: zero derivatives of
// the inputs' dtype, or the tangent and cotangent themselves where the op
// returns its input.
void check_integer_inputs(const Op& op) {
  for (Dtype t : {int32, bool_}) {
    if (!op.accepts(t) || is_inexact(harness::out_dtype(op.rule, t))) continue;
    Inputs in = draw_inputs(op, op.domain, t, {3}, 600);
    bool identity =
        std::find(op.identity_on.begin(), op.identity_on.end(), t) != op.identity_on.end();
    expect_derivatives_equal(op.name + " " + dtype_name(t), of_swept(op, in.all), in.swept,
                             identity ? 1 : 0);
  }
}

// ---- complex64 derivatives ----------------------------------------------------

std::vector<cd> random_complex(size_t n, uint64_t seed, double lo, double hi) {
  auto re = grad_check::values(grad_check::random_f64({static_cast<int>(n)}, seed, lo, hi));
  auto im = grad_check::values(grad_check::random_f64({static_cast<int>(n)}, seed + 1, lo, hi));
  std::vector<cd> v;
  for (size_t i = 0; i < n; ++i) v.emplace_back(re[i], im[i]);
  return v;
}

// Re(sum(conj(a) * b)): the real inner product of which the vjp is the adjoint.
double inner(const std::vector<cd>& a, const std::vector<cd>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (std::conj(a[i]) * b[i]).real();
  return s;
}

// In complex64, inputs drawn off the branch cuts and the poles (both parts in
// the smooth domain, made positive): jvp against central differences, and
// <c, jvp(t)> == <vjp(c), t> for the real inner product.
void check_complex_derivatives(const Op& op) {
  const size_t n = 6;
  Inputs held = draw_inputs(op, op.smooth_domain, complex64, {int(n)}, 700);  // where's condition
  std::vector<std::vector<cd>> xv, tv;
  std::vector<array> x, t;
  uint64_t seed = 710;
  for (int k = 0; k < op.arity(); ++k) {
    if (op.domain[k].dtype) continue;
    double lo = op.smooth_domain[k].lo > 0 ? op.smooth_domain[k].lo : 0.2;
    xv.push_back(random_complex(n, seed, lo, op.smooth_domain[k].hi));
    tv.push_back(random_complex(n, seed + 2, -1, 1));
    x.push_back(harness::from_complex(xv.back(), {int(n)}));
    t.push_back(harness::from_complex(tv.back(), {int(n)}));
    seed += 4;
  }
  VecFn f = of_swept(op, held.all);
  auto [outs, tangent] = jvp(f, x, t);
  const double eps = 1e-2;
  std::vector<array> plus, minus;
  for (size_t k = 0; k < x.size(); ++k) {
    std::vector<cd> p(n), m(n);
    for (size_t i = 0; i < n; ++i) {
      p[i] = xv[k][i] + eps * tv[k][i];
      m[i] = xv[k][i] - eps * tv[k][i];
    }
    plus.push_back(harness::from_complex(p, {int(n)}));
    minus.push_back(harness::from_complex(m, {int(n)}));
  }
  auto fp = harness::to_complex(f(plus)[0]), fm = harness::to_complex(f(minus)[0]);
  auto got = harness::to_complex(tangent[0]);
  for (size_t i = 0; i < n; ++i) {
    cd fd = (fp[i] - fm[i]) / (2 * eps);
    EXPECT_LE(std::abs(got[i] - fd), 2e-3 * std::max(1.0, std::abs(fd)))
        << op.name << ": complex jvp element " << i << " is " << got[i]
        << ", finite differences give " << fd;
  }
  auto cv = random_complex(n, seed, -1, 1);
  if (!is_complex(outs[0].dtype())) {
    for (auto& c : cv) c = c.real();
  }
  array c = astype(harness::from_complex(cv, {int(n)}), outs[0].dtype());
  auto [outs2, cot] = vjp(f, x, {c});
  double lhs = inner(cv, got), rhs = 0;
  for (size_t k = 0; k < x.size(); ++k) {
    EXPECT_EQ(cot[k].dtype(), complex64) << op.name << ": complex vjp " << k;
    rhs += inner(harness::to_complex(cot[k]), tv[k]);
  }
  EXPECT_LE(std::abs(lhs - rhs), 1e-4 * std::max(1.0, std::abs(lhs)))
      << op.name << ": complex <c, jvp(t)> = " << lhs << " but <vjp(c), t> = " << rhs;
}

void check_derivatives(const Op& op) {
  harness::on_each_device([&] {
    if (op.grad != Grad::none) {
      Inputs in = draw_inputs(op, op.smooth_domain, float64, {3, 4}, 1);
      VecFn f = of_swept(op, in.all);
      if (op.grad == Grad::smooth || op.grad == Grad::zero) {
        grad_check::check_derivatives(op.name, f, in.swept);
      }
      if (op.grad == Grad::zero || op.grad == Grad::blocked) {
        expect_derivatives_equal(op.name, f, in.swept, 0);
      }
      if (default_device() != Device::cpu) expect_derivatives_match_cpu(op.name, f, in.swept);
      check_low_precision(op);
    }
    check_integer_inputs(op);
    if (op.complex_grad) check_complex_derivatives(op);
  });
}

// ---- vmap -------------------------------------------------------------------

// The batch axis of each input (-1: unmapped), by the number of inputs.
std::vector<std::vector<int>> batch_axes(int arity) {
  switch (arity) {
    case 1: return {{0}, {2}};
    case 2: return {{0, 0}, {2, 1}, {1, -1}, {-1, 0}};
    default: return {{0, 0, 0}, {2, 1, -1}, {-1, -1, 1}, {0, -1, 2}};
  }
}

// A batch of 3 elements of shape (2, 4), in float64, int32 and bool.
void check_vmaps(const Op& op) {
  harness::on_each_device([&] {
    uint64_t seed = 200;
    for (Dtype t : {float64, int32, bool_}) {
      if (!op.accepts(t)) continue;
      for (const auto& axes : batch_axes(op.arity())) {
        std::vector<array> in;
        std::ostringstream name;
        name << op.name << " " << t << " axes";
        for (int k = 0; k < op.arity(); ++k) {
          Shape shape{2, 4};
          if (axes[k] >= 0) shape.insert(shape.begin() + axes[k], 3);
          Dtype tk = op.input_dtype(k, t);
          auto v = harness::random_values(shape_size(shape), tk, op.domain[k].lo, op.domain[k].hi,
                                          seed++);
          in.push_back(harness::from_doubles(v, shape, tk));
          name << " " << axes[k];
        }
        grad_check::check_vmap(name.str(), grad_check::vec(op.fn), in, axes);
      }
    }
  });
}

// One test per op of the table and suite, named after the op, so that a
// failure names it and gtest's shards (and a sanitizer's runs of them) split
// the table op by op.
std::vector<size_t> op_indices(bool (*keep)(const Op&)) {
  std::vector<size_t> out;
  for (size_t i = 0; i < op_table::ops().size(); ++i) {
    if (keep(op_table::ops()[i])) out.push_back(i);
  }
  return out;
}

bool every(const Op&) { return true; }
bool vmappable(const Op& op) { return op.vmappable; }

std::string op_test_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = op_table::ops()[info.param].name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

class EveryOp : public ::testing::TestWithParam<size_t> {
 protected:
  const Op& op() const { return op_table::ops()[GetParam()]; }
};

class EveryVmappableOp : public EveryOp {};

}  // namespace

TEST_P(EveryOp, Values) { check_values(op()); }

TEST_P(EveryOp, Derivatives) { check_derivatives(op()); }

TEST_P(EveryVmappableOp, Vmap) { check_vmaps(op()); }

INSTANTIATE_TEST_SUITE_P(Elementwise, EveryOp, ::testing::ValuesIn(op_indices(every)),
                         op_test_name);
INSTANTIATE_TEST_SUITE_P(Elementwise, EveryVmappableOp,
                         ::testing::ValuesIn(op_indices(vmappable)), op_test_name);

// Every entry has a distinct name, describes each of its inputs, and gives
// every suite something to check.
TEST(Elementwise, TableIsWellFormed) {
  std::set<std::string> names, test_names;
  for (size_t i = 0; i < op_table::ops().size(); ++i) {
    const Op& op = op_table::ops()[i];
    EXPECT_TRUE(names.insert(op.name).second) << op.name << " twice";
    EXPECT_TRUE(test_names.insert(op_test_name({i, 0})).second) << op.name << "'s test name twice";
    EXPECT_GE(op.arity(), 1) << op.name;
    EXPECT_FALSE(op.dtypes.empty()) << op.name;
    EXPECT_FALSE(op.layouts.empty()) << op.name;
    EXPECT_EQ(op.cref != nullptr, op.accepts(complex64)) << op.name;
    EXPECT_EQ(op.smooth_domain.size(), op.grad == Grad::none ? 0u : op.domain.size()) << op.name;
    EXPECT_TRUE(op.grad != Grad::none || op.accepts(int32) || op.accepts(bool_))
        << op.name << " has no derivative to check";
    EXPECT_TRUE(!op.complex_grad || op.accepts(complex64)) << op.name;
    for (Dtype t : op.identity_on) EXPECT_TRUE(op.accepts(t)) << op.name << " " << t;
    EXPECT_TRUE(!op.vmappable || op.accepts(float64) || op.accepts(int32) || op.accepts(bool_))
        << op.name << " has no dtype to vmap";
  }
}
