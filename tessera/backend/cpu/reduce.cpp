// eval_cpu of Reduce, ArgReduce, Variance, Trace, and (at the end) Softmax and LogSumExp.
//
// Every kernel sees its input as (kept axes) x (reduced axes), each group
// collapsed (ReducePlan); the output is row-contiguous over the kept axes (see
// Note [Reduction axes]). Views are read in place, never copied. Cases:
//   rows     the innermost reduced axis is contiguous, or nothing better applies:
//            each output reduces its region, a row at a time, with independent
//            lanes the compiler vectorises; outputs in parallel, or one large
//            region split across threads with per-thread partials.
//   columns  the innermost kept axis is contiguous and the reduced ones are not
//            (sum over axis 0 of a matrix): a block of outputs accumulates a
//            row vector over every reduced position, which vectorises.
// Floating sums accumulate blocks of kBlock elements in the compute type and
// combine the block totals in float64, so the error does not grow with N.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "tessera/backend/common/reduce_plan.h"
#include "tessera/backend/common/views.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/cpu/reduce.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/reduce.h"
#include <bit>
#include <cstdint>
#include <vector>
#include "tessera/backend/cpu/copy.h"

namespace tessera {

namespace cpu {

// Max / min of n contiguous floats or doubles, NaN propagating, in 16-byte
// vectors (GCC's vector extensions: the plain loop does not vectorise, its
// NaN test is control flow to the vectoriser). Also used by the softmax kernels below.
template <typename C, bool IsMax>
TESSERA_SIMD_CLONES C extremum_contiguous(const C* x, int64_t n) {
  constexpr int W = 16 / sizeof(C);
  typedef C V __attribute__((vector_size(16)));
  const C init = IsMax ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
  auto pick = [](V a, V v) { return ((IsMax ? (v > a) : (v < a)) | (v != v)) ? v : a; };
  auto pick1 = [](C a, C v) { return ((IsMax ? v > a : v < a) || v != v) ? v : a; };
  V a0 = V{} + init, a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    V v0, v1, v2, v3;
    std::memcpy(&v0, x + i, sizeof(V));
    std::memcpy(&v1, x + i + W, sizeof(V));
    std::memcpy(&v2, x + i + 2 * W, sizeof(V));
    std::memcpy(&v3, x + i + 3 * W, sizeof(V));
    a0 = pick(a0, v0);
    a1 = pick(a1, v1);
    a2 = pick(a2, v2);
    a3 = pick(a3, v3);
  }
  a0 = pick(pick(a0, a1), pick(a2, a3));
  C m = init;
  for (int k = 0; k < W; ++k) m = pick1(m, a0[k]);
  for (; i < n; ++i) m = pick1(m, x[i]);
  return m;
}
template float extremum_contiguous<float, true>(const float*, int64_t);
template float extremum_contiguous<float, false>(const float*, int64_t);
template double extremum_contiguous<double, true>(const double*, int64_t);
template double extremum_contiguous<double, false>(const double*, int64_t);

}  // namespace cpu

namespace {

using namespace cpu;

constexpr int64_t kBlock = kReduceBlock;
constexpr int64_t kParallelWork = 1 << 15;  // elements below which a kernel runs inline
constexpr int64_t kColumnBlock = 256;       // outputs a column kernel accumulates at once

// The output's first reduced element for output o.
inline int64_t out_loc(const ReducePlan& p, int64_t o) {
  return elem_to_loc(o, p.kept_shape, p.kept_strides);
}

// Calls f(offset, len, stride) for the row segments of the reduced region
// covering flat positions [b, e) (row-major over red_shape).
template <typename F>
void for_segments(const ReducePlan& p, int64_t b, int64_t e, F&& f) {
  const int64_t n = p.row_len();
  const int64_t s = p.row_stride();
  for (int64_t i = b; i < e;) {
    int64_t col = i % n;
    int64_t len = std::min(n - col, e - i);
    f(elem_to_loc(i - col, p.red_shape, p.red_strides) + col * s, len, s);
    i += len;
  }
}

// Reduces [0, n) with f(b, e) -> Total, split across threads when n is large.
template <typename Total, typename F, typename M>
Total split_reduce(int64_t n, Total init, F&& f, M&& merge) {
  int chunks = num_threads();
  if (n < 2 * kParallelWork || chunks == 1) return f(int64_t{0}, n);
  std::unique_ptr<Total[]> part(new Total[chunks]);
  std::fill(part.get(), part.get() + chunks, init);
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) part[c] = f(c * n / chunks, (c + 1) * n / chunks);
  });
  Total t = init;
  for (int c = 0; c < chunks; ++c) t = merge(t, part[c]);
  return t;
}

// ---- element types -------------------------------------------------------------

