// eval_gpu of RandomBits: one thread per pair of words of one key, the same
// words as the CPU's (backend/common/threefry.h).
#include "tessera/backend/common/threefry.h"
#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/ops/primitives/random.h"

namespace tessera {

namespace {

constexpr int kThreads = 256;

__global__ void random_bits_kernel(const uint32_t* keys, unsigned char* out, int64_t num_keys,
                                   threefry::Words layout) {
  const int64_t pairs = layout.pairs();
  const int64_t n = num_keys * pairs;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < n;
       u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t key = u / pairs;
    threefry::fill_pair(out + key * layout.bytes, layout, keys[2 * key], keys[2 * key + 1],
                        u - key * pairs);
  }
}

}  // namespace

void RandomBits::eval_gpu(const std::vector<array>& inputs, array& out) {
  auto& s = stream();
  const array& keys = inputs[0];
  auto* dst = static_cast<unsigned char*>(gpu::allocate_output(out, s));
  const int64_t num_keys = static_cast<int64_t>(keys.size()) / 2;
  if (out.size() == 0 || num_keys == 0) return;
  const threefry::Words layout(static_cast<int64_t>(out.nbytes()) / num_keys);
  const uint32_t* k = gpu::device_ptr<uint32_t>(keys, s);
  const int64_t n = num_keys * layout.pairs();
  random_bits_kernel<<<gpu::grid_blocks(n, kThreads), kThreads, 0, gpu::cuda_stream(s)>>>(
      k, dst, num_keys, layout);
  gpu::check_launch("RandomBits");
}

}  // namespace tessera
