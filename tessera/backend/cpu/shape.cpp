// eval_cpu of the shape primitives.
#include "tessera/backend/cpu/copy.h"
#include "tessera/ops/primitives/shape.h"

namespace tessera {

void Transpose::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  Strides strides(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) strides[i] = in.strides()[axes_[i]];
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides), in.data_size());
}

void Slice::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (out.size() == 0) {
    out.set_data(allocator::malloc(0));
    return;
  }
  Strides strides(in.ndim());
  int64_t offset = 0;
  for (size_t i = 0; i < in.ndim(); ++i) {
    offset += int64_t(start_[i]) * in.strides()[i];
    strides[i] = in.strides()[i] * strides_[i];
  }
  out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides),
                         compute_data_size(out.shape(), strides), offset);
}

void Reshape::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous) {
    auto strides = row_major_strides(out.shape());
    out.copy_shared_buffer(in, strides, compute_flags(out.shape(), strides), in.data_size());
    return;
  }
  array dense = cpu::ensure_row_contiguous(in);
  auto strides = row_major_strides(out.shape());
  out.copy_shared_buffer(dense, strides, compute_flags(out.shape(), strides), dense.data_size());
}

}  // namespace tessera
