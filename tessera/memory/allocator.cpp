#include "tessera/memory/allocator.h"

#include "tessera/core/gpu.h"
#include "tessera/core/device.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace tessera::allocator {

namespace {

constexpr size_t kHeader = 128;
constexpr size_t kAlign = 64;
static_assert(sizeof(BufferStorage) <= kHeader);

// Blocks of this size and more come from the GPU's pinned host pool when a GPU
// is present (Note [Pinned host memory]).
constexpr size_t kPinnedMin = size_t{1} << 16;

// A block of kHeader + cap bytes: pinned where that pays, else ordinary memory.
void* system_alloc(size_t cap, bool& pinned) {
  pinned = false;
  if (cap >= kPinnedMin) {
    if (void* p = gpu::pinned_alloc(kHeader + cap)) {
      pinned = true;
      return p;
    }
  }
  return std::aligned_alloc(kAlign, kHeader + cap);
}

void system_free(BufferStorage* s) {
  if (s->pinned) {
    gpu::pinned_free(s);
  } else {
    std::free(s);
  }
}

size_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return size_t{1} << 34;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

// Size classes: multiples of 64 bytes up to 4 KiB, then multiples of 4 KiB up to
// 1 MiB, then of 64 KiB. A freed block returns to a cache keyed by its class.
size_t size_class(size_t n) {
  if (n <= 4096) return (n + 63) & ~size_t{63};
  if (n <= (size_t{1} << 20)) return (n + 4095) & ~size_t{4095};
  return (n + 65535) & ~size_t{65535};
}

class HostAllocator {
 public:
  HostAllocator() : memory_limit_(physical_memory()), cache_limit_(memory_limit_) {}
  ~HostAllocator() {
    std::lock_guard lock(mutex_);
    release_cache(0);
  }

  Buffer malloc(size_t size) {
    size_t cap = size_class(size);
    std::unique_lock lock(mutex_);
    BufferStorage* s = take_cached(cap);
    if (!s) {
      if (active_ + cache_bytes_ + cap > memory_limit_ && cache_bytes_ > 0) {
        release_cache(0);
      }
      if (active_ + cap > memory_limit_) {
        std::ostringstream msg;
        msg << "[malloc] cannot allocate " << size << " bytes: " << active_
            << " bytes are in use and the memory limit is " << memory_limit_ << " bytes";
        throw std::runtime_error(msg.str());
      }
      lock.unlock();
      bool pinned = false;
      void* p = system_alloc(cap, pinned);
      if (!p) {
        lock.lock();
        release_cache(0);
        lock.unlock();
        p = system_alloc(cap, pinned);
        if (!p) {
          throw std::runtime_error("[malloc] the system could not allocate " +
                                   std::to_string(size) + " bytes");
        }
      }
      s = new (p) BufferStorage{static_cast<char*>(p) + kHeader, size, cap};
      s->pinned = pinned;
      lock.lock();
    }
    s->size = size;
    s->host_valid = true;
    s->device_valid = false;
    s->device_stream = -1;
    s->in_use = 0;
    active_ += cap;
    if (active_ > peak_) peak_ = active_;
    return Buffer(s);
  }

  void free(Buffer b) {
    BufferStorage* s = b.storage();
    if (!s) return;
    // Waits for copies still reading the host copy before it can be reused.
    if (s->device || s->upload_event) gpu::release_device(s);
    if (s->separate_host) {
      BufferStorage* block = s->host_block;
      delete s;
      if (block) free(Buffer(block));
      return;
    }
    std::lock_guard lock(mutex_);
    active_ -= s->capacity;
    if (cache_limit_ == 0) {
      system_free(s);
      return;
    }
    put_cached(s);
    if (cache_bytes_ > cache_limit_) release_cache(cache_limit_);
  }