template <typename A, typename T>
inline A to_acc(T x) {
  if constexpr (std::is_same_v<A, T>) {
    return x;
  } else if constexpr (is_complex_v<T>) {
    return A(x);
  } else {
    return static_cast<A>(static_cast<compute_t<T>>(x));
  }
}

template <typename O, typename Total>
inline O to_out(Total t) {
  if constexpr (is_complex_v<O> && std::is_arithmetic_v<Total>) {
    return O(static_cast<float>(t), 0.0f);
  } else if constexpr (is_complex_v<O>) {
    return O(static_cast<float>(t.real()), static_cast<float>(t.imag()));
  } else {
    return cast_to<O>(t);
  }
}

// Accumulator (Acc, per lane and block) and Total (across blocks and threads).
template <typename O>
using sum_acc_t = std::conditional_t<
    is_integral_v<O>, std::make_unsigned_t<std::conditional_t<is_integral_v<O>, O, int>>,
    std::conditional_t<is_complex_v<O>, complex64_t, compute_t<O>>>;
template <typename Acc>
using total_t = std::conditional_t<
    std::is_floating_point_v<Acc>, double,
    std::conditional_t<is_complex_v<Acc>, std::complex<double>, Acc>>;

template <typename T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else if constexpr (is_complex_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

template <typename A>
inline bool greater(A x, A a) {
  if constexpr (requires { x.imag(); }) {
    return x.real() > a.real() || (x.real() == a.real() && x.imag() > a.imag());
  } else {
    return x > a;
  }
}

// ---- reduction ops -------------------------------------------------------------

template <typename T_, typename O_, typename Acc_, typename Total_ = total_t<Acc_>>
struct OpTypes {
  using T = T_;
  using O = O_;
  using Acc = Acc_;
  using Total = Total_;
};

// Mean: float32 lanes for 16/32-bit floats, float64 otherwise.
template <typename T>
using mean_acc_t =
    std::conditional_t<is_complex_v<T>, complex64_t,
                       std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>>;

// A sum in Acc; with IsMean, divided by the count at the end.
template <typename T, typename O, typename Acc_, bool IsMean>
struct AddOp : OpTypes<T, O, Acc_> {
  static constexpr bool kAdds = true;
  using Acc = Acc_;
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, T x) { return a + to_acc<Acc>(x); }
  template <typename V>
  static V merge(V a, V b) { return a + b; }
  template <typename V>
  static O finish(V t, int64_t n) {
    if constexpr (IsMean) {
      return to_out<O>(t / static_cast<double>(n));
    } else {
      return to_out<O>(t);
    }
  }
};

template <typename T, typename O = sum_out_t<T>>
using SumOp = AddOp<T, O, sum_acc_t<O>, false>;
template <typename T, typename O = mean_out_t<T>>
using MeanOp = AddOp<T, O, mean_acc_t<T>, true>;

template <typename T, typename O = sum_out_t<T>>
struct ProdOp : OpTypes<T, O, sum_acc_t<O>> {
  using Acc = sum_acc_t<O>;
  static Acc init() { return Acc(1); }
  static Acc step(Acc a, T x) { return a * to_acc<Acc>(x); }
  template <typename V>
  static V merge(V a, V b) { return a * b; }
  template <typename V>
  static O finish(V t, int64_t) { return to_out<O>(t); }
};

