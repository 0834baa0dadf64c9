// The GPU copy with cast (see Note [GPU copy paths] in copy.h) and eval_gpu of
// AsType, Copy, Broadcast, Contiguous.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tessera/backend/common/views.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/ops/primitives/copy.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;

template <typename In, typename Out>
__global__ void cast_dense_kernel(const In* src, Out* dst, int64_t n) {
  constexpr int V = vec_width<In, Out>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / V;
  auto* vs = reinterpret_cast<const Vec<In, V>*>(src);
  auto* vd = reinterpret_cast<Vec<Out, V>*>(dst);
  for (int64_t i = first; i < nvec; i += step) {
    Vec<In, V> a = vs[i];
    Vec<Out, V> b;
#pragma unroll
    for (int k = 0; k < V; ++k) b.v[k] = cast_to<Out>(a.v[k]);
    vd[i] = b;
  }
  for (int64_t i = nvec * V + first; i < n; i += step) dst[i] = cast_to<Out>(src[i]);
}

// Each item is W neighbours along the last collapsed dimension.
constexpr int kWork = 4;

// A grid of two rows in y copies (src2, dst2) in its second row: two copies of
// one layout in one launch.
template <typename In, typename Out, typename I>
__global__ void copy_general_kernel(const In* src, Out* dst, Dims<2> outer, I last_n,
                                    I in_last, I out_last, I items, const int64_t* src_dyn,
                                    const int64_t* dst_dyn, const In* src2, Out* dst2) {
  if (blockIdx.y) {
    src = src2;
    dst = dst2;
  }
  if (src_dyn) src += *src_dyn;
  if (dst_dyn) dst += *dst_dyn;
  const I chunks = (last_n + kWork - 1) / kWork;
  for (I item = I(blockIdx.x) * blockDim.x + threadIdx.x; item < items;
       item += I(gridDim.x) * blockDim.x) {
    I row = item / chunks;
    I c = (item - row * chunks) * kWork;
    I loc[2];
    elem_to_loc(row, outer, loc);
    const In* s = src + loc[0] + c * in_last;
    Out* d = dst + loc[1] + c * out_last;
    const int m = static_cast<int>(min(I(kWork), last_n - c));
    if (m == kWork) {
      In v[kWork];
#pragma unroll
      for (int k = 0; k < kWork; ++k) v[k] = s[k * in_last];
#pragma unroll
      for (int k = 0; k < kWork; ++k) d[k * out_last] = cast_to<Out>(v[k]);
    } else {
      for (int k = 0; k < m; ++k) d[k * out_last] = cast_to<Out>(s[k * in_last]);
    }
  }
}

// Note [Tiled transpose]
// Element (i, j): source at i * in_b + j (dense along j), destination at
// j * out_a + i (dense along i). A 32 x 4 block moves a 32 x 32 tile: it reads
// rows of the tile along j and writes them along i through shared memory,
// padded by one column so that the column reads hit 32 different banks. Each
// thread issues its 8 loads before the first store, and small blocks let 16 of
// them share an SM: enough bytes in flight to keep HBM busy.
constexpr int kTile = 32;
constexpr int kTileRows = 4;
constexpr int kPerThread = kTile / kTileRows;

template <typename T, typename I>
__global__ void __launch_bounds__(kTile * kTileRows)
    transpose_tiled_kernel(const T* src, T* dst, I na, I nb, I in_b, I out_a, Dims<2> outer,
                           I n_outer) {
  __shared__ T tile[kTile][kTile + 1];
  const I tiles_b = (nb + kTile - 1) / kTile;
  const I j0 = I(blockIdx.x) * kTile;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (I o = blockIdx.z; o < n_outer; o += gridDim.z) {
    I loc[2];
    elem_to_loc(o, outer, loc);
    const T* s = src + loc[0];
    T* d = dst + loc[1];
    for (I tb = blockIdx.y; tb < tiles_b; tb += gridDim.y) {
      const I i0 = tb * kTile;
      T r[kPerThread];
      const bool j_in = j0 + tx < na;
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        I i = i0 + ty + k * kTileRows;
        r[k] = (j_in && i < nb) ? s[i * in_b + j0 + tx] : T{};
      }
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) tile[ty + k * kTileRows][tx] = r[k];
      __syncthreads();
      if (i0 + tx < nb) {
#pragma unroll
        for (int k = 0; k < kPerThread; ++k) {
          I j = j0 + ty + k * kTileRows;
          if (j < na) d[j * out_a + i0 + tx] = tile[tx][ty + k * kTileRows];
        }
      }
      __syncthreads();
    }
  }
}

