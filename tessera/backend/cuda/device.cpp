// The CUDA core: devices, streams, the device allocator and the residency
// protocol (see Note [Residency] in device.h).
#include "tessera/backend/cuda/device.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/backend/cuda/tiny.h"
#include "tessera/core/gpu.h"
#include "tessera/memory/allocator.h"

namespace tessera::gpu {

void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear the sticky error state where it is not sticky
  std::ostringstream msg;
  msg << "[cuda] " << call << " failed: " << cudaGetErrorString(err) << " (" << file << ":" << line
      << ")";
  throw std::runtime_error(msg.str());
}

void check_launch(const char* op) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("[") + op +
                             "] kernel launch failed: " + cudaGetErrorString(err));
  }
}

int device_count() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;  // no driver, or no device: a CPU-only process
    }
    return count;
  }();
  return n;
}

const cudaDeviceProp& properties(int device) {
  static const cudaDeviceProp props = [device] {
    cudaDeviceProp p{};
    TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    return p;
  }();
  return props;
}

// Note [Pinned host memory]
// With a GPU present, the host allocator takes its blocks of 64 KiB and more
// from page-locked memory (cudaHostAlloc), and caches them like any other
// block. Copies between such a block and the device run at DMA speed and are
// asynchronous, so the copy engine works while the CPU and the compute streams
// go on. Because a copy can still be reading a host block after the call that
// queued it returns, every host write and every free of a block waits for the
// block's last upload first (BufferStorage::upload_event).
void* pinned_alloc(size_t bytes) {
  if (device_count() == 0) return nullptr;
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}

void pinned_free(void* p) {
  if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();
}

namespace {

using allocator::BufferStorage;

// The stream index that stands for the copy stream in BufferStorage::device_stream.
constexpr int kCopyStream = -2;

// Note [Eviction]
// The device pool has a limit (set_memory_limit; 95% of the device's memory
// by default). Buffers with a device copy form a list, least recently used
// first. An allocation that would pass the limit first evicts from the front
// of that list: a copy that is the only valid one is written back to the
// host, then the device copy is freed (stream-ordered, after the work that
// uses it). Buffers in use by the task being encoded or by a DLPack export
// (in_use) are skipped, and so are borrowed device copies (Note [Borrowed
// memory] in memory/allocator.h), which are not the pool's to free.
// Only when nothing is left to evict does the allocation fail, with an error
// naming the sizes.
//
// One mutex guards all of it: the residency fields of every BufferStorage, the
// list, the streams and the counters.
struct CudaState {
  std::mutex mutex;
  std::vector<cudaStream_t> streams;
  cudaStream_t copy_stream = nullptr;
  cudaMemPool_t pool = nullptr;
  std::vector<cudaEvent_t> free_events;
  // Per stream index, the tiny ops not launched yet (Note [Tiny ops]).
  std::vector<std::unique_ptr<TinyBatch>> tiny;
  BufferStorage* lru_head = nullptr;
  BufferStorage* lru_tail = nullptr;
  // Free small blocks by (stream index, block size), see Note [Small blocks].
  std::map<std::pair<int, size_t>, std::vector<void*>> small_blocks;
  size_t small_cached = 0;
  // Reserved but unused pool memory that the last trim could not release:
  // the free parts of pool chunks that also hold live buffers.
  uint64_t pool_slack = 0;
  size_t active = 0;
  size_t peak = 0;
  size_t limit = 0;

  CudaState() {
    TESSERA_CUDA_CHECK(cudaSetDevice(0));
    TESSERA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    // Keep freed memory in the pool (our cache) instead of returning it at
    // every synchronisation.
    uint64_t threshold = std::numeric_limits<uint64_t>::max();
    TESSERA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking));
    size_t free_bytes = 0, total = 0;
    TESSERA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    limit = total / 20 * 19;
  }
};

CudaState& state() {
  // Leaked on purpose: buffers may be freed during static destruction.
  static CudaState* s = new CudaState();
  return *s;
}

// Everything below that ends in _locked expects state().mutex to be held.

