// eval_gpu of the shape primitives: views through backend/common/views.h,
// copies through the GPU copy (copy.h).
#include <algorithm>
#include <type_traits>

#include "tessera/backend/common/strided.h"
#include "tessera/backend/common/views.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/pairs.h"
#include "tessera/core/grouped.h"
#include "tessera/ops/primitives/shape.h"

namespace tessera {

namespace {

// Where the start of each dynamic axis is read and how it is clamped.
constexpr int kMaxDynamicAxes = 16;
struct DynamicStarts {
  int n;
  int64_t index_loc[kMaxDynamicAxes];  // element of the index array
  int64_t window[kMaxDynamicAxes];
  int64_t extent[kMaxDynamicAxes];
  int64_t stride[kMaxDynamicAxes];  // of the array the window is in
};

// *offset = sum of clamped start * stride, the starts read from idx (as in the
// CPU's clamp_start: negative counts from the end, then the window must fit).
template <typename T>
__global__ void dynamic_offset_kernel(const T* idx, DynamicStarts p, int64_t* offset) {
  int64_t off = 0;
  for (int i = 0; i < p.n; ++i) {
    int64_t start = gpu::cast_to<int64_t>(idx[p.index_loc[i]]);
    if (start < 0) start += p.extent[i];
    start = max(int64_t(0), min(start, p.extent[i] - p.window[i]));
    off += start * p.stride[i];
  }
  *offset = off;
}

// A device int64 holding the element offset of a window of `window` (on the
// axes) in an array of `extent` with `strides`, its starts read from `starts`
// on the device (no host synchronisation).
const int64_t* dynamic_offset(const array& starts, const std::vector<int>& axes,
                              const Shape& window, const Shape& extent, const Strides& strides,
                              const Stream& s, const char* op) {
  if (axes.size() > size_t(kMaxDynamicAxes)) {
    throw std::invalid_argument(std::string("[") + op +
                                "] more than 16 dynamic axes are not supported on the GPU");
  }
  DynamicStarts p{};
  p.n = static_cast<int>(axes.size());
  for (int i = 0; i < p.n; ++i) {
    int64_t loc = 0, rem = i;
    for (int d = static_cast<int>(starts.ndim()) - 1; d >= 0; --d) {
      loc += (rem % starts.shape(d)) * starts.strides()[d];
      rem /= starts.shape(d);
    }
    p.index_loc[i] = loc;
    p.window[i] = window[axes[i]];
    p.extent[i] = extent[axes[i]];
    p.stride[i] = strides[axes[i]];
  }
  auto* offset = static_cast<int64_t*>(gpu::scratch(sizeof(int64_t), s));
  const void* idx = gpu::device_ptr(starts, s);
  gpu::dispatch_device(starts.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dynamic_offset_kernel<T><<<1, 1, 0, gpu::cuda_stream(s)>>>(static_cast<const T*>(idx), p, offset);
  });
  gpu::check_launch(op);
  return offset;
}

// base (void* or const void*) moved by offset elements of a.
template <typename V>
auto* at(V* base, int64_t offset, const array& a) {
  using C = std::conditional_t<std::is_const_v<V>, const char, char>;
  return static_cast<C*>(base) + offset * int64_t(a.itemsize());
}

// Whether src, used for the last time, is written in place.
bool writable_in_place(const array& src) {
  return src.is_donatable() && src.flags().contiguous && src.data_size() == src.size();
}

// out = src with the region (start, steps; update's shape), moved by the
// device offset dyn when given, replaced by update.
void slice_update_gpu(const array& src, const array& update, array& out, const Shape& start,
                      const Shape& steps, const array* dyn_starts,
                      const std::vector<int>* dyn_axes, const Stream& s, const char* op) {
  void* base;
  if (writable_in_place(src)) {
    array donor = src;
    out.move_shared_buffer(donor);
    base = gpu::writable_device_ptr(out, s);
  } else {
    base = gpu::allocate_output(out, s);
    if (src.size() > 0) {
      gpu::copy_gpu(src.shape(), gpu::device_ptr(src, s), src.dtype(), src.strides(), base,
                    out.dtype(), out.strides(), s, op);
    }
  }
  if (update.size() == 0) return;
  auto [strides, offset] = views::slice_strides(out.strides(), start, steps);
  const int64_t* dyn = nullptr;
  if (dyn_starts) {
    dyn = dynamic_offset(*dyn_starts, *dyn_axes, update.shape(), out.shape(), out.strides(), s, op);
  }
  gpu::copy_gpu(update.shape(), gpu::device_ptr(update, s), update.dtype(), update.strides(),
                at(base, offset, out), out.dtype(), strides, s, op, nullptr, dyn);
}

}  // namespace

