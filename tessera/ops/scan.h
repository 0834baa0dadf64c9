// Cumulative (scan) ops along one axis; the overloads without an axis scan the
// flattened array.
//
//   auto c = cumsum(x, 1);                         // running sum along axis 1
//   auto e = cumprod(x, 0, /*reverse=*/true, /*inclusive=*/false);
//   auto m = cummax(x);                            // flattened
//
// inclusive=false gives the exclusive scan (element i excludes input i; the
// first element is the identity: 0, 1, the lowest value, the highest value,
// -inf); reverse scans from the end of the axis. Result dtypes: cumsum maps
// bool to int32, every other input dtype is kept (after the optional `dtype`
// cast of cumsum and cumprod); logcumsumexp is float-out (complex: the principal
// log of the running sums of exp). cummax and cummin reject complex input.
#pragma once

#include <optional>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

#define TESSERA_SCAN_WITH_DTYPE(NAME)                                                       \
  array NAME(const array& a, bool reverse = false, bool inclusive = true,                   \
             std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});             \
  array NAME(const array& a, int axis, bool reverse = false, bool inclusive = true,         \
             std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});             \
  array NAME(const array& a, bool reverse, bool inclusive, StreamOrDevice s);               \
  array NAME(const array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s);
TESSERA_SCAN_WITH_DTYPE(cumsum)
TESSERA_SCAN_WITH_DTYPE(cumprod)
#undef TESSERA_SCAN_WITH_DTYPE

#define TESSERA_SCAN(NAME)                                                                  \
  array NAME(const array& a, bool reverse = false, bool inclusive = true,                   \
             StreamOrDevice s = {});                                                        \
  array NAME(const array& a, int axis, bool reverse = false, bool inclusive = true,         \
             StreamOrDevice s = {});
TESSERA_SCAN(cummax)
TESSERA_SCAN(cummin)
TESSERA_SCAN(logcumsumexp)
#undef TESSERA_SCAN

}  // namespace tessera