// The stream of index `index`, for queueing work on it or waiting for it:
// its pending tiny ops are launched first (Note [Tiny ops]).
cudaStream_t stream_locked(int index) {
  auto& st = state();
  if (index < 0 || index >= static_cast<int>(st.streams.size()) || !st.streams[index]) {
    return st.copy_stream;
  }
  if (index < static_cast<int>(st.tiny.size()) && st.tiny[index] && st.tiny[index]->count > 0) {
    launch_tiny(*st.tiny[index], st.streams[index]);
    st.tiny[index]->count = 0;
  }
  return st.streams[index];
}

cudaEvent_t take_event_locked() {
  auto& st = state();
  if (!st.free_events.empty()) {
    cudaEvent_t e = st.free_events.back();
    st.free_events.pop_back();
    return e;
  }
  cudaEvent_t e;
  TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void give_event_locked(cudaEvent_t e) { state().free_events.push_back(e); }

// Makes `waiter` wait for the work queued on stream index `index` so far.
void order_after_locked(cudaStream_t waiter, int index) {
  cudaStream_t producer = stream_locked(index);
  if (producer == waiter) return;
  cudaEvent_t e = take_event_locked();
  TESSERA_CUDA_CHECK(cudaEventRecord(e, producer));
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(waiter, e, 0));
  give_event_locked(e);
}

void lru_remove_locked(BufferStorage* b) {
  auto& st = state();
  (b->lru_prev ? b->lru_prev->lru_next : st.lru_head) = b->lru_next;
  (b->lru_next ? b->lru_next->lru_prev : st.lru_tail) = b->lru_prev;
  b->lru_prev = b->lru_next = nullptr;
}

void lru_push_back_locked(BufferStorage* b) {
  auto& st = state();
  b->lru_prev = st.lru_tail;
  b->lru_next = nullptr;
  (st.lru_tail ? st.lru_tail->lru_next : st.lru_head) = b;
  st.lru_tail = b;
}

void lru_touch_locked(BufferStorage* b) {
  if (state().lru_tail == b) return;
  lru_remove_locked(b);
  lru_push_back_locked(b);
}

// Waits until the last upload of b has read its host copy.
void finish_upload_locked(BufferStorage* b) {
  if (!b->upload_event) return;
  auto e = static_cast<cudaEvent_t>(b->upload_event);
  cudaError_t err = cudaEventSynchronize(e);
  if (err != cudaSuccess) cudaGetLastError();
  b->upload_event = nullptr;
  give_event_locked(e);
}

// Note [Small blocks]
// An op on a few elements would spend more time in cudaMallocAsync and
// cudaFreeAsync than in its kernel. Blocks of up to 1 MiB therefore go, when
// freed, to a free list of the stream that freed them, and the next
// allocation of that size on the same stream takes one back without a CUDA
// call. Reuse on the same stream is safe without any event: the work that
// used the block was queued on that stream before the free (or ordered
// before it by an event). Other streams get memory from the pool, which
// orders reuse across streams itself. The lists hold at most 256 MiB.
constexpr size_t kSmallBlock = size_t{1} << 20;
constexpr size_t kSmallCacheMax = size_t{256} << 20;

size_t block_size(size_t bytes) {
  return bytes <= kSmallBlock ? std::max<size_t>(256, (bytes + 255) & ~size_t{255}) : bytes;
}

// Frees device memory for reuse after the work queued on stream `index`.
void free_block_locked(void* p, size_t bytes, int index) {
  auto& st = state();
  size_t size = block_size(bytes);
  st.active -= std::min(st.active, bytes);
  if (size <= kSmallBlock && st.small_cached + size <= kSmallCacheMax) {
    st.small_blocks[{index, size}].push_back(p);
    st.small_cached += size;
    return;
  }
  cudaError_t err = cudaFreeAsync(p, stream_locked(index));
  if (err != cudaSuccess) cudaGetLastError();  // frees never throw (destructors)
}

void release_small_blocks_locked() {
  auto& st = state();
  for (auto& [key, list] : st.small_blocks) {
    for (void* p : list) {
      if (cudaFreeAsync(p, stream_locked(key.first)) != cudaSuccess) cudaGetLastError();
    }
  }
  st.small_blocks.clear();
  st.small_cached = 0;
}

