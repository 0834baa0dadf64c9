// Transform rules of AsType, Copy, Broadcast and Contiguous: the derivative of
// moving data is moving the (co)tangent back; vmap applies the same op with
// the batch axis where it is, except Broadcast, which needs it in front.
#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/copy.h"

namespace tessera {

array sum_to_shape(const array& x, const Shape& shape, Stream s) {
  if (x.shape() == shape) return x;
  const int lead = static_cast<int>(x.ndim() - shape.size());
  std::vector<int> axes;
  for (int d = 0; d < static_cast<int>(x.ndim()); ++d) {
    if (d < lead || (shape[d - lead] == 1 && x.shape(d) != 1)) axes.push_back(d);
  }
  return reshape(sum(x, axes, true, s), shape, s);
}

// ---- AsType: a cast to or from an integer or bool dtype has zero derivatives;
// between inexact dtypes the (co)tangent is cast (complex to real keeps the
// real part, as the forward cast does).

std::vector<array> AsType::vjp(const std::vector<array>& primals,
                               const std::vector<array>& cotangents, const std::vector<int>&,
                               const std::vector<array>&) {
  const array& x = primals[0];
  if (!is_inexact(x.dtype()) || !is_inexact(dtype_)) return {zeros_like(x, stream())};
  return {astype(cotangents[0], x.dtype(), stream())};
}

std::vector<array> AsType::jvp(const std::vector<array>& primals,
                               const std::vector<array>& tangents, const std::vector<int>&) {
  if (!is_inexact(primals[0].dtype()) || !is_inexact(dtype_)) {
    return {zeros(primals[0].shape(), dtype_, stream())};
  }
  return {astype(tangents[0], dtype_, stream())};
}

std::pair<std::vector<array>, std::vector<int>> AsType::vmap(const std::vector<array>& inputs,
                                                             const std::vector<int>& axes) {
  return {{astype(inputs[0], dtype_, stream())}, axes};
}

// ---- Copy, Contiguous: identity.

std::vector<array> Copy::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                             const std::vector<int>&, const std::vector<array>&) {
  return cotangents;
}

std::vector<array> Copy::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                             const std::vector<int>&) {
  return tangents;
}

std::pair<std::vector<array>, std::vector<int>> Copy::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  return {{copy(inputs[0], stream())}, axes};
}

std::vector<array> Contiguous::vjp(const std::vector<array>&,
                                   const std::vector<array>& cotangents, const std::vector<int>&,
                                   const std::vector<array>&) {
  return cotangents;
}

std::vector<array> Contiguous::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                   const std::vector<int>&) {
  return tangents;
}

std::pair<std::vector<array>, std::vector<int>> Contiguous::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  return {{contiguous(inputs[0], allow_col_major_, stream())}, axes};
}

// ---- Broadcast

std::vector<array> Broadcast::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  const array& x = primals[0];
  return {astype(sum_to_shape(cotangents[0], x.shape(), stream()), x.dtype(), stream())};
}

std::vector<array> Broadcast::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {broadcast_to(tangents[0], shape_, stream())};
}

// The input's batch axis goes first, then the axes broadcasting adds in front
// of the input's (unbatched) axes: (B, 1, ..., 1, input axes...) broadcasts to
// (B, shape...).
std::pair<std::vector<array>, std::vector<int>> Broadcast::vmap(
    const std::vector<array>& inputs, const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  const int added = static_cast<int>(shape_.size() - (x.ndim() - 1));
  std::vector<int> new_axes;
  for (int i = 0; i < added; ++i) new_axes.push_back(1 + i);
  if (!new_axes.empty()) x = expand_dims(x, new_axes, stream());
  Shape shape{x.shape(0)};
  shape.insert(shape.end(), shape_.begin(), shape_.end());
  return {{broadcast_to(x, shape, stream())}, {0}};
}

}  // namespace tessera
