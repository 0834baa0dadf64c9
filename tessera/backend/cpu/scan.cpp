// eval_cpu of Scan.
//
// The input is seen as rows along the scan axis (AxisPlan). Cases:
//   columns  the innermost other axis is contiguous in input and output (a scan
//            over axis 0 of a matrix): a block of rows advances together, one
//            vectorisable sweep per position along the axis.
//   rows     otherwise: each row is scanned on its own, rows in parallel; a
//            single long row is split into chunks, each chunk's total is
//            combined into the carry of the next (three passes).
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "tessera/backend/common/axis_plan.h"
#include "tessera/backend/common/scan_ops.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/scan.h"

namespace tessera {

namespace {

using namespace cpu;

constexpr int64_t kParallelWork = 1 << 15;  // elements below which a scan runs inline
constexpr int64_t kColumnBlock = 256;       // rows a column sweep advances at once

template <typename T, typename A>
inline A load(T x) {
  if constexpr (std::is_same_v<T, A>) {
    return x;
  } else {
    return static_cast<A>(static_cast<compute_t<T>>(x));
  }
}
template <typename T, typename A>
inline T store(A a) {
  if constexpr (std::is_same_v<T, A>) {
    return a;
  } else if constexpr (is_half_v<T>) {
    return T(static_cast<float>(a));
  } else {
    return static_cast<T>(a);
  }
}

// Scans n elements of x (stride xs) into y (stride ys) starting from carry;
// returns the total including the carry.
template <typename Op, typename T>
typename Op::A scan_row(const T* x, int64_t xs, T* y, int64_t ys, int64_t n, bool reverse,
                        bool inclusive, typename Op::A carry) {
  using A = typename Op::A;
  A acc = carry;
  if (reverse) {
    x += (n - 1) * xs;
    y += (n - 1) * ys;
    xs = -xs;
    ys = -ys;
  }
  if (inclusive) {
    if (xs == 1 && ys == 1) {
      for (int64_t i = 0; i < n; ++i) {
        acc = Op::step(acc, load<T, A>(x[i]));
        y[i] = store<T>(acc);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        acc = Op::step(acc, load<T, A>(x[i * xs]));
        y[i * ys] = store<T>(acc);
      }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      A v = load<T, A>(x[i * xs]);
      y[i * ys] = store<T>(acc);
      acc = Op::step(acc, v);
    }
  }
  return acc;
}

template <typename Op, typename T>
typename Op::A reduce_row(const T* x, int64_t xs, int64_t n) {
  using A = typename Op::A;
  A acc = Op::init();
  for (int64_t i = 0; i < n; ++i) acc = Op::step(acc, load<T, A>(x[i * xs]));
  return acc;
}

// One long row split into chunks across threads.
template <typename Op, typename T>
void scan_long_row(const T* x, int64_t xs, T* y, int64_t ys, int64_t n, bool reverse,
                   bool inclusive) {
  using A = typename Op::A;
  const int chunks = num_threads();
  std::unique_ptr<A[]> carry(new A[chunks]);
  // Chunk c covers scan-order positions [c n / chunks, (c + 1) n / chunks).
  auto range = [&](int64_t c, int64_t& b, int64_t& len) {
    int64_t s = c * n / chunks, e = (c + 1) * n / chunks;
    b = reverse ? n - e : s;
    len = e - s;
  };
  parallel_for(chunks - 1, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      int64_t b, len;
      range(c, b, len);
      carry[c + 1] = reduce_row<Op>(x + b * xs, xs, len);
    }
  });
  carry[0] = Op::init();
  for (int c = 1; c < chunks; ++c) carry[c] = Op::step(carry[c - 1], carry[c]);
  parallel_for(chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      int64_t b, len;
      range(c, b, len);
      scan_row<Op>(x + b * xs, xs, y + b * ys, ys, len, reverse, inclusive, carry[c]);
    }
  });
}

// A block of m adjacent rows (stride 1 in x and y), advanced together.
template <typename Op, typename T>
void scan_columns(const T* x, int64_t xs, T* y, int64_t ys, int64_t n, int64_t m, bool reverse,
                  bool inclusive) {
  using A = typename Op::A;
  A acc[kColumnBlock];
  for (int64_t j = 0; j < m; ++j) acc[j] = Op::init();
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = reverse ? n - 1 - k : k;
    const T* xr = x + i * xs;
    T* yr = y + i * ys;
    if (inclusive) {
      for (int64_t j = 0; j < m; ++j) {
        acc[j] = Op::step(acc[j], load<T, A>(xr[j]));
        yr[j] = store<T>(acc[j]);
      }
    } else {
      for (int64_t j = 0; j < m; ++j) {
        A v = load<T, A>(xr[j]);
        yr[j] = store<T>(acc[j]);
        acc[j] = Op::step(acc[j], v);
      }
    }
  }
}

template <typename Op, typename T>
void run_scan(const T* x, T* y, const AxisPlan& p, bool reverse, bool inclusive) {
  if (p.rows == 0 || p.n == 0) return;
  if (p.inner_contiguous() && p.n > 1) {
    const int64_t inner = p.rest_shape.back();
    const int64_t blocks_per_row = (inner + kColumnBlock - 1) / kColumnBlock;
    const int64_t outer = p.rows / inner;
    Shape outer_shape(p.rest_shape.begin(), p.rest_shape.end() - 1);
    Strides xo(p.in_strides.begin(), p.in_strides.end() - 1);
    Strides yo(p.out_strides.begin(), p.out_strides.end() - 1);
    const int64_t total = outer * blocks_per_row;
    const int64_t grain = std::max<int64_t>(1, kParallelWork / (p.n * kColumnBlock));
    parallel_for(total, grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / blocks_per_row, j0 = (t % blocks_per_row) * kColumnBlock;
        int64_t m = std::min(kColumnBlock, inner - j0);
        scan_columns<Op>(x + elem_to_loc(o, outer_shape, xo) + j0, p.in_stride,
                         y + elem_to_loc(o, outer_shape, yo) + j0, p.out_stride, p.n, m, reverse,
                         inclusive);
      }
    });
    return;
  }
  if (p.rows == 1 && p.n >= 4 * kParallelWork && num_threads() > 1) {
    scan_long_row<Op>(x, p.in_stride, y, p.out_stride, p.n, reverse, inclusive);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kParallelWork / p.n);
  parallel_for(p.rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      scan_row<Op>(x + elem_to_loc(r, p.rest_shape, p.in_strides), p.in_stride,
                   y + elem_to_loc(r, p.rest_shape, p.out_strides), p.out_stride, p.n, reverse,
                   inclusive, Op::init());
    }
  });
}

}  // namespace

void Scan::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  if (in.dtype() != out.dtype()) throw std::logic_error("[Scan] input and output dtypes differ (bug)");
  AxisPlan p = axis_plan(in.shape(), in.strides(), in.ndim() == 0 ? 0 : axis_);
  dispatch_all(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    scan_ops::visit_scan_op<T, compute_t<T>>(
        type_, [&](auto op) { run_scan<decltype(op)>(x, y, p, reverse_, inclusive_); });
  });
}

}  // namespace tessera
