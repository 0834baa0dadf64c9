// eval_gpu of the indexing primitives: Gather, Scatter, GatherAxis,
// ScatterAxis, MaskedScatter (Note [Index arrays] in ops/primitives/indexing.h:
// out-of-range indices gather zeros and scatter nothing).
//
// Scatters with a reduction combine their updates with atomics: native ones
// where CUDA has them (add on 32/64-bit integers, float, double, and each
// half of a complex; max/min on 32/64-bit integers), a compare-and-swap loop
// otherwise (on the 32-bit word around a 1- or 2-byte element). The order in
// which duplicate indices combine is unspecified, so float sums may differ
// from the CPU's in the last bits.
#include <cub/device/device_scan.cuh>

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/backend/cuda/types.cuh"
#include "tessera/ops/primitives/indexing.h"

namespace tessera {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxIndexArrays = 8;

// The index arrays of a Gather or Scatter, and how each addresses its axis.
struct IndexArgs {
  int n;
  bool dense;  // every index array row-contiguous: tuple i is element i of each
  const void* ptr[kMaxIndexArrays];
  int64_t extent[kMaxIndexArrays];
  int64_t window[kMaxIndexArrays];
  int64_t step[kMaxIndexArrays];
  gpu::Dims<kMaxIndexArrays> dims;  // the index shape and each array's strides
};

IndexArgs index_args(const std::vector<array>& idx, const std::vector<int>& axes,
                     const Shape& extents, const Shape& windows, const Strides& strides,
                     const Stream& s, const char* op) {
  if (idx.size() > size_t(kMaxIndexArrays)) {
    throw std::invalid_argument(std::string("[") + op +
                                "] more than 8 index arrays are not supported on the GPU");
  }
  IndexArgs ix{};
  ix.n = static_cast<int>(idx.size());
  ix.dense = true;
  for (int k = 0; k < ix.n; ++k) {
    ix.ptr[k] = gpu::device_ptr(idx[k], s);
    ix.dense = ix.dense && idx[k].flags().row_contiguous;
    ix.extent[k] = extents[axes[k]];
    ix.window[k] = windows[axes[k]];
    ix.step[k] = strides[axes[k]];
  }
  if (!ix.dense) {
    std::vector<Strides> st;
    for (int k = 0; k < kMaxIndexArrays; ++k) {
      st.push_back(k < ix.n ? idx[k].strides() : Strides(idx[0].ndim(), 0));
    }
    ix.dims = gpu::make_dims<kMaxIndexArrays>(idx[0].shape(), st);
  }
  return ix;
}

// Marks an index tuple out of range: a window's offset itself may be negative
// (a view with a negative stride).
constexpr int64_t kOutOfRange = INT64_MIN;

// The element offset of index tuple i's window, or kOutOfRange.
template <typename I>
__device__ int64_t tuple_start(const IndexArgs& ix, int64_t i) {
  int64_t loc[kMaxIndexArrays];
  if (ix.dense) {
    for (int k = 0; k < kMaxIndexArrays; ++k) loc[k] = i;
  } else {
    gpu::elem_to_loc(i, ix.dims, loc);
  }
  int64_t base = 0;
  for (int k = 0; k < ix.n; ++k) {
    int64_t v = static_cast<int64_t>(static_cast<const I*>(ix.ptr[k])[loc[k]]);
    if (v < 0) v += ix.extent[k];
    if (v < 0 || v > ix.extent[k] - ix.window[k]) return kOutOfRange;
    base += v * ix.step[k];
  }
  return base;
}

__device__ __forceinline__ int64_t in_range(int64_t v, int64_t n) {
  if (v < 0) v += n;
  return (v >= 0 && v < n) ? v : -1;
}

// ---- atomic combination ------------------------------------------------------

template <typename T>
__device__ __forceinline__ T combine(Scatter::ReduceType r, T a, T b) {
  if constexpr (std::is_same_v<T, gpu::c64>) {
    if (r == Scatter::Sum) return a + b;
    if (r == Scatter::Prod) return a * b;
    return b;
  } else if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case Scatter::Sum: case Scatter::Max: return a || b;
      case Scatter::Prod: case Scatter::Min: return a && b;
      case Scatter::None: return b;
    }
    return b;
  } else {
    auto x = gpu::widen(a), y = gpu::widen(b);
    switch (r) {
      case Scatter::Sum: return gpu::cast_to<T>(x + y);
      case Scatter::Prod: return gpu::cast_to<T>(x * y);
      case Scatter::Max: return (y != y || y > x) ? b : a;
      case Scatter::Min: return (y != y || y < x) ? b : a;
      case Scatter::None: return b;
    }
    return b;
  }
}

