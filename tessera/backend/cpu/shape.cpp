// eval_cpu of the shape primitives.
#include <algorithm>

#include "tessera/backend/cpu/copy.h"
#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/ops/primitives/shape.h"

namespace tessera {

namespace {

// A view of base's buffer (offset in elements, relative to base's offset).
array view_of(const array& base, const Shape& shape, const Strides& strides, int64_t offset) {
  array v(shape, base.dtype(), nullptr, {});
  v.copy_shared_buffer(base, strides, compute_flags(shape, strides),
                       compute_data_size(shape, strides), offset);
  return v;
}

// out as a view of in (an empty out gets an empty buffer of its own).
void set_view(const array& in, array& out, const Strides& strides, int64_t offset) {
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides),
                         compute_data_size(out.shape(), strides), offset);
}

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

// The integers of a (small) index array, in row-major order.
std::vector<int64_t> read_indices(const array& idx) {
  std::vector<int64_t> v(idx.size());
  cpu::dispatch_all(idx.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = idx.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = cpu::cast_to<int64_t>(p[cpu::elem_to_loc(i, idx.shape(), idx.strides())]);
    }
  });
  return v;
}

// Start of a window of `size` on an axis of extent n: negative counts from the
// end, then clamped so the window fits.
int clamp_start(int64_t start, int64_t size, int64_t n) {
  if (start < 0) start += n;
  return static_cast<int>(std::clamp<int64_t>(start, 0, n - size));
}

// out = src with the region (start, steps; update's shape) replaced by update.
void slice_update_cpu(const array& src, const array& update, array& out, const Shape& start,
                      const Shape& steps) {
  if (src.is_donatable() && src.flags().contiguous && src.data_size() == src.size()) {
    array donor = src;
    out.move_shared_buffer(donor);
  } else {
    cpu::copy_to_row_contiguous(src, out);
  }
  if (update.size() == 0) return;
  Strides strides(out.ndim());
  int64_t offset = 0;
  for (size_t i = 0; i < out.ndim(); ++i) {
    offset += int64_t(start[i]) * out.strides()[i];
    strides[i] = out.strides()[i] * steps[i];
  }
  array region = view_of(out, update.shape(), strides, offset);
  cpu::copy_into(update, region);
}

}  // namespace

void Transpose::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) strides[i] = in.strides()[axes_[i]];
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides), in.data_size());
}

void Slice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides(in.ndim());
  int64_t offset = 0;
  for (size_t i = 0; i < in.ndim(); ++i) {
    offset += int64_t(start_[i]) * in.strides()[i];
    strides[i] = in.strides()[i] * strides_[i];
  }
  set_view(in, out, strides, offset);
}

void Reshape::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  Strides strides;
  if (in.flags().row_contiguous) {
    strides = row_major_strides(out.shape());
  } else if (!reshape_strides(in.shape(), in.strides(), out.shape(), strides)) {
    array dense = cpu::ensure_row_contiguous(in);
    strides = row_major_strides(out.shape());
    out.copy_shared_buffer(dense, strides, compute_flags(out.shape(), strides), dense.data_size());
    return;
  }
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides), in.data_size());
}

void DynamicSlice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto starts = read_indices(inputs[1]);
  int64_t offset = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    int ax = axes_[i];
    offset += clamp_start(starts[i], slice_size_[ax], in.shape(ax)) * in.strides()[ax];
  }
  set_view(in, out, in.strides(), offset);
}

void SliceUpdate::eval_cpu(const std::vector<array>& inputs, array& out) {
  slice_update_cpu(inputs[0], inputs[1], out, start_, strides_);
}

void DynamicSliceUpdate::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& update = inputs[1];
  auto starts = read_indices(inputs[2]);
  Shape start(out.ndim(), 0);
  for (size_t i = 0; i < axes_.size(); ++i) {
    int ax = axes_[i];
    start[ax] = clamp_start(starts[i], update.shape(ax), out.shape(ax));
  }
  slice_update_cpu(inputs[0], update, out, start, Shape(out.ndim(), 1));
}

void Concatenate::eval_cpu(const std::vector<array>& inputs, array& out) {
  out.set_data(allocator::malloc(out.nbytes()));
  int64_t pos = 0;
  for (auto& in : inputs) {
    if (in.size() > 0) {
      array region = view_of(out, in.shape(), out.strides(), pos * out.strides()[axis_]);
      cpu::copy_into(in, region);
    }
    pos += in.shape(axis_);
  }
}

void Pad::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  if (out.size() == 0) return;
  const Strides& strides = out.strides();
  int64_t interior = 0;
  for (size_t i = 0; i < axes_.size(); ++i) interior += int64_t(low_[i]) * strides[axes_[i]];
  array inner = view_of(out, in.shape(), strides, interior);
  cpu::copy_into(in, inner);

  if (mode_ == Mode::constant) {
    // Every border slab, from a stride-0 view of the value.
    const array& value = inputs[1];
    auto fill = [&](Shape shape, int64_t offset) {
      array src = view_of(value, shape, Strides(shape.size(), 0), 0);
      array dst = view_of(out, shape, strides, offset);
      cpu::copy_into(src, dst);
    };
    for (size_t i = 0; i < axes_.size(); ++i) {
      int ax = axes_[i];
      Shape shape = out.shape();
      if (low_[i] > 0) {
        shape[ax] = low_[i];
        fill(shape, 0);
      }
      if (high_[i] > 0) {
        shape[ax] = high_[i];
        fill(shape, int64_t(low_[i] + in.shape(ax)) * strides[ax]);
      }
    }
    return;
  }
  // Edge: axis by axis, broadcast the first / last slab of what is filled so far
  // (padded extent on the axes done, interior on the rest) into the borders.
  Shape cur = in.shape();
  int64_t cur_offset = interior;
  for (size_t i = 0; i < axes_.size(); ++i) {
    int ax = axes_[i];
    int64_t n = in.shape(ax);
    Strides edge = strides;
    edge[ax] = 0;
    Shape shape = cur;
    if (low_[i] > 0) {
      shape[ax] = low_[i];
      array src = view_of(out, shape, edge, cur_offset);
      array dst = view_of(out, shape, strides, cur_offset - low_[i] * strides[ax]);
      cpu::copy_into(src, dst);
    }
    if (high_[i] > 0) {
      shape[ax] = high_[i];
      array src = view_of(out, shape, edge, cur_offset + (n - 1) * strides[ax]);
      array dst = view_of(out, shape, strides, cur_offset + n * strides[ax]);
      cpu::copy_into(src, dst);
    }
    cur[ax] = out.shape(ax);
    cur_offset -= low_[i] * strides[ax];
  }
}

void Diagonal::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides;
  for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
    if (d != axis1_ && d != axis2_) strides.push_back(in.strides()[d]);
  }
  strides.push_back(in.strides()[axis1_] + in.strides()[axis2_]);
  int64_t offset = offset_ >= 0 ? int64_t(offset_) * in.strides()[axis2_]
                                : -int64_t(offset_) * in.strides()[axis1_];
  set_view(in, out, strides, offset);
}

}  // namespace tessera
