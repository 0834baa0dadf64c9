// eval_cpu of the shape primitives.
#include <algorithm>

#include "tessera/backend/common/views.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/core/dispatch.h"
#include "tessera/backend/common/strided.h"
#include "tessera/ops/primitives/shape.h"

namespace tessera {

namespace {

using views::view_of;

// The integers of a (small) index array, in row-major order.
std::vector<int64_t> read_indices(const array& idx) {
  std::vector<int64_t> v(idx.size());
  tessera::dispatch_all(idx.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = idx.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = tessera::cast_to<int64_t>(p[tessera::elem_to_loc(i, idx.shape(), idx.strides())]);
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
  auto [strides, offset] = views::slice_strides(out.strides(), start, steps);
  array region = view_of(out, update.shape(), strides, offset);
  cpu::copy_into(update, region);
}

}  // namespace

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
  views::PadPlan p = views::pad_plan(in.shape(), out.shape(), strides, axes_, low_, high_,
                                     mode_ == Mode::edge);
  array inner = view_of(out, in.shape(), strides, p.interior);
  cpu::copy_into(in, inner);
  // The borders, each from a view of the value (constant) or of out (edge).
  const array& src = mode_ == Mode::constant ? inputs[1] : out;
  for (const auto& c : p.copies) {
    array from = view_of(src, c.shape, c.src_strides, c.src_offset);
    array to = view_of(out, c.shape, strides, c.dst_offset);
    cpu::copy_into(from, to);
  }
}

}  // namespace tessera