void free_device_locked(BufferStorage* b) {
  free_block_locked(b->device, b->size, b->device_stream);
  b->device = nullptr;
  b->device_valid = false;
  lru_remove_locked(b);
}

void ensure_host_block_locked(BufferStorage* b) {
  if (b->host) return;
  BufferStorage* block = allocator::malloc(b->size).storage();
  b->host_block = block;
  b->host = block->host;
}

// Copies the device copy of b to the host, queued after the work that wrote
// it; returns the event that marks its end.
cudaEvent_t queue_download_locked(BufferStorage* b) {
  ensure_host_block_locked(b);
  cudaStream_t cs = stream_locked(b->device_stream);
  if (b->size > 0) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(b->host, b->device, b->size, cudaMemcpyDeviceToHost, cs));
  }
  cudaEvent_t e = take_event_locked();
  TESSERA_CUDA_CHECK(cudaEventRecord(e, cs));
  return e;
}

// Evicts least recently used device copies until `bytes` more fit under the
// limit, or nothing evictable is left.
void evict_locked(size_t bytes) {
  auto& st = state();
  BufferStorage* b = st.lru_head;
  while (b && st.active + bytes > st.limit) {
    BufferStorage* next = b->lru_next;
    if (b->in_use == 0 && !b->device_borrowed) {
      if (!b->host_valid) {
        cudaEvent_t e = queue_download_locked(b);
        TESSERA_CUDA_CHECK(cudaEventSynchronize(e));
        give_event_locked(e);
        b->host_valid = true;
      }
      free_device_locked(b);
    }
    b = next;
  }
}

[[noreturn]] void throw_out_of_memory(size_t bytes, const char* why) {
  auto& st = state();
  std::ostringstream msg;
  msg << "[gpu::malloc] cannot allocate " << bytes << " bytes of device memory: " << st.active
      << " bytes are in use by arrays that the running work needs and the limit is " << st.limit
      << " bytes (" << why << ")";
  throw std::runtime_error(msg.str());
}

// Device memory for work queued on stream `index`. With `evict` false (the
// prefetcher), returns null instead of evicting or failing.
void* device_alloc_locked(size_t bytes, int index, bool evict = true) {
  auto& st = state();
  if (st.active + bytes > st.limit) {
    if (!evict) return nullptr;
    evict_locked(bytes);
    if (st.active + bytes > st.limit) throw_out_of_memory(bytes, "memory limit");
  }
  const size_t size = block_size(bytes);
  if (size <= kSmallBlock) {
    auto it = st.small_blocks.find({index, size});
    if (it != st.small_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      st.small_cached -= size;
      st.active += bytes;
      if (st.active > st.peak) st.peak = st.active;
      return p;
    }
  }
  cudaStream_t cs = stream_locked(index);
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, size == 0 ? 1 : size, cs);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (!evict) return nullptr;
    // The device itself is full: evict everything evictable, give the pool's
    // cached memory back, and try once more.
    evict_locked(st.limit);
    release_small_blocks_locked();
    TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
    TESSERA_CUDA_CHECK(cudaMemPoolTrimTo(st.pool, 0));
    err = cudaMallocAsync(&p, size == 0 ? 1 : size, cs);
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw_out_of_memory(bytes, cudaGetErrorString(err));
    }
  }
  st.active += bytes;
  if (st.active > st.peak) st.peak = st.active;
  return p;
}

// Queues the copy of b's host copy into its device copy on the copy stream.
void upload_locked(BufferStorage* b) {
  auto& st = state();
  // Kernels may still read the old contents of the device copy.
  if (b->device_stream >= 0) order_after_locked(st.copy_stream, b->device_stream);
  if (b->size > 0) {
    TESSERA_CUDA_CHECK(
        cudaMemcpyAsync(b->device, b->host, b->size, cudaMemcpyHostToDevice, st.copy_stream));
  }
  if (!b->upload_event) b->upload_event = take_event_locked();
  TESSERA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(b->upload_event), st.copy_stream));
  b->device_valid = true;
  b->device_stream = kCopyStream;
}

