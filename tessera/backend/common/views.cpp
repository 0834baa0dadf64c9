#include "tessera/backend/common/views.h"

#include <algorithm>

#include "tessera/ops/primitives/copy.h"
#include "tessera/ops/primitives/creation.h"
#include "tessera/ops/primitives/shape.h"

namespace tessera::views {

namespace {

// The strides that view (shape, strides) as new_shape without moving data, if
// there are any (NumPy's no-copy reshape): each group of old axes that merges
// into or splits from new axes must be contiguous within itself.
bool reshape_strides(const Shape& shape, const Strides& strides, const Shape& new_shape,
                     Strides& out) {
  Shape old_dims;
  Strides old_strides;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      old_dims.push_back(shape[i]);
      old_strides.push_back(strides[i]);
    }
  }
  const int old_nd = static_cast<int>(old_dims.size());
  const int new_nd = static_cast<int>(new_shape.size());
  out.assign(new_nd, 1);
  int oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < new_nd && oi < old_nd) {
    int64_t np = new_shape[ni], op = old_dims[oi];
    while (np != op) {
      if (np < op) {
        np *= new_shape[nj++];
      } else {
        op *= old_dims[oj++];
      }
    }
    for (int ok = oi; ok < oj - 1; ++ok) {
      if (old_strides[ok] != old_dims[ok + 1] * old_strides[ok + 1]) return false;
    }
    out[nj - 1] = old_strides[oj - 1];
    for (int nk = nj - 1; nk > ni; --nk) out[nk - 1] = out[nk] * new_shape[nk];
    ni = nj++;
    oi = oj++;
  }
  return true;
}

}  // namespace

array view_of(const array& base, const Shape& shape, const Strides& strides, int64_t offset) {
  array v(shape, base.dtype(), nullptr, {});
  v.copy_shared_buffer(base, strides, compute_flags(shape, strides),
                       compute_data_size(shape, strides), offset);
  return v;
}

void set_view(const array& in, array& out, const Strides& strides, int64_t offset) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides),
                         compute_data_size(out.shape(), strides), offset);
}

array batched_like(const array& m, const array& out) {
  if (m.ndim() == out.ndim()) return m;
  Shape shape(out.shape().begin(), out.shape().end() - 2);
  shape.insert(shape.end(), {m.shape(-2), m.shape(-1)});
  array view(shape, m.dtype(), nullptr, {});
  broadcast(m, view);
  return view;
}

void broadcast(const array& in, array& out) {
  Strides strides(out.ndim(), 0);
  int diff = static_cast<int>(out.ndim() - in.ndim());
  for (int i = static_cast<int>(in.ndim()) - 1; i >= 0; --i) {
    strides[i + diff] = in.shape(i) == 1 ? 0 : in.strides()[i];
  }
  Flags flags = compute_flags(out.shape(), strides);
  if (out.size() > in.size()) flags.contiguous = flags.row_contiguous = flags.col_contiguous = false;
  out.copy_shared_buffer(in, strides, flags, in.data_size());
}

void transpose(const array& in, array& out, const std::vector<int>& axes) {
  Strides strides(axes.size());
  for (size_t i = 0; i < axes.size(); ++i) strides[i] = in.strides()[axes[i]];
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides), in.data_size());
}

std::pair<Strides, int64_t> slice_strides(const Strides& strides, const Shape& start,
                                          const Shape& steps) {
  Strides out(strides.size());
  int64_t offset = 0;
  for (size_t i = 0; i < strides.size(); ++i) {
    offset += int64_t(start[i]) * strides[i];
    out[i] = strides[i] * steps[i];
  }
  return {out, offset};
}

void slice(const array& in, array& out, const Shape& start, const Shape& steps) {
  auto [strides, offset] = slice_strides(in.strides(), start, steps);
  set_view(in, out, strides, offset);
}

bool reshape(const array& in, array& out) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return true;
  }
  Strides strides;
  if (in.flags().row_contiguous) {
    strides = row_major_strides(out.shape());
  } else if (!reshape_strides(in.shape(), in.strides(), out.shape(), strides)) {
    return false;
  }
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides), in.data_size());
  return true;
}

StridedView diagonal_view(const Shape& shape, const Strides& strides, int offset, int axis1,
                          int axis2) {
  StridedView v;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d != axis1 && d != axis2) {
      v.shape.push_back(shape[d]);
      v.strides.push_back(strides[d]);
    }
  }
  const int64_t k = offset;
  const int64_t start1 = k >= 0 ? 0 : -k;
  const int64_t start2 = k >= 0 ? k : 0;
  const int64_t len = std::max<int64_t>(0, std::min(shape[axis1] - start1, shape[axis2] - start2));
  v.shape.push_back(static_cast<ShapeElem>(len));
  v.strides.push_back(strides[axis1] + strides[axis2]);
  v.offset = len > 0 ? start1 * strides[axis1] + start2 * strides[axis2] : 0;
  return v;
}

