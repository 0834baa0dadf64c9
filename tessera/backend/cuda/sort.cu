// eval_gpu of Sort, SearchSorted and PermuteAxis.
//
// Sort: every row is copied into a contiguous buffer of unsigned keys whose
// order is NumPy's (common/sort_keys.h), with its positions 0..n-1 as values;
// CUB's segmented stable radix sort orders all rows in one call; a last
// kernel writes the decoded keys (values) or the positions (indices) into the
// row-contiguous output. A full stable sort is a valid partition, so the
// partitions take the same path (Note [Sort order]). CUB lives in this file
// only (it is heavy to compile).
#include <cub/device/device_segmented_sort.cuh>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/backend/common/axis_plan.h"
#include "tessera/backend/common/sort_keys.h"
#include "tessera/backend/cuda/reduce.cuh"
#include "tessera/ops/primitives/sort.h"

namespace tessera {

template <>
struct SortKey<__half> : Half16Key<__half, false> {};
template <>
struct SortKey<__nv_bfloat16> : Half16Key<__nv_bfloat16, true> {};

namespace {

using namespace gpu;

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n, const char* op) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b > INT32_MAX) throw std::invalid_argument(std::string("[") + op + "] array too large for the GPU");
  return static_cast<unsigned>(b);
}

// keys[g], pos[g] for g = r * n + i: element i of row r.
template <typename T>
__global__ void gather_keys_kernel(const T* x, Dims<2> rest, int64_t n, int64_t xs, int64_t total,
                                   typename SortKey<T>::K* keys, uint32_t* pos) {
  const int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (g >= total) return;
  const int64_t r = g / n, i = g - r * n;
  keys[g] = SortKey<T>::encode(x[offset_of(r, rest, 0) + i * xs]);
  if (pos) pos[g] = static_cast<uint32_t>(i);
}

__global__ void segment_offsets_kernel(int* offsets, int64_t rows, int64_t n) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r <= rows) offsets[r] = static_cast<int>(r * n);
}

template <typename T>
__global__ void scatter_values_kernel(const typename SortKey<T>::K* keys, Dims<2> rest, int64_t n,
                                      int64_t ys, int64_t total, T* y) {
  const int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (g >= total) return;
  const int64_t r = g / n, i = g - r * n;
  y[offset_of(r, rest, 1) + i * ys] = SortKey<T>::decode(keys[g]);
}

__global__ void scatter_indices_kernel(const uint32_t* pos, Dims<2> rest, int64_t n, int64_t ys,
                                       int64_t total, uint32_t* y) {
  const int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (g >= total) return;
  const int64_t r = g / n, i = g - r * n;
  y[offset_of(r, rest, 1) + i * ys] = pos[g];
}

void check_cub(cudaError_t err, const char* call) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("[Sort] ") + call + " failed: " + cudaGetErrorString(err));
  }
}

template <typename T>
void run_sort(const void* xv, void* out, const AxisPlan& p, bool indices, const Stream& s) {
  using K = typename SortKey<T>::K;
  const int64_t total = p.rows * p.n;
  if (total > INT32_MAX) {
    throw std::invalid_argument("[Sort] arrays of more than 2^31 - 1 elements are not supported on the GPU");
  }
  cudaStream_t st = cuda_stream(s);
  Dims<2> rest = make_dims<2>(p.rest_shape, {p.in_strides, p.out_strides});
  K* keys_in = static_cast<K*>(scratch(total * sizeof(K), s));
  K* keys_out = static_cast<K*>(scratch(total * sizeof(K), s));
  uint32_t* pos_in = indices ? static_cast<uint32_t*>(scratch(total * sizeof(uint32_t), s)) : nullptr;
  uint32_t* pos_out = indices ? static_cast<uint32_t*>(scratch(total * sizeof(uint32_t), s)) : nullptr;
  int* offsets = static_cast<int*>(scratch((p.rows + 1) * sizeof(int), s));
  gather_keys_kernel<T><<<blocks_for(total, "Sort"), kThreads, 0, st>>>(
      static_cast<const T*>(xv), rest, p.n, p.in_stride, total, keys_in, pos_in);
  check_launch("Sort");
  segment_offsets_kernel<<<blocks_for(p.rows + 1, "Sort"), kThreads, 0, st>>>(offsets, p.rows, p.n);
  check_launch("Sort");
  const int items = static_cast<int>(total), segments = static_cast<int>(p.rows);
  size_t temp_bytes = 0;
  if (indices) {
    check_cub(cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp_bytes, keys_in, keys_out,
                                                        pos_in, pos_out, items, segments, offsets,
                                                        offsets + 1, st),
              "cub::DeviceSegmentedSort::StableSortPairs");
    void* temp = scratch(std::max<size_t>(temp_bytes, 1), s);
    check_cub(cub::DeviceSegmentedSort::StableSortPairs(temp, temp_bytes, keys_in, keys_out,
                                                        pos_in, pos_out, items, segments, offsets,
                                                        offsets + 1, st),
              "cub::DeviceSegmentedSort::StableSortPairs");
    scatter_indices_kernel<<<blocks_for(total, "Sort"), kThreads, 0, st>>>(
        pos_out, rest, p.n, p.out_stride, total, static_cast<uint32_t*>(out));
  } else {
    check_cub(cub::DeviceSegmentedSort::StableSortKeys(nullptr, temp_bytes, keys_in, keys_out,
                                                       items, segments, offsets, offsets + 1, st),
              "cub::DeviceSegmentedSort::StableSortKeys");
    void* temp = scratch(std::max<size_t>(temp_bytes, 1), s);
    check_cub(cub::DeviceSegmentedSort::StableSortKeys(temp, temp_bytes, keys_in, keys_out, items,
                                                       segments, offsets, offsets + 1, st),
              "cub::DeviceSegmentedSort::StableSortKeys");
    scatter_values_kernel<T><<<blocks_for(total, "Sort"), kThreads, 0, st>>>(
        keys_out, rest, p.n, p.out_stride, total, static_cast<T*>(out));
  }
  check_launch("Sort");
}

