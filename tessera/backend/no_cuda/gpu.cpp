// A build without CUDA: no GPU, and buffers only ever have a host copy.
#include "tessera/core/gpu.h"

#include <stdexcept>

namespace tessera::gpu {

int device_count() { return 0; }
void stream_created(const Stream&) { throw std::logic_error("[gpu] no GPU stream can exist (bug)"); }
void synchronize(const Stream&) {}
void flush(const Stream&) {}
void begin_batch(const Stream&) {}
void launch_recorded() {}
void task_done(const Stream&) {}
void make_host_valid(allocator::BufferStorage*) {
  throw std::logic_error("[gpu] a buffer without a device copy is always valid on the host (bug)");
}
void host_write(allocator::BufferStorage*) {}
void host_written(allocator::BufferStorage*) {}
void wait_uploads(allocator::BufferStorage*) {}
void release_device(allocator::BufferStorage*) {}
void prefetch(const std::vector<allocator::BufferStorage*>&) {}
std::uintptr_t stream_handle(const Stream&) { throw std::logic_error("[gpu] no GPU stream can exist (bug)"); }
allocator::BufferStorage* borrow_device(void*, size_t, const Stream&) {
  throw std::invalid_argument("[from_dlpack] GPU memory cannot be imported: this build has no GPU backend");
}
void* export_device(allocator::BufferStorage*, std::intptr_t) {
  throw std::invalid_argument("[__dlpack__] this build has no GPU backend to export to");
}
void end_export(allocator::BufferStorage*) {}
void* pinned_alloc(size_t) { return nullptr; }
void pinned_free(void*) { throw std::logic_error("[gpu] no pinned memory exists (bug)"); }
size_t active_memory() { return 0; }
size_t cache_memory() { return 0; }
size_t peak_memory() { return 0; }
void reset_peak_memory() {}
void clear_cache() {}
size_t memory_limit() { return 0; }
size_t set_memory_limit(size_t) { return 0; }
DeviceInfo device_info(int) { throw std::invalid_argument("[device_info] there is no GPU"); }

}  // namespace tessera::gpu
