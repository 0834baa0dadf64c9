// Transform rules (jvp, vjp, vmap) of the indexing primitives, written with
// the public ops on the primitive's stream.
//
// Gathers and scatters are linear in their data: the vjp of a gather is a
// scatter_add of the cotangent into zeros, the vjp of a scatter gathers the
// cotangent at the same indices. Index inputs get zero cotangents and no
// tangent. Scatter's Max and Min route the derivative to the elements equal
// to the result (all of them on a tie); Prod's derivatives divide by the
// factors, so they hold where a and the updates are nonzero.
//
// Batching: the data's batch axis goes first; batched indices gain one more
// index array, arange(B) on axis 0, so that each batch element gathers from
// (or scatters into) its own slab.
#include <stdexcept>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/indexing.h"
#include "tessera/ops/rules/vmap.h"

namespace tessera {

namespace {


array tangent(size_t i, const std::vector<array>& primals, const std::vector<array>& tangents,
              const std::vector<int>& argnums, Stream s) {
  for (size_t k = 0; k < argnums.size(); ++k) {
    if (argnums[k] == static_cast<int>(i)) return tangents[k];
  }
  return zeros_like(primals[i], s);
}

using rules::batch_first;
using rules::batch_size;
using rules::shifted;

// arange(n) along axis 0 of `shape` (which starts with n).
array batch_index(int n, const Shape& shape, Stream s) {
  Shape one(shape.size(), 1);
  one[0] = n;
  return broadcast_to(reshape(arange(0, n, s), one, s), shape, s);
}

std::vector<array> index_inputs(const std::vector<array>& inputs, size_t end) {
  return std::vector<array>(inputs.begin() + 1, inputs.begin() + end);
}

}  // namespace

// ---- Gather: inputs (a, idx...)

std::vector<array> Gather::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents,
                               const std::vector<int>& argnums) {
  auto idx = index_inputs(primals, primals.size());
  return {gather(tangent(0, primals, tangents, argnums, stream()), idx, axes_, slice_sizes_,
                 stream())};
}

std::vector<array> Gather::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents,
                               const std::vector<int>& argnums, const std::vector<array>&) {
  auto idx = index_inputs(primals, primals.size());
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(scatter_add(zeros_like(primals[0], stream()), idx,
                                 astype(cotangents[0], primals[0].dtype(), stream()), axes_,
                                 stream()));
    } else {
      vjps.push_back(zeros_like(primals[i], stream()));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> Gather::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  auto s = stream();
  int n = batch_size(inputs, axes);
  bool batched_idx = false;
  for (size_t i = 1; i < inputs.size(); ++i) batched_idx = batched_idx || axes[i] >= 0;
  if (!batched_idx) {
    auto idx = index_inputs(inputs, inputs.size());
    Shape sizes = slice_sizes_;
    sizes.insert(sizes.begin(), n);
    array a = moveaxis(inputs[0], axes[0], 0, s);
    int k = idx.empty() ? 0 : static_cast<int>(idx[0].ndim());
    return {{gather(a, idx, shifted(axes_), sizes, s)}, {k}};
  }
  std::vector<array> idx;
  for (size_t i = 1; i < inputs.size(); ++i) idx.push_back(batch_first(inputs[i], axes[i], n, s));
  if (axes[0] < 0) return {{gather(inputs[0], idx, axes_, slice_sizes_, s)}, {0}};
  idx.insert(idx.begin(), batch_index(n, idx[0].shape(), s));
  std::vector<int> ax = shifted(axes_);
  ax.insert(ax.begin(), 0);
  Shape sizes = slice_sizes_;
  sizes.insert(sizes.begin(), 1);
  int k = static_cast<int>(idx[0].ndim());
  array g = gather(moveaxis(inputs[0], axes[0], 0, s), idx, ax, sizes, s);
  return {{squeeze(g, k, s)}, {0}};
}

// ---- Scatter: inputs (a, idx..., updates)

