// The GPU backend as the core sees it. The CUDA backend implements it; a build
// without CUDA links an implementation for which there is no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "tessera/core/device.h"
#include "tessera/memory/allocator.h"

namespace tessera::gpu {

// Usable GPUs; 0 without CUDA, without a driver or without a device.
int device_count();

// Called when the scheduler creates a GPU stream (makes its cudaStream_t).
void stream_created(const Stream& s);
// Blocks until the GPU has run all work queued on s.
void synchronize(const Stream& s);
// Launches the work of s that the backend holds back to batch it (Note [Tiny
// ops], Note [Recorded batches]); nothing for a CPU stream. Ends a batch.
void flush(const Stream& s);
// The calling thread runs a batch of s's tasks, which ends with flush(s):
// meanwhile the kernels it queues on s may be recorded into a CUDA graph and
// launched together (Note [Recorded batches] in backend/cuda/recording.cpp).
void begin_batch(const Stream& s);
// Launches what the calling thread has recorded and not launched yet: before
// it waits for anything.
void launch_recorded();
// After a task's eval_gpu (also one that threw): frees the scratch memory it
// took (stream-ordered) and lets its buffers be evicted again.
void task_done(const Stream& s);

// Residency hooks, see Note [Residency].
// Makes the host copy of a buffer valid (copies the device copy back).
void make_host_valid(allocator::BufferStorage* s);
// The CPU is about to write the host copy: waits for copies still reading it
// and marks the device copy stale.
void host_write(allocator::BufferStorage* s);
// The host copy was written by the CPU: the device copy is stale.
void host_written(allocator::BufferStorage* s);
// Waits until no copy to the device reads the host copy any more.
void wait_uploads(allocator::BufferStorage* s);
// Frees the device copy of a buffer that is being freed (after the copies
// that still read its host copy).
void release_device(allocator::BufferStorage* s);
// The prefetcher: queues the host-to-device copies of these host-valid
// buffers on the copy stream, in this order, as far as the memory limit
// allows without evicting anything.
void prefetch(const std::vector<allocator::BufferStorage*>& buffers);

// DLPack (see Note [Borrowed memory] in memory/allocator.h). Streams cross
// the interface as integers, as DLPack passes them: a cudaStream_t, or 1 for
// the legacy default stream, 2 for the per-thread default stream.
// The cudaStream_t behind GPU stream s.
std::uintptr_t stream_handle(const Stream& s);
// Storage whose only valid copy is `bytes` of device memory at `ptr` that
// another library owns, written by work that s is ordered after.
allocator::BufferStorage* borrow_device(void* ptr, size_t bytes, const Stream& s);
// Makes the device copy of a buffer valid for a consumer, orders the
// consumer's stream after the work that wrote it (none when consumer_stream
// is -1), marks the device copy the only valid one (the consumer may write
// it) and keeps it from eviction until end_export. Returns its address.
void* export_device(allocator::BufferStorage* s, std::intptr_t consumer_stream);
void end_export(allocator::BufferStorage* s);

// Page-locked host memory (null without a GPU, or when the system refuses).
void* pinned_alloc(size_t bytes);
void pinned_free(void* p);

// Bytes of device memory held by arrays / by the device cache.
size_t active_memory();
size_t cache_memory();
size_t peak_memory();
void reset_peak_memory();
void clear_cache();
// The device memory limit: allocations past it evict device copies first.
size_t memory_limit();
size_t set_memory_limit(size_t limit);

using DeviceInfo = std::map<std::string, std::variant<std::string, size_t>>;
DeviceInfo device_info(int index);

}  // namespace tessera::gpu
