// depends: ordering without data flow.
#pragma once

#include <vector>

#include "tessera/core/array.h"

namespace tessera {

// Arrays equal to `inputs` (views of their data, no copy) that are computed
// only after every array of `dependencies` is: evaluating a result runs the
// dependencies too. Gradients flow to `inputs` alone.
std::vector<array> depends(const std::vector<array>& inputs,
                           const std::vector<array>& dependencies);

}  // namespace tessera
