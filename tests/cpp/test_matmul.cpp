// matmul, addmm, inner, outer, tensordot against a float64 (complex<double>)
// triple-loop reference.
#include <gtest/gtest.h>

#include <complex>

#include "harness.h"
#include "tessera/ops/primitives/matmul.h"

using namespace tessera;
using harness::Layout;
using cd = std::complex<double>;

namespace {

std::vector<Dtype> matmul_types() { return {float16, bfloat16, float32, float64, complex64}; }

Strides strides_of(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// NumPy's matmul on row-major values: 1-D operands gain an axis, batch axes
// broadcast. V is std::complex<double>, or uint64_t for sums modulo 2^64.
template <typename V>
std::vector<V> ref_matmul(const std::vector<V>& a, Shape sa, const std::vector<V>& b, Shape sb,
                          Shape* out_shape = nullptr) {
  bool av = sa.size() == 1, bv = sb.size() == 1;
  if (av) sa.insert(sa.begin(), 1);
  if (bv) sb.push_back(1);
  int M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  size_t nb = std::max(sa.size(), sb.size()) - 2;
  Shape batch(nb);
  auto dim = [](const Shape& s, size_t i, size_t nb) -> int {
    size_t lead = s.size() - 2;
    return i + lead < nb ? 1 : s[i + lead - nb];
  };
  for (size_t i = 0; i < nb; ++i) batch[i] = std::max(dim(sa, i, nb), dim(sb, i, nb));
  Strides st_a = strides_of(sa), st_b = strides_of(sb);
  size_t batches = 1;
  for (int d : batch) batches *= d;
  std::vector<V> out(batches * M * N);
  for (size_t bi = 0; bi < batches; ++bi) {
    // Offsets of this batch element in a and b (broadcast axes read index 0).
    int64_t oa = 0, ob = 0, rem = bi;
    for (int i = static_cast<int>(nb) - 1; i >= 0; --i) {
      int64_t idx = rem % batch[i];
      rem /= batch[i];
      int64_t ia = static_cast<int64_t>(i) - static_cast<int64_t>(nb - (sa.size() - 2));
      int64_t ib = static_cast<int64_t>(i) - static_cast<int64_t>(nb - (sb.size() - 2));
      if (ia >= 0 && sa[ia] != 1) oa += idx * st_a[ia];
      if (ib >= 0 && sb[ib] != 1) ob += idx * st_b[ib];
    }
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        V acc = 0;
        for (int k = 0; k < K; ++k) acc += a[oa + i * K + k] * b[ob + k * N + j];
        out[(bi * M + i) * N + j] = acc;
      }
    }
  }
  if (out_shape) {
    *out_shape = batch;
    if (!av) out_shape->push_back(M);
    if (!bv) out_shape->push_back(N);
  }
  return out;
}

// Values an element of t holds exactly (imaginary parts for complex64 only).
std::vector<cd> random_cd(size_t n, Dtype t, uint64_t seed) {
  auto re = harness::random_values(n, t, -1, 1, seed);
  auto im = harness::random_values(n, t, -1, 1, seed + 1000);
  std::vector<cd> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = cd(re[i], t == complex64 ? im[i] : 0.0);
  return v;
}

array complex_array(const std::vector<cd>& v, const Shape& shape) {
  std::vector<complex64_t> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = complex64_t(v[i].real(), v[i].imag());
  return array(f.begin(), shape, complex64);
}

// v in the given layout (for broadcast, v must repeat along axis 0).
array make_input(const std::vector<cd>& v, const Shape& shape, Dtype t, Layout layout) {
  if (t != complex64) {
    std::vector<double> re(v.size());
    for (size_t i = 0; i < v.size(); ++i) re[i] = v[i].real();
    return harness::with_layout(re, shape, t, layout);
  }
  int nd = static_cast<int>(shape.size());
  array out = complex_array(v, shape);
  switch (layout) {
    case Layout::contiguous:
      break;
    case Layout::transposed:
      out = transpose(contiguous(transpose(out)));
      break;
    case Layout::strided: {
      Shape wide = shape;
      wide.back() *= 2;
      std::vector<cd> w(v.size() * 2, cd(-7, 7));
      for (size_t i = 0; i < v.size(); ++i) w[2 * i] = v[i];
      Shape step(nd, 1);
      step.back() = 2;
      out = slice(complex_array(w, wide), Shape(nd, 0), wide, step);
      break;
    }
    case Layout::broadcast: {
      Shape row(shape.begin() + 1, shape.end());
      std::vector<cd> r(v.begin(), v.begin() + v.size() / shape[0]);
      out = broadcast_to(complex_array(r, row), shape);
      break;
    }
  }
  eval(out);
  return out;
}