  size_t active() { std::lock_guard l(mutex_); return active_; }
  size_t peak() { std::lock_guard l(mutex_); return peak_; }
  void reset_peak() { std::lock_guard l(mutex_); peak_ = active_; }
  size_t cache() { std::lock_guard l(mutex_); return cache_bytes_; }
  size_t memory_limit() { std::lock_guard l(mutex_); return memory_limit_; }
  size_t set_memory_limit(size_t limit) {
    std::lock_guard l(mutex_);
    size_t old = memory_limit_;
    memory_limit_ = limit;
    return old;
  }
  size_t set_cache_limit(size_t limit) {
    std::lock_guard l(mutex_);
    size_t old = cache_limit_;
    cache_limit_ = limit;
    if (cache_bytes_ > cache_limit_) release_cache(cache_limit_);
    return old;
  }
  void clear() { std::lock_guard l(mutex_); release_cache(0); }

 private:
  BufferStorage* take_cached(size_t cap) {
    BufferStorage* s = nullptr;
    if (cap <= kSmallMax) {
      auto& list = small_[cap / 64];
      if (list.empty()) return nullptr;
      s = list.back();
      list.pop_back();
    } else {
      auto it = cache_.find(cap);
      if (it == cache_.end()) return nullptr;
      s = it->second;
      cache_.erase(it);
    }
    cache_bytes_ -= cap;
    return s;
  }

  void put_cached(BufferStorage* s) {
    if (s->capacity <= kSmallMax) {
      small_[s->capacity / 64].push_back(s);
    } else {
      cache_.emplace(s->capacity, s);
    }
    cache_bytes_ += s->capacity;
  }

  // Frees cached blocks, largest first, until the cache holds at most `target` bytes.
  void release_cache(size_t target) {
    while (cache_bytes_ > target && !cache_.empty()) {
      auto it = std::prev(cache_.end());
      cache_bytes_ -= it->first;
      system_free(it->second);
      cache_.erase(it);
    }
    for (size_t c = small_.size(); c-- > 0 && cache_bytes_ > target;) {
      auto& list = small_[c];
      while (!list.empty() && cache_bytes_ > target) {
        cache_bytes_ -= list.back()->capacity;
        system_free(list.back());
        list.pop_back();
      }
    }
  }

  std::mutex mutex_;
  // Small size classes (multiples of 64 bytes up to kSmallMax) in free lists
  // indexed by class; larger ones in a map by size.
  static constexpr size_t kSmallMax = 4096;
  std::vector<std::vector<BufferStorage*>> small_ = std::vector<std::vector<BufferStorage*>>(kSmallMax / 64 + 1);
  std::multimap<size_t, BufferStorage*> cache_;
  size_t cache_bytes_ = 0;
  size_t active_ = 0;
  size_t peak_ = 0;
  size_t memory_limit_;
  size_t cache_limit_;
};

HostAllocator& host_allocator() {
  // Leaked on purpose: buffers may be freed by static destructors at exit.
  static HostAllocator* a = new HostAllocator();
  return *a;
}

}  // namespace

Buffer malloc(size_t size) { return host_allocator().malloc(size); }
void free(Buffer buffer) { host_allocator().free(buffer); }

}  // namespace tessera::allocator

namespace tessera {

size_t get_active_memory() { return allocator::host_allocator().active() + gpu::active_memory(); }
size_t get_peak_memory() { return allocator::host_allocator().peak() + gpu::peak_memory(); }
void reset_peak_memory() {
  allocator::host_allocator().reset_peak();
  gpu::reset_peak_memory();
}
size_t get_cache_memory() { return allocator::host_allocator().cache() + gpu::cache_memory(); }
// With a GPU the limit is the device pool's (Note [Eviction]); host memory is
// then bounded by the system only.
size_t get_memory_limit() {
  if (gpu::device_count() > 0) return gpu::memory_limit();
  return allocator::host_allocator().memory_limit();
}
size_t set_memory_limit(size_t limit) {
  if (gpu::device_count() > 0) return gpu::set_memory_limit(limit);
  return allocator::host_allocator().set_memory_limit(limit);
}
size_t set_cache_limit(size_t limit) { return allocator::host_allocator().set_cache_limit(limit); }
size_t set_wired_limit(size_t) { return 0; }
// Work still in flight holds buffers that it frees when it ends: wait for it,
// so that what it frees is given back too.
void clear_cache() {
  synchronize();
  allocator::host_allocator().clear();
  gpu::clear_cache();
}

}  // namespace tessera
