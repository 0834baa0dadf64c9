// Sorting and selection: validate, normalize axis and kth, create the nodes.
#include "tessera/ops/sort.h"

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

}  // namespace tessera