// Max / Min propagate NaN, as NumPy does.
template <typename T, bool IsMax>
struct ExtremumOp : OpTypes<T, T, compute_t<T>, compute_t<T>> {
  static constexpr bool kSimd = std::is_same_v<T, float> || std::is_same_v<T, double>;
  static constexpr bool kMax = IsMax;
  using Acc = compute_t<T>;
  static Acc init() {
    if constexpr (std::is_same_v<Acc, bool>) {
      return !IsMax;
    } else if constexpr (is_complex_v<Acc>) {
      float v = IsMax ? -std::numeric_limits<float>::infinity()
                      : std::numeric_limits<float>::infinity();
      return Acc(v, v);
    } else if constexpr (std::numeric_limits<Acc>::has_infinity) {
      return IsMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return IsMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  template <typename V>
  static V merge(V a, V x) {
    if constexpr (std::is_floating_point_v<V>) {
      return ((IsMax ? x > a : x < a) | (x != x)) ? x : a;
    } else {
      return (IsMax ? greater(x, a) : greater(a, x)) ? x : a;
    }
  }
  static Acc step(Acc a, T x) { return merge(a, to_acc<Acc>(x)); }
  template <typename V>
  static T finish(V t, int64_t) { return static_cast<T>(t); }
};

template <typename T, bool IsAnd>
struct LogicalOp : OpTypes<T, bool, bool, bool> {
  static bool init() { return IsAnd; }
  static bool step(bool a, T x) {
    bool nz = cast_to<bool>(x);
    return IsAnd ? (a & nz) : (a | nz);
  }
  template <typename V>
  static V merge(V a, V b) { return IsAnd ? (a & b) : (a | b); }
  template <typename V>
  static bool finish(V t, int64_t) { return t; }
};

// ---- kernels -------------------------------------------------------------------

// Sum of n contiguous floats or doubles in L independent lanes (vectorisable).
template <int L, typename C>
inline C lane_sum(const C* x, int64_t n) {
  C lanes[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (int k = 0; k < L; ++k) lanes[k] += x[i + k];
  }
  C a = 0;
  for (; i < n; ++i) a += x[i];
  for (int k = 0; k < L; ++k) a += lanes[k];
  return a;
}

template <typename C>
TESSERA_SIMD_CLONES C sum_contiguous(const C* x, int64_t n) {
  return lane_sum<32>(x, n);
}

template <typename Op>
typename Op::Acc reduce_contiguous(const typename Op::T* x, int64_t n) {
  using Acc = typename Op::Acc;
  using T = typename Op::T;
  if constexpr (requires { Op::kSimd; }) {
    if constexpr (Op::kSimd) return extremum_contiguous<T, Op::kMax>(x, n);
  }
  if constexpr (requires { Op::kAdds; }) {
    if constexpr (std::is_same_v<T, Acc> && std::is_floating_point_v<T>) {
      return sum_contiguous<T>(x, n);
    }
  }
  constexpr int L = 16;
  Acc lanes[L];
  for (int k = 0; k < L; ++k) lanes[k] = Op::init();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (int k = 0; k < L; ++k) lanes[k] = Op::step(lanes[k], x[i + k]);
  }
  Acc a = Op::init();
  for (; i < n; ++i) a = Op::step(a, x[i]);
  for (int k = 0; k < L; ++k) a = Op::merge(a, lanes[k]);
  return a;
}

template <typename Op>
typename Op::Acc reduce_strided(const typename Op::T* x, int64_t n, int64_t s) {
  using Acc = typename Op::Acc;
  Acc a0 = Op::init(), a1 = Op::init(), a2 = Op::init(), a3 = Op::init();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 = Op::step(a0, x[i * s]);
    a1 = Op::step(a1, x[(i + 1) * s]);
    a2 = Op::step(a2, x[(i + 2) * s]);
    a3 = Op::step(a3, x[(i + 3) * s]);
  }
  for (; i < n; ++i) a0 = Op::step(a0, x[i * s]);
  return Op::merge(Op::merge(a0, a1), Op::merge(a2, a3));
}

template <typename Op>
typename Op::Total reduce_row(const typename Op::T* x, int64_t n, int64_t s) {
  using Total = typename Op::Total;
  Total t = Total(Op::init());
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t len = std::min(kBlock, n - b);
    auto a = s == 1 ? reduce_contiguous<Op>(x + b, len) : reduce_strided<Op>(x + b * s, len, s);
    t = Op::merge(t, Total(a));
  }
  return t;
}

template <typename Op>
typename Op::Total reduce_range(const typename Op::T* base, const ReducePlan& p, int64_t b,
                                int64_t e) {
  using Total = typename Op::Total;
  Total t = Total(Op::init());
  for_segments(p, b, e, [&](int64_t off, int64_t len, int64_t s) {
    t = Op::merge(t, reduce_row<Op>(base + off, len, s));
  });
  return t;
}

template <typename Op>
void reduce_rows(const typename Op::T* in, const ReducePlan& p, typename Op::O* out) {
  using Total = typename Op::Total;
  if (p.out_size < 2 * num_threads() && p.red_size >= 2 * kParallelWork) {
    for (int64_t o = 0; o < p.out_size; ++o) {
      const auto* base = in + out_loc(p, o);
      Total t = split_reduce(
          p.red_size, Total(Op::init()),
          [&](int64_t b, int64_t e) { return reduce_range<Op>(base, p, b, e); },
          [](Total a, Total b) { return Op::merge(a, b); });
      out[o] = Op::finish(t, p.red_size);
    }
    return;
  }
  int64_t grain = std::max<int64_t>(1, kParallelWork / std::max<int64_t>(p.red_size, 1));
  parallel_for(p.out_size, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      out[o] = Op::finish(reduce_range<Op>(in + out_loc(p, o), p, 0, p.red_size), p.red_size);
    }
  });
}

// acc[j] += x[j]: the column kernel of float sums.
template <typename C>
TESSERA_SIMD_CLONES void add_into(C* __restrict acc, const C* __restrict x, int64_t m) {
  for (int64_t j = 0; j < m; ++j) acc[j] += x[j];
}

template <typename Op>
constexpr bool adds_in_place = [] {
  if constexpr (requires { Op::kAdds; }) {
    return std::is_same_v<typename Op::T, typename Op::Acc> &&
           std::is_floating_point_v<typename Op::T>;
  }
  return false;
}();

