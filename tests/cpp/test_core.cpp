// The array, the graph, evaluation, streams and memory.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <thread>

#include "tessera/core/grouped.h"
#include "tessera/tessera.h"

using namespace tessera;

TEST(Array, ScalarConstructionAndItem) {
  array a(3.5f);
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.ndim(), 0u);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(a.item<float>(), 3.5f);
  EXPECT_EQ(array(7).dtype(), int32);
  EXPECT_EQ(array(true).dtype(), bool_);
  EXPECT_EQ(array(2.0).dtype(), float32);  // C++ rule: double -> float32
  EXPECT_EQ(array(int64_t{5}).dtype(), int64);
  EXPECT_EQ(array(uint32_t{5}).dtype(), uint32);
  EXPECT_EQ(array(complex64_t(1, 2)).item<complex64_t>(), complex64_t(1, 2));
  EXPECT_EQ(array(1.25, float64).item<double>(), 1.25);
  EXPECT_EQ(array(300, uint8).item<int>(), 300 % 256);
}

TEST(Array, ListConstruction) {
  array a({1.f, 2.f, 3.f, 4.f}, {2, 2});
  EXPECT_EQ(a.shape(), (Shape{2, 2}));
  EXPECT_EQ(a.strides(), (Strides{2, 1}));
  EXPECT_TRUE(a.flags().row_contiguous);
  EXPECT_FALSE(a.flags().col_contiguous);
  EXPECT_EQ(a.data<float>()[3], 4.f);
  array b({1, 2, 3});
  EXPECT_EQ(b.dtype(), int32);
  array c({1, 2, 3}, float16);
  EXPECT_EQ(c.dtype(), float16);
  EXPECT_EQ(static_cast<float>(c.data<float16_t>()[2]), 3.f);
  array d({true, false});
  EXPECT_EQ(d.dtype(), bool_);
  EXPECT_THROW(array({1.f, 2.f, 3.f}, {2, 2}), std::invalid_argument);
  std::vector<double> v{1.5, 2.5};
  array e(v.begin(), {2}, float64);
  EXPECT_EQ(e.data<double>()[1], 2.5);
}