template <typename T>
__global__ void search_kernel(const T* a, int64_t n, int64_t as, const T* v, Dims<1> vd,
                              int64_t total, bool right, uint32_t* y) {
  const int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (g >= total) return;
  using Enc = SortKey<T>;
  const auto k = Enc::encode(v[offset_of(g, vd, 0)]);
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = (lo + hi) / 2;
    auto m = Enc::encode(a[mid * as]);
    if (right ? !(k < m) : (m < k)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  y[g] = static_cast<uint32_t>(lo);
}

// out[g] = x[rest offset + clamp(perm[g]) * xs] over the row-contiguous output.
template <typename T>
__global__ void permute_kernel(const T* x, const uint32_t* perm, Dims<2> d, int64_t n, int64_t xs,
                               int64_t total, T* y) {
  const int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (g >= total) return;
  int64_t j = perm[offset_of(g, d, 1)];
  j = j < n ? j : n - 1;
  y[g] = x[offset_of(g, d, 0) + j * xs];
}

}  // namespace

void Sort::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  AxisPlan p = axis_plan(in.shape(), in.strides(), axis_);
  const Stream& s = stream();
  void* y = allocate_output(out, s);
  if (out.size() == 0) return;
  const void* x = device_ptr(in, s);
  dispatch_device(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, c64>) {
      throw std::logic_error("[Sort] complex input reached the kernel (bug)");
    } else {
      run_sort<T>(x, y, p, returns_indices(), s);
    }
  });
}

void SearchSorted::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& a = inputs[0];
  const array& v = inputs[1];
  const Stream& s = stream();
  uint32_t* y = allocate_output<uint32_t>(out, s);
  if (out.size() == 0) return;
  const int64_t n = a.size();
  const void* ap = n > 0 ? device_ptr(a, s) : nullptr;
  const void* vp = device_ptr(v, s);
  Shape vshape = v.shape();
  Strides vstrides = v.strides();
  if (vshape.empty()) {
    vshape.push_back(1);
    vstrides.push_back(0);
  }
  Dims<1> vd = make_dims<1>(vshape, {vstrides});
  const int64_t as = a.ndim() ? a.strides()[0] : 0;
  const int64_t total = out.size();
  dispatch_device(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, c64>) {
      throw std::logic_error("[SearchSorted] complex input reached the kernel (bug)");
    } else {
      search_kernel<T><<<blocks_for(total, "SearchSorted"), kThreads, 0, cuda_stream(s)>>>(
          static_cast<const T*>(ap), n, as, static_cast<const T*>(vp), vd, total, right_, y);
    }
  });
  check_launch("SearchSorted");
}

void PermuteAxis::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& x = inputs[0];
  const array& perm = inputs[1];
  const Stream& s = stream();
  void* y = allocate_output(out, s);
  if (out.size() == 0) return;
  Strides xs = x.strides();
  const int64_t axis_stride = xs[axis_];
  xs[axis_] = 0;
  Dims<2> d = make_dims<2>(x.shape(), {xs, perm.strides()});
  const void* xp = device_ptr(x, s);
  const uint32_t* pp = device_ptr<uint32_t>(perm, s);
  const int64_t total = out.size();
  dispatch_width(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    permute_kernel<T><<<blocks_for(total, "PermuteAxis"), kThreads, 0, cuda_stream(s)>>>(
        static_cast<const T*>(xp), pp, d, x.shape(axis_), axis_stride, total, static_cast<T*>(y));
  });
  check_launch("PermuteAxis");
}

}  // namespace tessera
