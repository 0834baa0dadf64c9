// eval_gpu of Softmax.
//
// Rows are the reduced elements of one output row; the output always holds
// them consecutively (the input's own layout when the input is dense with the
// reduced axes innermost, else the kept axes then the reduced ones, row-major,
// as on the CPU). Two kernels, each a group of threads per row (a power of two
// <= 32 within a warp, or the whole block):
//   registers  float input of the output's dtype, contiguous rows of at most
//              8 16-byte vectors per thread: one read into registers, the max
//              and sum of exp(x - max) per thread, merged over the group, one
//              write. The input is read once.
//   looped     everything else (long rows, strided or integer input): a pass
//              for the running max and sum, a pass to write.
// 16-bit floats compute in float32 (so `precise` changes nothing here, as on
// the CPU).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "tessera/backend/cpu/strided.h"
#include "tessera/backend/cuda/reduce.cuh"
#include "tessera/ops/primitives/reduce.h"

namespace tessera {

namespace {

using namespace gpu;

constexpr int kMaxThreads = 1024;
// 16-byte vectors a thread of the registers kernel holds within 64 registers:
// 32 float32 values (16-bit ones are converted), 4 doubles (exp(double) needs
// registers of its own).
template <typename T>
inline constexpr int kMaxVecs = sizeof(T) == 4 ? 8 : sizeof(T) == 2 ? 4 : 2;

struct SoftmaxArgs {
  int64_t rows;
  int64_t n;        // elements per row
  int group;        // threads per row
  bool contiguous;  // input rows are n consecutive elements
  Dims<2> kept;     // row offsets: [0] input, [1] output
  Dims<1> red;      // input offsets within a row (when not contiguous)
};

template <typename C>
__device__ __forceinline__ MaxSum<C> merge_ms(MaxSum<C> a, MaxSum<C> b) {
  return max_sum_merge(a, b);
}

template <typename T, int VPT>
__global__ void __launch_bounds__(kMaxThreads)
    softmax_registers_kernel(const T* __restrict__ in, T* __restrict__ out, SoftmaxArgs a) {
  using C = dev_compute_t<T>;
  constexpr int V = kVec<T>;
  const int g = a.group;
  const int lane = threadIdx.x % g;
  const int per_block = blockDim.x / g;
  const int n = static_cast<int>(a.n);
  for (int64_t r0 = int64_t(blockIdx.x) * per_block; r0 < a.rows;
       r0 += int64_t(gridDim.x) * per_block) {
    const int64_t row = r0 + threadIdx.x / g;
    const bool active = row < a.rows;
    const T* x = in + (active ? offset_of(row, a.kept, 0) : 0);
    T* y = out + (active ? offset_of(row, a.kept, 1) : 0);
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    C c[VPT * V];
#pragma unroll
    for (int u = 0; u < VPT; ++u) {
      const int i = (u * g + lane) * V;
      if (active && aligned && i + V <= n) {
        Vec<T, V> r = *reinterpret_cast<const Vec<T, V>*>(x + i);
#pragma unroll
        for (int k = 0; k < V; ++k) c[u * V + k] = convert<C>(r.v[k]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) c[u * V + k] = (active && i + k < n) ? convert<C>(x[i + k]) : -C(INFINITY);
      }
    }
    // One exp per element: c becomes exp(c - m_t) with this thread's max
    // m_t, scaled to exp(c - m) / s once the row's m and s are known. A
    // thread whose values are all -inf keeps them and computes
    // exp(c - m) / s directly (NaN for a row of -inf, as on the CPU).
    MaxSum<C> ms{-C(INFINITY), C(0)};
#pragma unroll
    for (int q = 0; q < VPT * V; ++q) ms.m = (c[q] > ms.m || c[q] != c[q]) ? c[q] : ms.m;
    const C mt = ms.m;
    const bool scaled = mt != -C(INFINITY);
    if (scaled) {
#pragma unroll
      for (int q = 0; q < VPT * V; ++q) {
        c[q] = exp_(c[q] - mt);
        ms.s += c[q];
      }
    }
    ms = group_reduce(ms, g, merge_ms<C>);
    const C inv = C(1) / ms.s;
    const C scale = scaled ? exp_(mt - ms.m) * inv : C(0);
    if (active) {
#pragma unroll
      for (int u = 0; u < VPT; ++u) {
        const int i = (u * g + lane) * V;
        Vec<T, V> o;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C e = scaled ? c[u * V + k] * scale : exp_(c[u * V + k] - ms.m) * inv;
          o.v[k] = convert<T>(e);
        }
        if (aligned && i + V <= n) {
          *reinterpret_cast<Vec<T, V>*>(y + i) = o;
        } else {
#pragma unroll
          for (int k = 0; k < V; ++k) {
            if (i + k < n) y[i + k] = o.v[k];
          }
        }
      }
    }
  }
}

template <typename Tin, typename Tout>
__global__ void __launch_bounds__(256)
    softmax_looped_kernel(const Tin* __restrict__ in, Tout* __restrict__ out, SoftmaxArgs a) {
  using C = std::conditional_t<std::is_same_v<Tout, double>, double, float>;
  constexpr int V = kVec<Tin>;
  const int g = a.group;
  const int lane = threadIdx.x % g;
  const int per_block = blockDim.x / g;
  const int64_t n = a.n;
  for (int64_t r0 = int64_t(blockIdx.x) * per_block; r0 < a.rows;
       r0 += int64_t(gridDim.x) * per_block) {
    const int64_t row = r0 + threadIdx.x / g;
    const bool active = row < a.rows;
    const Tin* x = in + (active ? offset_of(row, a.kept, 0) : 0);
    Tout* y = out + (active ? offset_of(row, a.kept, 1) : 0);
    auto at = [&](int64_t i) { return a.contiguous ? x[i] : x[offset_of(i, a.red)]; };
    MaxSum<C> ms = max_sum_init<C>();
    if (active) {
      if (a.contiguous && V > 1 && (reinterpret_cast<uintptr_t>(x) & 15) == 0) {
        const Vec<Tin, V>* xv = reinterpret_cast<const Vec<Tin, V>*>(x);
        const int64_t nv = n / V;
        for (int64_t iv = lane; iv < nv; iv += g) {
          Vec<Tin, V> v = xv[iv];
#pragma unroll
          for (int k = 0; k < V; ++k) ms = max_sum_step(ms, convert<C>(v.v[k]));
        }
        for (int64_t i = nv * V + lane; i < n; i += g) ms = max_sum_step(ms, convert<C>(x[i]));
      } else {
        for (int64_t i = lane; i < n; i += g) ms = max_sum_step(ms, convert<C>(at(i)));
      }
    }
    ms = group_reduce(ms, g, merge_ms<C>);
    const C inv = C(1) / ms.s;
    if (active) {
      for (int64_t i = lane; i < n; i += g) {
        y[i] = convert<Tout>(exp_(convert<C>(at(i)) - ms.m) * inv);
      }
    }
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int pow2_at_least(int64_t n) {
  int g = 1;
  while (g < n && g < 32) g *= 2;
  return g;
}

template <typename K>
int64_t grid_for(K kernel, int threads, int64_t blocks) {
  int per_sm = 0;
  TESSERA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  // One pass of blocks (a softmax of 8192 rows of 32768 float32 on an H200:
  // 4.1 TB/s with a block per row, 3.9 with one block per multiprocessor
  // looping over rows); the cap only bounds the grid.
  int64_t resident = int64_t(properties().multiProcessorCount) * std::max(per_sm, 1);
  return std::max<int64_t>(1, std::min(blocks, resident * 1024));
}

template <typename T, int VPT>
void launch_registers(const T* x, T* y, SoftmaxArgs a, int threads, cudaStream_t st) {
  auto kernel = softmax_registers_kernel<T, VPT>;
  int64_t blocks = grid_for(kernel, threads, ceil_div(a.rows, threads / a.group));
  kernel<<<static_cast<unsigned>(blocks), threads, 0, st>>>(x, y, a);
}

// Runs the registers kernel when the rows fit; returns false otherwise.
template <typename T>
bool try_registers(const T* x, T* y, SoftmaxArgs a, cudaStream_t st) {
  constexpr int V = kVec<T>;
  if (!a.contiguous || a.n > int64_t(kMaxThreads) * V * kMaxVecs<T>) return false;
  const int64_t n = a.n;
  int vpt = 1;
  int threads = 256;
  if (ceil_div(n, V) <= 32) {
    a.group = pow2_at_least(ceil_div(n, V));
  } else if (ceil_div(n, 4 * V) <= 32) {
    vpt = ceil_div(n, 2 * V) <= 32 ? 2 : 4;
    a.group = 32;
  } else {
    while (vpt < kMaxVecs<T> && ceil_div(n, int64_t(vpt) * V) > 256) vpt *= 2;
    threads = static_cast<int>(ceil_div(ceil_div(n, int64_t(vpt) * V), 32) * 32);
    a.group = threads;
  }
  switch (vpt) {
    case 1: launch_registers<T, 1>(x, y, a, threads, st); break;
    case 2: launch_registers<T, 2>(x, y, a, threads, st); break;
    case 4: launch_registers<T, 4>(x, y, a, threads, st); break;
    default:
      if constexpr (kMaxVecs<T> == 8) launch_registers<T, 8>(x, y, a, threads, st);
      break;
  }
  return true;
}

template <typename Tin, typename Tout>
void launch_looped(const Tin* x, Tout* y, SoftmaxArgs a, cudaStream_t st) {
  constexpr int kThreads = 256;
  a.group = a.n >= 1024 ? kThreads : pow2_at_least(a.n);
  auto kernel = softmax_looped_kernel<Tin, Tout>;
  int64_t blocks = grid_for(kernel, kThreads, ceil_div(a.rows, kThreads / a.group));
  kernel<<<static_cast<unsigned>(blocks), kThreads, 0, st>>>(x, y, a);
}

}  // namespace

void Softmax::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  const Stream& s = stream();
  if (out.size() == 0) {
    allocate_output(out, s);
    return;
  }
  // The kept axes and the reduced ones, each in input order.
  std::vector<char> reduced(in.ndim(), 0);
  for (int ax : axes_) reduced[ax] = 1;
  Shape ks, rs;
  Strides kst, rst;
  std::vector<int> perm;
  int64_t n = 1;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (reduced[d]) {
      rs.push_back(in.shape(d));
      rst.push_back(in.strides(d));
      n *= in.shape(d);
    } else {
      ks.push_back(in.shape(d));
      kst.push_back(in.strides(d));
      perm.push_back(d);
    }
  }
  for (int ax : axes_) perm.push_back(ax);
  auto [crs, crst] = cpu::collapse_contiguous_dims(rs, {rst});
  const bool rows_contiguous = n <= 1 || (crs.size() == 1 && crst[0][0] == 1);
  bool dense = in.flags().contiguous && in.data_size() == in.size();
  for (auto st : in.strides()) dense &= st >= 0;

