// What export_function knows of each primitive (not a public header): its
// parameters as ExportValues, how to make its node again from them on another
// stream, and for shapeless imports how its output shapes follow from its
// inputs' (Note [Exported primitives] in io/export_primitives.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/core/array.h"
#include "tessera/core/device.h"
#include "tessera/core/primitive.h"
#include "tessera/io/export.h"

namespace tessera::io::detail {

// How the operands of a node meet, for the broadcasts that a shapeless import
// infers again (Note [Shapeless imports] in io/export.cpp).
enum class Operands : uint8_t {
  fixed,        // no rule
  elementwise,  // every operand is broadcast to the output's shape
  matmul,       // operands 0 and 1, (..., M, K) and (..., K, N), are broadcast to one batch
                // shape; operand 2 (AddMM's c) to the output's shape
};

// One node to make again.
struct NodeBuild {
  const char* name;                        // the primitive's name, for messages
  const std::vector<ExportValue>& params;  // as PrimitiveCodec::parameters wrote them
  const std::vector<array>& inputs;
  const std::vector<Shape>& traced_inputs;  // the inputs' shapes at the trace
  const std::vector<Shape>& shapes;         // the outputs' shapes and dtypes at the trace
  const std::vector<Dtype>& dtypes;
  bool infer_shapes;    // the inputs' shapes differ from the trace's (shapeless)
  size_t used_outputs;  // 1 + the highest output position that later nodes read
  Stream stream;
};

struct PrimitiveCodec {
  // The parameters of p, a primitive of the codec's type.
  std::vector<ExportValue> (*parameters)(const Primitive& p);
  // The outputs of the node: its primitive made again from the parameters
  // (the fast primitives: the op that makes it), with the traced output
  // shapes, or with shapes inferred from the inputs'. Throws
  // std::invalid_argument when they cannot be inferred, std::runtime_error
  // when the parameters are corrupt.
  std::vector<array> (*build)(const NodeBuild& b);
  Operands operands;
};

// The codec of the primitive whose name() is `name`, or null.
const PrimitiveCodec* find_codec(std::string_view name);

}  // namespace tessera::io::detail