// *addr = combine(r, *addr, v) through a compare-and-swap loop.
template <typename T>
__device__ void atomic_cas_combine(T* addr, T v, Scatter::ReduceType r) {
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using U = std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>;
    U* p = reinterpret_cast<U*>(addr);
    U old = *p, assumed;
    do {
      assumed = old;
      T cur;
      memcpy(&cur, &assumed, sizeof(T));
      T next = combine(r, cur, v);
      U bits;
      memcpy(&bits, &next, sizeof(T));
      old = atomicCAS(p, assumed, bits);
    } while (assumed != old);
  } else {
    // A 1- or 2-byte element inside its aligned 32-bit word. Device blocks
    // start 256-byte aligned, so the word never leaves the element's block
    // (it may reach up to 3 bytes past the last element, into the block's
    // padding); the other bytes of the word are written back unchanged, and
    // every write to this output in the kernel is such a compare-and-swap.
    using U = std::conditional_t<sizeof(T) == 1, uint8_t, uint16_t>;
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
    const unsigned shift = static_cast<unsigned>(a & 3) * 8;
    const unsigned mask = ((1u << (8 * sizeof(T))) - 1u) << shift;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      U cb = static_cast<U>((assumed & mask) >> shift);
      T cur;
      memcpy(&cur, &cb, sizeof(T));
      T next = combine(r, cur, v);
      U nb;
      memcpy(&nb, &next, sizeof(T));
      old = atomicCAS(word, assumed, (assumed & ~mask) | (static_cast<unsigned>(nb) << shift));
    } while (assumed != old);
  }
}

template <typename T>
__device__ __forceinline__ void atomic_combine(T* addr, T v, Scatter::ReduceType r) {
  if (r == Scatter::Sum) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>) {
      atomicAdd(addr, v);
      return;
    } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
      atomicAdd(reinterpret_cast<unsigned long long*>(addr), static_cast<unsigned long long>(v));
      return;
    } else if constexpr (std::is_same_v<T, gpu::c64>) {
      atomicAdd(&addr->re, v.re);
      atomicAdd(&addr->im, v.im);
      return;
    }
  } else if (r == Scatter::Max || r == Scatter::Min) {
    if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t> ||
                  std::is_same_v<T, uint64_t>) {
      using A = std::conditional_t<std::is_same_v<T, uint64_t>, unsigned long long, T>;
      if (r == Scatter::Max) {
        atomicMax(reinterpret_cast<A*>(addr), static_cast<A>(v));
      } else {
        atomicMin(reinterpret_cast<A*>(addr), static_cast<A>(v));
      }
      return;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      if (r == Scatter::Max) {
        atomicMax(reinterpret_cast<long long*>(addr), static_cast<long long>(v));
      } else {
        atomicMin(reinterpret_cast<long long*>(addr), static_cast<long long>(v));
      }
      return;
    }
  }
  atomic_cas_combine(addr, v, r);
}

// ---- kernels -----------------------------------------------------------------

#define TESSERA_GRID_LOOP(i, n)                                                   \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);       \
       i += int64_t(gridDim.x) * blockDim.x)

// out[i * w + j] = window element j of index tuple i (zero when out of range).
template <typename T, typename I>
__global__ void gather_kernel(const T* src, T* out, IndexArgs ix, gpu::Dims<1> win, int64_t w,
                              int64_t total) {
  TESSERA_GRID_LOOP(o, total) {
    const int64_t i = o / w, j = o - i * w;
    const int64_t base = tuple_start<I>(ix, i);
    T v{};
    if (base != kOutOfRange) {
      int64_t off[1];
      gpu::elem_to_loc(j, win, off);
      v = src[base + off[0]];
    }
    out[o] = v;
  }
}

// Update element u (of index tuple u / w) combined into its place in out.
template <typename T, typename I>
__global__ void scatter_kernel(const T* upd, T* out, IndexArgs ix, gpu::Dims<1> win,
                               gpu::Dims<1> udims, int64_t w, int64_t total,
                               Scatter::ReduceType r) {
  TESSERA_GRID_LOOP(u, total) {
    const int64_t i = u / w, j = u - i * w;
    const int64_t base = tuple_start<I>(ix, i);
    if (base == kOutOfRange) continue;
    int64_t off[1], uloc[1];
    gpu::elem_to_loc(j, win, off);
    gpu::elem_to_loc(u, udims, uloc);
    T* dst = out + base + off[0];
    if (r == Scatter::None) {
      *dst = upd[uloc[0]];
    } else {
      atomic_combine(dst, upd[uloc[0]], r);
    }
  }
}

// d's stride sets: a (0 on the axis), idx, out.
template <typename T, typename I>
__global__ void gather_axis_kernel(const T* src, const I* idx, T* out, gpu::Dims<3> d,
                                   int64_t extent, int64_t step, int64_t total) {
  TESSERA_GRID_LOOP(e, total) {
    int64_t loc[3];
    gpu::elem_to_loc(e, d, loc);
    const int64_t v = in_range(static_cast<int64_t>(idx[loc[1]]), extent);
    out[loc[2]] = v < 0 ? T{} : src[loc[0] + v * step];
  }
}