// The buffers the task on this thread uses (in_use) and its scratch memory.
struct Scratch {
  void* ptr;
  size_t bytes;
  int stream;
};
thread_local std::vector<Scratch> tl_scratch;
thread_local std::vector<BufferStorage*> tl_used;

void mark_in_use_locked(BufferStorage* b) {
  ++b->in_use;
  tl_used.push_back(b);
}

// A buffer freed while the task on this thread still counts it: a temporary
// of the task (a dense copy of an input, a workspace array). task_done must
// not touch it once it is gone.
void forget_in_use_locked(BufferStorage* b) {
  if (b->in_use == 0 || tl_used.empty()) return;
  auto kept = std::remove(tl_used.begin(), tl_used.end(), b);
  b->in_use -= static_cast<int>(tl_used.end() - kept);
  tl_used.erase(kept, tl_used.end());
}

// Makes the device copy of b exist and valid (its writer: b->device_stream).
void make_device_valid_locked(BufferStorage* b) {
  if (!b->device) {
    // Allocated on the copy stream, which writes it first.
    b->device = device_alloc_locked(b->size, kCopyStream);
    b->device_valid = false;
    b->device_stream = kCopyStream;
    lru_push_back_locked(b);
  } else {
    lru_touch_locked(b);
  }
  if (!b->device_valid) upload_locked(b);
}

// Makes `waiter` wait for the work that wrote the device copy of b.
void order_after_writer_locked(cudaStream_t waiter, BufferStorage* b) {
  if (b->device_stream == kCopyStream && b->upload_event) {
    TESSERA_CUDA_CHECK(cudaStreamWaitEvent(waiter, static_cast<cudaEvent_t>(b->upload_event), 0));
  } else {
    order_after_locked(waiter, b->device_stream);
  }
}

// Makes the device copy of b exist and valid for work on stream s.
// (The stream is obtained only to queue a wait: see Note [Tiny ops].)
void ensure_device_locked(BufferStorage* b, const Stream& s) {
  mark_in_use_locked(b);
  make_device_valid_locked(b);
  if ((b->device_stream == kCopyStream && b->upload_event) || b->device_stream != s.index) {
    order_after_writer_locked(stream_locked(s.index), b);
  }
  b->device_stream = s.index;
}

void check_gpu_stream(const Stream& s) {
  if (s.device != Device::gpu) {
    throw std::logic_error("[gpu::cuda_stream] stream is not a GPU stream (bug)");
  }
}

// The cudaStream_t of GPU stream s.
cudaStream_t gpu_stream_locked(const Stream& s) {
  check_gpu_stream(s);
  return stream_locked(s.index);
}

char* element_ptr(void* base, const array& a) {
  return static_cast<char*>(base) + a.offset() * static_cast<int64_t>(a.itemsize());
}

}  // namespace

void stream_created(const Stream& s) {
  auto& st = state();
  cudaStream_t cs;
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  std::lock_guard l(st.mutex);
  if (static_cast<int>(st.streams.size()) <= s.index) st.streams.resize(s.index + 1, nullptr);
  st.streams[s.index] = cs;
}

cudaStream_t cuda_stream(const Stream& s) {
  std::lock_guard l(state().mutex);
  return gpu_stream_locked(s);
}

void enqueue_tiny(const Stream& s, const TinyOp& op) {
  auto& st = state();
  std::lock_guard l(st.mutex);
  if (static_cast<int>(st.tiny.size()) <= s.index) st.tiny.resize(s.index + 1);
  auto& batch = st.tiny[s.index];
  if (!batch) batch = std::make_unique<TinyBatch>();
  if (batch->count == kTinyBatch) stream_locked(s.index);  // launches the full batch
  if (batch->count == kTinyBatch) {
    throw std::logic_error("[gpu::enqueue_tiny] stream " + std::to_string(s.index) +
                           " has no CUDA stream (bug)");
  }
  batch->ops[batch->count++] = op;
}

void flush(const Stream& s) {
  if (s.device != Device::gpu) return;
  std::lock_guard l(state().mutex);
  stream_locked(s.index);
}