// Accumulates reduced positions [rb, re) into tot[0, m) for m outputs that are
// consecutive in memory from base.
template <typename Op>
void reduce_columns_block(const typename Op::T* base, int64_t m, const ReducePlan& p, int64_t rb,
                          int64_t re, typename Op::Total* tot) {
  using Acc = typename Op::Acc;
  Acc acc[kColumnBlock];
  for (int64_t j = 0; j < m; ++j) acc[j] = Op::init();
  int64_t pending = 0;
  auto flush = [&] {
    for (int64_t j = 0; j < m; ++j) {
      tot[j] = Op::merge(tot[j], typename Op::Total(acc[j]));
      acc[j] = Op::init();
    }
    pending = 0;
  };
  for_segments(p, rb, re, [&](int64_t off, int64_t len, int64_t s) {
    for (int64_t c = 0; c < len; ++c) {
      const auto* x = base + off + c * s;
      if constexpr (adds_in_place<Op>) {
        add_into(acc, x, m);
      } else {
        for (int64_t j = 0; j < m; ++j) acc[j] = Op::step(acc[j], x[j]);
      }
      if (++pending == kBlock) flush();
    }
  });
  flush();
}

template <typename Op>
void reduce_columns(const typename Op::T* in, const ReducePlan& p, typename Op::O* out) {
  using Total = typename Op::Total;
  const int64_t m = p.kept_shape.back();
  const int64_t outer = p.out_size / m;
  const int64_t jblocks = (m + kColumnBlock - 1) / kColumnBlock;
  const int64_t tasks = outer * jblocks;
  auto task_range = [&](int64_t t, int64_t& j0, int64_t& jl) {
    j0 = (t % jblocks) * kColumnBlock;
    jl = std::min<int64_t>(kColumnBlock, m - j0);
    return in + out_loc(p, (t / jblocks) * m) + j0;
  };
  if (tasks < 2 * num_threads() && p.red_size * m >= 2 * kParallelWork) {
    // Few blocks of outputs: split the reduced positions across threads.
    int chunks = num_threads();
    // (not std::vector: Total may be bool)
    std::unique_ptr<Total[]> part(new Total[chunks * kColumnBlock]);
    for (int64_t t = 0; t < tasks; ++t) {
      int64_t j0, jl;
      const auto* base = task_range(t, j0, jl);
      std::fill(part.get(), part.get() + chunks * kColumnBlock, Total(Op::init()));
      parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          reduce_columns_block<Op>(base, jl, p, c * p.red_size / chunks,
                                   (c + 1) * p.red_size / chunks, &part[c * kColumnBlock]);
        }
      });
      int64_t o0 = (t / jblocks) * m + j0;
      for (int64_t j = 0; j < jl; ++j) {
        Total v = part[j];
        for (int c = 1; c < chunks; ++c) v = Op::merge(v, part[c * kColumnBlock + j]);
        out[o0 + j] = Op::finish(v, p.red_size);
      }
    }
    return;
  }
  int64_t grain =
      std::max<int64_t>(1, kParallelWork / std::max<int64_t>(p.red_size * kColumnBlock, 1));
  parallel_for(tasks, grain, [&](int64_t b, int64_t e) {
    Total tot[kColumnBlock];
    for (int64_t t = b; t < e; ++t) {
      int64_t j0, jl;
      const auto* base = task_range(t, j0, jl);
      for (int64_t j = 0; j < jl; ++j) tot[j] = Total(Op::init());
      reduce_columns_block<Op>(base, jl, p, 0, p.red_size, tot);
      int64_t o0 = (t / jblocks) * m + j0;
      for (int64_t j = 0; j < jl; ++j) out[o0 + j] = Op::finish(tot[j], p.red_size);
    }
  });
}

template <typename Op>
void run_reduce(const void* in, const ReducePlan& p, void* out) {
  const auto* x = static_cast<const typename Op::T*>(in);
  auto* y = static_cast<typename Op::O*>(out);
  if (p.out_size == 0) return;
  bool columns = p.row_stride() != 1 && p.red_size > 1 && p.kept_strides.back() == 1 &&
                 p.kept_shape.back() >= 4;
  if (columns) {
    reduce_columns<Op>(x, p, y);
  } else {
    reduce_rows<Op>(x, p, y);
  }
}

template <typename O>
void check_out(Dtype out_t, const char* what) {
  if (out_t != detail::exact_dtype<O>) {
    throw std::logic_error(std::string("[Reduce] unexpected output dtype ") + dtype_name(out_t) +
                           " for " + what + " (bug)");
  }
}