// d's stride sets: updates, idx, out (0 on the axis).
template <typename T, typename I>
__global__ void scatter_axis_kernel(const T* upd, const I* idx, T* out, gpu::Dims<3> d,
                                    int64_t extent, int64_t step, int64_t total, bool sum) {
  TESSERA_GRID_LOOP(e, total) {
    int64_t loc[3];
    gpu::elem_to_loc(e, d, loc);
    const int64_t v = in_range(static_cast<int64_t>(idx[loc[1]]), extent);
    if (v < 0) continue;
    T* dst = out + loc[2] + v * step;
    if (sum) {
      atomic_combine(dst, upd[loc[0]], Scatter::Sum);
    } else {
      *dst = upd[loc[0]];
    }
  }
}

__global__ void mask_flags_kernel(const bool* mask, gpu::Dims<1> d, int64_t* flags, int64_t n) {
  TESSERA_GRID_LOOP(i, n) {
    int64_t loc[1];
    gpu::elem_to_loc(i, d, loc);
    flags[i] = mask[loc[0]] ? 1 : 0;
  }
}

// out (row-contiguous) takes src[rank[i]] at the true positions of the mask.
template <typename T>
__global__ void masked_scatter_kernel(const bool* mask, gpu::Dims<1> d, const int64_t* rank,
                                      const T* src, int64_t src_stride, int64_t available,
                                      T* out, int64_t n) {
  TESSERA_GRID_LOOP(i, n) {
    int64_t loc[1];
    gpu::elem_to_loc(i, d, loc);
    if (mask[loc[0]] && rank[i] < available) out[i] = src[rank[i] * src_stride];
  }
}

#undef TESSERA_GRID_LOOP

// out = a as a row-contiguous device array (a's buffer reused when it can be).
void* copy_or_donate(const array& a, array& out, const Stream& s, const char* op) {
  if (a.is_donatable() && a.flags().row_contiguous && a.data_size() == a.size()) {
    array donor = a;
    out.move_shared_buffer(donor);
    return gpu::writable_device_ptr(out, s);
  }
  void* base = gpu::allocate_output(out, s);
  if (a.size() > 0) {
    gpu::copy_gpu(a.shape(), gpu::device_ptr(a, s), a.dtype(), a.strides(), base, out.dtype(),
                  out.strides(), s, op);
  }
  return base;
}

gpu::Dims<1> window_dims(const Shape& window, const Strides& strides) {
  return gpu::make_dims<1>(window, {strides});
}

}  // namespace

void Gather::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  const array& a = inputs[0];
  std::vector<array> idx(inputs.begin() + 1, inputs.end());
  void* dst = gpu::allocate_output(out, s);
  const int64_t total = static_cast<int64_t>(out.size());
  if (total == 0) return;
  IndexArgs ix = index_args(idx, axes_, a.shape(), slice_sizes_, a.strides(), s, "Gather");
  auto win = window_dims(slice_sizes_, a.strides());
  const int64_t w = shape_size(slice_sizes_);
  const void* src = gpu::device_ptr(a, s);
  gpu::dispatch_width(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(idx.empty() ? int32 : idx[0].dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      gather_kernel<T, I><<<gpu::grid_blocks(total, kThreads), kThreads, 0, gpu::cuda_stream(s)>>>(
          static_cast<const T*>(src), static_cast<T*>(dst), ix, win, w, total);
    });
  });
  gpu::check_launch("Gather");
}

void Scatter::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  const array& a = inputs[0];
  const array& upd = inputs.back();
  std::vector<array> idx(inputs.begin() + 1, inputs.end() - 1);
  void* dst = copy_or_donate(a, out, s, "Scatter");
  const int64_t total = static_cast<int64_t>(upd.size());
  size_t k = upd.ndim() - a.ndim();
  Shape window(upd.shape().begin() + k, upd.shape().end());
  const int64_t w = shape_size(window);
  if (total == 0 || w == 0) return;
  IndexArgs ix = index_args(idx, axes_, out.shape(), window, out.strides(), s, "Scatter");
  auto win = window_dims(window, out.strides());
  auto [ushape, ustrides] = tessera::collapse_contiguous_dims(upd.shape(), {upd.strides()});
  auto udims = gpu::make_dims<1>(ushape, ustrides);
  const void* u = gpu::device_ptr(upd, s);
  const auto r = type_;
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(idx.empty() ? int32 : idx[0].dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      scatter_kernel<T, I><<<gpu::grid_blocks(total, kThreads), kThreads, 0, gpu::cuda_stream(s)>>>(
          static_cast<const T*>(u), static_cast<T*>(dst), ix, win, udims, w, total, r);
    });
  };
  if (r == None) {
    gpu::dispatch_width(out.dtype(), launch);
  } else {
    gpu::dispatch_device(out.dtype(), launch);
  }
  gpu::check_launch("Scatter");
}

