// eval_cpu of AsType, Copy, Broadcast, Contiguous.
#include "tessera/backend/common/views.h"
#include "tessera/backend/cpu/copy.h"
#include "tessera/ops/primitives/copy.h"

namespace tessera {

void AsType::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().contiguous && in.data_size() == in.size() && in.itemsize() == out.itemsize() &&
      in.is_donatable()) {
    // Same width: cast in place, keeping the input's layout.
    array donor = in;
    out.move_shared_buffer(donor);
    cpu::cast_contiguous(out.raw_data(), in.dtype(), out.raw_data(), out.dtype(), out.data_size());
    return;
  }
  if (in.flags().contiguous && in.data_size() == in.size()) {
    // Keep the (possibly permuted) layout of dense input: one linear pass.
    out.set_data(allocator::malloc(out.nbytes()), in.data_size(), in.strides(), in.flags());
    cpu::cast_contiguous(in.raw_data(), in.dtype(), out.raw_data(), out.dtype(), in.size());
    return;
  }
  cpu::copy_to_row_contiguous(in, out);
}

void Copy::eval_cpu(const std::vector<array>& inputs, array& out) {
  cpu::copy_to_row_contiguous(inputs[0], out);
}

void Contiguous::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& in = inputs[0];
  if (in.flags().row_contiguous || (allow_col_major_ && in.flags().col_contiguous)) {
    out.copy_shared_buffer(in);
    return;
  }
  cpu::copy_to_row_contiguous(in, out);
}

}  // namespace tessera
