// Reductions over axes, and softmax.
//
//   auto t = sum(x);                    // all axes
//   auto m = mean(x, {0, 2}, true);     // keepdims
//   auto i = argmax(x, 1);              // uint32
#pragma once

#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

#define TESSERA_REDUCTION(NAME)                                                        \
  array NAME(const array& a, bool keepdims, StreamOrDevice s = {});                    \
  array NAME(const array& a, StreamOrDevice s = {});                                   \
  array NAME(const array& a, const std::vector<int>& axes, bool keepdims = false,      \
             StreamOrDevice s = {});                                                   \
  array NAME(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
TESSERA_REDUCTION(sum)
TESSERA_REDUCTION(prod)
TESSERA_REDUCTION(max)
TESSERA_REDUCTION(min)
TESSERA_REDUCTION(mean)
TESSERA_REDUCTION(logsumexp)
TESSERA_REDUCTION(all)
TESSERA_REDUCTION(any)
#undef TESSERA_REDUCTION

// Variance / standard deviation with divisor N - ddof.
#define TESSERA_MOMENT(NAME)                                                           \
  array NAME(const array& a, bool keepdims, int ddof = 0, StreamOrDevice s = {});      \
  array NAME(const array& a, StreamOrDevice s = {});                                   \
  array NAME(const array& a, const std::vector<int>& axes, bool keepdims = false,      \
             int ddof = 0, StreamOrDevice s = {});                                     \
  array NAME(const array& a, int axis, bool keepdims = false, int ddof = 0,            \
             StreamOrDevice s = {});
TESSERA_MOMENT(var)
TESSERA_MOMENT(std)
#undef TESSERA_MOMENT

// Index of the max / min (first occurrence), uint32.
array argmax(const array& a, bool keepdims, StreamOrDevice s = {});
array argmax(const array& a, StreamOrDevice s = {});
array argmax(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array argmin(const array& a, bool keepdims, StreamOrDevice s = {});
array argmin(const array& a, StreamOrDevice s = {});
array argmin(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// Number of non-zero elements, int32.
array count_nonzero(const array& a, bool keepdims = false, StreamOrDevice s = {});
array count_nonzero(const array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
array count_nonzero(const array& a, const std::vector<int>& axes, bool keepdims = false,
                    StreamOrDevice s = {});

// exp(x) / sum(exp(x)) over axes, computed stably. precise: accumulate
// 16-bit inputs in float32.
array softmax(const array& a, const std::vector<int>& axes, bool precise = false,
              StreamOrDevice s = {});
array softmax(const array& a, bool precise = false, StreamOrDevice s = {});
array softmax(const array& a, int axis, bool precise = false, StreamOrDevice s = {});

// Sum along a diagonal of the (axis1, axis2) planes.
array trace(const array& a, int offset, int axis1, int axis2, Dtype dtype,
            StreamOrDevice s = {});
array trace(const array& a, int offset, int axis1, int axis2, StreamOrDevice s = {});
array trace(const array& a, StreamOrDevice s = {});

}  // namespace tessera
