#include "tessera/backend/common/fused_layout.h"

#include "tessera/backend/common/strided.h"

namespace tessera {

FusedLayout fused_layout(const Shape& out_shape, const std::vector<array>& inputs) {
  const int nd = static_cast<int>(out_shape.size());
  std::vector<Strides> sets;
  sets.reserve(inputs.size() + 1);
  for (const array& in : inputs) {
    Strides s(nd, 0);
    const int shift = nd - static_cast<int>(in.ndim());
    for (int d = 0; d < static_cast<int>(in.ndim()); ++d) {
      if (in.shape(d) != 1) s[d + shift] = in.strides()[d];
    }
    sets.push_back(std::move(s));
  }
  Strides row(nd, 1);
  for (int d = nd - 2; d >= 0; --d) row[d] = row[d + 1] * out_shape[d + 1];
  sets.push_back(std::move(row));

  auto [shape, strides] = collapse_contiguous_dims(out_shape, sets);
  FusedLayout layout;
  layout.size = 1;
  for (auto e : shape) layout.size *= e;
  const Strides& dense = strides.back();
  for (size_t k = 0; k < inputs.size(); ++k) {
    bool zero = true;
    for (auto st : strides[k]) zero = zero && st == 0;
    layout.access.push_back(zero              ? FusedAccess::scalar
                            : strides[k] == dense ? FusedAccess::linear
                                                  : FusedAccess::strided);
  }
  strides.pop_back();
  layout.shape = std::move(shape);
  layout.strides = std::move(strides);
  return layout;
}

}  // namespace tessera