// The reduction of `in` (any strides, relative to its data pointer) over axes
// into the row-contiguous `out`.
void reduce_into(Reduce::ReduceType type, const void* in, Dtype in_t, const Shape& shape,
                 const Strides& strides, const std::vector<int>& axes, void* out, Dtype out_t) {
  ReducePlan p = reduce_plan(shape, strides, axes);
  dispatch_all(in_t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (type) {
      case Reduce::Sum:
        check_out<typename SumOp<T>::O>(out_t, "Sum");
        return run_reduce<SumOp<T>>(in, p, out);
      case Reduce::Prod:
        check_out<typename ProdOp<T>::O>(out_t, "Prod");
        return run_reduce<ProdOp<T>>(in, p, out);
      case Reduce::Mean:
        check_out<typename MeanOp<T>::O>(out_t, "Mean");
        return run_reduce<MeanOp<T>>(in, p, out);
      case Reduce::Max:
        check_out<T>(out_t, "Max");
        return run_reduce<ExtremumOp<T, true>>(in, p, out);
      case Reduce::Min:
        check_out<T>(out_t, "Min");
        return run_reduce<ExtremumOp<T, false>>(in, p, out);
      case Reduce::And:
        check_out<bool>(out_t, "And");
        return run_reduce<LogicalOp<T, true>>(in, p, out);
      case Reduce::Or:
        check_out<bool>(out_t, "Or");
        return run_reduce<LogicalOp<T, false>>(in, p, out);
    }
  });
}

// ---- arg reduce ------------------------------------------------------------------

template <typename T, bool IsMax>
uint32_t arg_row(const T* x, int64_t n, int64_t s) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (s == 1) {
      // The extremum in vectors, then the first element equal to it (or NaN).
      T m = extremum_contiguous<T, IsMax>(x, n);
      bool nan = m != m;
      auto hit = [&](T v) { return nan ? v != v : v == m; };
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        bool any = false;
        for (int k = 0; k < 16; ++k) any |= hit(x[i + k]);
        if (any) break;
      }
      while (!hit(x[i])) ++i;
      return static_cast<uint32_t>(i);
    }
  }
  C best = static_cast<C>(x[0]);
  uint32_t idx = 0;
  if (is_nan(best)) return 0;
  for (int64_t i = 1; i < n; ++i) {
    C v = static_cast<C>(x[i * s]);
    if (is_nan(v)) return static_cast<uint32_t>(i);
    if (IsMax ? greater(v, best) : greater(best, v)) {
      best = v;
      idx = static_cast<uint32_t>(i);
    }
  }
  return idx;
}

// Consecutive outputs side by side: keep m running bests, a row at a time.
template <typename T, bool IsMax>
void arg_columns(const T* x, int64_t m, int64_t n, int64_t s, uint32_t* out) {
  using C = compute_t<T>;
  C best[kColumnBlock];
  for (int64_t j = 0; j < m; ++j) {
    best[j] = static_cast<C>(x[j]);
    out[j] = 0;
  }
  for (int64_t i = 1; i < n; ++i) {
    const T* r = x + i * s;
    for (int64_t j = 0; j < m; ++j) {
      C v = static_cast<C>(r[j]);
      bool take = !is_nan(best[j]) && ((IsMax ? greater(v, best[j]) : greater(best[j], v)) ||
                                       is_nan(v));
      best[j] = take ? v : best[j];
      out[j] = take ? static_cast<uint32_t>(i) : out[j];
    }
  }
}

template <typename T, bool IsMax>
void run_arg_reduce(const T* in, const ReducePlan& p, uint32_t* out) {
  const int64_t n = p.red_size;
  const int64_t s = p.row_stride();
  if (p.out_size == 0) return;
  const int64_t m = p.kept_shape.back();
  if (s != 1 && n > 1 && p.kept_strides.back() == 1 && m >= 4) {
    const int64_t outer = p.out_size / m;
    const int64_t jblocks = (m + kColumnBlock - 1) / kColumnBlock;
    int64_t grain = std::max<int64_t>(1, kParallelWork / (n * kColumnBlock));
    parallel_for(outer * jblocks, grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t j0 = (t % jblocks) * kColumnBlock;
        int64_t o0 = (t / jblocks) * m + j0;
        arg_columns<T, IsMax>(in + out_loc(p, (t / jblocks) * m) + j0,
                              std::min<int64_t>(kColumnBlock, m - j0), n, s, out + o0);
      }
    });
    return;
  }
  int64_t grain = std::max<int64_t>(1, kParallelWork / std::max<int64_t>(n, 1));
  parallel_for(p.out_size, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) out[o] = arg_row<T, IsMax>(in + out_loc(p, o), n, s);
  });
}

// ---- variance ---------------------------------------------------------------------