// Largest |offset| reachable through shape and strides.
int64_t max_offset(const Shape& shape, const Strides& strides) {
  int64_t m = 0;
  for (size_t d = 0; d < shape.size(); ++d) m += int64_t(std::max(shape[d] - 1, 0)) * std::abs(strides[d]);
  return m;
}

template <typename In, typename Out>
bool cast_dense(const In* src, Out* dst, int64_t n, cudaStream_t stream, const char* op) {
  constexpr int V = vec_width<In, Out>;
  if (!aligned(src, sizeof(In) * V) || !aligned(dst, sizeof(Out) * V)) return false;
  cast_dense_kernel<In, Out><<<grid_blocks((n + V - 1) / V, kThreads), kThreads, 0, stream>>>(
      src, dst, n);
  check_launch(op);
  return true;
}

template <typename In, typename Out>
void copy_general(const In* src, Out* dst, const Shape& shape, const Strides& in_strides,
                  const Strides& out_strides, const int64_t* src_dyn, const int64_t* dst_dyn,
                  cudaStream_t stream, const char* op, const In* src2 = nullptr,
                  Out* dst2 = nullptr) {
  const int nd = static_cast<int>(shape.size());
  Shape outer_shape(shape.begin(), shape.end() - 1);
  Dims<2> outer = make_dims<2>(
      outer_shape, {Strides(in_strides.begin(), in_strides.end() - 1),
                    Strides(out_strides.begin(), out_strides.end() - 1)});
  const int64_t last_n = shape[nd - 1];
  const int64_t rows = tessera::num_rows(shape);
  const int64_t items = rows * ((last_n + kWork - 1) / kWork);
  const dim3 blocks(grid_blocks(items, kThreads), src2 ? 2 : 1);
  const bool small = items + int64_t(blocks.x) * kThreads <= INT32_MAX &&
                     int64_t(shape_size(shape)) + kWork <= INT32_MAX &&
                     max_offset(shape, in_strides) + kWork * std::abs(in_strides[nd - 1]) <= INT32_MAX &&
                     max_offset(shape, out_strides) + kWork * std::abs(out_strides[nd - 1]) <= INT32_MAX;
  // Casts get only the 64-bit kernel (182 type pairs; the GPU's 64-bit
  // division takes a 32-bit path when the operands fit).
  if constexpr (std::is_same_v<In, Out>) {
    if (small) {
      copy_general_kernel<In, Out, int32_t><<<blocks, kThreads, 0, stream>>>(
          src, dst, outer, int32_t(last_n), int32_t(in_strides[nd - 1]),
          int32_t(out_strides[nd - 1]), int32_t(items), src_dyn, dst_dyn, src2, dst2);
      check_launch(op);
      return;
    }
  }
  copy_general_kernel<In, Out, int64_t><<<blocks, kThreads, 0, stream>>>(
      src, dst, outer, last_n, in_strides[nd - 1], out_strides[nd - 1], items, src_dyn, dst_dyn,
      src2, dst2);
  check_launch(op);
}

