// The graph walks shared by the transforms (transforms.cpp, compile.cpp) and
// export (io/export.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_set>
#include <vector>

#include "tessera/core/array.h"

namespace tessera::detail {

// The nodes between `outputs` and the cut arrays (excluded) that depend on a
// cut array, one array per node, inputs before users. Only tracers are
// followed: nothing else can depend on the transformed inputs.
std::vector<array> trace_tape(const std::vector<array>& outputs,
                              const std::unordered_set<std::uintptr_t>& cut);

// The nodes that outputs depend on, one array per node, inputs before users,
// without recursion; the walk does not enter arrays for which leaf(a) holds.
std::vector<array> graph_nodes(const std::vector<array>& outputs,
                               const std::function<bool(const array&)>& leaf);

// An input of a function while `transform` traces it: a shape and a dtype, no
// data. Evaluating anything computed from it throws std::invalid_argument
// naming the transform, since the trace must not depend on the inputs' values
// (compile; vmap, whose trace runs once for every batch element).
array placeholder(const Shape& shape, Dtype dtype, const char* transform);

}  // namespace tessera::detail
