// Indexing primitives: Gather, Scatter, GatherAxis, ScatterAxis, MaskedScatter.
//
// Note [Index arrays]
// Index inputs reach a primitive as int32 or int64 (the op functions cast the
// other integer types), all of one shape (broadcast views are fine). An index
// v into an axis of extent n, for a window of w elements on that axis (w = 1
// except in Gather and Scatter slices), is read as v + n when v < 0, and is in
// range when 0 <= v <= n - w afterwards. A gather writes zeros for an index
// out of range; a scatter drops the updates of an index out of range. So no
// kernel reads or writes outside its arrays, whatever the indices hold, and
// the derivative rules stay consistent (the vjp of a gather is a scatter_add
// that drops what the gather zeroed).
#pragma once

#include <vector>

#include "tessera/core/primitive.h"

namespace tessera {

// inputs (a, idx_0, ..., idx_{k-1}); output idx shape + slice_sizes, the
// slice of a whose start is idx_i on axes[i] (0 on the other axes).
class Gather : public UnaryPrimitive {
 public:
  Gather(Stream s, std::vector<int> axes, Shape slice_sizes)
      : UnaryPrimitive(s), axes_(std::move(axes)), slice_sizes_(std::move(slice_sizes)) {}
  TESSERA_PRIMITIVE(Gather, axes_, slice_sizes_)

 private:
  std::vector<int> axes_;
  Shape slice_sizes_;
};

// inputs (a, idx_0, ..., idx_{k-1}, updates); updates has the shape idx shape
// + a slice shape (one entry per axis of a) and a's dtype. The output is a
// with each slice combined with its update: replaced (None), or summed,
// multiplied, maximised or minimised. Duplicate indices under None leave one
// of their updates (which one is unspecified); the reductions combine all.
class Scatter : public UnaryPrimitive {
 public:
  enum ReduceType { None, Sum, Prod, Max, Min };
  Scatter(Stream s, ReduceType type, std::vector<int> axes)
      : UnaryPrimitive(s), type_(type), axes_(std::move(axes)) {}
  TESSERA_PRIMITIVE(Scatter, type_, axes_)
  void print(std::ostream& os) const override;

 private:
  ReduceType type_;
  std::vector<int> axes_;
};

// inputs (a, idx) of equal rank and equal extents except on `axis` (a may be
// a broadcast view); out[..., i, ...] = a[..., idx[..., i, ...], ...].
class GatherAxis : public UnaryPrimitive {
 public:
  GatherAxis(Stream s, int axis) : UnaryPrimitive(s), axis_(axis) {}
  TESSERA_PRIMITIVE(GatherAxis, axis_)

 private:
  int axis_;
};

// inputs (a, idx, updates), idx and updates of one shape, equal to a's except
// on `axis`: out = a with out[..., idx[..., i, ...], ...] set to (None) or
// increased by (Sum) updates[..., i, ...].
class ScatterAxis : public UnaryPrimitive {
 public:
  enum ReduceType { None, Sum };
  ScatterAxis(Stream s, ReduceType type, int axis) : UnaryPrimitive(s), type_(type), axis_(axis) {}
  TESSERA_PRIMITIVE(ScatterAxis, type_, axis_)

 private:
  ReduceType type_;
  int axis_;
};

// inputs (a, mask, src): mask is bool of a's shape, src 1-D of a's dtype. The
// k-th true position of the mask (row-major) takes src[k]; positions past the
// end of src, and false ones, keep a's value.
class MaskedScatter : public UnaryPrimitive {
 public:
  explicit MaskedScatter(Stream s) : UnaryPrimitive(s) {}
  TESSERA_PRIMITIVE(MaskedScatter)
};

}  // namespace tessera
