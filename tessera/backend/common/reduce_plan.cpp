#include "tessera/backend/common/reduce_plan.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "tessera/backend/common/strided.h"

namespace tessera {

ReducePlan reduce_plan(const Shape& shape, const Strides& strides, const std::vector<int>& axes) {
  std::vector<char> reduced(shape.size(), 0);
  for (int ax : axes) reduced[ax] = 1;
  std::vector<int> kept_dims, red_dims;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(d);
  }
  auto key = [&](int d) {
    return strides[d] == 0 ? std::numeric_limits<int64_t>::max() : std::abs(strides[d]);
  };
  std::stable_sort(red_dims.begin(), red_dims.end(), [&](int a, int b) { return key(a) > key(b); });

  auto group = [&](const std::vector<int>& dims, Shape& gs, Strides& gst, int64_t& count) {
    Shape s;
    Strides st;
    count = 1;
    for (int d : dims) {
      s.push_back(shape[d]);
      st.push_back(strides[d]);
      count *= shape[d];
    }
    auto [cs, cst] = tessera::collapse_contiguous_dims(s, {st});
    gs = std::move(cs);
    gst = std::move(cst[0]);
  };
  ReducePlan p;
  group(kept_dims, p.kept_shape, p.kept_strides, p.out_size);
  group(red_dims, p.red_shape, p.red_strides, p.red_size);
  return p;
}

}  // namespace tessera
