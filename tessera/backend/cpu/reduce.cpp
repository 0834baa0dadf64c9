// eval_cpu of Reduce, ArgReduce, Variance and Trace.
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
#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/reduce.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/reduce.h"

namespace tessera {

namespace cpu {

// Max / min of n contiguous floats or doubles, NaN propagating, in 16-byte
// vectors (GCC's vector extensions: the plain loop does not vectorise, its
// NaN test is control flow to the vectoriser). Also used by softmax.cpp.
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

template <typename T, typename O = sum_out_t<T>>
struct SumOp : OpTypes<T, O, sum_acc_t<O>> {
  static constexpr bool kAdds = true;
  using Acc = sum_acc_t<O>;
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, T x) { return a + to_acc<Acc>(x); }
  template <typename V>
  static V merge(V a, V b) { return a + b; }
  template <typename V>
  static O finish(V t, int64_t) { return to_out<O>(t); }
};

// Mean: float32 lanes for 16/32-bit floats, float64 otherwise.
template <typename T>
using mean_acc_t =
    std::conditional_t<is_complex_v<T>, complex64_t,
                       std::conditional_t<std::is_same_v<compute_t<T>, float>, float, double>>;

template <typename T, typename O = mean_out_t<T>>
struct MeanOp : OpTypes<T, O, mean_acc_t<T>> {
  static constexpr bool kAdds = true;
  using Acc = mean_acc_t<T>;
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, T x) { return a + to_acc<Acc>(x); }
  template <typename V>
  static V merge(V a, V b) { return a + b; }
  template <typename V>
  static O finish(V t, int64_t n) { return to_out<O>(t / static_cast<double>(n)); }
};

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

// Sum of n contiguous floats or doubles in independent lanes.
template <typename C>
TESSERA_SIMD_CLONES C sum_contiguous(const C* x, int64_t n) {
  constexpr int L = 32;
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
