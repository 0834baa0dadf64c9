// How the convolution kernels of every backend lower a Convolution to matrix
// products (the geometry is Note [Convolution geometry] in
// ops/primitives/convolution.h).
//
// The window matrix of group g has one row per output position (N out_1..out_n
// rows, in the output's order) and one column per (kernel tap, channel of the
// group) (K_1..K_n C/groups columns, channel fastest): row r, column
// (tap, c) holds the input element that output position r multiplies with
// weight element (tap, c), or zero. The window matrix of group g times the
// transpose of the weight's rows of group g, read in place as an
// (O/groups, columns) matrix, is the output's channels of group g: an (rows,
// O/groups) block of the (rows, O) output with row stride O. Kernels build and
// multiply the rows in chunks (chunk_rows), so the window matrices never hold
// more than a bounded number of bytes; in memory, a chunk is the matrices of
// all groups one after the other, (groups, chunk, columns).
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/core/array.h"

#ifdef __CUDACC__
#define TESSERA_CONV_HD __host__ __device__ __forceinline__
#else
#define TESSERA_CONV_HD inline
#endif

namespace tessera {

class Convolution;

struct ConvPlan {
  static constexpr int kMaxDims = 8;  // spatial dimensions (conv_general checks)

  int ndim;
  bool flip;
  int64_t groups;
  int64_t in_group;      // input channels per group
  int64_t out_group;     // output channels per group
  int64_t out_channels;  // O
  int64_t rows;          // N out_1..out_n
  int64_t taps;          // K_1..K_n
  int64_t cols;          // taps * in_group
  int64_t batch_stride;  // of the input, in elements
  int64_t channel_stride;
  int64_t in_stride[kMaxDims];
  int64_t dilated[kMaxDims];  // D of the Note
  int64_t out[kMaxDims];
  int64_t kernel[kMaxDims];
  int64_t stride[kMaxDims];
  int64_t lo[kMaxDims];
  int64_t kdil[kMaxDims];
  int64_t idil[kMaxDims];
};

// The plan of p applied to the input x (any strides) and the weight w.
ConvPlan conv_plan(const Convolution& p, const array& x, const array& w);

// Rows per chunk: as many as fit `budget` bytes of window matrices of
// elements of `elem_bytes` (at least one, at most plan.rows).
int64_t chunk_rows(const ConvPlan& plan, size_t elem_bytes, size_t budget);

// The offset (in elements, from the input's first element) of channel 0 read
// at window-matrix row `row` and kernel tap `tap`, or -1 where the window
// reads padding or a dilation zero.
TESSERA_CONV_HD int64_t window_offset(const ConvPlan& p, int64_t row, int64_t tap) {
  int64_t offset = 0;
  for (int i = p.ndim - 1; i >= 0; --i) {
    const int64_t o = row % p.out[i];
    const int64_t k = tap % p.kernel[i];
    row /= p.out[i];
    tap /= p.kernel[i];
    const int64_t q = o * p.stride[i] + (p.flip ? p.kernel[i] - 1 - k : k) * p.kdil[i] - p.lo[i];
    if (q < 0 || q >= p.dilated[i] || q % p.idil[i] != 0) return -1;
    offset += q / p.idil[i] * p.in_stride[i];
  }
  return offset + row * p.batch_stride;  // row is now the batch index
}

}  // namespace tessera
