// The window matrices of a convolution on the GPU (conv_windows.h). Gathering
// only moves elements, so the kernel is instantiated per element width.
#include "tessera/backend/cuda/conv_windows.h"

#include <stdexcept>

#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 256;

// Element e walks the chunk in (row, tap, channel) order, so that neighbouring
// threads read neighbouring channels.
template <typename U>
__global__ void gather_kernel(ConvPlan p, const U* x, int64_t r0, int64_t count, U* windows) {
  const int64_t channels = p.groups * p.in_group;
  const int64_t total = count * p.taps * channels;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t cc = e % channels;
    const int64_t tap = (e / channels) % p.taps;
    const int64_t r = e / (channels * p.taps);
    const int64_t g = cc / p.in_group;
    const int64_t offset = window_offset(p, r0 + r, tap);
    windows[(g * count + r) * p.cols + tap * p.in_group + cc % p.in_group] =
        offset < 0 ? U(0) : x[offset + cc * p.channel_stride];
  }
}

template <typename U>
void launch(const ConvPlan& p, const void* x, int64_t r0, int64_t count, void* windows,
            const Stream& s) {
  const int64_t total = count * p.taps * p.groups * p.in_group;
  gather_kernel<U><<<grid_blocks(total, kThreads), kThreads, 0, cuda_stream(s)>>>(
      p, static_cast<const U*>(x), r0, count, static_cast<U*>(windows));
  check_launch("Convolution");
}

}  // namespace

void gather_windows(const ConvPlan& plan, const void* x, int64_t r0, int64_t count, void* windows,
                    size_t elem_bytes, const Stream& s) {
  switch (elem_bytes) {
    case 2: return launch<uint16_t>(plan, x, r0, count, windows, s);
    case 4: return launch<uint32_t>(plan, x, r0, count, windows, s);
    case 8: return launch<uint64_t>(plan, x, r0, count, windows, s);
    default: throw std::logic_error("[Convolution] needs a floating-point dtype (bug in the caller)");
  }
}

}  // namespace tessera::gpu
