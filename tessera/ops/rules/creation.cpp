// Transform rules of the creation primitives that have an input: Band, View
// and AsStrided. (Arange and Linspace have no input, so no transform reaches
// them.)
#include <stdexcept>

#include "tessera/ops/ops.h"
#include "tessera/ops/primitives/creation.h"

namespace tessera {

// ---- Band: linear, so the (co)tangent goes through the same band.

namespace {

array band_like(const array& x, int64_t lo, int64_t hi, Stream s) {
  return array(x.shape(), x.dtype(), std::make_shared<Band>(s, lo, hi), {x});
}

}  // namespace

std::vector<array> Band::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, stream())};
  return {band_like(astype(cotangents[0], x.dtype(), stream()), lo_, hi_, stream())};
}

std::vector<array> Band::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, stream())};
  return {band_like(tangents[0], lo_, hi_, stream())};
}

// The band is taken over the last two axes: a batch axis among them moves to the front.
std::pair<std::vector<array>, std::vector<int>> Band::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  array x = inputs[0];
  int b = axes[0];
  if (b >= static_cast<int>(x.ndim()) - 2) {
    x = moveaxis(x, b, 0, stream());
    b = 0;
  }
  return {{band_like(x, lo_, hi_, stream())}, {b}};
}

// ---- View: reading complex64 as pairs of float32 (or back) is linear, and
// its (co)tangent is the same view; a view to or from an integer or bool
// dtype has zero derivatives; any other view between inexact dtypes (float16
// bits read as bfloat16, ...) has no derivative and raises.

namespace {

bool linear_view(Dtype from, Dtype to) {
  return (from == complex64 && to == float32) || (from == float32 && to == complex64);
}

void check_differentiable_view(Dtype from, Dtype to) {
  if (is_inexact(from) && is_inexact(to) && !linear_view(from, to)) {
    throw std::invalid_argument("[View] has no derivative: the bits of " + dtype_name(from) +
                                " read as " + dtype_name(to) +
                                " are not a differentiable function of the input");
  }
}

}  // namespace

std::vector<array> View::vjp(const std::vector<array>& primals,
                             const std::vector<array>& cotangents, const std::vector<int>&,
                             const std::vector<array>&) {
  const array& x = primals[0];
  check_differentiable_view(x.dtype(), dtype_);
  if (!linear_view(x.dtype(), dtype_)) return {zeros_like(x, stream())};
  return {view(astype(cotangents[0], dtype_, stream()), x.dtype(), stream())};
}

std::vector<array> View::jvp(const std::vector<array>& primals,
                             const std::vector<array>& tangents, const std::vector<int>&) {
  const array& x = primals[0];
  check_differentiable_view(x.dtype(), dtype_);
  if (!linear_view(x.dtype(), dtype_)) return {zeros_like(view(x, dtype_, stream()), stream())};
  return {view(tangents[0], dtype_, stream())};
}

// A view between dtypes of different sizes rescales the last axis: a batch
// axis there moves to the front.
std::pair<std::vector<array>, std::vector<int>> View::vmap(const std::vector<array>& inputs,
                                                           const std::vector<int>& axes) {
  array x = inputs[0];
  int b = axes[0];
  if (x.itemsize() != dtype_.size && b == static_cast<int>(x.ndim()) - 1) {
    x = moveaxis(x, b, 0, stream());
    b = 0;
  }
  return {{view(x, dtype_, stream())}, {b}};
}

// ---- AsStrided: the jvp is the same view of the tangent. In the vjp, each
// element of the input receives the sum of the cotangent over the output
// positions that view it: a scatter_add of the cotangent at the flat input
// position of each output element.

std::vector<array> AsStrided::vjp(const std::vector<array>& primals,
                                  const std::vector<array>& cotangents, const std::vector<int>&,
                                  const std::vector<array>&) {
  auto s = stream();
  const array& x = primals[0];
  if (!is_inexact(x.dtype())) return {zeros_like(x, s)};
  const int n = static_cast<int>(x.size());
  const int p = static_cast<int>(shape_size(shape_));
  array positions = reshape(as_strided(arange(0, n, s), shape_, strides_, offset_, s), {p}, s);
  array c = reshape(astype(cotangents[0], x.dtype(), s), {p}, s);
  return {reshape(scatter_add_axis(zeros({n}, x.dtype(), s), positions, c, 0, s), x.shape(), s)};
}

std::vector<array> AsStrided::jvp(const std::vector<array>&, const std::vector<array>& tangents,
                                  const std::vector<int>&) {
  return {as_strided(tangents[0], shape_, strides_, offset_, stream())};
}

// With the batch axis in front, batch element i starts i * (its size)
// elements into the row-contiguous batched input.
std::pair<std::vector<array>, std::vector<int>> AsStrided::vmap(const std::vector<array>& inputs,
                                                                const std::vector<int>& axes) {
  array x = moveaxis(inputs[0], axes[0], 0, stream());
  const int64_t per_element = x.shape(0) == 0 ? 0 : static_cast<int64_t>(x.size()) / x.shape(0);
  Shape shape{x.shape(0)};
  shape.insert(shape.end(), shape_.begin(), shape_.end());
  Strides strides{per_element};
  strides.insert(strides.end(), strides_.begin(), strides_.end());
  return {{as_strided(x, shape, strides, offset_, stream())}, {0}};
}

}  // namespace tessera
