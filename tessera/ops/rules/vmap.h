// Helpers of the vmap rules that move the mapped axis of every input to the
// front (ops/rules/shape.cpp, ops/rules/indexing.cpp).
#pragma once

#include <stdexcept>
#include <vector>

#include "tessera/ops/ops.h"

namespace tessera::rules {

// The size of the mapped axis, from the first batched input.
inline int batch_size(const std::vector<array>& inputs, const std::vector<int>& axes) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (axes[i] >= 0) return inputs[i].shape(axes[i]);
  }
  throw std::logic_error("[vmap] a vmap rule was called with no batched input (bug)");
}

// x with its batch axis (-1: none) moved to 0; an unbatched x is broadcast to
// n copies.
inline array batch_first(const array& x, int ax, int n, Stream s) {
  if (ax >= 0) return moveaxis(x, ax, 0, s);
  Shape shape = x.shape();
  shape.insert(shape.begin(), n);
  return broadcast_to(expand_dims(x, 0, s), shape, s);
}

// The axes of an unbatched input as axes of the batch-first one.
inline std::vector<int> shifted(std::vector<int> axes, int by = 1) {
  for (auto& ax : axes) ax += by;
  return axes;
}

}  // namespace tessera::rules
