// eval_gpu of Arange, Linspace, Band, View, AsStrided.
#include <algorithm>
#include <climits>
#include <cmath>

#include "tessera/backend/common/creation.h"
#include "tessera/backend/common/views.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/ops/primitives/creation.h"

namespace tessera {

namespace {

constexpr int kThreads = 256;

template <typename T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Integers wrap like the dtype (64-bit modular arithmetic, truncated); other
// dtypes compute in float64 and convert.
template <typename T>
__global__ void arange_kernel(T* out, int64_t n, double s, double inc, uint64_t si,
                              uint64_t inci) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (is_int_v<T>) {
      out[i] = static_cast<T>(si + uint64_t(i) * inci);
    } else {
      out[i] = gpu::cast_to<T>(s + double(i) * inc);
    }
  }
}

template <typename T>
__global__ void linspace_kernel(T* out, int64_t n, int64_t div, double start, double stop) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = div == 0 ? gpu::cast_to<T>(start)
                      : gpu::cast_to<T>(creation::linspace_value<C>(i, div, C(start), C(stop)));
  }
}

// out (row-contiguous) keeps in's elements with lo <= j - i <= hi, zero elsewhere.
template <typename T, typename I>
__global__ void band_kernel(const T* in, T* out, gpu::Dims<1> dims, I n, I rows, I cols,
                            int64_t lo, int64_t hi) {
  for (I e = I(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += I(gridDim.x) * blockDim.x) {
    I j = e % cols;
    I i = (e / cols) % rows;
    int64_t d = int64_t(j) - int64_t(i);
    T v{};
    if (lo <= d && d <= hi) {
      I loc[1];
      gpu::elem_to_loc(e, dims, loc);
      v = in[loc[0]];
    }
    out[e] = v;
  }
}

}  // namespace

void Arange::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  void* p = gpu::allocate_output(out, s);
  const int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) return;
  // The start and effective increment, computed on the host as the CPU does.
  double sd = 0, incd = 0;
  uint64_t si = 0, inci = 0;
  tessera::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (tessera::is_integral_v<T>) {
      si = static_cast<uint64_t>(tessera::cast_to<T>(start_));
      inci = static_cast<uint64_t>(tessera::cast_to<T>(start_ + step_)) - si;
    } else {
      sd = tessera::cast_to<double>(tessera::cast_to<T>(start_));
      incd = tessera::cast_to<double>(tessera::cast_to<T>(start_ + step_)) - sd;
    }
  });
  gpu::dispatch_device(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    arange_kernel<T><<<gpu::grid_blocks(n, kThreads), kThreads, 0, gpu::cuda_stream(s)>>>(
        static_cast<T*>(p), n, sd, incd, si, inci);
  });
  gpu::check_launch("Arange");
}

void Linspace::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  void* p = gpu::allocate_output(out, s);
  const int64_t n = static_cast<int64_t>(out.size());
  if (n == 0) return;
  const int64_t div = endpoint_ ? n - 1 : n;
  gpu::dispatch_device(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    linspace_kernel<T><<<gpu::grid_blocks(n, kThreads), kThreads, 0, gpu::cuda_stream(s)>>>(
        static_cast<T*>(p), n, div, start_, stop_);
  });
  gpu::check_launch("Linspace");
}

void Band::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto& s = stream();
  if (out.size() == 0) {
    gpu::allocate_output(out, s);
    return;
  }
  const bool in_place =
      in.flags().row_contiguous && in.data_size() == in.size() && in.is_donatable();
  const void* src;
  void* dst;
  Strides in_strides = in.strides();
  if (in_place) {
    array donor = in;
    out.move_shared_buffer(donor);
    dst = gpu::writable_device_ptr(out, s);
    src = dst;
  } else {
    src = gpu::device_ptr(in, s);
    dst = gpu::allocate_output(out, s);
  }
  const int nd = static_cast<int>(out.ndim());
  const int64_t n = static_cast<int64_t>(out.size());
  const int64_t rows = out.shape(nd - 2), cols = out.shape(nd - 1);
  auto [shape, strides] =
      tessera::collapse_contiguous_dims(out.shape(), {in_strides, row_major_strides(out.shape())});
  auto dims = gpu::make_dims<1>(shape, {strides[0]});
  int64_t span = 0;
  for (size_t d = 0; d < shape.size(); ++d) span += int64_t(shape[d] - 1) * std::abs(strides[0][d]);
  const unsigned blocks = gpu::grid_blocks(n, kThreads);
  const bool small = n + int64_t(blocks) * kThreads <= INT32_MAX && span <= INT32_MAX;
  cudaStream_t stream = gpu::cuda_stream(s);
  gpu::dispatch_width(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = static_cast<const T*>(src);
    T* pd = static_cast<T*>(dst);
    if (small) {
      band_kernel<T, int32_t><<<blocks, kThreads, 0, stream>>>(
          ps, pd, dims, int32_t(n), int32_t(rows), int32_t(cols), lo_, hi_);
    } else {
      band_kernel<T, int64_t><<<blocks, kThreads, 0, stream>>>(ps, pd, dims, n, rows, cols, lo_,
                                                                hi_);
    }
  });
  gpu::check_launch("Band");
}

void View::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (views::reinterpret(in, out)) return;
  array dense(in.shape(), in.dtype(), nullptr, {});
  gpu::copy_gpu_to_row_contiguous(in, dense, stream(), "View");
  views::reinterpret(dense, out);
}

}  // namespace tessera
