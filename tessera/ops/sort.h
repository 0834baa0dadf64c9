// Sorting and selection along one axis; the overloads without an axis work on
// the flattened array.
//
//   auto y = sort(x, 1);           // stable, NaNs last (NumPy's order)
//   auto i = argsort(x);           // uint32 indices of a stable sort, flattened
//   auto p = partition(x, 2, 0);   // element 2 in sorted place, <= before, >= after
//   auto t = topk(x, 3);           // the 3 largest (unsorted), along the last axis
//   auto k = searchsorted(sorted, values, "right");
//
// Real dtypes only: complex input is rejected with std::invalid_argument. kth
// may be negative (counted from the end); out of range it throws
// std::invalid_argument, as does k outside [0, size of the axis] for topk.
#pragma once

#include <string>

#include "tessera/core/array.h"
#include "tessera/core/device.h"

namespace tessera {

array sort(const array& a, StreamOrDevice s = {});
array sort(const array& a, int axis, StreamOrDevice s = {});
array argsort(const array& a, StreamOrDevice s = {});
array argsort(const array& a, int axis, StreamOrDevice s = {});

array partition(const array& a, int kth, StreamOrDevice s = {});
array partition(const array& a, int kth, int axis, StreamOrDevice s = {});
array argpartition(const array& a, int kth, StreamOrDevice s = {});
array argpartition(const array& a, int kth, int axis, StreamOrDevice s = {});

array topk(const array& a, int k, StreamOrDevice s = {});
array topk(const array& a, int k, int axis, StreamOrDevice s = {});

// Insertion indices of `values` into the sorted 1-D `sorted_sequence`
// ("left": number of elements < v; "right": <= v; NaN sorts last), uint32,
// shape of `values`. The two inputs are promoted to a common dtype.
array searchsorted(const array& sorted_sequence, const array& values,
                   const std::string& side = "left", StreamOrDevice s = {});

}  // namespace tessera