std::vector<array> Scatter::jvp(const std::vector<array>& primals,
                                const std::vector<array>& tangents,
                                const std::vector<int>& argnums) {
  auto s = stream();
  const array& a = primals[0];
  const array& u = primals.back();
  auto idx = index_inputs(primals, primals.size() - 1);
  array ta = tangent(0, primals, tangents, argnums, s);
  array tu = tangent(primals.size() - 1, primals, tangents, argnums, s);
  switch (type_) {
    case None: return {scatter(ta, idx, tu, axes_, s)};
    case Sum: return {scatter_add(ta, idx, tu, axes_, s)};
    case Prod: {
      array out = scatter_prod(a, idx, u, axes_, s);
      array rel = scatter_add(divide(ta, a, s), idx, divide(tu, u, s), axes_, s);
      return {multiply(out, rel, s)};
    }
    case Max:
    case Min: {
      array out = array(a.shape(), a.dtype(), std::make_shared<Scatter>(s, type_, axes_), primals);
      size_t k = u.ndim() - a.ndim();
      Shape window(u.shape().begin() + k, u.shape().end());
      array won = equal(u, gather(out, idx, axes_, window, s), s);
      array zero = array(0, a.dtype());
      return {scatter_add(where(equal(a, out, s), ta, zero, s), idx, where(won, tu, zero, s),
                          axes_, s)};
    }
  }
  throw std::logic_error("[Scatter] unknown reduction (bug)");
}

std::vector<array> Scatter::vjp(const std::vector<array>& primals,
                                const std::vector<array>& cotangents,
                                const std::vector<int>& argnums,
                                const std::vector<array>& outputs) {
  auto s = stream();
  const array& a = primals[0];
  const array& u = primals.back();
  const array& cot = cotangents[0];
  const array& out = outputs[0];
  auto idx = index_inputs(primals, primals.size() - 1);
  size_t k = u.ndim() - a.ndim();
  Shape window(u.shape().begin() + k, u.shape().end());
  const int last = static_cast<int>(primals.size()) - 1;
  array zero = array(0, a.dtype());
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      switch (type_) {
        case None: vjps.push_back(scatter(cot, idx, zeros_like(u, s), axes_, s)); break;
        case Sum: vjps.push_back(cot); break;
        case Prod: vjps.push_back(divide(multiply(cot, out, s), a, s)); break;
        case Max:
        case Min: vjps.push_back(where(equal(a, out, s), cot, zero, s)); break;
      }
    } else if (i == last) {
      array g = gather(cot, idx, axes_, window, s);
      switch (type_) {
        case None:
        case Sum: break;
        case Prod: g = divide(gather(multiply(cot, out, s), idx, axes_, window, s), u, s); break;
        case Max:
        case Min: g = where(equal(u, gather(out, idx, axes_, window, s), s), g, zero, s); break;
      }
      vjps.push_back(g);
    } else {
      vjps.push_back(zeros_like(primals[i], s));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> Scatter::vmap(const std::vector<array>& inputs,
                                                              const std::vector<int>& axes) {
  auto s = stream();
  int n = batch_size(inputs, axes);
  const size_t last = inputs.size() - 1;
  array a = batch_first(inputs[0], axes[0], n, s);
  array u = batch_first(inputs[last], axes[last], n, s);
  bool batched_idx = false;
  for (size_t i = 1; i < last; ++i) batched_idx = batched_idx || axes[i] >= 0;
  auto make = [&](std::vector<array> idx, std::vector<int> ax, array upd) {
    return array(a.shape(), a.dtype(), std::make_shared<Scatter>(s, type_, std::move(ax)),
                 [&] {
                   std::vector<array> in{a};
                   in.insert(in.end(), idx.begin(), idx.end());
                   in.push_back(upd);
                   return in;
                 }());
  };
  // The update's index dims precede its window dims; the window gains the
  // batch axis.
  int k = static_cast<int>(u.ndim() - a.ndim());
  if (!batched_idx) {
    auto idx = index_inputs(inputs, last);
    return {{make(idx, shifted(axes_), moveaxis(u, 0, k, s))}, {0}};
  }
  std::vector<array> idx;
  for (size_t i = 1; i < last; ++i) idx.push_back(batch_first(inputs[i], axes[i], n, s));
  idx.insert(idx.begin(), batch_index(n, idx[0].shape(), s));
  std::vector<int> ax = shifted(axes_);
  ax.insert(ax.begin(), 0);
  Shape ushape = u.shape();
  ushape.insert(ushape.begin() + k + 1, 1);
  return {{make(idx, ax, reshape(u, ushape, s))}, {0}};
}

// ---- GatherAxis: inputs (a, idx)

std::vector<array> GatherAxis::jvp(const std::vector<array>& primals,
                                   const std::vector<array>& tangents,
                                   const std::vector<int>& argnums) {
  return {take_along_axis(tangent(0, primals, tangents, argnums, stream()), primals[1], axis_,
                          stream())};
}

std::vector<array> GatherAxis::vjp(const std::vector<array>& primals,
                                   const std::vector<array>& cotangents,
                                   const std::vector<int>& argnums, const std::vector<array>&) {
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(scatter_add_axis(zeros_like(primals[0], stream()), primals[1],
                                      cotangents[0], axis_, stream()));
    } else {
      vjps.push_back(zeros_like(primals[i], stream()));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> GatherAxis::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  int n = batch_size(inputs, axes);
  array a = batch_first(inputs[0], axes[0], n, stream());
  array idx = batch_first(inputs[1], axes[1], n, stream());
  return {{take_along_axis(a, idx, axis_ + 1, stream())}, {0}};
}

// ---- ScatterAxis: inputs (a, idx, updates)

std::vector<array> ScatterAxis::jvp(const std::vector<array>& primals,
                                    const std::vector<array>& tangents,
                                    const std::vector<int>& argnums) {
  array ta = tangent(0, primals, tangents, argnums, stream());
  array tu = tangent(2, primals, tangents, argnums, stream());
  if (type_ == Sum) return {scatter_add_axis(ta, primals[1], tu, axis_, stream())};
  return {put_along_axis(ta, primals[1], tu, axis_, stream())};
}

std::vector<array> ScatterAxis::vjp(const std::vector<array>& primals,
                                    const std::vector<array>& cotangents,
                                    const std::vector<int>& argnums, const std::vector<array>&) {
  const array& cot = cotangents[0];
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(type_ == Sum ? cot
                                  : put_along_axis(cot, primals[1], array(0, cot.dtype()), axis_,
                                                   stream()));
    } else if (i == 2) {
      vjps.push_back(take_along_axis(cot, primals[1], axis_, stream()));
    } else {
      vjps.push_back(zeros_like(primals[i], stream()));
    }
  }
  return vjps;
}

