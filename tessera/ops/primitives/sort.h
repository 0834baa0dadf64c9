// Sorting primitives: Sort (values or indices of a stable sort, or of a
// partition around kth) along one axis, SearchSorted, and PermuteAxis, the
// gather through a permutation that the rules of Sort are written with.
//
// Note [Sort order]
// Every kernel orders values as NumPy does: ascending, NaNs last, ties in
// input order (stable). A partition's indices and values come from one
// algorithm, so that partition(x) == take_along_axis(x, argpartition(x)) and
// the rules can use the indices. A full sort is a valid partition; the GPU
// uses it for both.
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

class Sort : public UnaryPrimitive {
 public:
  // Values or uint32 indices; sorted, or partitioned around kth.
  enum Kind { Values, Indices, PartitionValues, PartitionIndices };

  Sort(Stream s, Kind kind, int axis, int kth = 0)
      : UnaryPrimitive(s), kind_(kind), axis_(axis), kth_(kth) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  const char* name() const override;
  TESSERA_TRANSFORM_RULES
  TESSERA_PARAMETERS(kind_, axis_, kth_)
  bool returns_indices() const { return kind_ == Indices || kind_ == PartitionIndices; }
  bool is_partition() const { return kind_ == PartitionValues || kind_ == PartitionIndices; }

 private:
  Kind kind_;
  int axis_;
  int kth_;
};

// Inputs: a sorted 1-D sequence and values of the same dtype; uint32 output
// of the values' shape (see Note [Sort order] for NaNs).
class SearchSorted : public UnaryPrimitive {
 public:
  SearchSorted(Stream s, bool right) : UnaryPrimitive(s), right_(right) {}
  TESSERA_PRIMITIVE(SearchSorted, right_)

 private:
  bool right_;
};

// out[..., i, ...] = x[..., perm[..., i, ...], ...] along `axis`, where perm
// (uint32, x's shape) holds a permutation of [0, n) in every row along the
// axis; rows of perm that are not permutations give unspecified values but
// never read out of bounds (indices are clamped).
class PermuteAxis : public UnaryPrimitive {
 public:
  PermuteAxis(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  TESSERA_PRIMITIVE(PermuteAxis, axis_)

 private:
  int axis_;
};

namespace detail {
// The PermuteAxis node (no checks: perm must be uint32 of x's shape).
array permute_axis(const array& x, const array& perm, int axis, StreamOrDevice s = {});
}  // namespace detail

}  // namespace tessera
