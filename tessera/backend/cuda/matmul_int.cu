// Batched GEMM for integer and bool dtypes (see matmul_int.h).
//
// A block of kTile x kRows threads computes kTile x kTile output tiles, striding
// over the tiles of all batch elements (flat index: batch, tile row, tile
// column). Each step over K stages a kTile x kTile tile of a and of b in shared
// memory, loaded along whichever axis of the operand is denser so that global
// reads coalesce; elements past the edges of a matrix load as zero and add
// nothing. Thread (x, y) accumulates the outputs (y + q kRows, x), q < kTile / kRows.
//
// Integer results equal the CPU's (naive_gemm): the sum of products modulo
// 2^bits of the dtype. Those bits do not depend on signedness, so each width
// has one kernel, on the unsigned type: it accumulates in an unsigned type of
// at least 32 bits (nothing is promoted to a signed int, so overflow wraps) and
// keeps the low bits on store. bool is the OR of ANDs.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/indexing.cuh"
#include "tessera/backend/cuda/matmul_int.h"

namespace tessera::gpu {

namespace {

constexpr int kTile = 32;
constexpr int kRows = 8;
constexpr int kPerThread = kTile / kRows;  // outputs per thread, and tile elements it loads
static_assert(kTile % kRows == 0);

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, bool>, bool,
                                 std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>>;

template <typename T>
using Tile = T[kTile][kTile + 1];  // padded: a column is spread over the banks

// tile[r][c] = m(r0 + r, c0 + c) for an R x C matrix with strides (row, col), or
// zero outside it. rows_fast: consecutive threads take consecutive rows.
template <typename T>
__device__ __forceinline__ void load_tile(Tile<T>& tile, const T* m, int64_t row, int64_t col,
                                          int64_t r0, int64_t c0, int64_t R, int64_t C,
                                          bool rows_fast) {
  const int tid = threadIdx.y * kTile + threadIdx.x;
#pragma unroll
  for (int q = 0; q < kPerThread; ++q) {
    const int e = tid + q * kTile * kRows;
    const int fast = e % kTile, slow = e / kTile;
    const int r = rows_fast ? fast : slow, c = rows_fast ? slow : fast;
    const int64_t gr = r0 + r, gc = c0 + c;
    tile[r][c] = (gr < R && gc < C) ? m[gr * row + gc * col] : T(0);
  }
}

template <typename Acc, typename T>
__device__ __forceinline__ Acc multiply_add(Acc acc, T x, Acc y) {
  if constexpr (std::is_same_v<T, bool>) {
    return acc || (x && y);
  } else {
    return acc + static_cast<Acc>(x) * y;
  }
}

// batch: the collapsed batch shape with the batch strides of a (0) and b (1);
// the output's batch elements are M * N apart.
template <typename T>
__global__ void __launch_bounds__(kTile * kRows)
    gemm_kernel(const T* a, int64_t ar, int64_t ac, bool a_rows_fast, const T* b, int64_t br,
                int64_t bc, bool b_rows_fast, T* out, int64_t M, int64_t N, int64_t K,
                Dims<2> batch, int64_t tiles_n, int64_t tiles_per_batch, int64_t tiles) {
  using Acc = acc_t<T>;
  __shared__ Tile<T> ta;  // ta[i][k]
  __shared__ Tile<T> tb;  // tb[k][j]
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t bi = t / tiles_per_batch, in_batch = t - bi * tiles_per_batch;
    const int64_t i0 = in_batch / tiles_n * kTile, j0 = in_batch % tiles_n * kTile;
    int64_t loc[2];
    elem_to_loc(bi, batch, loc);
    const T* pa = a + loc[0];
    const T* pb = b + loc[1];
    Acc acc[kPerThread];
#pragma unroll
    for (int q = 0; q < kPerThread; ++q) acc[q] = Acc(0);
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
      load_tile(ta, pa, ar, ac, i0, k0, M, K, a_rows_fast);
      load_tile(tb, pb, br, bc, k0, j0, K, N, b_rows_fast);
      __syncthreads();
#pragma unroll 8
      for (int k = 0; k < kTile; ++k) {
        const Acc y = static_cast<Acc>(tb[k][tx]);
#pragma unroll
        for (int q = 0; q < kPerThread; ++q) {
          acc[q] = multiply_add(acc[q], ta[ty + q * kRows][k], y);
        }
      }
      __syncthreads();
    }
    T* po = out + bi * M * N;
    const int64_t j = j0 + tx;
#pragma unroll
    for (int q = 0; q < kPerThread; ++q) {
      const int64_t i = i0 + ty + q * kRows;
      if (i < M && j < N) po[i * N + j] = static_cast<T>(acc[q]);
    }
  }
}

// Whether consecutive rows are closer in memory than consecutive columns.
bool rows_fast(const StridedMatrix& m) {
  return std::abs(m.row) < std::abs(m.col);
}

}  // namespace

void integer_gemm(const StridedMatrix& a, const StridedMatrix& b, void* out, Dtype dtype,
                  const Shape& batch_shape, int64_t M, int64_t N, int64_t K, const Stream& s,
                  const char* op) {
  if (is_inexact(dtype)) {
    throw std::logic_error("[" + std::string(op) + "] integer_gemm on dtype " +
                           dtype_name(dtype) + " (bug)");
  }
  const int64_t batches = static_cast<int64_t>(shape_size(batch_shape));
  const int64_t tiles_m = (M + kTile - 1) / kTile, tiles_n = (N + kTile - 1) / kTile;
  const int64_t tiles = batches * tiles_m * tiles_n;
  if (tiles == 0) return;
  auto [bshape, bstrides] =
      tessera::collapse_contiguous_dims(batch_shape, {a.batch_strides, b.batch_strides});
  const Dims<2> batch = make_dims<2>(bshape, bstrides);
  const int64_t cap = int64_t(properties(s.device.index).multiProcessorCount) * 32;
  const unsigned grid = static_cast<unsigned>(std::min(tiles, cap));
  const dim3 block(kTile, kRows);
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    gemm_kernel<T><<<grid, block, 0, cuda_stream(s)>>>(
        static_cast<const T*>(a.data), a.row, a.col, rows_fast(a),
        static_cast<const T*>(b.data), b.row, b.col, rows_fast(b), static_cast<T*>(out), M, N,
        K, batch, tiles_n, tiles_m * tiles_n, tiles);
  };
  if (dtype == bool_) {
    launch(tessera::TypeTag<bool>{});
  } else {
    tessera::dispatch_bytes(dtype, launch);
  }
  check_launch(op);
}

}  // namespace tessera::gpu