void GatherAxis::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  const array& a = inputs[0];
  const array& idx = inputs[1];
  void* dst = gpu::allocate_output(out, s);
  const int64_t total = static_cast<int64_t>(out.size());
  if (total == 0) return;
  Strides a_strides = a.strides();
  const int64_t step = a_strides[axis_], extent = a.shape(axis_);
  a_strides[axis_] = 0;
  auto [shape, strides] =
      tessera::collapse_contiguous_dims(out.shape(), {a_strides, idx.strides(), out.strides()});
  auto d = gpu::make_dims<3>(shape, strides);
  const void* src = gpu::device_ptr(a, s);
  const void* ip = gpu::device_ptr(idx, s);
  gpu::dispatch_width(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      gather_axis_kernel<T, I><<<gpu::grid_blocks(total, kThreads), kThreads, 0,
                                 gpu::cuda_stream(s)>>>(static_cast<const T*>(src),
                                                        static_cast<const I*>(ip),
                                                        static_cast<T*>(dst), d, extent, step,
                                                        total);
    });
  });
  gpu::check_launch("GatherAxis");
}

void ScatterAxis::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  const array& idx = inputs[1];
  const array& upd = inputs[2];
  void* dst = copy_or_donate(inputs[0], out, s, "ScatterAxis");
  const int64_t total = static_cast<int64_t>(upd.size());
  if (total == 0) return;
  Strides o_strides = out.strides();
  const int64_t step = o_strides[axis_], extent = out.shape(axis_);
  o_strides[axis_] = 0;
  auto [shape, strides] =
      tessera::collapse_contiguous_dims(upd.shape(), {upd.strides(), idx.strides(), o_strides});
  auto d = gpu::make_dims<3>(shape, strides);
  const void* u = gpu::device_ptr(upd, s);
  const void* ip = gpu::device_ptr(idx, s);
  const bool sum = type_ == Sum;
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = typename decltype(itag)::type;
      scatter_axis_kernel<T, I><<<gpu::grid_blocks(total, kThreads), kThreads, 0,
                                  gpu::cuda_stream(s)>>>(static_cast<const T*>(u),
                                                         static_cast<const I*>(ip),
                                                         static_cast<T*>(dst), d, extent, step,
                                                         total, sum);
    });
  };
  if (sum) {
    gpu::dispatch_device(out.dtype(), launch);
  } else {
    gpu::dispatch_width(out.dtype(), launch);
  }
  gpu::check_launch("ScatterAxis");
}

void MaskedScatter::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  const array& mask = inputs[1];
  const array& src = inputs[2];
  void* dst = copy_or_donate(inputs[0], out, s, "MaskedScatter");
  const int64_t n = static_cast<int64_t>(out.size());
  if (n == 0 || src.size() == 0) return;
  if (n > INT_MAX) {
    throw std::invalid_argument("[MaskedScatter] arrays of more than 2^31 - 1 elements are not "
                                "supported on the GPU");
  }
  auto [mshape, mstrides] = tessera::collapse_contiguous_dims(mask.shape(), {mask.strides()});
  auto d = gpu::make_dims<1>(mshape, mstrides);
  const bool* m = gpu::device_ptr<bool>(mask, s);
  cudaStream_t cs = gpu::cuda_stream(s);
  auto* flags = static_cast<int64_t*>(gpu::scratch(sizeof(int64_t) * n, s));
  auto* rank = static_cast<int64_t*>(gpu::scratch(sizeof(int64_t) * n, s));
  const unsigned blocks = gpu::grid_blocks(n, kThreads);
  mask_flags_kernel<<<blocks, kThreads, 0, cs>>>(m, d, flags, n);
  gpu::check_launch("MaskedScatter");
  size_t temp_bytes = 0;
  TESSERA_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, flags, rank, static_cast<int>(n), cs));
  void* temp = gpu::scratch(temp_bytes, s);
  TESSERA_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(temp, temp_bytes, flags, rank, static_cast<int>(n), cs));
  const void* sp = gpu::device_ptr(src, s);
  const int64_t src_stride = src.strides()[0];
  const int64_t available = static_cast<int64_t>(src.size());
  gpu::dispatch_width(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    masked_scatter_kernel<T><<<blocks, kThreads, 0, cs>>>(m, d, rank, static_cast<const T*>(sp),
                                                          src_stride, available,
                                                          static_cast<T*>(dst), n);
  });
  gpu::check_launch("MaskedScatter");
}

}  // namespace tessera
