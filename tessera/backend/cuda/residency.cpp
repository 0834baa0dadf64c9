// The residency protocol on the GPU (Note [Residency] in device.h): the
// device copies of buffers and the copies between host and device, eviction,
// the buffers and scratch memory of the task being encoded, the prefetcher,
// and DLPack's borrowed and exported device memory.
//
// For every BufferStorage b, under the mutex (Note [CUDA state] in state.h):
// - b is on the LRU list exactly when b->device is set, borrowed device
//   copies included.
// - b->device_stream is the stream index of the last GPU work on the device
//   copy (kCopyStream after an upload). Work on another stream waits for it
//   first (order_after_writer_locked), and the device copy is freed on it.
// - b->upload_event, when set, follows the last upload of b, which may still
//   read the host copy; a host write or a free of b waits for it first and
//   gives it back (Note [Pinned host memory] in allocator.cpp).
// - b->in_use counts b's entries in the in-use lists of all threads and its
//   DLPack exports not ended yet; eviction skips b while it is not 0.
// A task is encoded on one thread, from its first device_ptr, allocate_output
// or scratch to task_done; that thread's in-use list and scratch list hold
// what it took.
#include "tessera/backend/cuda/device.h"

#include <algorithm>
#include <cstring>

#include "tessera/backend/cpu/threading.h"
#include "tessera/backend/cuda/state.h"
#include "tessera/core/gpu.h"

