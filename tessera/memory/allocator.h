// Buffers and the caching host allocator.
//
//   allocator::Buffer b = allocator::malloc(1024);   // throws on out-of-memory
//   float* p = static_cast<float*>(b.raw_ptr());
//   allocator::free(b);                               // back to the cache
//
// Note [Buffer storage]
// A Buffer is a handle to one BufferStorage: a header placed at the start of the
// allocation, followed by the data. The header holds the size and the host pointer;
// the residency protocol of the GPU backend adds its device copies and their
// validity to the same header, so a Buffer stays one pointer wide everywhere.
//
// Note [Borrowed memory]
// A buffer may wrap memory that another library owns (a NumPy array's data, a
// DLPack tensor, on the host or on the GPU): `borrowed`. Such memory is shared
// with its owner, so no kernel ever writes it in place (array::is_donatable is
// false) and Tessera never frees it: the array's deleter hands it back. When
// the borrowed memory is the device copy (`device_borrowed`), the device pool
// neither counts nor evicts it, and the buffer's release waits for the GPU
// work that reads it before handing it back.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::allocator {

struct BufferStorage {
  void* host;        // start of the data (64-byte aligned)
  size_t size;       // bytes requested by the user of the buffer
  size_t capacity;   // bytes available behind host (the cache's size class)

  // Residency (GPU builds, see Note [Residency]).
  void* device = nullptr;    // device copy, or null
  bool host_valid = true;
  bool device_valid = false;
  // The block is page-locked memory from the GPU's host pool.
  bool pinned = false;
  // Storage made by the GPU backend for a device-born buffer: the header is a
  // separate object and the host copy, a block of the host allocator
  // (host_block), is taken when first needed.
  bool separate_host = false;
  int device_stream = -1;    // stream of the last GPU work on the device copy
  int in_use = 0;            // GPU tasks and DLPack exports using the device copy now (not evictable)
  void* upload_event = nullptr;  // cudaEvent_t after the last host-to-device copy
  BufferStorage* host_block = nullptr;
  // See Note [Borrowed memory].
  bool borrowed = false;
  bool device_borrowed = false;
  // Buffers with a device copy, least recently used first (eviction order).
  BufferStorage* lru_prev = nullptr;
  BufferStorage* lru_next = nullptr;
};

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(BufferStorage* s) : storage_(s) {}
  void* raw_ptr() const { return storage_ ? storage_->host : nullptr; }
  size_t size() const { return storage_ ? storage_->size : 0; }
  BufferStorage* storage() const { return storage_; }
  explicit operator bool() const { return storage_ != nullptr; }

 private:
  BufferStorage* storage_ = nullptr;
};

// Allocate `size` bytes (64-byte aligned). Zero bytes gives a valid, empty buffer.
// Throws std::runtime_error naming the sizes when the memory limit or the system
// refuses the allocation.
Buffer malloc(size_t size);
void free(Buffer buffer);

}  // namespace tessera::allocator

namespace tessera {

// MLX's memory API. Sizes in bytes.
size_t get_active_memory();
size_t get_peak_memory();
void reset_peak_memory();
size_t get_cache_memory();
size_t get_memory_limit();
size_t set_memory_limit(size_t limit);
size_t set_cache_limit(size_t limit);
size_t set_wired_limit(size_t limit);
void clear_cache();

}  // namespace tessera
