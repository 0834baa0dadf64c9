// How a fused elementwise kernel (ops/primitives/compiled.h) reads its inputs:
// each input's strides broadcast to the output shape, with the dimensions
// that are contiguous in every input and in the row-contiguous output merged.
// Computed once per call and shared by the CPU interpreter and the CUDA
// source generator.
//
//   FusedLayout l = fused_layout(out.shape(), inputs);
//   // l.shape: e.g. {4096} for dense inputs; l.access[k]: how input k is read
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/array.h"

namespace tessera {

enum class FusedAccess : uint8_t {
  linear,   // element i of the output reads element i of the input
  scalar,   // every element reads the input's first element
  strided,  // element i reads elem_to_loc(i, shape, strides[k])
};

struct FusedLayout {
  Shape shape;                   // the output's, collapsed; at least one dimension
  std::vector<Strides> strides;  // per input, in elements, over `shape` (0: broadcast)
  std::vector<FusedAccess> access;
  int64_t size = 0;              // elements of the output
};

// inputs may have fewer dimensions than out_shape, or dimensions of size 1
// (NumPy's broadcasting); strides are the arrays' own (offsets are not included).
FusedLayout fused_layout(const Shape& out_shape, const std::vector<array>& inputs);

}  // namespace tessera
