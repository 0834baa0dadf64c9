// Sorting and selection: validate, normalize axis and kth, create the nodes.
#include "tessera/ops/sort.h"
#include "tessera/ops/array_api.h"
#include "tessera/ops/binary.h"
#include "tessera/ops/indexing.h"
#include "tessera/ops/reduce.h"
#include "tessera/ops/scan.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/primitives/sort.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

namespace {

void check_real(const array& a, const char* op) {
  if (is_complex(a.dtype())) {
    throw_invalid(op, "complex input (" + dtype_name(a.dtype()) + ") is not supported");
  }
}

array make_sort(const array& a, int axis, Sort::Kind kind, int kth, const char* op,
                StreamOrDevice s) {
  check_real(a, op);
  int ax = normalize_axis(axis, static_cast<int>(a.ndim()), op);
  bool indices = kind == Sort::Indices || kind == Sort::PartitionIndices;
  if (kind == Sort::PartitionValues || kind == Sort::PartitionIndices) {
    int n = a.shape(ax);
    if (kth < -n || kth >= n) {
      throw_invalid(op, "kth " + std::to_string(kth) + " is out of bounds for axis " +
                            std::to_string(axis) + " with size " + std::to_string(n));
    }
    if (kth < 0) kth += n;
  }
  return array(a.shape(), indices ? uint32 : a.dtype(),
               std::make_shared<Sort>(to_stream(s), kind, ax, kth), {a});
}

}  // namespace

array sort(const array& a, int axis, StreamOrDevice s) {
  return make_sort(a, axis, Sort::Values, 0, "sort", s);
}
array sort(const array& a, StreamOrDevice s) { return sort(flatten(a, s), 0, s); }
array argsort(const array& a, int axis, StreamOrDevice s) {
  return make_sort(a, axis, Sort::Indices, 0, "argsort", s);
}
array argsort(const array& a, StreamOrDevice s) { return argsort(flatten(a, s), 0, s); }
array partition(const array& a, int kth, int axis, StreamOrDevice s) {
  return make_sort(a, axis, Sort::PartitionValues, kth, "partition", s);
}
array partition(const array& a, int kth, StreamOrDevice s) {
  return partition(flatten(a, s), kth, 0, s);
}
array argpartition(const array& a, int kth, int axis, StreamOrDevice s) {
  return make_sort(a, axis, Sort::PartitionIndices, kth, "argpartition", s);
}
array argpartition(const array& a, int kth, StreamOrDevice s) {
  return argpartition(flatten(a, s), kth, 0, s);
}

array topk(const array& a, int k, int axis, StreamOrDevice s) {
  check_real(a, "topk");
  int ax = normalize_axis(axis, static_cast<int>(a.ndim()), "topk");
  int n = a.shape(ax);
  if (k < 0 || k > n) {
    throw_invalid("topk", "k " + std::to_string(k) + " is out of range for axis " +
                              std::to_string(axis) + " with size " + std::to_string(n));
  }
  Shape start(a.ndim(), 0), stop = a.shape();
  start[ax] = n - k;
  array p = k == 0 ? a : partition(a, n - k, ax, s);
  return slice(p, start, stop, s);
}
array topk(const array& a, int k, StreamOrDevice s) { return topk(flatten(a, s), k, 0, s); }

array searchsorted(const array& sorted_sequence, const array& values, const std::string& side,
                   StreamOrDevice s) {
  if (side != "left" && side != "right") {
    throw_invalid("searchsorted", "side must be 'left' or 'right', got '" + side + "'");
  }
  if (sorted_sequence.ndim() != 1) {
    throw_invalid("searchsorted", "sorted_sequence must be 1-D, got shape " +
                                      shape_str(sorted_sequence.shape()));
  }
  Dtype t = promote_types(sorted_sequence.dtype(), values.dtype());
  if (is_complex(t)) {
    throw_invalid("searchsorted", "complex input (" + dtype_name(t) + ") is not supported");
  }
  array a = sorted_sequence.dtype() == t ? sorted_sequence : astype(sorted_sequence, t, s);
  array v = values.dtype() == t ? values : astype(values, t, s);
  return array(v.shape(), uint32,
               std::make_shared<SearchSorted>(to_stream(s), side == "right"), {a, v});
}

namespace detail {
array permute_axis(const array& x, const array& perm, int axis, StreamOrDevice s) {
  return array(x.shape(), x.dtype(), std::make_shared<PermuteAxis>(to_stream(s), axis),
               {x, perm});
}
}  // namespace detail

const char* Sort::name() const {
  switch (kind_) {
    case Values: return "Sort";
    case Indices: return "ArgSort";
    case PartitionValues: return "Partition";
    case PartitionIndices: return "ArgPartition";
  }
  return "Sort";
}

// unique composes sort-family ops: a stable argsort, the starts of the runs of
// equal sorted values, their running count (each element's group), and a
// searchsorted of the groups 0..size-1 for where each begins.
std::vector<array> unique(const array& a, int size, bool return_index, bool return_inverse,
                          bool return_counts, const std::optional<array>& fill_value,
                          StreamOrDevice s) {
  if (size < 0) throw_invalid("unique", "size must be non-negative, got " + std::to_string(size));
  if (is_complex(a.dtype())) throw_invalid("unique", "complex input has no order");
  array x = flatten(a, s);
  const int n = static_cast<int>(x.size());
  if (n == 0 && size > 0 && !fill_value) {
    throw_invalid("unique", "an empty input needs a fill_value to pad to size " +
                                std::to_string(size));
  }
  array perm = argsort(x, 0, s);
  array sorted = take(x, perm, 0, s);
  array starts = n == 0 ? zeros({0}, bool_, s)
                        : concatenate({ones({1}, bool_, s),
                                       not_equal(slice(sorted, {1}, {n}, s),
                                                 slice(sorted, {0}, {n - 1}, s), s)},
                                      0, s);
  array group = subtract(cumsum(astype(starts, int32, s), 0, false, true, s), array(1), s);
  array count = sum(astype(starts, int32, s), s);
  array k = arange(0, size, s);
  array first = astype(searchsorted(group, k, "left", s), int32, s);
  array next = astype(searchsorted(group, k, "right", s), int32, s);
  array present = less(k, count, s);
  array at = minimum(first, array(std::max(n - 1, 0)), s);
  array fill = fill_value ? astype(*fill_value, a.dtype(), s)
                          : (n > 0 ? take(sorted, 0, 0, s) : zeros({}, a.dtype(), s));
  std::vector<array> out;
  out.push_back(n == 0 ? broadcast_to(fill, {size}, s)
                       : where(present, take(sorted, at, 0, s), fill, s));
  if (return_index) {
    array idx = n == 0 ? zeros({size}, uint32, s) : take(perm, at, 0, s);
    out.push_back(n == 0 ? idx : where(present, idx, take(perm, 0, 0, s), s));
  }
  if (return_inverse) {
    array inverse = take(group, argsort(perm, 0, s), 0, s);
    inverse = minimum(inverse, array(std::max(size - 1, 0)), s);
    out.push_back(reshape(astype(inverse, uint32, s), a.shape(), s));
  }
  if (return_counts) out.push_back(where(present, subtract(next, first, s), array(0), s));
  return out;
}

}  // namespace tessera