// Sum of x (pass 1) or of |x - mean|^2 (pass 2) over a row, in float64 lanes.
template <typename T, typename D>
D moment_row(const T* x, int64_t n, int64_t s, D mean, bool second) {
  constexpr int L = 8;
  D lanes[L] = {};
  auto term = [&](T v) -> D {
    D d = to_acc<D>(v);
    if (!second) return d;
    d -= mean;
    if constexpr (is_complex_v<D> || std::is_same_v<D, std::complex<double>>) {
      return D(d.real() * d.real() + d.imag() * d.imag());
    } else {
      return d * d;
    }
  };
  int64_t i = 0;
  if (s == 1) {
    for (; i + L <= n; i += L) {
      for (int k = 0; k < L; ++k) lanes[k] += term(x[i + k]);
    }
  }
  D a{};
  for (; i < n; ++i) a += term(x[i * s]);
  for (int k = 0; k < L; ++k) a += lanes[k];
  return a;
}

template <typename T>
void run_variance(const T* in, const ReducePlan& p, mean_out_t<T>* out, int ddof, bool take_sqrt) {
  using O = mean_out_t<T>;
  using D = std::conditional_t<is_complex_v<T>, std::complex<double>, double>;
  if (p.out_size == 0) return;
  const int64_t n = p.red_size;
  const double divisor = std::max<double>(static_cast<double>(n) - ddof, 0.0);
  auto total = [&](const T* base, D mean, bool second, bool split) {
    auto range = [&](int64_t b, int64_t e) {
      D t{};
      for_segments(p, b, e, [&](int64_t off, int64_t len, int64_t s) {
        t += moment_row<T, D>(base + off, len, s, mean, second);
      });
      return t;
    };
    if (!split) return range(0, n);
    return split_reduce(n, D{}, range, [](D a, D b) { return a + b; });
  };
  auto one = [&](int64_t o, bool split) {
    const T* base = in + out_loc(p, o);
    D mean = total(base, D{}, false, split) / static_cast<double>(n);
    double ss = std::real(total(base, mean, true, split));
    double v = ss / divisor;
    if (take_sqrt) v = std::sqrt(v);
    out[o] = to_out<O>(v);
  };
  if (p.out_size < 2 * num_threads() && n >= 2 * kParallelWork) {
    for (int64_t o = 0; o < p.out_size; ++o) one(o, true);
    return;
  }
  int64_t grain = std::max<int64_t>(1, kParallelWork / std::max<int64_t>(n, 1));
  parallel_for(p.out_size, grain, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) one(o, false);
  });
}

}  // namespace

// ---- primitives -------------------------------------------------------------------

void Reduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  reduce_into(type_, in.raw_data(), in.dtype(), in.shape(), in.strides(), axes_, out.raw_data(),
              out.dtype());
}

void ArgReduce::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  ReducePlan p = reduce_plan(in.shape(), in.strides(), {axis_});
  dispatch_all(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (type_ == ArgMax) {
      run_arg_reduce<T, true>(in.data<T>(), p, out.data<uint32_t>());
    } else {
      run_arg_reduce<T, false>(in.data<T>(), p, out.data<uint32_t>());
    }
  });
}

void Variance::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  ReducePlan p = reduce_plan(in.shape(), in.strides(), axes_);
  dispatch_all(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    check_out<mean_out_t<T>>(out.dtype(), "Variance");
    run_variance<T>(in.data<T>(), p, out.data<mean_out_t<T>>(), ddof_, take_sqrt_);
  });
}

void Trace::eval_cpu(const std::vector<array>& inputs, array& out) {
  // The diagonal as a strided view: the kept axes, then the diagonal axis.
  const array& in = inputs[0];
  views::StridedView d = views::diagonal_view(in.shape(), in.strides(), offset_, axis1_, axis2_);
  out.set_data(allocator::malloc(out.nbytes()));
  const char* base = static_cast<const char*>(in.raw_data()) + d.offset * int64_t(in.itemsize());
  reduce_into(Reduce::Sum, base, in.dtype(), d.shape, d.strides,
              {static_cast<int>(d.shape.size()) - 1}, out.raw_data(), out.dtype());
}

}  // namespace tessera

