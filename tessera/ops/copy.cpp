// astype, copy, contiguous, broadcast_to, broadcast_arrays.
#include "tessera/ops/primitives/copy.h"

#include "tessera/ops/creation.h"
#include "tessera/ops/shape.h"
#include "tessera/ops/utils.h"

namespace tessera {

array astype(array a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  return array(a.shape(), dtype, std::make_shared<AsType>(to_stream(s), dtype), {a});
}

array copy(array a, StreamOrDevice s) {
  return array(a.shape(), a.dtype(), std::make_shared<Copy>(to_stream(s)), {a});
}

array contiguous(const array& a, bool allow_col_major, StreamOrDevice s) {
  return array(a.shape(), a.dtype(), std::make_shared<Contiguous>(to_stream(s), allow_col_major),
               {a});
}

array broadcast_to(const array& a, const Shape& shape, StreamOrDevice s) {
  if (a.shape() == shape) return a;
  check_non_negative(shape, "broadcast_to");
  Shape out = broadcast_shapes(a.shape(), shape, "broadcast_to");
  if (out != shape) {
    throw_invalid("broadcast_to", "cannot broadcast an array of shape " + shape_str(a.shape()) +
                                      " to shape " + shape_str(shape));
  }
  return array(shape, a.dtype(), std::make_shared<Broadcast>(to_stream(s), shape), {a});
}

std::vector<array> broadcast_arrays(const std::vector<array>& inputs, StreamOrDevice s) {
  std::vector<Shape> shapes;
  for (auto& a : inputs) shapes.push_back(a.shape());
  Shape out = broadcast_shapes(shapes, "broadcast_arrays");
  std::vector<array> result;
  for (auto& a : inputs) result.push_back(broadcast_to(a, out, s));
  return result;
}

}  // namespace tessera
