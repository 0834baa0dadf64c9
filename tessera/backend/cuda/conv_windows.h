// The gather of window matrices on the GPU (conv_windows.cu), for
// Convolution's eval_gpu (convolution.cpp):
//
//   gpu::gather_windows(plan, gpu::device_ptr(x, s), r0, count, windows, x.itemsize(), s);
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/backend/common/conv_plan.h"
#include "tessera/core/device.h"

namespace tessera::gpu {

// The window matrices of rows [r0, r0 + count) of `plan` (conv_plan.h), as
// (groups, count, cols) elements of elem_bytes bytes at `windows`, read from
// the input whose first element is at x. Queued on s.
void gather_windows(const ConvPlan& plan, const void* x, int64_t r0, int64_t count, void* windows,
                    size_t elem_bytes, const Stream& s);

}  // namespace tessera::gpu