// ==== Softmax and LogSumExp =================================================
//
// eval_cpu of Softmax and LogSumExp: row kernels over the reduced axes.
//
// Both work on rows: the reduced elements of one output, contiguous. When the
// reduced axes of the input are already innermost and dense (softmax over the
// last axis of a row-major array), rows are read in place; otherwise the input
// is copied once, reduced axes last (casting to the float output type on the
// way). Per row: one pass for the max, one for exp(x - max) and its sum, and
// for softmax one to scale; rows run in parallel.
namespace tessera {

namespace {

using namespace cpu;

constexpr int kLanes = 16;
constexpr int64_t kRowParallelWork = 1 << 14;  // elements below which rows run inline

// c ? a : b on the bits: the vectoriser takes float compares in a ternary for
// control flow (they may trap), and masks for what they are.
inline float select(bool c, float a, float b) {
  uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// exp(x) for float without branches, so loops over it vectorise: Cephes'
// polynomial on x - n ln2, scaled by 2^n through the exponent bits (about 1 ulp).
inline float exp_f(float x) {
  constexpr float hi = 88.72283f;
  constexpr float lo = -87.33654f;
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  float xc = select(x < lo, lo, x);
  xc = select(xc > hi, hi, xc);
  float t = xc * 1.44269504088896341f + magic;
  float n = t - magic;
  uint32_t ni = std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(magic);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  float scale = std::bit_cast<float>((ni + 126u) << 23);  // 2^(n-1), n in [-126, 128]
  float y = p * scale * 2.0f;
  y = select(x > hi, std::numeric_limits<float>::infinity(), y);
  return select(x < lo, 0.0f, y);
}

template <typename C>
inline C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>) {
    return exp_f(x);
  } else {
    return std::exp(x);
  }
}

// Max of a row, NaN propagating.
template <typename T>
compute_t<T> row_max(const T* x, int64_t n) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, C>) return extremum_contiguous<C, true>(x, n);
  C lanes[kLanes];
  for (int k = 0; k < kLanes; ++k) lanes[k] = -std::numeric_limits<C>::infinity();
  auto pick = [](C a, C v) { return ((v > a) | (v != v)) ? v : a; };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) lanes[k] = pick(lanes[k], static_cast<C>(x[i + k]));
  }
  C m = -std::numeric_limits<C>::infinity();
  for (; i < n; ++i) m = pick(m, static_cast<C>(x[i]));
  for (int k = 0; k < kLanes; ++k) m = pick(m, lanes[k]);
  return m;
}

// Hot leaf loops are compiled for AVX-512 and AVX2 too, chosen at load time.

// The float32 row loops of softmax: e = exp(x - m), returns sum(e); y = e * inv.
TESSERA_SIMD_CLONES double exp_sum_f32(const float* x, int64_t n, float m, float* e) {
  float buf[kBlock];
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    float* eb = e ? e + b : buf;
    for (int64_t i = 0; i < len; ++i) eb[i] = exp_f(x[b + i] - m);
    float lanes[2 * kLanes] = {};
    int64_t i = 0;
    for (; i + 2 * kLanes <= len; i += 2 * kLanes) {
      for (int k = 0; k < 2 * kLanes; ++k) lanes[k] += eb[i + k];
    }
    float s = 0;
    for (; i < len; ++i) s += eb[i];
    for (int k = 0; k < 2 * kLanes; ++k) s += lanes[k];
    total += s;
  }
  return total;
}
TESSERA_SIMD_CLONES void scale_f32(float* y, int64_t n, float inv) {
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

// Sum of exp(x - m) over a row, a block at a time: one loop stores the exps (in
// e when given, else in a block buffer), one sums them.
template <typename T>
double row_exp_sum(const T* x, int64_t n, compute_t<T> m, compute_t<T>* e) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float>) return exp_sum_f32(x, n, m, e);
  C buf[kBlock];
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    const T* xb = x + b;
    C* eb = e ? e + b : buf;
    for (int64_t i = 0; i < len; ++i) eb[i] = exp_c(static_cast<C>(xb[i]) - m);
    total += lane_sum<kLanes>(eb, len);
  }
  return total;
}

// y may alias x. scratch holds n compute-type elements when T is 16-bit.
template <typename T>
void softmax_row(const T* x, T* y, int64_t n, compute_t<T>* scratch) {
  using C = compute_t<T>;
  C m = row_max(x, n);
  C* e = std::is_same_v<T, C> ? reinterpret_cast<C*>(y) : scratch;
  C inv = static_cast<C>(1.0 / row_exp_sum<T>(x, n, m, e));
  if constexpr (std::is_same_v<T, float>) return scale_f32(y, n, inv);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(e[i] * inv);
}

template <typename T>
T logsumexp_row(const T* x, int64_t n) {
  using C = compute_t<T>;
  if (n == 0) return static_cast<T>(-std::numeric_limits<C>::infinity());
  C m = row_max(x, n);
  if (std::isinf(m) || std::isnan(m)) return static_cast<T>(m);
  return static_cast<T>(m + static_cast<C>(std::log(row_exp_sum<T>(x, n, m, nullptr))));
}

// Calls f(TypeTag<T>) for the floating output dtypes of these ops.
template <typename F>
void dispatch_float(Dtype t, F&& f) {
  switch (t.val) {
    case Dtype::Val::float16: return f(TypeTag<float16_t>{});
    case Dtype::Val::bfloat16: return f(TypeTag<bfloat16_t>{});
    case Dtype::Val::float32: return f(TypeTag<float>{});
    case Dtype::Val::float64: return f(TypeTag<double>{});
    default:
      throw std::logic_error("[softmax] unexpected output dtype " + dtype_name(t) + " (bug)");
  }
}