// v with every row along axis 0 replaced by the first (the values of a
// broadcast layout).
template <typename V>
std::vector<V> repeat_rows(std::vector<V> v, const Shape& shape) {
  if (v.empty()) return v;
  size_t row = v.size() / shape[0];
  for (size_t i = row; i < v.size(); ++i) v[i] = v[i % row];
  return v;
}

double atol_for(Dtype t, int K) {
  double eps = t == float64 ? 2.3e-16 : t == float16 ? 1e-3 : t == bfloat16 ? 8e-3 : 1.2e-7;
  return eps * 4 * std::max(K, 1);
}

// EXPECTs got == want within the tolerance of got's dtype for a K-term sum.
void expect_close(const array& got, const std::vector<cd>& want, int K, const std::string& ctx) {
  double rtol = harness::rtol_for(got.dtype()), atol = atol_for(got.dtype(), K);
  std::vector<cd> g;
  if (got.dtype() == complex64) {
    g = harness::to_complex(got);
  } else {
    for (double d : harness::to_doubles(got)) g.push_back(d);
  }
  ASSERT_EQ(g.size(), want.size()) << ctx;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 5; ++i) {
    if (std::abs(g[i] - want[i]) > atol + rtol * std::abs(want[i])) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++failures;
    }
  }
}

std::string ctx_of(Dtype t, Layout la, Layout lb) {
  return dtype_name(t) + " a " + harness::layout_name(la) + " b " + harness::layout_name(lb);
}

void check_matmul(const Shape& sa, const Shape& sb, Dtype t, uint64_t seed = 1) {
  auto va = random_cd(shape_size(sa), t, seed), vb = random_cd(shape_size(sb), t, seed + 7);
  Shape want_shape;
  auto want = ref_matmul(va, sa, vb, sb, &want_shape);
  array out = matmul(make_input(va, sa, t, Layout::contiguous),
                     make_input(vb, sb, t, Layout::contiguous));
  std::string ctx = dtype_name(t) + " " + shape_str(sa) + " @ " + shape_str(sb);
  EXPECT_EQ(out.shape(), want_shape) << ctx;
  EXPECT_EQ(out.dtype(), t) << ctx;
  expect_close(out, want, sa.back(), ctx);
}

}  // namespace

// ---- matmul -------------------------------------------------------------------

TEST(Matmul, EveryDtypeAndLayout) {
  for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{5, 7}, {7, 6}},
                                                                   {{2, 5, 7}, {2, 7, 6}}}) {
    for (Dtype t : matmul_types()) {
      for (auto la : harness::all_layouts()) {
        for (auto lb : harness::all_layouts()) {
          auto va = random_cd(shape_size(sa), t, 3), vb = random_cd(shape_size(sb), t, 4);
          if (la == Layout::broadcast) va = repeat_rows(va, sa);
          if (lb == Layout::broadcast) vb = repeat_rows(vb, sb);
          array out = matmul(make_input(va, sa, t, la), make_input(vb, sb, t, lb));
          EXPECT_EQ(out.dtype(), t);
          expect_close(out, ref_matmul(va, sa, vb, sb), sa.back(),
                       ctx_of(t, la, lb) + " " + shape_str(sa));
        }
      }
    }
  }
}

