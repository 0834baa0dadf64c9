#include "tessera/core/dispatch.h"

#include <cstring>

namespace tessera {

void cast_contiguous(const void* src, Dtype src_t, void* dst, Dtype dst_t, size_t n) {
  if (n == 0) return;  // empty arrays may have no memory at all
  if (src_t == dst_t) {
    if (src != dst) std::memcpy(dst, src, n * src_t.size);
    return;
  }
  dispatch_all(src_t, [&](auto in_tag) {
    using In = typename decltype(in_tag)::type;
    dispatch_all(dst_t, [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      const In* s = static_cast<const In*>(src);
      Out* d = static_cast<Out*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = cast_to<Out>(s[i]);
    });
  });
}

}  // namespace tessera
