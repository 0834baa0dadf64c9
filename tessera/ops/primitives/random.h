// The primitive behind every random sampler: RandomBits.
//
// Note [Random bits]
// RandomBits hashes counters with Threefry-2x32 (20 rounds) under each key of
// its input, as ../shared/reference/random-algorithm.md states (the words and
// their counters are in backend/common/threefry.h). The input holds keys of
// shape (..., 2), uint32, row-contiguous (random::bits makes it so); the output
// has shape (...) + shape_, one slice per key, of dtype uint8, uint16 or
// uint32 for width 1, 2 or 4. random::bits takes one key of shape (2,); more
// leading key axes come only from vmap. The bits are not differentiable: the
// rules give zero (co)tangents.
#pragma once

#include "tessera/core/primitive.h"

namespace tessera {

class RandomBits : public UnaryPrimitive {
 public:
  RandomBits(Stream s, Shape shape, int width)
      : UnaryPrimitive(s), shape_(std::move(shape)), width_(width) {}
  TESSERA_PRIMITIVE(RandomBits, shape_, width_)
  std::vector<Shape> output_shapes(const std::vector<array>& inputs) override;
  // uint8, uint16 or uint32 for width 1, 2 or 4.
  Dtype dtype_of_width() const { return width_ == 1 ? uint8 : width_ == 2 ? uint16 : uint32; }

 private:
  Shape shape_;
  int width_;
};

}  // namespace tessera