TEST(Matmul, TransposedAndSlicedOperands) {
  for (Dtype t : matmul_types()) {
    // Stored (8, 10); operands are windows and transposes of it.
    Shape big{8, 10};
    auto vbig = random_cd(80, t, 11);
    array m = make_input(vbig, big, t, Layout::contiguous);
    auto window = [&](int r0, int r1, int rs, int c0, int c1, int cs, Shape* shape) {
      std::vector<cd> v;
      int rows = 0, cols = 0;
      for (int r = r0; rs > 0 ? r < r1 : r > r1; r += rs, ++rows) {
        cols = 0;
        for (int c = c0; cs > 0 ? c < c1 : c > c1; c += cs, ++cols) v.push_back(vbig[r * 10 + c]);
      }
      *shape = {rows, cols};
      return v;
    };
    auto transposed = [](const std::vector<cd>& v, const Shape& s) {
      std::vector<cd> out(v.size());
      for (int i = 0; i < s[0]; ++i)
        for (int j = 0; j < s[1]; ++j) out[j * s[0] + i] = v[i * s[1] + j];
      return out;
    };
    Shape sa, sb;
    // Row window (lda 10) @ transposed row window (CblasTrans, lda 10).
    auto va = window(1, 6, 1, 2, 9, 1, &sa);     // (5, 7)
    auto vb0 = window(0, 3, 1, 1, 8, 1, &sb);    // (3, 7) -> b = its transpose (7, 3)
    array a = slice(m, {1, 2}, {6, 9});
    array b = transpose(slice(m, {0, 1}, {3, 8}));
    auto vb = transposed(vb0, sb);
    expect_close(matmul(a, b), ref_matmul(va, sa, vb, {sb[1], sb[0]}), 7,
                 dtype_name(t) + " windows");
    // Every other row (lda 20) @ the transpose of every other row.
    va = window(0, 8, 2, 0, 10, 1, &sa);  // (4, 10)
    vb0 = window(1, 8, 2, 0, 10, 1, &sb);  // (4, 10)
    array a2 = slice(m, {0, 0}, {8, 10}, {2, 1});
    array b2 = transpose(slice(m, {1, 0}, {8, 10}, {2, 1}));
    expect_close(matmul(a2, b2), ref_matmul(va, sa, transposed(vb0, sb), {10, 4}), 10,
                 dtype_name(t) + " row steps");
    // Negative steps (copied).
    va = window(7, -1, -1, 9, -1, -2, &sa);  // (8, 5)
    array a3 = slice(m, {7, 9}, {-9, -11}, {-1, -2});
    Shape s3;
    auto vb3 = window(0, 5, 1, 0, 3, 1, &s3);  // (5, 3)
    array b3 = slice(m, {0, 0}, {5, 3});
    expect_close(matmul(a3, b3), ref_matmul(va, sa, vb3, s3), 5, dtype_name(t) + " negative");
    // Column vectors and single rows of a transposed matrix.
    array col = slice(m, {0, 4}, {7, 5});  // (7, 1), stride 10
    Shape scol;
    auto vcol = window(0, 7, 1, 4, 5, 1, &scol);
    Shape srow;
    auto vrow = window(2, 3, 1, 0, 7, 1, &srow);  // (1, 7)
    array row = slice(m, {2, 0}, {3, 7});
    expect_close(matmul(row, col), ref_matmul(vrow, srow, vcol, scol), 7,
                 dtype_name(t) + " row @ column");
    expect_close(matmul(col, row), ref_matmul(vcol, scol, vrow, srow), 1,
                 dtype_name(t) + " column @ row");
  }
}

TEST(Matmul, BroadcastBatches) {
  for (Dtype t : {float32, float16, complex64}) {
    check_matmul({2, 1, 3, 4}, {5, 4, 2}, t);
    check_matmul({3, 4}, {2, 4, 5}, t);
    check_matmul({2, 3, 4}, {4, 5}, t);
    check_matmul({1, 3, 4}, {6, 4, 2}, t);
  }
  // A batch axis broadcast inside the operand (stride 0).
  auto va = random_cd(12, float32, 5), vb = random_cd(8, float32, 6);
  array a = broadcast_to(make_input(va, {3, 4}, float32, Layout::contiguous), {3, 3, 4});
  array b = make_input(random_cd(24, float32, 6), {3, 4, 2}, float32, Layout::contiguous);
  std::vector<cd> a_full;
  for (int i = 0; i < 3; ++i) a_full.insert(a_full.end(), va.begin(), va.end());
  expect_close(matmul(a, b), ref_matmul(a_full, {3, 3, 4}, random_cd(24, float32, 6), {3, 4, 2}),
               4, "stride-0 batch");
  // A transposed 3-D operand whose batch axis is not outermost in memory.
  auto vt = random_cd(24, float64, 9);
  array stored = make_input(vt, {4, 2, 3}, float64, Layout::contiguous);  // (K, batch, M)
  array at = transpose(stored, {1, 2, 0});                                // (batch, M, K)
  std::vector<cd> vat(24);
  for (int k = 0; k < 4; ++k)
    for (int bt = 0; bt < 2; ++bt)
      for (int i = 0; i < 3; ++i) vat[(bt * 3 + i) * 4 + k] = vt[(k * 2 + bt) * 3 + i];
  auto vb2 = random_cd(20, float64, 10);
  expect_close(matmul(at, make_input(vb2, {4, 5}, float64, Layout::contiguous)),
               ref_matmul(vat, {2, 3, 4}, vb2, {4, 5}), 4, "permuted batch");
}