namespace tessera::gpu {

namespace {

using allocator::BufferStorage;

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
// One mutex guards it all (Note [CUDA state] in state.h).

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

// Copies the device copy of b to the host (or to `dst`, pinned memory of
// b->size bytes), queued after the work that wrote it; returns the event that
// marks its end.
cudaEvent_t queue_download_locked(BufferStorage* b, void* dst = nullptr) {
  ensure_host_block_locked(b);
  cudaStream_t cs = stream_locked(b->device_stream);
  if (b->size > 0) {
    TESSERA_CUDA_CHECK(
        cudaMemcpyAsync(dst ? dst : b->host, b->device, b->size, cudaMemcpyDeviceToHost, cs));
  }
  cudaEvent_t e = take_event_locked();
  TESSERA_CUDA_CHECK(cudaEventRecord(e, cs));
  return e;
}

}  // namespace

void evict_locked(size_t bytes) {
  auto& st = state();
  BufferStorage* b = st.lru_head;
  while (b && st.active + bytes > st.limit) {
    BufferStorage* next = b->lru_next;
    // A device copy that another thread's recording may use stays (Note
    // [Recorded batches] in recording.cpp).
    if (b->in_use == 0 && !b->device_borrowed && !recorded_elsewhere_locked(b->device_stream)) {
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

namespace {

bool host_pinned(const BufferStorage* b) {
  return b->separate_host ? b->host_block && b->host_block->pinned : b->pinned;
}

// Note [Uploads through pinned memory]
// cudaMemcpyAsync from pageable memory copies through the driver's staging,
// on the calling core, and returns once it has read the source: a 1 GiB
// NumPy array taken by mx.asarray went up at 7.7 GB/s on an H100, where DMA
// from pinned memory runs at about 50. A pageable host copy of
// kStagedUpload bytes or more therefore goes up in pieces of kStagePiece
// bytes through kStageSlots pinned slots: the CPU pool copies piece i into
// its slot while the copy engine moves piece i - 1, and a slot is refilled
// only after the event of its last copy. The caller holds the state's mutex,
// so the pool is used only if no other parallel region holds it
// (parallel_for_if_idle): a job of that region might wait for the mutex.
// When the call returns the source has been read whole, as with
// cudaMemcpyAsync. Without pinned memory the plain copy is taken.
constexpr size_t kStagedUpload = size_t{4} << 20;
constexpr size_t kStagePiece = size_t{16} << 20;
constexpr int kStageSlots = 3;

bool upload_slots_locked() {
  auto& st = state();
  if (!st.upload_slots.empty()) return true;
  std::vector<std::pair<void*, cudaEvent_t>> slots;
  for (int i = 0; i < kStageSlots; ++i) {
    void* p = nullptr;
    cudaEvent_t e = nullptr;
    if (cudaHostAlloc(&p, kStagePiece, cudaHostAllocPortable) != cudaSuccess ||
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      if (p) cudaFreeHost(p);
      for (auto& [q, f] : slots) cudaFreeHost(q), cudaEventDestroy(f);
      return false;
    }
    slots.emplace_back(p, e);
  }
  st.upload_slots = std::move(slots);
  return true;
}

void staged_upload_locked(BufferStorage* b) {
  auto& st = state();
  const char* src = static_cast<const char*>(b->host);
  char* dst = static_cast<char*>(b->device);
  size_t k = 0;
  for (size_t off = 0; off < b->size; off += kStagePiece, k = (k + 1) % st.upload_slots.size()) {
    auto [slot, done] = st.upload_slots[k];
    const size_t n = std::min(kStagePiece, b->size - off);
    TESSERA_CUDA_CHECK(cudaEventSynchronize(done));  // the slot's last copy has read it
    cpu::parallel_for_if_idle(static_cast<int64_t>(n), int64_t{1} << 20, [&](int64_t s, int64_t e) {
      std::memcpy(static_cast<char*>(slot) + s, src + off + s, static_cast<size_t>(e - s));
    });
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(dst + off, slot, n, cudaMemcpyHostToDevice, st.copy_stream));
    TESSERA_CUDA_CHECK(cudaEventRecord(done, st.copy_stream));
  }
}

// Queues the copy of b's host copy into its device copy on the copy stream.
void upload_locked(BufferStorage* b) {
  auto& st = state();
  // Kernels may still read the old contents of the device copy.
  if (b->device_stream >= 0) order_after_locked(st.copy_stream, b->device_stream);
  if (b->size >= kStagedUpload && !host_pinned(b) && upload_slots_locked()) {
    staged_upload_locked(b);
  } else if (b->size > 0) {
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
  // Work of another stream that writes b may still be in a recording.
  if (b->device_stream != s.index) settle_recording_locked(b->device_stream);
  mark_in_use_locked(b);
  make_device_valid_locked(b);
  if ((b->device_stream == kCopyStream && b->upload_event) || b->device_stream != s.index) {
    order_after_writer_locked(stream_locked(s.index), b);
  }
  b->device_stream = s.index;
}

char* element_ptr(void* base, const array& a) {
  return static_cast<char*>(base) + a.offset() * static_cast<int64_t>(a.itemsize());
}

}  // namespace

const void* device_ptr(const array& a, const Stream& s) {
  auto* b = a.buffer().storage();
  check_gpu_stream(s);
  std::lock_guard l(state().mutex);
  ensure_device_locked(b, s);
  return element_ptr(b->device, a);
}

bool host_scalar(const array& a, void* value) {
  auto* b = a.buffer().storage();
  if (!b) return false;
  std::lock_guard l(state().mutex);
  if (!b->host_valid || !b->host) return false;
  std::memcpy(value, element_ptr(b->host, a), a.itemsize());
  return true;
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
  Strides strides = row_major_strides(out.shape());
  Flags flags = compute_flags(out.shape(), strides);
  return allocate_output(out, s, out.size(), std::move(strides), flags);
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
  launch_if_waited_for_locked();
  for (auto* b : tl_used) --b->in_use;
  tl_used.clear();
  for (auto& sc : tl_scratch) free_block_locked(sc.ptr, sc.bytes, sc.stream);
  tl_scratch.clear();
}

// Note [Downloads through pinned memory]
// A copy from the device into pageable memory makes cudaMemcpyAsync wait, on
// the calling thread, for all the work queued before it on the stream. Under
// the state's mutex that stalls every other thread's launches: the stream
// worker dispatching the next decoding step while the program reads the
// current token waited for the whole step. A buffer of up to kStagingSlot
// bytes whose host copy is pageable (blocks of the host allocator below its
// pinned size, borrowed memory) therefore comes down through a pinned slot,
// kept for reuse, and is copied into its host copy after the event.
namespace {

constexpr size_t kStagingSlot = size_t{1} << 16;

void* take_staging_locked() {
  auto& st = state();
  if (!st.staging.empty()) {
    void* p = st.staging.back();
    st.staging.pop_back();
    return p;
  }
  void* p = nullptr;
  if (cudaHostAlloc(&p, kStagingSlot, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // the copy goes straight to the host copy
  }
  return p;
}

}  // namespace

void make_host_valid(BufferStorage* b) {
  auto& st = state();
  std::unique_lock l(st.mutex);
  if (b->host_valid) return;
  // The work that wrote b may be in a recording not launched yet; meanwhile
  // another thread may have made the host copy valid.
  settle_recording_locked(b->device_stream);
  check_recording_locked();
  if (b->host_valid) return;
  ensure_host_block_locked(b);
  void* slot = b->size > 0 && b->size <= kStagingSlot && !host_pinned(b) ? take_staging_locked()
                                                                          : nullptr;
  cudaEvent_t e;
  try {
    e = queue_download_locked(b, slot);
  } catch (...) {
    if (slot) st.staging.push_back(slot);
    throw;
  }
  // The copy is queued before any later free of the device copy on the same
  // stream, so the wait needs no lock.
  l.unlock();
  cudaError_t err = cudaEventSynchronize(e);
  l.lock();
  give_event_locked(e);
  if (slot) {
    if (err == cudaSuccess) std::memcpy(b->host, slot, b->size);
    st.staging.push_back(slot);
  }
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
  settle_recording_locked(b->device_stream);
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
    // An upload would wait for another thread's recording: the task uploads.
    if (recorded_elsewhere_locked(b->device_stream)) continue;
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

}  // namespace tessera::gpu
