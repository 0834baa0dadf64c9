// The GPU backend as the core sees it. backend/cuda implements it; a build
// without CUDA links backend/no_cuda, where there is no GPU.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <variant>

#include "tessera/core/device.h"
#include "tessera/memory/allocator.h"

namespace tessera::gpu {

// Usable GPUs; 0 without CUDA, without a driver or without a device.
int device_count();

// Called when the scheduler creates a GPU stream (makes its cudaStream_t).
void stream_created(const Stream& s);
// Blocks until the GPU has run all work queued on s.
void synchronize(const Stream& s);
// After a task's eval_gpu: frees the scratch memory it took (stream-ordered).
void task_done(const Stream& s);

// Residency hooks, see Note [Residency] in backend/cuda/device.h.
// Makes the host copy of a buffer valid (copies the device copy back).
void make_host_valid(allocator::BufferStorage* s);
// The host copy was written by the CPU: the device copy is stale.
void host_written(allocator::BufferStorage* s);
// Frees the device copy of a buffer that is being freed.
void release_device(allocator::BufferStorage* s);

// Bytes of device memory held by arrays / by the device cache.
size_t active_memory();
size_t cache_memory();
size_t peak_memory();
void reset_peak_memory();
void clear_cache();

using DeviceInfo = std::map<std::string, std::variant<std::string, size_t>>;
DeviceInfo device_info(int index);

}  // namespace tessera::gpu
