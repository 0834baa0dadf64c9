// eval_gpu of Compiled.
#include "tessera/ops/primitives/compiled.h"

namespace tessera {

void Compiled::eval_gpu(const std::vector<array>& inputs, array& out) {
  throw_no_implementation(*this, "CUDA");
}

}  // namespace tessera
