// Transform rules of RandomBits: the bits are not differentiable (zero
// derivatives w.r.t. the keys); vmap over keys gives each key its own slice.
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/random.h"

namespace tessera {

std::vector<array> RandomBits::vjp(const std::vector<array>& primals, const std::vector<array>&,
                                   const std::vector<int>&, const std::vector<array>&) {
  return {zeros_like(primals[0], stream())};
}

std::vector<array> RandomBits::jvp(const std::vector<array>& primals, const std::vector<array>&,
                                   const std::vector<int>&) {
  return {zeros(output_shapes(primals)[0], dtype_of_width(), stream())};
}

// Keys batched along axis b (not the last, which holds the key's two words)
// move to the front; the output's leading axes are the keys' leading axes.
std::pair<std::vector<array>, std::vector<int>> RandomBits::vmap(const std::vector<array>& inputs,
                                                                 const std::vector<int>& axes) {
  array keys = contiguous(moveaxis(inputs[0], axes[0], 0, stream()), false, stream());
  Shape out = output_shapes({keys})[0];
  return {{array(out, dtype_of_width(), std::make_shared<RandomBits>(stream(), shape_, width_),
                 {keys})},
          {0}};
}

}  // namespace tessera
