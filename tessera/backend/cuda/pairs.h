// The one-launch kernels of fused pairs (Note [Fused pairs] in core/grouped.h).
// Each returns false, having launched nothing and given no output a buffer,
// where its kernel does not cover the pair; the members then run in turn.
#pragma once

#include <vector>

#include "tessera/core/array.h"

namespace tessera {
class FusedPair;
}

namespace tessera::gpu {

// The sum of an Add and its RMSNorm or LayerNorm (backend/cuda/fast.cu).
bool add_norm(const FusedPair& p, const std::vector<array>& inputs, std::vector<array>& outputs);

// Two RoPE nodes of equal parameters (backend/cuda/fast.cu).
bool rope_pair(const FusedPair& p, const std::vector<array>& inputs, std::vector<array>& outputs);

// Two SliceUpdate nodes of equal parameters, each written in place
// (backend/cuda/shape.cu).
bool slice_update_pair(const FusedPair& p, const std::vector<array>& inputs,
                       std::vector<array>& outputs);

}  // namespace tessera::gpu
