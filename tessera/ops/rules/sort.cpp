// Transform rules of Sort, SearchSorted and PermuteAxis.
//   sort, partition  the output is a gather of x through the indices of the same
//                    sort or partition (Note [Sort order]): jvp gathers the
//                    tangent through them, vjp gathers the cotangent through the
//                    inverse permutation (an argsort of the indices).
//   argsort, argpartition, searchsorted  indices: zero derivatives.
//   PermuteAxis      linear in x: jvp permutes the tangent, vjp applies the
//                    inverse permutation; the indices get zero derivatives.
// vmap runs the op along the axis shifted past the batch axis; SearchSorted
// with a batched sorted sequence loops over the batch.
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/sort.h"
#include "tessera/ops/sort.h"

namespace tessera {

namespace {

array sort_like(Sort::Kind kind, const array& x, int axis, int kth, Stream s) {
  switch (kind) {
    case Sort::Values: return sort(x, axis, s);
    case Sort::Indices: return argsort(x, axis, s);
    case Sort::PartitionValues: return partition(x, kth, axis, s);
    case Sort::PartitionIndices: return argpartition(x, kth, axis, s);
  }
  return x;
}

// `a` with a batch axis at `b` (broadcast when it has none).
array batched_at(const array& a, int axis, int b, int size, Stream s) {
  if (axis >= 0) return moveaxis(a, axis, b, s);
  Shape shape = a.shape();
  shape.insert(shape.begin() + b, size);
  return broadcast_to(expand_dims(a, b, s), shape, s);
}

}  // namespace

std::vector<array> Sort::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  const array& x = primals[0];
  const Stream s = stream();
  if (returns_indices() || !is_inexact(x.dtype())) return {zeros_like(x, s)};
  array order = is_partition() ? argpartition(x, kth_, axis_, s) : argsort(x, axis_, s);
  return {detail::permute_axis(cotangents[0], argsort(order, axis_, s), axis_, s)};
}

std::vector<array> Sort::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  const array& x = primals[0];
  const Stream s = stream();
  if (returns_indices()) return {zeros_like(argsort(x, axis_, s), s)};
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  array order = is_partition() ? argpartition(x, kth_, axis_, s) : argsort(x, axis_, s);
  return {detail::permute_axis(tangents[0], order, axis_, s)};
}

std::pair<std::vector<array>, std::vector<int>> Sort::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  const int b = axes[0];
  const int axis = axis_ >= b ? axis_ + 1 : axis_;
  return {{sort_like(kind_, inputs[0], axis, kth_, stream())}, {b}};
}

std::vector<array> SearchSorted::vjp(const std::vector<array>& primals,
                                     const std::vector<array>&, const std::vector<int>& argnums,
                                     const std::vector<array>&) {
  std::vector<array> out;
  for (int i : argnums) out.push_back(zeros_like(primals[i], stream()));
  return out;
}

std::vector<array> SearchSorted::jvp(const std::vector<array>& primals,
                                     const std::vector<array>&, const std::vector<int>&) {
  return {zeros(primals[1].shape(), uint32, stream())};
}

std::pair<std::vector<array>, std::vector<int>> SearchSorted::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const Stream s = stream();
  const std::string side = right_ ? "right" : "left";
  if (axes[0] < 0) {
    return {{searchsorted(inputs[0], inputs[1], side, s)}, {axes[1]}};
  }
  const int n = inputs[0].shape(axes[0]);
  array seq = moveaxis(inputs[0], axes[0], 0, s);
  array vals = batched_at(inputs[1], axes[1], 0, n, s);
  std::vector<array> outs;
  for (int i = 0; i < n; ++i) {
    array row = squeeze(slice(seq, Shape{i, 0}, Shape{i + 1, seq.shape(1)}, s), 0, s);
    Shape start(vals.ndim(), 0), stop = vals.shape();
    start[0] = i;
    stop[0] = i + 1;
    outs.push_back(searchsorted(row, squeeze(slice(vals, start, stop, s), 0, s), side, s));
  }
  return {{stack(outs, 0, s)}, {0}};
}

std::vector<array> PermuteAxis::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const Stream s = stream();
  std::vector<array> out;
  for (int i : argnums) {
    if (i == 0) {
      out.push_back(detail::permute_axis(cotangents[0], argsort(primals[1], axis_, s), axis_, s));
    } else {
      out.push_back(zeros_like(primals[1], s));
    }
  }
  return out;
}

std::vector<array> PermuteAxis::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  const Stream s = stream();
  array out = zeros_like(primals[0], s);
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == 0) out = detail::permute_axis(tangents[k], primals[1], axis_, s);
  }
  return {out};
}

std::pair<std::vector<array>, std::vector<int>> PermuteAxis::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  const Stream s = stream();
  int n = axes[0] >= 0 ? inputs[0].shape(axes[0]) : inputs[1].shape(axes[1]);
  array x = batched_at(inputs[0], axes[0], 0, n, s);
  array p = batched_at(inputs[1], axes[1], 0, n, s);
  return {{detail::permute_axis(x, p, axis_ + 1, s)}, {0}};
}

}  // namespace tessera