void diagonal(const array& in, array& out, int offset, int axis1, int axis2) {
  StridedView v = diagonal_view(in.shape(), in.strides(), offset, axis1, axis2);
  set_view(in, out, v.strides, v.offset);
}

bool reinterpret(const array& in, array& out) {
  const int64_t in_size = in.itemsize(), out_size = out.itemsize();
  if (in_size == out_size) {
    out.copy_shared_buffer(in);
    return true;
  }
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return true;
  }
  const int nd = static_cast<int>(in.ndim());
  if (in.shape(nd - 1) != 1 && in.strides()[nd - 1] != 1) return false;
  for (int d = 0; d + 1 < nd; ++d) {
    if ((in.strides()[d] * in_size) % out_size != 0) return false;
  }
  if ((in.offset() * in_size) % out_size != 0) return false;
  Strides strides(nd);
  for (int d = 0; d + 1 < nd; ++d) strides[d] = in.strides()[d] * in_size / out_size;
  strides[nd - 1] = 1;
  int64_t offset = in.offset() * in_size / out_size - in.offset();
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides),
                         compute_data_size(out.shape(), strides), offset);
  return true;
}

void as_strided(const array& in, array& out, const Strides& strides, int64_t offset) {
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides),
                         compute_data_size(out.shape(), strides), offset);
}

PadPlan pad_plan(const Shape& in_shape, const Shape& out_shape, const Strides& out_strides,
                 const std::vector<int>& axes, const Shape& low, const Shape& high, bool edge) {
  const Strides& strides = out_strides;
  PadPlan p{0, {}};
  for (size_t i = 0; i < axes.size(); ++i) p.interior += int64_t(low[i]) * strides[axes[i]];
  if (!edge) {
    const Strides zeros(out_shape.size(), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      int ax = axes[i];
      Shape shape = out_shape;
      if (low[i] > 0) {
        shape[ax] = low[i];
        p.copies.push_back({shape, zeros, 0, 0});
      }
      if (high[i] > 0) {
        shape[ax] = high[i];
        p.copies.push_back({shape, zeros, 0, int64_t(low[i] + in_shape[ax]) * strides[ax]});
      }
    }
    return p;
  }
  Shape cur = in_shape;
  int64_t cur_offset = p.interior;
  for (size_t i = 0; i < axes.size(); ++i) {
    int ax = axes[i];
    int64_t n = in_shape[ax];
    Strides edge_strides = strides;
    edge_strides[ax] = 0;
    Shape shape = cur;
    if (low[i] > 0) {
      shape[ax] = low[i];
      p.copies.push_back({shape, edge_strides, cur_offset, cur_offset - low[i] * strides[ax]});
    }
    if (high[i] > 0) {
      shape[ax] = high[i];
      p.copies.push_back(
          {shape, edge_strides, cur_offset + (n - 1) * strides[ax], cur_offset + n * strides[ax]});
    }
    cur[ax] = out_shape[ax];
    cur_offset -= low[i] * strides[ax];
  }
  return p;
}

std::optional<TransposePlan> transpose_plan(const Shape& shape, const Strides& in_strides,
                                            const Strides& out_strides, int min_len) {
  const int nd = static_cast<int>(shape.size());
  if (nd < 2) return std::nullopt;
  TransposePlan p{-1, -1, {}, {}, {}};
  for (int d = 0; d < nd; ++d) {
    if (in_strides[d] == 1 && p.a < 0) p.a = d;
    if (out_strides[d] == 1 && p.b < 0) p.b = d;
  }
  if (p.a < 0 || p.b < 0 || p.a == p.b || shape[p.a] < min_len || shape[p.b] < min_len) {
    return std::nullopt;
  }
  for (int d = 0; d < nd; ++d) {
    if (d == p.a || d == p.b) continue;
    p.outer.push_back(shape[d]);
    p.outer_in.push_back(in_strides[d]);
    p.outer_out.push_back(out_strides[d]);
  }
  return p;
}

}  // namespace tessera::views

namespace tessera {

// The kernels of the view primitives (TESSERA_VIEW_PRIMITIVE), one for every
// device.
void Transpose::eval_view(const array& in, array& out) { views::transpose(in, out, axes_); }
void Slice::eval_view(const array& in, array& out) { views::slice(in, out, start_, strides_); }
void Diagonal::eval_view(const array& in, array& out) {
  views::diagonal(in, out, offset_, axis1_, axis2_);
}
void Broadcast::eval_view(const array& in, array& out) { views::broadcast(in, out); }
void AsStrided::eval_view(const array& in, array& out) {
  views::as_strided(in, out, strides_, offset_);
}

}  // namespace tessera