// The tiled path, when the source is dense along one axis and the destination
// along another (both long enough to fill tiles).
template <typename T>
bool transpose_tiled(const T* src, T* dst, const Shape& shape, const Strides& in_strides,
                     const Strides& out_strides, cudaStream_t stream, const char* op) {
  auto plan = views::transpose_plan(shape, in_strides, out_strides, 16);
  if (!plan) return false;
  const int a = plan->a, b = plan->b;
  const Shape& outer = plan->outer;
  const Strides &outer_in = plan->outer_in, &outer_out = plan->outer_out;
  Dims<2> dims = make_dims<2>(outer, {outer_in, outer_out});
  const int64_t na = shape[a], nb = shape[b], n_outer = shape_size(outer);
  const int64_t tiles_a = (na + kTile - 1) / kTile, tiles_b = (nb + kTile - 1) / kTile;
  if (tiles_a > INT_MAX) return false;
  dim3 grid(static_cast<unsigned>(tiles_a), static_cast<unsigned>(std::min<int64_t>(tiles_b, 65535)),
            static_cast<unsigned>(std::min<int64_t>(n_outer, 65535)));
  dim3 block(kTile, kTileRows);
  const bool small = int64_t(shape_size(shape)) <= INT32_MAX &&
                     max_offset(shape, in_strides) + kTile * std::abs(in_strides[b]) <= INT32_MAX &&
                     max_offset(shape, out_strides) + kTile * std::abs(out_strides[a]) <= INT32_MAX;
  if (small) {
    transpose_tiled_kernel<T, int32_t><<<grid, block, 0, stream>>>(
        src, dst, int32_t(na), int32_t(nb), int32_t(in_strides[b]), int32_t(out_strides[a]), dims,
        int32_t(n_outer));
  } else {
    transpose_tiled_kernel<T, int64_t><<<grid, block, 0, stream>>>(
        src, dst, na, nb, in_strides[b], out_strides[a], dims, n_outer);
  }
  check_launch(op);
  return true;
}

}  // namespace

unsigned int grid_blocks(int64_t n, int threads) {
  static const int64_t max_blocks = int64_t(properties().multiProcessorCount) * (2048 / 256) * 4;
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned int>(std::clamp<int64_t>(blocks, 1, max_blocks));
}

void copy_gpu(const Shape& shape, const void* src, Dtype src_t, const Strides& src_strides,
              void* dst, Dtype dst_t, const Strides& dst_strides, const Stream& s,
              const char* op, const int64_t* src_dyn, const int64_t* dst_dyn) {
  if (shape_size(shape) == 0) return;
  auto [cshape, cstrides] = tessera::collapse_contiguous_dims(shape, {src_strides, dst_strides});
  const Strides& in_str = cstrides[0];
  const Strides& out_str = cstrides[1];
  cudaStream_t stream = cuda_stream(s);
  const bool dynamic = src_dyn || dst_dyn;
  const bool dense = !dynamic && cshape.size() == 1 && in_str[0] == 1 && out_str[0] == 1;
  if (src_t == dst_t) {
    if (dense) {
      if (src != dst) {
        TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(cshape[0]) * src_t.size,
                                           cudaMemcpyDeviceToDevice, stream));
      }
      return;
    }
    dispatch_width(src_t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* sp = static_cast<const T*>(src);
      T* dp = static_cast<T*>(dst);
      if (!dynamic && transpose_tiled(sp, dp, cshape, in_str, out_str, stream, op)) return;
      copy_general(sp, dp, cshape, in_str, out_str, src_dyn, dst_dyn, stream, op);
    });
    return;
  }
  dispatch_device(src_t, [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    dispatch_device(dst_t, [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      if constexpr (!std::is_same_v<In, Out>) {
        const In* sp = static_cast<const In*>(src);
        Out* dp = static_cast<Out*>(dst);
        if (dense && cast_dense(sp, dp, cshape[0], stream, op)) return;
        copy_general(sp, dp, cshape, in_str, out_str, src_dyn, dst_dyn, stream, op);
      }
    });
  });
}

bool strided_copy(const CopyLayout& c) {
  const auto& [shape, strides] = c;
  if (shape_size(shape) == 0) return false;
  if (shape.size() == 1 && strides[0][0] == 1 && strides[1][0] == 1) return false;
  return !views::transpose_plan(shape, strides[0], strides[1], 16);
}

