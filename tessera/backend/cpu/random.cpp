// eval_cpu of RandomBits.
#include <algorithm>

#include "tessera/backend/common/threefry.h"
#include "tessera/backend/cpu/threading.h"
#include "tessera/ops/primitives/random.h"

namespace tessera {

void RandomBits::eval_cpu(const std::vector<array>& inputs, array& out) {
  const array& keys = inputs[0];
  out.set_data(allocator::malloc(out.nbytes()));
  const int64_t num_keys = static_cast<int64_t>(keys.size()) / 2;
  if (out.size() == 0 || num_keys == 0) return;
  const threefry::Words layout(static_cast<int64_t>(out.nbytes()) / num_keys);
  const uint32_t* k = keys.data<uint32_t>();
  unsigned char* dst = out.data<unsigned char>();
  const int64_t pairs = layout.pairs();
  // One unit is one pair of one key: about 100 integer operations.
  cpu::parallel_for(num_keys * pairs, 1 << 12, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t key = u / pairs;
      threefry::fill_pair(dst + key * layout.bytes, layout, k[2 * key], k[2 * key + 1],
                          u - key * pairs);
    }
  });
}

}  // namespace tessera
