// eval_gpu of GroupedProducts (Note [Grouped products] in core/grouped.h): one
// launch for every member where the matrix-vector kernels apply, else each
// member's own kernel; and of FusedPair (Note [Fused pairs]): one launch for
// both members where a pair kernel covers them, else each member's own.
#include <cstring>

#include "tessera/backend/cuda/matmul.h"
#include "tessera/backend/cuda/pairs.h"
#include "tessera/core/grouped.h"

namespace tessera {

void GroupedProducts::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const bool dense = std::strcmp(member(0).name(), "Matmul") == 0;
  if (dense ? gpu::grouped_matmul(*this, inputs, outputs)
            : gpu::grouped_quantized_matmul(*this, inputs, outputs)) {
    return;
  }
  for (size_t i = 0; i < size(); ++i) member(i).eval_gpu(member_inputs(i, inputs), outputs[i]);
}

void FusedPair::eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  bool fused = false;
  switch (kind()) {
    case GroupKind::add_norm:
      fused = gpu::add_norm(*this, inputs, outputs);
      break;
    case GroupKind::rope_pair:
      fused = gpu::rope_pair(*this, inputs, outputs);
      break;
    case GroupKind::update_pair:
      fused = gpu::slice_update_pair(*this, inputs, outputs);
      break;
    case GroupKind::products:
      break;
  }
  if (!fused) run_in_turn(inputs, outputs, Device::gpu);
}

}  // namespace tessera