// The kept axes (collapsed) and the reduced extent of `in`; rows_inplace when
// the reduced axes collapse to one contiguous innermost run.
struct RowView {
  Shape kept_shape;
  Strides kept_strides;
  int64_t n = 1;
  bool rows_inplace = false;
  std::vector<int> perm;  // kept axes, then reduced axes
};

RowView row_view(const array& in, const std::vector<int>& axes) {
  RowView v;
  std::vector<char> reduced(in.ndim(), 0);
  for (int ax : axes) reduced[ax] = 1;
  Shape ks, rs;
  Strides kst, rst;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (reduced[d]) {
      rs.push_back(in.shape(d));
      rst.push_back(in.strides(d));
      v.n *= in.shape(d);
    } else {
      ks.push_back(in.shape(d));
      kst.push_back(in.strides(d));
      v.perm.push_back(d);
    }
  }
  for (int ax : axes) v.perm.push_back(ax);
  auto [cks, ckst] = collapse_contiguous_dims(ks, {kst});
  v.kept_shape = std::move(cks);
  v.kept_strides = std::move(ckst[0]);
  auto [crs, crst] = collapse_contiguous_dims(rs, {rst});
  v.rows_inplace = v.n <= 1 || (crs.size() == 1 && crst[0][0] == 1);
  return v;
}

// A view of `in` with its axes in perm order (no copy).
array permuted_view(const array& in, const std::vector<int>& perm) {
  Shape shape;
  Strides strides;
  for (int d : perm) {
    shape.push_back(in.shape(d));
    strides.push_back(in.strides(d));
  }
  Flags flags = compute_flags(shape, strides);
  if (in.data_size() != in.size()) flags.contiguous = flags.row_contiguous = flags.col_contiguous = false;
  array v(shape, in.dtype(), nullptr, {});
  v.copy_shared_buffer(in, strides, flags, in.data_size());
  return v;
}

template <typename F>
void for_rows(int64_t rows, int64_t n, F&& f) {
  int64_t grain = std::max<int64_t>(1, kRowParallelWork / std::max<int64_t>(n, 1));
  parallel_for(rows, grain, f);
}

}  // namespace

void Softmax::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  RowView v = row_view(in, axes_);
  bool dense = in.flags().contiguous && in.data_size() == in.size();
  for (auto s : in.strides()) dense &= s >= 0;
  const void* src;
  Shape kept_shape = v.kept_shape;
  Strides kept_strides = v.kept_strides;
  if (in.dtype() == out.dtype() && dense && v.rows_inplace) {
    // Same layout as the input, in place when the input is not used again.
    src = in.raw_data();
    if (in.is_donatable()) {
      out.move_shared_buffer(in);
    } else {
      out.set_data(allocator::malloc(out.nbytes()), in.data_size(), in.strides(), in.flags());
    }
  } else {
    // Rows in the output's own buffer: reduced axes last, cast on the way in.
    Shape perm_shape;
    for (int d : v.perm) perm_shape.push_back(in.shape(d));
    Strides rm = row_major_strides(perm_shape);
    Strides strides(in.ndim());
    for (size_t q = 0; q < v.perm.size(); ++q) strides[v.perm[q]] = rm[q];
    out.set_data(allocator::malloc(out.nbytes()), out.size(), strides,
                 compute_flags(out.shape(), strides));
    array w(perm_shape, out.dtype(), nullptr, {});
    w.copy_shared_buffer(out, rm, compute_flags(perm_shape, rm), out.size());
    copy_into(permuted_view(in, v.perm), w);
    src = out.raw_data();
    kept_shape = {static_cast<ShapeElem>(out.size() / v.n)};
    kept_strides = {v.n};
  }
  const int64_t n = v.n;
  const int64_t rows = out.size() / n;
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(src);
    T* y = out.data<T>();
    for_rows(rows, n, [&](int64_t b, int64_t e) {
      std::vector<compute_t<T>> scratch(std::is_same_v<T, compute_t<T>> ? 0 : n);
      for (int64_t r = b; r < e; ++r) {
        int64_t loc = elem_to_loc(r, kept_shape, kept_strides);
        softmax_row<T>(x + loc, y + loc, n, scratch.data());
      }
    });
  });
}

void LogSumExp::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  RowView v = row_view(in, axes_);
  array src = in;
  if (in.dtype() != out.dtype() || !v.rows_inplace) {
    array permuted = permuted_view(in, v.perm);
    src = array(permuted.shape(), out.dtype(), nullptr, {});
    copy_to_row_contiguous(permuted, src);
    v.kept_shape = {static_cast<ShapeElem>(out.size())};
    v.kept_strides = {v.n};
  }
  dispatch_float(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = src.data<T>();
    T* y = out.data<T>();
    for_rows(static_cast<int64_t>(out.size()), v.n, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        y[r] = logsumexp_row(x + elem_to_loc(r, v.kept_shape, v.kept_strides), v.n);
      }
    });
  });
}

}  // namespace tessera