TEST(Array, ShapeAccessorsCheckRange) {
  array a({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  EXPECT_EQ(a.shape(-1), 3);
  EXPECT_EQ(a.shape(0), 2);
  EXPECT_THROW(a.shape(2), std::out_of_range);
  EXPECT_THROW(a.shape(-3), std::out_of_range);
  EXPECT_THROW(a.item<float>(), std::invalid_argument);
}

TEST(Array, ExternalMemoryIsNotCopied) {
  static float storage[4] = {1, 2, 3, 4};
  bool freed = false;
  {
    array a(storage, {4}, float32, [&](void* p) { freed = (p == storage); });
    EXPECT_EQ(a.data<float>(), storage);
  }
  EXPECT_TRUE(freed);
}

TEST(Array, BorrowedMemoryIsNeverWrittenInPlace) {
  // Each op below may reuse the buffer of an input that only its task holds
  // (donation); a borrowed input is never reused.
  std::vector<float> f = {1, 2, 3, 4};
  std::vector<int32_t> i = {5, -6, 7, -8};
  int released = 0;
  auto wrap_f = [&] { return array(f.data(), {4}, float32, [&](void*) { ++released; }); };
  auto wrap_i = [&] { return array(i.data(), {2, 2}, int32, [&](void*) { ++released; }); };
  array y = add(wrap_f(), array(1.f));
  array z = negative(exp(wrap_f()));
  array u = astype(wrap_i(), uint32);  // same width
  array c = copy(wrap_i());
  eval(y, z, u, c);
  EXPECT_EQ(released, 4);
  EXPECT_EQ(f, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(i, (std::vector<int32_t>{5, -6, 7, -8}));
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(y.data<float>()[k], f[k] + 1);
    EXPECT_FLOAT_EQ(z.data<float>()[k], -std::exp(f[k]));
    EXPECT_EQ(u.data<uint32_t>()[k], static_cast<uint32_t>(i[k]));
    EXPECT_EQ(c.data<int32_t>()[k], i[k]);
  }
  // Not donatable even when this handle is the only one.
  array w = wrap_f();
  EXPECT_FALSE(w.is_donatable());
  array own = copy(w);
  eval(own);
  EXPECT_TRUE(own.is_donatable());
}

TEST(Array, BorrowKeepsStridesOfAnySign) {
  float buf[12];
  for (int k = 0; k < 12; ++k) buf[k] = static_cast<float>(k);
  bool released = false;
  {
    // buf viewed as a (3, 4) matrix, rows reversed and every other column.
    array a = array::borrow(buf + 8, {3, 2}, {-4, 2}, float32, Device::cpu,
                            [&] { released = true; });
    EXPECT_EQ(a.strides(), (Strides{-4, 2}));
    EXPECT_EQ(a.data<float>(), buf + 8);  // no copy
    array r = contiguous(a);
    eval(r);
    std::vector<float> got(r.data<float>(), r.data<float>() + 6);
    EXPECT_EQ(got, (std::vector<float>{8, 10, 4, 6, 0, 2}));
    EXPECT_FLOAT_EQ(sum(a).item<float>(), 30.f);
    EXPECT_FALSE(released);
  }
  EXPECT_TRUE(released);
  EXPECT_THROW(array::borrow(buf, {3, 4}, {4}, float32, Device::cpu, nullptr),
               std::invalid_argument);
}

TEST(Half, RoundTripAndRounding) {
  EXPECT_EQ(static_cast<float>(float16_t(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(float16_t(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(float16_t(65520.0f))));
  EXPECT_EQ(static_cast<float>(float16_t(5.9604644775390625e-8f)), 5.9604644775390625e-8f);
  EXPECT_EQ(float16_t(1.0f + 1.0f / 2048).bits, float16_t(1.0f).bits);  // ties to even
  EXPECT_TRUE(std::isnan(static_cast<float>(float16_t(NAN))));
  EXPECT_EQ(static_cast<float>(bfloat16_t(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bfloat16_t(3.0f)), 3.0f);
  EXPECT_EQ(bfloat16_t(1.0f + 1.0f / 256).bits, bfloat16_t(1.0f).bits);  // ties to even
}

TEST(Dtype, PromotionTableSpotChecks) {
  EXPECT_EQ(promote_types(uint8, int8), int16);
  EXPECT_EQ(promote_types(uint64, int8), float32);
  EXPECT_EQ(promote_types(float16, bfloat16), float32);
  EXPECT_EQ(promote_types(int64, float16), float16);
  EXPECT_EQ(promote_types(float64, complex64), complex64);
  EXPECT_EQ(promote_types(bool_, bool_), bool_);
  EXPECT_EQ(promote_types(uint32, int32), int64);
  // Symmetric.
  for (auto a : all_dtypes) {
    for (auto b : all_dtypes) EXPECT_EQ(promote_types(a, b), promote_types(b, a));
  }
}

TEST(Dtype, Categories) {
  EXPECT_TRUE(issubdtype(float16, floating));
  EXPECT_TRUE(issubdtype(int8, signedinteger));
  EXPECT_FALSE(issubdtype(uint8, signedinteger));
  EXPECT_TRUE(issubdtype(complex64, inexact));
  EXPECT_FALSE(issubdtype(bool_, number));
  EXPECT_TRUE(issubdtype(bool_, generic));
  EXPECT_TRUE(issubdtype(integer, number));
  EXPECT_FALSE(issubdtype(number, integer));
  EXPECT_FALSE(issubdtype(floating, float32));
  EXPECT_EQ(finfo(float16).max, 65504.0);
  EXPECT_EQ(iinfo(int8).min, -128);
  EXPECT_EQ(iinfo(uint16).max, 65535u);
  EXPECT_THROW(finfo{int32}, std::invalid_argument);
  EXPECT_THROW(iinfo{float32}, std::invalid_argument);
}

TEST(Eval, AstypeIsLazyUntilEval) {
  array a({1.5f, -2.5f, 3.f});
  array b = astype(a, int32);
  EXPECT_EQ(b.status(), ArrayStatus::unscheduled);
  EXPECT_FALSE(b.has_data());
  eval(b);
  EXPECT_TRUE(b.is_available());
  EXPECT_EQ(b.data<int32_t>()[0], 1);
  EXPECT_EQ(b.data<int32_t>()[1], -2);
  EXPECT_EQ(b.data<int32_t>()[2], 3);
  EXPECT_FALSE(b.has_primitive());  // the graph was released
}

TEST(Eval, BroadcastIsAView) {
  array a({1.f, 2.f, 3.f});
  array b = broadcast_to(a, {2, 3});
  eval(b);
  EXPECT_EQ(b.strides(), (Strides{0, 1}));
  EXPECT_EQ(b.data<float>(), a.data<float>());
  EXPECT_FALSE(b.flags().contiguous);
  array c = copy(b);
  eval(c);
  EXPECT_EQ(c.data<float>()[4], 2.f);
  EXPECT_THROW(broadcast_to(a, {2, 4}), std::invalid_argument);
}

// Note [Views of evaluated arrays] (core/array.cpp): a view of an evaluated
// array is made at once and shares its buffer; a view of an unevaluated one,
// of a tracer, of one whose evaluation failed, or any view while a transform
// traces, stays a node.
TEST(Eval, ViewsOfEvaluatedArraysAreMadeAtOnce) {
  array a = reshape(arange(6.0f), {2, 3});
  array lazy = transpose(a);
  EXPECT_TRUE(lazy.has_primitive());
  eval(a);
  array t = transpose(a), s = slice(a, {0, 1}, {2, 3}), b = broadcast_to(a, {4, 2, 3});
  for (const array& v : {t, s, b}) {
    EXPECT_TRUE(v.is_available());
    EXPECT_FALSE(v.has_primitive());
  }
  EXPECT_EQ(t.strides(), (Strides{1, 3}));
  EXPECT_EQ(t.data<float>(), a.data<float>());
  EXPECT_EQ(s.data<float>(), a.data<float>() + 1);
  EXPECT_TRUE(array_equal(lazy, t).item<bool>());
  array c = copy(s);
  eval(c);
  EXPECT_EQ(c.data<float>()[3], 5.f);  // s is {{1, 2}, {4, 5}}

  // A tracer's view, and a constant's view while a transform traces.
  auto [out, grads] = vjp(
      [&](const std::vector<array>& x) {
        array ct = transpose(a);
        EXPECT_TRUE(ct.has_primitive());
        array xt = transpose(x[0]);
        EXPECT_TRUE(xt.has_primitive());
        return std::vector{sum(multiply(xt, ct))};
      },
      {full({2, 3}, 2.f)}, {array(1.f)});
  EXPECT_TRUE(array_equal(grads[0], a).item<bool>());
  EXPECT_EQ(out[0].item<float>(), 30.f);

  // A failed evaluation: the view reports its error.
  array bad = linalg::inv(zeros({2, 2}), Device::cpu);
  EXPECT_THROW(eval(bad), std::invalid_argument);
  array bad_view = transpose(bad);
  EXPECT_TRUE(bad_view.has_primitive());
  EXPECT_THROW(eval(bad_view), std::invalid_argument);
}

TEST(Eval, LongChainNeitherOverflowsNorLeaks) {
  // 10^6 nodes: topological sort and release are iterative.
  array x(0.0f);
  size_t before = get_active_memory();
  for (int i = 0; i < 1000000; ++i) x = astype(astype(x, float64), float32);
  eval(x);
  EXPECT_EQ(x.item<float>(), 0.0f);
  // Only x is alive: intermediate buffers were released.
  EXPECT_LE(get_active_memory(), before + 1024);
}

TEST(Eval, DroppingAnUnevaluatedChainIsIterative) {
  array x(1.0f);
  for (int i = 0; i < 1000000; ++i) x = copy(x);
  x = array(2.0f);  // drops a million unevaluated nodes
  EXPECT_EQ(x.item<float>(), 2.0f);
}

TEST(Streams, TwoCpuStreamsWithADependency) {
  Stream s1 = new_stream(Device::cpu);
  Stream s2 = new_stream(Device::cpu);
  EXPECT_NE(s1, s2);
  array a({1.f, 2.f, 3.f});
  array b = astype(a, float64, s1);
  array c = astype(b, int32, s2);  // waits on s1's event
  eval(c);
  EXPECT_EQ(c.data<int32_t>()[2], 3);
  synchronize(s1);
  synchronize();
}

TEST(Streams, AsyncEvalThenWait) {
  array a({1.f, 2.f});
  array b = copy(astype(a, float64));
  async_eval(b);
  b.wait();
  EXPECT_EQ(b.data<double>()[1], 2.0);
}

TEST(Streams, GpuRequestIsAClearError) {
  if (is_available(Device::gpu)) GTEST_SKIP() << "this test is for machines without a GPU";
  EXPECT_THROW(new_stream(Device::gpu), std::invalid_argument);
  EXPECT_THROW(astype(array(1.f), int32, Device::gpu), std::invalid_argument);
  EXPECT_EQ(default_device(), Device(Device::cpu));
}

TEST(Memory, StatsAndLimits) {
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  size_t base = get_active_memory();
  {
    array a = astype(array(1.0f), float32);
    array big = copy(broadcast_to(array(1.0f), {1 << 20}));
    eval(big);
    EXPECT_GE(get_active_memory(), base + (4u << 20));
    EXPECT_GE(get_peak_memory(), base + (4u << 20));
  }
  EXPECT_GE(get_cache_memory(), 4u << 20);
  clear_cache();
  EXPECT_EQ(get_cache_memory(), 0u);
  size_t old = set_memory_limit(1 << 20);
  array big = copy(broadcast_to(array(1.0f), {1 << 20}));
  EXPECT_THROW(eval(big), std::runtime_error);  // out of memory is an exception
  set_memory_limit(old);
  array ok = copy(broadcast_to(array(1.0f), {1 << 20}));
  eval(ok);
  EXPECT_EQ(ok.data<float>()[12345], 1.0f);
}

TEST(Eval, ErrorsSurfaceAtEvalAndPropagate) {
  size_t old = set_memory_limit(1 << 10);
  array big = copy(broadcast_to(array(1.0f), {1 << 20}));
  array after = astype(big, float64);
  set_memory_limit(old);
  set_memory_limit(1 << 10);
  EXPECT_THROW(eval(after), std::runtime_error);
  set_memory_limit(old);
}

#include "harness.h"
#include "tessera/ops/array_api.h"

TEST(Copy, AstypeEveryPairOfDtypesOnEveryLayout) {
  for (auto layout : harness::all_layouts()) {
    for (auto from : harness::all_types()) {
      Shape shape{3, 4};
      auto v = harness::rows_repeated(harness::random_values(12, from, 0, 100, 7), shape);
      array x = harness::with_layout(v, shape, from, layout);
      for (auto to : harness::all_types()) {
        std::vector<double> want(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          double w = v[i];
          if (to == bool_) w = w != 0;
          else if (to == float16) w = static_cast<float>(float16_t(static_cast<float>(w)));
          else if (to == bfloat16) w = static_cast<float>(bfloat16_t(static_cast<float>(w)));
          else if (is_integer(to)) w = std::trunc(w);
          else if (to == float32 || to == complex64) w = static_cast<float>(w);
          want[i] = w;
        }
        std::ostringstream ctx;
        ctx << from << " -> " << to << " (" << harness::layout_name(layout) << ")";
        harness::expect_values(astype(x, to), want, ctx.str(), 0, 0);
      }
    }
  }
}

TEST(Shape, TransposeSliceReshapeViews) {
  array a({0.f, 1.f, 2.f, 3.f, 4.f, 5.f}, {2, 3});
  array t = transpose(a);
  eval(t);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Strides{1, 3}));
  EXPECT_TRUE(t.flags().col_contiguous);
  harness::expect_values(t, {0, 3, 1, 4, 2, 5}, "transpose");
  harness::expect_values(slice(a, {0, 2}, {2, -4}, {1, -1}), {2, 1, 0, 5, 4, 3}, "reverse slice");
  harness::expect_values(slice(a, {1, 0}, {2, 3}, {1, 2}), {3, 5}, "stepped slice");
  harness::expect_values(reshape(t, {6}), {0, 3, 1, 4, 2, 5}, "reshape of a transpose copies");
  harness::expect_values(reshape(a, {3, -1}), {0, 1, 2, 3, 4, 5}, "reshape -1");
  EXPECT_THROW(reshape(a, {4}), std::invalid_argument);
  EXPECT_THROW(reshape(a, {-1, -1}), std::invalid_argument);
  EXPECT_THROW(transpose(a, {0, 0}), std::invalid_argument);
  EXPECT_THROW(transpose(a, {0, 2}), std::out_of_range);
  EXPECT_THROW(slice(a, {0}, {1}, {1}), std::invalid_argument);
}

TEST(Dtype, PromotionTableMatchesTheReference) {
  // MLX's promotion table, row by row, in the order b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c.
  const char* rows[] = {
      "b u8 u16 u32 u64 i8 i16 i32 i64 f16 bf f32 f64 c",
      "u8 u8 u16 u32 u64 i16 i16 i32 i64 f16 bf f32 f64 c",
      "u16 u16 u16 u32 u64 i32 i32 i32 i64 f16 bf f32 f64 c",
      "u32 u32 u32 u32 u64 i64 i64 i64 i64 f16 bf f32 f64 c",
      "u64 u64 u64 u64 u64 f32 f32 f32 f32 f16 bf f32 f64 c",
      "i8 i16 i32 i64 f32 i8 i16 i32 i64 f16 bf f32 f64 c",
      "i16 i16 i32 i64 f32 i16 i16 i32 i64 f16 bf f32 f64 c",
      "i32 i32 i32 i64 f32 i32 i32 i32 i64 f16 bf f32 f64 c",
      "i64 i64 i64 i64 f32 i64 i64 i64 i64 f16 bf f32 f64 c",
      "f16 f16 f16 f16 f16 f16 f16 f16 f16 f16 f32 f32 f64 c",
      "bf bf bf bf bf bf bf bf bf f32 bf f32 f64 c",
      "f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f32 f64 c",
      "f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 f64 c",
      "c c c c c c c c c c c c c c",
  };
  std::map<std::string, Dtype> names = {
      {"b", bool_},    {"u8", uint8},  {"u16", uint16},   {"u32", uint32}, {"u64", uint64},
      {"i8", int8},    {"i16", int16}, {"i32", int32},    {"i64", int64},  {"f16", float16},
      {"bf", bfloat16}, {"f32", float32}, {"f64", float64}, {"c", complex64}};
  for (int i = 0; i < Dtype::num_types; ++i) {
    std::istringstream row(rows[i]);
    std::string cell;
    for (int j = 0; j < Dtype::num_types; ++j) {
      row >> cell;
      EXPECT_EQ(promote_types(all_dtypes[i], all_dtypes[j]), names.at(cell))
          << all_dtypes[i] << " with " << all_dtypes[j];
    }
  }
}

TEST(Errors, MessagesNameTheOpAndTheValues) {
  array a({1.f, 2.f, 3.f});
  try {
    broadcast_to(a, {2, 4});
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "[broadcast_to] shapes (3,) and (2,4) cannot be broadcast");
  }
  try {
    reshape(a, {2, 2});
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[reshape] cannot reshape an array of shape (3,) (size 3) into shape (2,2)");
  }
  try {
    transpose(a, {1});
    FAIL() << "expected an exception";
  } catch (const std::out_of_range& e) {
    EXPECT_EQ(std::string(e.what()),
              "[transpose] axis 1 is out of bounds for an array with 1 dimensions");
  }
}

TEST(Eval, LastUseInputBufferIsDonated) {
  array x = copy(array({1, 2, 3, 4}));
  eval(x);
  const void* p = x.data<int32_t>();
  array y = astype(x, uint32);  // same width: may reuse x's buffer
  x = array(0);                 // drop the last handle to the input
  eval(y);
  EXPECT_EQ(static_cast<const void*>(y.data<uint32_t>()), p);
  EXPECT_EQ(y.data<uint32_t>()[3], 4u);

  // An input that is still referenced is never written.
  array u = copy(array({5, 6}));
  eval(u);
  array v = astype(u, uint32);
  eval(v);
  EXPECT_NE(static_cast<const void*>(v.data<uint32_t>()), static_cast<const void*>(u.data<int32_t>()));
  EXPECT_EQ(u.data<int32_t>()[0], 5);
}

TEST(Eval, NothingRunsBeforeEval) {
  array one(1.0f);
  size_t before = get_active_memory();
  array big = copy(broadcast_to(one, {1 << 20}));
  array bigger = astype(big, float64);
  EXPECT_EQ(get_active_memory(), before);  // no buffer was allocated
  EXPECT_EQ(bigger.status(), ArrayStatus::unscheduled);
  eval(bigger);
  EXPECT_GE(get_active_memory(), before + (8u << 20));
}

TEST(Utils, ResultTypeAndNormalizeAxisIndex) {
  EXPECT_EQ(result_type({array(1, int8), array(1, uint8)}), int16);
  EXPECT_EQ(result_type({array(1), array(1.f, float16), array(true)}), float16);
  EXPECT_EQ(result_type({array(1u, uint32), array(1, int32)}), int64);
  EXPECT_THROW(result_type({}), std::invalid_argument);
  EXPECT_EQ(normalize_axis_index(-1, 3), 2);
  EXPECT_EQ(normalize_axis_index(1, 3), 1);
  EXPECT_THROW(normalize_axis_index(3, 3), std::out_of_range);
  EXPECT_THROW(normalize_axis_index(-4, 3, "[op]"), std::out_of_range);
}

// Note [Grouped products]: the products of one x in a tape (evaluation order)
// run as one task at the first one's place, the nodes that make the later
// ones' weights from evaluated arrays (reshapes here) just before it; a
// product that needs another's result stays alone.
TEST(GroupedProducts, ProductsOfOneXAndTheirWeightNodesFormOneGroup) {
  array x = ones({1, 8});
  std::vector<int> ns{8, 4, 4, 2, 3};
  std::vector<array> w;
  for (int n : ns) w.push_back(full({8 * n}, 0.5f));
  eval(x, w[0], w[1], w[2], w[3], w[4]);
  array h = multiply(x, array(2.f));
  std::vector<array> t, y;
  for (size_t i = 0; i < w.size(); ++i) {
    t.push_back(reshape(w[i], {8, ns[i]}));
    y.push_back(matmul(h, t.back()));
  }
  // As eval walks it: h, then each product after its weight's node.
  std::vector<array> tape{h};
  for (size_t i = 0; i < w.size(); ++i) tape.insert(tape.end(), {t[i], y[i]});
  auto groups = group_tasks(tape);
  ASSERT_EQ(groups.size(), 1u);  // at most 4 members: the fifth stays alone
  EXPECT_EQ(groups[0].kind, GroupKind::products);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{2, 4, 6, 8}));
  EXPECT_EQ(groups[0].hoisted, (std::vector<size_t>{3, 5, 7}));

  // A product whose weight is made from the first product's result: no group.
  array ty0 = transpose(y[0]);
  array m = matmul(ty0, h);
  array s = add(t[0], m);
  array dependent = transpose(s);
  array z = matmul(h, dependent);
  EXPECT_TRUE(group_tasks({h, t[0], y[0], ty0, m, s, dependent, z}).empty());

  // Evaluated together, each equals its own product: 2 * 8 * 0.5 = 8.
  eval(y[0], y[1], y[2], y[3], y[4]);
  for (auto& yi : y) {
    for (float v : std::vector<float>(yi.data<float>(), yi.data<float>() + yi.size())) {
      EXPECT_FLOAT_EQ(v, 8.f);
    }
  }
}

// Note [Fused pairs]: an Add and the norm of its sum; two rotations of equal
// parameters, the node that makes the second's input run before the pair;
// two slice updates. A
// second norm of the same sum, a rotation of the first's result, and nodes of
// another stream stay alone.
TEST(GroupedProducts, PairsOfASumAndItsNormOfRotationsAndOfUpdatesFormGroups) {
  array x = ones({1, 4, 8}), r = ones({1, 4, 8}), w = ones({8});
  array q0 = ones({1, 1, 4, 8}), k0 = ones({1, 1, 2, 8}), cache = zeros({1, 2, 6, 8});
  eval(x, r, w, q0, k0, cache);
  array h = add(x, r);
  array n = fast::rms_norm(h, w, 1e-5f);
  array n2 = fast::rms_norm(h, w, 1e-5f);
  EXPECT_EQ(n.primitive().name(), std::string("RMSNorm"));
  auto groups = group_tasks({h, n, n2});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].kind, GroupKind::add_norm);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{0, 1}));

  // Heads of queries and keys, (1, 1, heads, 8) seen as (1, heads, 1, 8).
  array tq = reshape(q0, {1, 4, 1, 8}), tk = reshape(k0, {1, 2, 1, 8});
  array q = fast::rope(tq, 8, false, 10000.f, 1.f, 3);
  array k = fast::rope(tk, 8, false, 10000.f, 1.f, 3);
  array other = fast::rope(tk, 8, true, 10000.f, 1.f, 3);  // another rotation: alone
  array again = fast::rope(q, 8, false, 10000.f, 1.f, 3);  // needs q: alone
  groups = group_tasks({tq, q, tk, other, k, again});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].kind, GroupKind::rope_pair);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{1, 4}));
  EXPECT_EQ(groups[0].hoisted, (std::vector<size_t>{2}));

  array kc = slice_update(cache, k, Shape{0, 0, 3, 0}, Shape{1, 2, 4, 8});
  array vc = slice_update(cache, tk, Shape{0, 0, 3, 0}, Shape{1, 2, 4, 8});
  array elsewhere = slice_update(cache, tk, Shape{0, 0, 2, 0}, Shape{1, 2, 3, 8});
  groups = group_tasks({tk, k, kc, elsewhere, vc});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].kind, GroupKind::update_pair);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{2, 4}));

  // Another stream: alone.
  Stream s2 = new_stream(Device::cpu);
  array h3 = add(x, r, s2);
  array n3 = fast::rms_norm(h3, w, 1e-5f);
  EXPECT_TRUE(group_tasks({h3, n3}).empty());

  // Evaluated, each pair equals its members: (1 + 1) normalised is 2 / sqrt(4 + eps).
  eval(n, n2, q, k, kc, vc, again);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(n.data<float>()[i], 2 / std::sqrt(4 + 1e-5), 1e-6);
  EXPECT_TRUE(array_equal(n, n2).item<bool>());
}
