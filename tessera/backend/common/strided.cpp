#include "tessera/backend/common/strided.h"

#include <cstdint>

namespace tessera {

std::pair<Shape, std::vector<Strides>> collapse_contiguous_dims(
    const Shape& shape, const std::vector<Strides>& strides) {
  const size_t k = strides.size();
  Shape out_shape;
  std::vector<Strides> out_strides(k);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !out_shape.empty() &&
                 int64_t(out_shape.back()) * shape[d] <= INT32_MAX;
    for (size_t j = 0; merge && j < k; ++j) {
      merge = out_strides[j].back() == strides[j][d] * shape[d];
    }
    if (merge) {
      out_shape.back() *= shape[d];
      for (size_t j = 0; j < k; ++j) out_strides[j].back() = strides[j][d];
    } else {
      out_shape.push_back(shape[d]);
      for (size_t j = 0; j < k; ++j) out_strides[j].push_back(strides[j][d]);
    }
  }
  if (out_shape.empty()) {
    bool empty = false;
    for (auto s : shape) empty |= (s == 0);
    out_shape.push_back(empty ? 0 : 1);
    for (size_t j = 0; j < k; ++j) out_strides[j].push_back(0);
  }
  return {std::move(out_shape), std::move(out_strides)};
}

}  // namespace tessera
