// eval_gpu of Scan.
//
// The input is seen as rows along the scan axis (AxisPlan, shared with the
// CPU). Two kernels:
//   rows     one block per row: each tile of kThreads * kItems elements is
//            scanned in registers (kItems per thread), across the warp with
//            shuffles and across warps through shared memory, then offset by
//            the carry of the tiles before it.
//   columns  one thread per row, sequentially: for many short rows, and for
//            scans over an outer axis, where neighbouring threads read
//            neighbouring addresses.
// Accumulators: float for 16-bit floats, the unsigned type for signed
// integers (wrapping, as on the CPU), the element type otherwise.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/backend/common/axis_plan.h"
#include "tessera/backend/common/scan_ops.h"
#include "tessera/backend/cuda/reduce.cuh"
#include "tessera/ops/primitives/scan.h"

namespace tessera {

namespace {

using namespace gpu;

constexpr int kThreads = 256;
constexpr int kItems = 4;

template <typename Op>
__device__ __forceinline__ typename Op::A load(const typename Op::T* x, int64_t loc) {
  return convert<typename Op::A>(x[loc]);
}

// One block per row (blockIdx.x + blockIdx.y * gridDim.x).
template <typename Op>
__global__ void __launch_bounds__(kThreads)
    scan_rows_kernel(const typename Op::T* x, typename Op::T* y, Dims<2> rest, int64_t rows,
                     int64_t n, int64_t xs, int64_t ys, bool reverse, bool inclusive) {
  using A = typename Op::A;
  using T = typename Op::T;
  const int64_t r = blockIdx.x + int64_t(blockIdx.y) * gridDim.x;
  if (r >= rows) return;
  const int64_t xo = offset_of(r, rest, 0), yo = offset_of(r, rest, 1);
  __shared__ A warp_total[kThreads / 32];
  __shared__ A warp_prefix[kThreads / 32];
  __shared__ A carry_s;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) carry_s = Op::init();
  __syncthreads();
  constexpr int64_t kTile = int64_t(kThreads) * kItems;
  for (int64_t base = 0; base < n; base += kTile) {
    // Scan-order positions base + threadIdx.x * kItems + j.
    A v[kItems];
    A local = Op::init();
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      int64_t k = base + int64_t(threadIdx.x) * kItems + j;
      A e = Op::init();
      if (k < n) e = load<Op>(x, xo + (reverse ? n - 1 - k : k) * xs);
      v[j] = e;
      local = Op::step(local, e);
    }
    // Inclusive scan of the thread totals across the warp.
    A incl = local;
#pragma unroll
    for (int off = 1; off < 32; off *= 2) {
      A up = shfl_up(incl, off);
      if (lane >= off) incl = Op::step(up, incl);
    }
    A excl = shfl_up(incl, 1);
    if (lane == 0) excl = Op::init();
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
      A run = carry_s;
      for (int w = 0; w < kThreads / 32; ++w) {
        warp_prefix[w] = run;
        run = Op::step(run, warp_total[w]);
      }
      carry_s = run;
    }
    __syncthreads();
    A acc = Op::step(warp_prefix[warp], excl);
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      int64_t k = base + int64_t(threadIdx.x) * kItems + j;
      A before = acc;
      acc = Op::step(acc, v[j]);
      if (k < n) y[yo + (reverse ? n - 1 - k : k) * ys] = convert<T>(inclusive ? acc : before);
    }
    __syncthreads();  // warp_prefix is rewritten by the next tile
  }
}

// One thread per row.
template <typename Op>
__global__ void scan_columns_kernel(const typename Op::T* x, typename Op::T* y, Dims<2> rest,
                                    int64_t rows, int64_t n, int64_t xs, int64_t ys, bool reverse,
                                    bool inclusive) {
  using A = typename Op::A;
  using T = typename Op::T;
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
  const int64_t xo = offset_of(r, rest, 0), yo = offset_of(r, rest, 1);
  A acc = Op::init();
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = reverse ? n - 1 - k : k;
    A e = load<Op>(x, xo + i * xs);
    A before = acc;
    acc = Op::step(acc, e);
    y[yo + i * ys] = convert<T>(inclusive ? acc : before);
  }
}

template <typename Op>
void run_scan(const void* xv, void* yv, const AxisPlan& p, bool reverse, bool inclusive,
              const Stream& s) {
  using T = typename Op::T;
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  Dims<2> rest = make_dims<2>(p.rest_shape, {p.in_strides, p.out_strides});
  cudaStream_t st = cuda_stream(s);
  const bool columns = p.n <= 16 || (p.inner_contiguous() && p.rows >= 2048 && p.n <= 4096);
  if (columns) {
    const int64_t blocks = (p.rows + kThreads - 1) / kThreads;
    if (blocks > INT32_MAX) throw std::invalid_argument("[Scan] too many rows for the GPU");
    scan_columns_kernel<Op><<<static_cast<unsigned>(blocks), kThreads, 0, st>>>(
        x, y, rest, p.rows, p.n, p.in_stride, p.out_stride, reverse, inclusive);
  } else {
    const int64_t gx = std::min<int64_t>(p.rows, 65535);
    const int64_t gy = (p.rows + gx - 1) / gx;
    if (gy > 65535) throw std::invalid_argument("[Scan] too many rows for the GPU");
    scan_rows_kernel<Op><<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), kThreads, 0,
                           st>>>(x, y, rest, p.rows, p.n, p.in_stride, p.out_stride, reverse,
                                 inclusive);
  }
  check_launch("Scan");
}

}  // namespace

void Scan::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.dtype() != out.dtype()) throw std::logic_error("[Scan] input and output dtypes differ (bug)");
  const Stream& s = stream();
  void* y = allocate_output(out, s);
  if (out.size() == 0) return;
  AxisPlan p = axis_plan(in.shape(), in.strides(), in.ndim() == 0 ? 0 : axis_);
  const void* x = device_ptr(in, s);
  dispatch_device(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_ops::visit_scan_op<T, dev_compute_t<T>>(
        type_, [&](auto op) { run_scan<decltype(op)>(x, y, p, reverse_, inclusive_, s); });
  });
}

}  // namespace tessera