std::pair<std::vector<array>, std::vector<int>> ScatterAxis::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int n = batch_size(inputs, axes);
  array a = batch_first(inputs[0], axes[0], n, s);
  array idx = batch_first(inputs[1], axes[1], n, s);
  array u = batch_first(inputs[2], axes[2], n, s);
  if (type_ == Sum) return {{scatter_add_axis(a, idx, u, axis_ + 1, s)}, {0}};
  return {{put_along_axis(a, idx, u, axis_ + 1, s)}, {0}};
}

// ---- MaskedScatter: inputs (a, mask, src (1-D))

std::vector<array> MaskedScatter::jvp(const std::vector<array>& primals,
                                      const std::vector<array>& tangents,
                                      const std::vector<int>& argnums) {
  return {masked_scatter(tangent(0, primals, tangents, argnums, stream()), primals[1],
                         tangent(2, primals, tangents, argnums, stream()), stream())};
}

// src[k] went to the k-th true position of the mask. The rank of each
// position that took a value of src, and m (src's size, out of range) at the
// others (false, or past src's end), routes the cotangent: to src through a
// scatter_add that drops rank m, to a where the rank is m.
std::vector<array> MaskedScatter::vjp(const std::vector<array>& primals,
                                      const std::vector<array>& cotangents,
                                      const std::vector<int>& argnums, const std::vector<array>&) {
  auto s = stream();
  const array& cot = cotangents[0];
  const int m = static_cast<int>(primals[2].size());
  const int total = static_cast<int>(cot.size());
  array rank = masked_scatter(full(cot.shape(), m, int32, s), primals[1], arange(0, m, s), s);
  std::vector<array> vjps;
  for (int i : argnums) {
    if (i == 0) {
      vjps.push_back(where(equal(rank, array(m), s), cot, array(0, cot.dtype()), s));
    } else if (i == 2) {
      vjps.push_back(scatter_add_axis(zeros_like(primals[2], s), reshape(rank, {total}, s),
                                      reshape(cot, {total}, s), 0, s));
    } else {
      vjps.push_back(zeros_like(primals[i], s));
    }
  }
  return vjps;
}

// Each batch element fills from its own src, so the rule loops over the batch.
std::pair<std::vector<array>, std::vector<int>> MaskedScatter::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  auto s = stream();
  int n = batch_size(inputs, axes);
  std::vector<std::vector<array>> parts(3);
  for (size_t i = 0; i < 3; ++i) {
    if (axes[i] >= 0) parts[i] = unstack(inputs[i], axes[i], s);
  }
  std::vector<array> outs;
  for (int b = 0; b < n; ++b) {
    auto arg = [&](size_t i) { return axes[i] >= 0 ? parts[i][b] : inputs[i]; };
    outs.push_back(masked_scatter(arg(0), arg(1), arg(2), s));
  }
  return {{stack(outs, 0, s)}, {0}};
}

}  // namespace tessera