  const void* x = device_ptr(in, s);
  void* y;
  Strides out_kst;
  if (in.dtype() == out.dtype() && dense && rows_contiguous) {
    // The input's layout, in place when the input is not used again.
    out_kst = kst;
    if (in.is_donatable()) {
      out.move_shared_buffer(in);
      y = writable_device_ptr(out, s);
    } else {
      y = allocate_output(out, s, in.data_size(), in.strides(), in.flags());
    }
  } else {
    // Kept axes, then reduced axes, row-major.
    Shape perm_shape;
    for (int d : perm) perm_shape.push_back(in.shape(d));
    Strides rm = row_major_strides(perm_shape);
    Strides strides(in.ndim());
    for (size_t q = 0; q < perm.size(); ++q) strides[perm[q]] = rm[q];
    y = allocate_output(out, s, out.size(), strides, compute_flags(out.shape(), strides));
    for (size_t q = 0; q < ks.size(); ++q) out_kst.push_back(rm[q]);
  }
  auto [cks, ckst] = cpu::collapse_contiguous_dims(ks, {kst, out_kst});
  SoftmaxArgs a{};
  a.rows = static_cast<int64_t>(out.size()) / n;
  a.n = n;
  a.contiguous = rows_contiguous;
  a.kept = make_dims<2>(cks, ckst);
  a.red = make_dims<1>(crs, crst);
  cudaStream_t st = cuda_stream(s);

  cpu::dispatch_all(in.dtype(), [&](auto tag) {
    using H = typename decltype(tag)::type;
    using Tin = device_t<H>;
    if constexpr (cpu::is_complex_v<H>) {
      throw std::logic_error("[Softmax] complex input reached the kernel (bug)");
    } else if constexpr (cpu::is_float_v<H>) {
      if (in.dtype() != out.dtype()) {
        throw std::logic_error("[Softmax] unexpected output dtype " + dtype_name(out.dtype()) + " (bug)");
      }
      const Tin* xi = static_cast<const Tin*>(x);
      Tin* yo = static_cast<Tin*>(y);
      if (!try_registers<Tin>(xi, yo, a, st)) launch_looped<Tin, Tin>(xi, yo, a, st);
    } else {
      if (out.dtype() != float32) {
        throw std::logic_error("[Softmax] unexpected output dtype " + dtype_name(out.dtype()) + " (bug)");
      }
      launch_looped<Tin, float>(static_cast<const Tin*>(x), static_cast<float*>(y), a, st);
    }
  });
  check_launch("Softmax");
}

}  // namespace tessera
