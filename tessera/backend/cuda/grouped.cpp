// eval_gpu of GroupedProducts (Note [Grouped products] in core/grouped.h): one
// launch for every member where the matrix-vector kernels apply, else each
// member's own kernel.
#include <cstring>

#include "tessera/backend/cuda/matmul.h"
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

}  // namespace tessera
