// eval_cpu of the shape primitives.
#include <algorithm>

#include "tessera/backend/common/views.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/backend/cpu/dispatch.h"
#include "tessera/backend/cpu/strided.h"
#include "tessera/ops/primitives/shape.h"

namespace tessera {

namespace {

using views::view_of;

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
  views::transpose(inputs[0], out, axes_);
}

void Slice::eval_cpu(const std::vector<array>& inputs, array& out) {
  views::slice(inputs[0], out, start_, strides_);
}

void Reshape::eval_cpu(const std::vector<array>& inputs, array& out) {
  if (!views::reshape(inputs[0], out)) views::reshape(cpu::ensure_row_contiguous(inputs[0]), out);
}

void DynamicSlice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto starts = read_indices(inputs[1]);
  int64_t offset = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    int ax = axes_[i];
    offset += clamp_start(starts[i], slice_size_[ax], in.shape(ax)) * in.strides()[ax];
  }
  views::set_view(in, out, in.strides(), offset);
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
  views::diagonal(inputs[0], out, offset_, axis1_, axis2_);
}

}  // namespace tessera