void copy_gpu_pair(const CopyLayout& c, const void* const src[2], void* const dst[2], Dtype t,
                   const Stream& s, const char* op) {
  if (!strided_copy(c)) {
    throw std::logic_error(std::string("[") + op + "] a pair of copies without a strided kernel (bug)");
  }
  const auto& [shape, strides] = c;
  dispatch_width(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    copy_general(static_cast<const T*>(src[0]), static_cast<T*>(dst[0]), shape, strides[0],
                 strides[1], nullptr, nullptr, cuda_stream(s), op, static_cast<const T*>(src[1]),
                 static_cast<T*>(dst[1]));
  });
}

void cast_gpu(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n, const Stream& s,
              const char* op) {
  const Shape shape{static_cast<ShapeElem>(std::min<size_t>(n, INT32_MAX))};
  if (n <= INT32_MAX) {
    copy_gpu(shape, src, src_t, {1}, dst, dst_t, {1}, s, op);
    return;
  }
  // Longer than one dimension can hold: as rows of 2^30.
  constexpr int64_t kRow = int64_t(1) << 30;
  const int64_t rows = int64_t(n) / kRow, rest = int64_t(n) % kRow;
  copy_gpu({static_cast<ShapeElem>(rows), static_cast<ShapeElem>(kRow)}, src, src_t, {kRow, 1},
           dst, dst_t, {kRow, 1}, s, op);
  if (rest > 0) {
    copy_gpu({static_cast<ShapeElem>(rest)}, static_cast<const char*>(src) + rows * kRow * src_t.size,
             src_t, {1}, static_cast<char*>(dst) + rows * kRow * dst_t.size, dst_t, {1}, s, op);
  }
}

void copy_gpu(const array& in, array& out, const Stream& s, const char* op) {
  if (in.size() == 0) return;
  copy_gpu(in.shape(), device_ptr(in, s), in.dtype(), in.strides(), writable_device_ptr(out, s),
           out.dtype(), out.strides(), s, op);
}

void copy_gpu_to_row_contiguous(const array& in, array& out, const Stream& s, const char* op) {
  void* dst = allocate_output(out, s);
  if (in.size() == 0) return;
  // in's elements in row-major order of in's shape: out may have another shape
  // of the same size (Reshape).
  copy_gpu(in.shape(), device_ptr(in, s), in.dtype(), in.strides(), dst, out.dtype(),
           row_major_strides(in.shape()), s, op);
}

}  // namespace tessera::gpu

namespace tessera {

void AsType::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto& s = stream();
  const bool dense = in.flags().contiguous && in.data_size() == in.size();
  if (dense && in.size() > 0 && in.itemsize() == out.itemsize() && in.is_donatable()) {
    // Same width: cast in place, keeping the input's layout.
    array donor = in;
    out.move_shared_buffer(donor);
    void* p = gpu::writable_device_ptr(out, s);
    gpu::cast_gpu(p, in.dtype(), p, out.dtype(), out.data_size(), s, "AsType");
    return;
  }
  if (dense) {
    // Keep the (possibly permuted) layout of dense input: one linear pass.
    void* dst = gpu::allocate_output(out, s, in.data_size(), in.strides(), in.flags());
    if (in.size() == 0) return;
    gpu::cast_gpu(gpu::device_ptr(in, s), in.dtype(), dst, out.dtype(), in.size(), s, "AsType");
    return;
  }
  gpu::copy_gpu_to_row_contiguous(in, out, s, "AsType");
}

void Copy::eval_gpu(const std::vector<array>& inputs, array& out) {
  gpu::copy_gpu_to_row_contiguous(inputs[0], out, stream(), "Copy");
}

void Contiguous::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous || (allow_col_major_ && in.flags().col_contiguous)) {
    out.copy_shared_buffer(in);
    return;
  }
  gpu::copy_gpu_to_row_contiguous(in, out, stream(), "Contiguous");
}

}  // namespace tessera
