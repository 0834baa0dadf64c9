// How a reduction walks its input, shared by every backend: the input seen as
// (kept axes) x (reduced axes), each group collapsed, so that the output
// (row-contiguous over the kept axes) and the reduced region of each output
// are plain strided loops. Nothing here touches data.
//
//   ReducePlan p = reduce_plan(in.shape(), in.strides(), axes);
//   for (int64_t o = 0; o < p.out_size; ++o) {
//     int64_t base = elem_to_loc(o, p.kept_shape, p.kept_strides);
//     ...  // reduce p.red_size elements from base over (red_shape, red_strides)
//   }
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/dispatch.h"

namespace tessera {

// The C++ type of accumulation_type(T) (sum, prod) and inexact_type(T) (mean,
// variance) for the C++ element type T, on every backend.
template <typename T>
using sum_out_t = std::conditional_t<
    std::is_same_v<T, bool>, int32_t,
    std::conditional_t<is_integral_v<T> && sizeof(T) <= 4,
                       std::conditional_t<std::is_signed_v<T>, int32_t, uint32_t>, T>>;
template <typename T>
using mean_out_t = std::conditional_t<is_float_v<T> || is_complex_v<T>, T, float>;

struct ReducePlan {
  Shape kept_shape;  // output order (row-major), collapsed
  Strides kept_strides;
  Shape red_shape;  // reduced axes, largest stride outermost, collapsed
  Strides red_strides;
  int64_t out_size = 1;
  int64_t red_size = 1;

  // The innermost reduced axis: its extent and stride.
  int64_t row_len() const { return red_shape.back(); }
  int64_t row_stride() const { return red_strides.back(); }
};

// The plan of reducing (shape, strides) over axes. The reduced axes are
// ordered with stride-0 (broadcast) axes outermost, then by decreasing |stride|.
ReducePlan reduce_plan(const Shape& shape, const Strides& strides, const std::vector<int>& axes);

}  // namespace tessera