void synchronize(const Stream& s) { TESSERA_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(s))); }

const void* device_ptr(const array& a, const Stream& s) {
  auto* b = a.buffer().storage();
  check_gpu_stream(s);
  std::lock_guard l(state().mutex);
  ensure_device_locked(b, s);
  return element_ptr(b->device, a);
}

void* writable_device_ptr(array& out, const Stream& s) {
  auto* b = out.buffer().storage();
  check_gpu_stream(s);
  std::lock_guard l(state().mutex);
  ensure_device_locked(b, s);
  b->host_valid = false;
  return element_ptr(b->device, out);
}

void* allocate_output(array& out, const Stream& s, size_t data_size, Strides strides,
                      Flags flags) {
  size_t bytes = data_size * out.itemsize();
  auto* b = new BufferStorage{nullptr, bytes, bytes};
  b->separate_host = true;
  b->host_valid = false;
  {
    std::lock_guard l(state().mutex);
    try {
      b->device = device_alloc_locked(bytes, s.index);
    } catch (...) {
      delete b;
      throw;
    }
    b->device_valid = true;
    b->device_stream = s.index;
    lru_push_back_locked(b);
    mark_in_use_locked(b);
  }
  out.set_data(allocator::Buffer(b), data_size, std::move(strides), flags);
  return b->device;
}

void* allocate_output(array& out, const Stream& s) {
  return allocate_output(out, s, out.size(), row_major_strides(out.shape()),
                         compute_flags(out.shape(), row_major_strides(out.shape())));
}

void* scratch(size_t bytes, const Stream& s) {
  std::lock_guard l(state().mutex);
  void* p = device_alloc_locked(bytes, s.index);
  tl_scratch.push_back({p, bytes, s.index});
  return p;
}

void task_done(const Stream&) {
  auto& st = state();
  std::lock_guard l(st.mutex);
  for (auto* b : tl_used) --b->in_use;
  tl_used.clear();
  for (auto& sc : tl_scratch) free_block_locked(sc.ptr, sc.bytes, sc.stream);
  tl_scratch.clear();
}

void make_host_valid(BufferStorage* b) {
  auto& st = state();
  std::unique_lock l(st.mutex);
  if (b->host_valid) return;
  cudaEvent_t e = queue_download_locked(b);
  // The copy is queued before any later free of the device copy on the same
  // stream, so the wait needs no lock.
  l.unlock();
  cudaError_t err = cudaEventSynchronize(e);
  l.lock();
  give_event_locked(e);
  TESSERA_CUDA_CHECK(err);
  b->host_valid = true;
}

void host_write(BufferStorage* b) {
  std::lock_guard l(state().mutex);
  finish_upload_locked(b);
  b->host_valid = true;
  b->device_valid = false;
}

void host_written(BufferStorage* b) {
  std::lock_guard l(state().mutex);
  b->host_valid = true;
  b->device_valid = false;
}

void wait_uploads(BufferStorage* b) {
  std::lock_guard l(state().mutex);
  finish_upload_locked(b);
}

void release_device(BufferStorage* b) {
  std::unique_lock l(state().mutex);
  forget_in_use_locked(b);
  finish_upload_locked(b);
  if (!b->device) return;
  if (!b->device_borrowed) {
    free_device_locked(b);
    return;
  }
  // Its owner may reuse the memory at once: first the work reading it ends.
  cudaEvent_t e = take_event_locked();
  cudaError_t err = cudaEventRecord(e, stream_locked(b->device_stream));
  lru_remove_locked(b);
  b->device = nullptr;
  b->device_valid = false;
  l.unlock();
  if (err == cudaSuccess) err = cudaEventSynchronize(e);
  if (err != cudaSuccess) cudaGetLastError();  // frees never throw (destructors)
  l.lock();
  give_event_locked(e);
}

std::uintptr_t stream_handle(const Stream& s) {
  return reinterpret_cast<std::uintptr_t>(cuda_stream(s));
}