TEST(Matmul, VectorOperands) {
  for (Dtype t : {float32, float64, bfloat16, complex64}) {
    check_matmul({4}, {4, 5}, t);
    check_matmul({3, 4}, {4}, t);
    check_matmul({4}, {4}, t);
    check_matmul({2, 3, 4}, {4}, t);
    check_matmul({4}, {2, 4, 5}, t);
  }
  EXPECT_EQ(matmul(array({1.f, 2.f}), array({3.f, 4.f})).item<float>(), 11.f);
  // A strided vector.
  array v = slice(array({1.f, 9.f, 2.f, 9.f}), {0}, {4}, {2});
  expect_close(matmul(v, array({1.f, 0.f, 0.f, 1.f}, {2, 2})), {1, 2}, 2, "strided vector");
}

TEST(Matmul, EmptyDimensions) {
  array a = zeros({0, 4});
  EXPECT_EQ(matmul(a, ones({4, 5})).shape(), (Shape{0, 5}));
  EXPECT_EQ(matmul(ones({3, 4}), zeros({4, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(matmul(zeros({0, 3, 4}), ones({4, 5})).shape(), (Shape{0, 3, 5}));
  for (Dtype t : matmul_types()) {
    array k0 = matmul(ones({3, 0}, t), ones({0, 5}, t));
    EXPECT_EQ(k0.shape(), (Shape{3, 5}));
    EXPECT_EQ(k0.dtype(), t);
    expect_close(k0, std::vector<cd>(15, 0), 0, "K = 0 " + dtype_name(t));
  }
  expect_close(matmul(zeros({0}), zeros({0})), {0}, 0, "empty vectors");
}

TEST(Matmul, PromotesToTheResultDtype) {
  auto va = random_cd(6, float16, 1), vb = random_cd(6, float16, 2);
  array a16 = make_input(va, {2, 3}, float16, Layout::contiguous);
  array b32 = make_input(vb, {3, 2}, float32, Layout::contiguous);
  EXPECT_EQ(matmul(a16, b32).dtype(), float32);
  expect_close(matmul(a16, b32), ref_matmul(va, {2, 3}, vb, {3, 2}), 3, "f16 @ f32");
  EXPECT_EQ(matmul(astype(a16, bfloat16), astype(b32, float16)).dtype(), float32);
  EXPECT_EQ(matmul(astype(a16, float32), astype(b32, float64)).dtype(), float64);
  array ai = array({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(matmul(ai, b32).dtype(), float32);
  expect_close(matmul(ai, b32), ref_matmul({1, 2, 3, 4, 5, 6}, {2, 3}, vb, {3, 2}), 3,
               "int32 @ f32");
  EXPECT_EQ(matmul(a16, astype(b32, complex64)).dtype(), complex64);
}

TEST(Matmul, LargerProducts) {
  for (Dtype t : {float32, float64, float16}) {
    check_matmul({64, 128}, {128, 33}, t, 21);
    check_matmul({3, 17, 40}, {40, 9}, t, 22);
  }
  check_matmul({40, 64}, {64, 24}, complex64, 23);
}

TEST(Matmul, Errors) {
  array f({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_THROW(matmul(array(1.f), f), std::invalid_argument);
  EXPECT_THROW(matmul(f, array(1.f)), std::invalid_argument);
  try {
    matmul(array({1, 2, 3, 4}, {2, 2}), array({1, 2, 3, 4}, {2, 2}));
    ADD_FAILURE() << "integer matmul did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("[matmul]", 0), 0u) << e.what();
  }
  EXPECT_THROW(matmul(array({true, false}), array({true, false})), std::invalid_argument);
  EXPECT_NO_THROW(matmul(array({1, 2}, uint8), array({1.f, 2.f})));
  try {
    matmul(zeros({2, 3}), zeros({4, 5}));
    ADD_FAILURE() << "inner dimension mismatch did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "[matmul] last dimension of a (2,3) must match the second-to-last of b (4,5)");
  }
  EXPECT_THROW(matmul(zeros({3}), zeros({4})), std::invalid_argument);
  EXPECT_THROW(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), std::invalid_argument);
  EXPECT_THROW(matmul(zeros({2, 3, 4}), zeros({3})), std::invalid_argument);
}

// ---- integer and bool products ---------------------------------------------------
//
// matmul takes inexact dtypes only; integer and bool products reach the Matmul
// primitive through outer and inner, as 2-D products. The tests below build
// the primitive directly, to check its kernels on batches, broadcast batches
// and every layout.

namespace {

std::vector<Dtype> exact_types() {
  auto v = harness::int_types();
  v.push_back(bool_);
  return v;
}

// Matmul on a and b broadcast to their common batch shape and cast to t, as
// matmul prepares its operands, on device d.
array matmul_primitive(const array& a, const array& b, Dtype t, Device d) {
  const int na = static_cast<int>(a.ndim()), nb = static_cast<int>(b.ndim());
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2));
  Shape sa = batch, sb = batch, shape = batch;
  sa.insert(sa.end(), {a.shape(na - 2), a.shape(na - 1)});
  sb.insert(sb.end(), {b.shape(nb - 2), b.shape(nb - 1)});
  shape.insert(shape.end(), {a.shape(na - 2), b.shape(nb - 1)});
  return array(shape, t, std::make_shared<Matmul>(to_stream(d)),
               {broadcast_to(astype(a, t, d), sa, d), broadcast_to(astype(b, t, d), sb, d)});
}

// n values of t, exact in float64. Sums of 8- and 16-bit and of unsigned
// products wrap around; int32 and int64 values stay small enough that the CPU's
// loop has no signed overflow (undefined in C++) for K <= 70.
std::vector<double> exact_values(size_t n, Dtype t, uint64_t seed) {
  const double hi = t == bool_    ? 1
                    : t == int8   ? 127
                    : t == uint8  ? 255
                    : t == int16  ? 32767
                    : t == uint16 ? 46340  // products fit the int they are promoted to
                    : t == int32  ? 0x1p12
                    : t == int64  ? 0x1p26
                    : t == uint32 ? 0x1p32 - 1
                                  : 0x1p40;
  return harness::random_values(n, t, is_signed_integer(t) ? -hi : 0, hi, seed);
}

std::vector<uint64_t> to_bits(const std::vector<double>& v) {
  std::vector<uint64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<uint64_t>(static_cast<int64_t>(v[i]));
  return out;
}

// A sum of products modulo 2^64 as the dtype t holds it, widened to int64:
// integers wrap to t's width, bool is "any term nonzero".
int64_t wrap_to(uint64_t v, Dtype t) {
  if (t == bool_) return v != 0;
  const int bits = 8 * t.size;
  if (bits < 64) {
    const uint64_t mask = (uint64_t(1) << bits) - 1;
    v &= mask;
    if (is_signed_integer(t) && (v >> (bits - 1)) != 0) v |= ~mask;
  }
  return static_cast<int64_t>(v);
}

// EXPECTs got (an integer or bool array) == want exactly.
void expect_exact(const array& got, const std::vector<uint64_t>& want, const std::string& ctx) {
  array wide = copy(astype(got, int64));
  eval(wide);
  ASSERT_EQ(wide.size(), want.size()) << ctx;
  const int64_t* g = wide.data<int64_t>();
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 5; ++i) {
    const int64_t w = wrap_to(want[i], got.dtype());
    if (g[i] != w) {
      ADD_FAILURE() << ctx << ": element " << i << " is " << g[i] << ", expected " << w;
      ++failures;
    }
  }
}

void check_exact_matmul(const Shape& sa, const Shape& sb, Dtype t, Layout la, Layout lb,
                        Device d, uint64_t seed) {
  auto va = exact_values(shape_size(sa), t, seed), vb = exact_values(shape_size(sb), t, seed + 7);
  if (la == Layout::broadcast) va = repeat_rows(va, sa);
  if (lb == Layout::broadcast) vb = repeat_rows(vb, sb);
  Shape want_shape;
  auto want = ref_matmul(to_bits(va), sa, to_bits(vb), sb, &want_shape);
  array out = matmul_primitive(harness::with_layout(va, sa, t, la),
                               harness::with_layout(vb, sb, t, lb), t, d);
  std::string ctx = dtype_name(t) + " " + shape_str(sa) + " @ " + shape_str(sb) + " a " +
                    harness::layout_name(la) + " b " + harness::layout_name(lb) +
                    (d == Device::gpu ? " on gpu" : " on cpu");
  EXPECT_EQ(out.shape(), want_shape) << ctx;
  EXPECT_EQ(out.dtype(), t) << ctx;
  expect_exact(out, want, ctx);
}

}  // namespace

TEST(Matmul, IntegerAndBoolOnEveryLayoutAndDevice) {
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{37, 45}, {45, 33}},         // off the tile grid, two steps over K
      {{3, 37, 45}, {1, 45, 33}},   // b broadcast over the batch
      {{2, 1, 5, 4}, {3, 4, 6}},    // both broadcast
      {{1, 70}, {70, 1}},           // a dot product
      {{70, 1}, {1, 3}}};           // an outer product
  for (Device d : harness::devices()) {
    for (Dtype t : exact_types()) {
      for (const auto& [sa, sb] : shapes) {
        for (auto la : harness::all_layouts()) {
          for (auto lb : harness::all_layouts()) check_exact_matmul(sa, sb, t, la, lb, d, 11);
        }
      }
    }
  }
}

TEST(Matmul, IntegerAndBoolEmptyAndManyTiles) {
  for (Device d : harness::devices()) {
    for (Dtype t : exact_types()) {
      // K = 0 gives zeros (false); M = 0 or N = 0 an empty result.
      check_exact_matmul({3, 0}, {0, 4}, t, Layout::contiguous, Layout::contiguous, d, 1);
      check_exact_matmul({2, 0, 3}, {3, 4}, t, Layout::contiguous, Layout::contiguous, d, 2);
      check_exact_matmul({2, 3}, {3, 0}, t, Layout::contiguous, Layout::contiguous, d, 3);
    }
    // More output tiles than blocks in one launch.
    check_exact_matmul({6, 1000, 3}, {3, 1000}, int16, Layout::contiguous, Layout::transposed, d,
                       4);
  }
}

// ---- addmm ----------------------------------------------------------------------

TEST(Addmm, EveryDtypeAndLayout) {
  Shape sa{3, 4}, sb{4, 5}, sc{3, 5};
  for (Dtype t : matmul_types()) {
    for (auto lc : harness::all_layouts()) {
      auto va = random_cd(12, t, 1), vb = random_cd(20, t, 2), vc = random_cd(15, t, 3);
      if (lc == Layout::broadcast) vc = repeat_rows(vc, sc);
      auto prod = ref_matmul(va, sa, vb, sb);
      std::vector<cd> want(15);
      for (int i = 0; i < 15; ++i) want[i] = 2.0 * prod[i] + 0.5 * vc[i];
      array out = addmm(make_input(vc, sc, t, lc), make_input(va, sa, t, Layout::transposed),
                        make_input(vb, sb, t, Layout::strided), 2.f, 0.5f);
      EXPECT_EQ(out.dtype(), t);
      EXPECT_EQ(out.shape(), sc);
      expect_close(out, want, 5, "addmm " + dtype_name(t) + " c " + harness::layout_name(lc));
    }
  }
}

TEST(Addmm, BroadcastCVectorsAndEmptyK) {
  auto va = random_cd(24, float32, 1), vb = random_cd(8, float32, 2);
  auto prod = ref_matmul(va, {2, 3, 4}, vb, {4, 2});
  array a = make_input(va, {2, 3, 4}, float32, Layout::contiguous);
  array b = make_input(vb, {4, 2}, float32, Layout::contiguous);
  // c of shape (2,): broadcast along rows and batches; default alpha = beta = 1.
  std::vector<cd> want(12);
  for (int i = 0; i < 12; ++i) want[i] = prod[i] + (i % 2 == 0 ? 10.0 : 20.0);
  expect_close(addmm(array({10.f, 20.f}), a, b), want, 4, "c (2,)");
  // 0-d c, alpha only.
  for (int i = 0; i < 12; ++i) want[i] = 3.0 * prod[i] + 1.0;
  expect_close(addmm(array(1.f), a, b, 3.f), want, 4, "c ()");
  // 1-D a: c broadcasts against the final (2,) shape.
  auto v4 = random_cd(4, float32, 3);
  auto pv = ref_matmul(v4, {4}, vb, {4, 2});
  expect_close(addmm(array({1.f, 2.f}), make_input(v4, {4}, float32, Layout::contiguous), b,
                     1.f, 2.f),
               {pv[0] + 2.0, pv[1] + 4.0}, 4, "1-D a");
  // 1-D b with c of shape (3,).
  auto pb = ref_matmul(va, {2, 3, 4}, v4, {4});
  std::vector<cd> wb(6);
  for (int i = 0; i < 6; ++i) wb[i] = pb[i] + double(i % 3);
  expect_close(addmm(array({0.f, 1.f, 2.f}), a, make_input(v4, {4}, float32, Layout::contiguous)),
               wb, 4, "1-D b");
  // Both 1-D: a scalar.
  array dot = addmm(array(5.f), make_input(v4, {4}, float32, Layout::contiguous),
                    make_input(v4, {4}, float32, Layout::contiguous));
  EXPECT_EQ(dot.ndim(), 0u);
  // K = 0: beta * c.
  for (Dtype t : matmul_types()) {
    array k0 = addmm(full({2, 3}, array(4.f), t), zeros({2, 0}, t), zeros({0, 3}, t), 1.f, 0.5f);
    EXPECT_EQ(k0.dtype(), t);
    expect_close(k0, std::vector<cd>(6, 2.0), 0, "K = 0 " + dtype_name(t));
  }
  // The result dtype promotes c too.
  EXPECT_EQ(addmm(array(1.0, float64), ones({2, 2}), ones({2, 2})).dtype(), float64);
}

TEST(Addmm, Errors) {
  EXPECT_THROW(addmm(zeros({2, 2}, int32), zeros({2, 2}, int32), zeros({2, 2}, int32)),
               std::invalid_argument);
  EXPECT_THROW(addmm(zeros({3, 3}), zeros({2, 2}), zeros({2, 2})), std::invalid_argument);
  EXPECT_THROW(addmm(zeros({2, 2, 2}), zeros({2, 2}), zeros({2, 2})), std::invalid_argument);
  EXPECT_THROW(addmm(zeros({2}), zeros({2, 3}), zeros({2, 2})), std::invalid_argument);
  EXPECT_THROW(addmm(zeros({2}), array(1.f), zeros({2, 2})), std::invalid_argument);
}

// ---- inner, outer, tensordot ------------------------------------------------------

TEST(Inner, VectorsMatricesAndScalars) {
  for (Dtype t : {float32, float64, complex64}) {
    auto va = random_cd(3, t, 1), vb = random_cd(3, t, 2);
    array d = inner(make_input(va, {3}, t, Layout::strided), make_input(vb, {3}, t,
                                                                         Layout::contiguous));
    EXPECT_EQ(d.ndim(), 0u);
    expect_close(d, {va[0] * vb[0] + va[1] * vb[1] + va[2] * vb[2]}, 3, "1-D " + dtype_name(t));
  }
  // (2,3) . (4,3) -> (2,4): a @ b^T.
  auto va = random_cd(6, float32, 3), vb = random_cd(12, float32, 4);
  std::vector<cd> vbt(12);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) vbt[j * 4 + i] = vb[i * 3 + j];
  array r = inner(make_input(va, {2, 3}, float32, Layout::transposed),
                  make_input(vb, {4, 3}, float32, Layout::contiguous));
  EXPECT_EQ(r.shape(), (Shape{2, 4}));
  expect_close(r, ref_matmul(va, {2, 3}, vbt, {3, 4}), 3, "2-D");
  // A scalar operand multiplies, for any dtype.
  array s = inner(array(2), array({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(s.dtype(), int32);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  harness::expect_values(s, {2, 4, 6, 8}, "scalar int");
  harness::expect_values(inner(array({1.5f, 2.f}), array(2.f)), {3, 4}, "scalar right");
  EXPECT_THROW(inner(zeros({2, 3}), zeros({3, 2})), std::invalid_argument);
  EXPECT_THROW(inner(array({1, 2}), array({1, 2})), std::invalid_argument);
}

TEST(Outer, FlattensAndWorksOnEveryDtype) {
  for (Dtype t : harness::all_types()) {
    array a = harness::from_doubles({1, 2, 0}, {3}, t);
    array b = harness::from_doubles({1, 0, 1, 1}, {2, 2}, t);  // flattened
    array o = outer(a, b);
    EXPECT_EQ(o.dtype(), t);
    EXPECT_EQ(o.shape(), (Shape{3, 4}));
    std::vector<double> want{1, 0, 1, 1, 2, 0, 2, 2, 0, 0, 0, 0};
    if (t == bool_) {
      for (auto& w : want) w = w != 0;  // logical and
    }
    harness::expect_values(o, want, "outer " + dtype_name(t));
  }
  EXPECT_EQ(outer(array({1, 2}, int8), array({1.f})).dtype(), float32);
  array tr = transpose(array({1.f, 2.f, 3.f, 4.f}, {2, 2}));
  harness::expect_values(outer(tr, array({1.f, 10.f})), {1, 10, 3, 30, 2, 20, 4, 40},
                         "transposed input flattened in logical order");
  EXPECT_EQ(outer(zeros({0}), ones({3})).shape(), (Shape{0, 3}));
  harness::expect_values(outer(array(3.f), array(2.f)), {6}, "scalars");
}

TEST(Tensordot, IntAndExplicitAxes) {
  // axis 2: (2,3,4) x (3,4,5) -> (2,5) = reshape (2,12) @ (12,5).
  auto va = random_cd(24, float32, 1), vb = random_cd(60, float32, 2);
  array a = make_input(va, {2, 3, 4}, float32, Layout::contiguous);
  array b = make_input(vb, {3, 4, 5}, float32, Layout::contiguous);
  array r = tensordot(a, b);
  EXPECT_EQ(r.shape(), (Shape{2, 5}));
  expect_close(r, ref_matmul(va, {2, 12}, vb, {12, 5}), 12, "axis 2");
  // axis 1 on (2,3) and (3,2) is matmul; axis 0 is the outer product.
  auto vm = random_cd(6, float64, 3), vn = random_cd(6, float64, 4);
  array m = make_input(vm, {2, 3}, float64, Layout::contiguous);
  array n = make_input(vn, {3, 2}, float64, Layout::transposed);
  expect_close(tensordot(m, n, 1), ref_matmul(vm, {2, 3}, vn, {3, 2}), 3, "axis 1");
  array o = tensordot(m, n, 0);
  EXPECT_EQ(o.shape(), (Shape{2, 3, 3, 2}));
  expect_close(o, ref_matmul(vm, {6, 1}, vn, {1, 6}), 1, "axis 0");
  // Explicit axes: a (3,4,5), b (4,3,2), contract a's (0,1) with b's (1,0) -> (5,2).
  auto vx = random_cd(60, float32, 5), vy = random_cd(24, float32, 6);
  array x = make_input(vx, {3, 4, 5}, float32, Layout::contiguous);
  array y = make_input(vy, {4, 3, 2}, float32, Layout::strided);
  std::vector<cd> want(10, 0);
  for (int p = 0; p < 5; ++p)
    for (int q = 0; q < 2; ++q)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) want[p * 2 + q] += vx[(i * 4 + j) * 5 + p] * vy[(j * 3 + i) * 2 + q];
  array z = tensordot(x, y, {0, 1}, {1, 0});
  EXPECT_EQ(z.shape(), (Shape{5, 2}));
  expect_close(z, want, 12, "explicit axes");
  expect_close(tensordot(x, y, {-3, -2}, {1, 0}), want, 12, "negative axes");
  // Empty contraction.
  expect_close(tensordot(zeros({2, 0}), zeros({0, 3}), 1), std::vector<cd>(6, 0), 0, "K = 0");
  EXPECT_EQ(tensordot(zeros({2, 3}, float16), zeros({3, 4}, float16), 1).dtype(), float16);
}

TEST(Tensordot, Errors) {
  array a = zeros({2, 3}), b = zeros({3, 4});
  EXPECT_THROW(tensordot(a, b, -1), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, 3), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, 2), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, {1}, {0, 1}), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, {0}, {0}), std::invalid_argument);
  EXPECT_THROW(tensordot(a, b, {2}, {0}), std::out_of_range);
  EXPECT_THROW(tensordot(a, zeros({3, 3}), {1, 1}, {0, 1}), std::invalid_argument);
  EXPECT_THROW(tensordot(zeros({2, 3}, int32), zeros({3, 4}, int32), 1), std::invalid_argument);
}