// Both windows written in place (each source used for the last time), of one
// shape, dtype and layout: one launch of the strided copy.
bool gpu::slice_update_pair(const FusedPair& p, const std::vector<array>& inputs,
                            std::vector<array>& outputs) {
  const auto& first = static_cast<const SliceUpdate&>(p.first());
  const array *src[2] = {&inputs[0], &inputs[2]}, *update[2] = {&inputs[1], &inputs[3]};
  for (int i = 0; i < 2; ++i) {
    const array &a = *src[i], &u = *update[i];
    if (!writable_in_place(a) || u.dtype() != outputs[i].dtype() ||
        a.dtype() != outputs[i].dtype()) {
      return false;
    }
  }
  if (src[0]->shape() != src[1]->shape() || src[0]->strides() != src[1]->strides() ||
      update[0]->shape() != update[1]->shape() || update[0]->size() == 0) {
    return false;
  }
  const Stream& s = p.stream();
  const array& model = *src[0];
  auto [strides, offset] = views::slice_strides(model.strides(), first.start(), first.steps());
  // One layout once collapsed (updates may differ in the strides of their
  // axes of one element: the keys rotated, the values a transposed view).
  const gpu::CopyLayout layout =
      collapse_contiguous_dims(update[0]->shape(), {update[0]->strides(), strides});
  if (layout != collapse_contiguous_dims(update[1]->shape(), {update[1]->strides(), strides}) ||
      !gpu::strided_copy(layout)) {
    return false;
  }
  const void* from[2];
  void* to[2];
  for (int i = 0; i < 2; ++i) {
    array donor = *src[i];
    outputs[i].move_shared_buffer(donor);
    to[i] = at(gpu::writable_device_ptr(outputs[i], s), offset, outputs[i]);
    from[i] = gpu::device_ptr(*update[i], s);
  }
  gpu::copy_gpu_pair(layout, from, to, model.dtype(), s, "SliceUpdate");
  return true;
}

void Reshape::eval_gpu(const std::vector<array>& inputs, array& out) {
  if (!views::reshape(inputs[0], out)) {
    gpu::copy_gpu_to_row_contiguous(inputs[0], out, stream(), "Reshape");
  }
}

// On the GPU the window's start is known only on the device, so the window is
// copied (a view would need the start on the host).
void DynamicSlice::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto& s = stream();
  void* dst = gpu::allocate_output(out, s);
  if (out.size() == 0) return;
  const int64_t* dyn =
      dynamic_offset(inputs[1], axes_, slice_size_, in.shape(), in.strides(), s, "DynamicSlice");
  gpu::copy_gpu(out.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(), dst, out.dtype(),
                out.strides(), s, "DynamicSlice", dyn, nullptr);
}

void SliceUpdate::eval_gpu(const std::vector<array>& inputs, array& out) {
  slice_update_gpu(inputs[0], inputs[1], out, start_, strides_, nullptr, nullptr, stream(),
                   "SliceUpdate");
}

void DynamicSliceUpdate::eval_gpu(const std::vector<array>& inputs, array& out) {
  const Shape zeros(out.ndim(), 0), ones(out.ndim(), 1);
  slice_update_gpu(inputs[0], inputs[1], out, zeros, ones, &inputs[2], &axes_, stream(),
                   "DynamicSliceUpdate");
}

void Concatenate::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  void* base = gpu::allocate_output(out, s);
  int64_t pos = 0;
  for (auto& in : inputs) {
    if (in.size() > 0) {
      gpu::copy_gpu(in.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(),
                    at(base, pos * out.strides()[axis_], out), out.dtype(), out.strides(), s,
                    "Concatenate");
    }
    pos += in.shape(axis_);
  }
}

void Pad::eval_gpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  auto& s = stream();
  void* base = gpu::allocate_output(out, s);
  if (out.size() == 0) return;
  const Strides& strides = out.strides();
  const Dtype t = out.dtype();
  views::PadPlan p = views::pad_plan(in.shape(), out.shape(), strides, axes_, low_, high_,
                                     mode_ == Mode::edge);
  if (in.size() > 0) {
    gpu::copy_gpu(in.shape(), gpu::device_ptr(in, s), in.dtype(), in.strides(),
                  at(base, p.interior, out), t, strides, s, "Pad");
  }
  // The borders, each from the value (constant) or from within out (edge).
  const bool constant = mode_ == Mode::constant;
  const array& src = constant ? inputs[1] : out;
  const void* src_base = constant ? gpu::device_ptr(src, s) : base;
  for (const auto& c : p.copies) {
    gpu::copy_gpu(c.shape, at(src_base, c.src_offset, src), src.dtype(), c.src_strides,
                  at(base, c.dst_offset, out), t, strides, s, "Pad");
  }
}

}  // namespace tessera
