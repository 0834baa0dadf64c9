// Strided iteration for CPU kernels.
//
//   auto [shape, strides] = collapse_contiguous_dims(out.shape(), {in.strides(), out_strides});
//   for_each_row<2>(shape, {strides[0], strides[1]}, 0, num_rows(shape),
//       [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& inc) {
//         for (int64_t i = 0; i < n; ++i) out[off[1] + i * inc[1]] = in[off[0] + i * inc[0]];
//       });
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/core/array.h"

namespace tessera {

// Drops size-1 dimensions and merges neighbours that are contiguous with each
// other in every stride set. The result has at least one dimension.
std::pair<Shape, std::vector<Strides>> collapse_contiguous_dims(
    const Shape& shape, const std::vector<Strides>& strides);

// Number of rows of the last dimension (product of all but the last extent).
inline int64_t num_rows(const Shape& shape) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= shape[i];
  return shape.empty() ? 1 : n;
}

// Calls row(offsets, n, increments) for rows [row_begin, row_end) of the last
// dimension; offsets are the element offsets of the row's first element in
// each stride set, increments the last-dimension strides.
template <size_t N, typename F>
void for_each_row(const Shape& shape, const std::array<Strides, N>& strides,
                  int64_t row_begin, int64_t row_end, F&& row) {
  const int nd = static_cast<int>(shape.size());
  if (nd == 0) {
    std::array<int64_t, N> off{};
    std::array<int64_t, N> inc{};
    if (row_begin < row_end) row(off, int64_t{1}, inc);
    return;
  }
  const int64_t n = shape[nd - 1];
  std::array<int64_t, N> inc;
  for (size_t k = 0; k < N; ++k) inc[k] = strides[k][nd - 1];
  // Decompose row_begin into an index over the outer dimensions.
  std::vector<int32_t> idx(nd > 1 ? nd - 1 : 0, 0);
  std::array<int64_t, N> off{};
  int64_t r = row_begin;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = static_cast<int32_t>(r % shape[d]);
    r /= shape[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * strides[k][d];
  }
  for (int64_t rr = row_begin; rr < row_end; ++rr) {
    row(off, n, inc);
    for (int d = nd - 2; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (++idx[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= int64_t(shape[d]) * strides[k][d];
      idx[d] = 0;
    }
  }
}

// The element offset (relative to the array's offset) of flat index i.
inline int64_t elem_to_loc(int64_t i, const Shape& shape, const Strides& strides) {
  int64_t loc = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0 && i > 0; --d) {
    loc += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return loc;
}

}  // namespace tessera