BufferStorage* borrow_device(void* ptr, size_t bytes, const Stream& s) {
  auto* b = new BufferStorage{nullptr, bytes, bytes};
  b->separate_host = true;
  b->host_valid = false;
  b->device = ptr;
  b->device_valid = true;
  b->device_borrowed = true;
  b->device_stream = s.index;
  std::lock_guard l(state().mutex);
  lru_push_back_locked(b);
  return b;
}

void* export_device(BufferStorage* b, std::intptr_t consumer_stream) {
  std::lock_guard l(state().mutex);
  make_device_valid_locked(b);
  if (consumer_stream != -1) {
    cudaStream_t consumer = consumer_stream == 1   ? cudaStreamLegacy
                            : consumer_stream == 2 ? cudaStreamPerThread
                                                   : reinterpret_cast<cudaStream_t>(consumer_stream);
    order_after_writer_locked(consumer, b);
  } else {
    stream_locked(b->device_stream);  // launches the writer's pending tiny ops
  }
  ++b->in_use;
  b->host_valid = false;
  return b->device;
}

void end_export(BufferStorage* b) {
  std::lock_guard l(state().mutex);
  --b->in_use;
}

void prefetch(const std::vector<BufferStorage*>& buffers) {
  auto& st = state();
  std::lock_guard l(st.mutex);
  for (auto* b : buffers) {
    if (!b->host_valid || b->device_valid || b->size == 0) continue;
    if (!b->device) {
      // Only into free memory: prefetching never evicts.
      b->device = device_alloc_locked(b->size, kCopyStream, /*evict=*/false);
      if (!b->device) break;
      b->device_stream = kCopyStream;
      lru_push_back_locked(b);
    } else {
      lru_touch_locked(b);
    }
    upload_locked(b);
  }
}

size_t active_memory() {
  if (device_count() == 0) return 0;
  auto& st = state();
  std::lock_guard l(st.mutex);
  return st.active;
}

size_t peak_memory() {
  if (device_count() == 0) return 0;
  auto& st = state();
  std::lock_guard l(st.mutex);
  return st.peak;
}

void reset_peak_memory() {
  if (device_count() == 0) return;
  auto& st = state();
  std::lock_guard l(st.mutex);
  st.peak = st.active;
}

size_t memory_limit() {
  if (device_count() == 0) return 0;
  auto& st = state();
  std::lock_guard l(st.mutex);
  return st.limit;
}

size_t set_memory_limit(size_t limit) {
  if (device_count() == 0) return 0;
  auto& st = state();
  std::lock_guard l(st.mutex);
  size_t old = st.limit;
  st.limit = limit;
  return old;
}

namespace {

// Pool memory reserved beyond what live buffers use.
uint64_t pool_unused(cudaMemPool_t pool) {
  uint64_t reserved = 0, used = 0;
  TESSERA_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  TESSERA_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return reserved > used ? reserved - used : 0;
}

}  // namespace

// The memory clear_cache() would give back: cached small blocks, and the
// pool's unused memory beyond what the last trim had to keep.
size_t cache_memory() {
  if (device_count() == 0) return 0;
  uint64_t unused = pool_unused(state().pool);
  std::lock_guard l(state().mutex);
  return (unused > state().pool_slack ? unused - state().pool_slack : 0) + state().small_cached;
}

void clear_cache() {
  if (device_count() == 0) return;
  {
    std::lock_guard l(state().mutex);
    release_small_blocks_locked();
  }
  TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
  TESSERA_CUDA_CHECK(cudaMemPoolTrimTo(state().pool, 0));
  uint64_t slack = pool_unused(state().pool);
  std::lock_guard l(state().mutex);
  state().pool_slack = slack;
}

DeviceInfo device_info(int index) {
  if (index < 0 || index >= device_count()) {
    throw std::invalid_argument("[device_info] there is no GPU " + std::to_string(index));
  }
  cudaDeviceProp p{};
  TESSERA_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceInfo info;
  info["device_name"] = std::string(p.name);
  info["architecture"] = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  info["memory_size"] = static_cast<size_t>(p.totalGlobalMem);
  info["multiprocessor_count"] = static_cast<size_t>(p.multiProcessorCount);
  return info;
}

}  // namespace tessera::gpu
