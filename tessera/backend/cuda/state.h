// The state that the three parts of the CUDA backend share: device.cpp
// (checks, streams, events), allocator.cpp (device memory) and residency.cpp
// (the device copies of buffers). Included by those three files only.
//
// Note [CUDA state]
// One CudaState exists per process. The first call of state() makes it (the
// first use of the GPU sets device 0, the pool and the copy stream up), and it
// is never destroyed: buffers may be freed during static destruction, and
// their device copies go back through it.
//
// Locking. One mutex, CudaState::mutex, guards every member but `pool` and
// `copy_stream` (set by the constructor, never changed afterwards), and the
// residency fields of every BufferStorage (device, host_valid, device_valid,
// device_stream, in_use, upload_event, host_block, lru_prev, lru_next).
// - A function whose name ends in _locked expects its caller to hold the
//   mutex, and never takes it; so does throw_out_of_memory, which only
//   device_alloc_locked calls.
// - Every other function of the three files that reads or writes what the
//   mutex guards takes it itself, so none of them is called with the mutex
//   held (std::mutex is not recursive).
// - Three let it go while they block, and take it again before they touch
//   guarded state: make_host_valid and release_device around the wait for an
//   event that they alone hold, clear_cache around the device's
//   synchronisation and the pool's trim.
// - With the mutex held, the host allocator's mutex may be taken (a download
//   takes a host block from allocator::malloc), never the other way round:
//   what the host allocator calls with its own mutex held (pinned_free)
//   takes no lock.
//
// Members, their owner and their lifetime:
// - streams: the cudaStream_t of each GPU stream, by stream index (null at the
//   indices of other streams); made by stream_created, never destroyed.
// - copy_stream: the stream of uploads (kCopyStream); made by the constructor.
// - pool: the device's default memory pool, which cudaMallocAsync draws from.
//   The CUDA runtime owns it; the constructor makes it keep freed memory (our
//   cache), and clear_cache trims it.
// - free_events: events not in use, owned here and never destroyed. An event
//   taken by take_event_locked belongs to its taker until give_event_locked,
//   a buffer's upload_event until finish_upload_locked.
// - staging, upload_slots: pinned host memory (and its events), owned, made on
//   first use, never freed.
// - tiny: the pending tiny ops of each stream index (Note [Tiny ops]), owned.
// - counters: the zeroed counters of each stream index (zeroed_counters),
//   made on first use, never freed.
// - lru_head, lru_tail: the buffers that have a device copy, least recently
//   used first (Note [Eviction]). The list owns none of them: a buffer leaves
//   it when its device copy goes, and is freed only after that.
// - small_blocks, small_cached: free device blocks, owned by the cache until
//   an allocation takes one back or clear_cache frees them (Note [Small
//   blocks]).
// - pool_slack, active, peak, limit: the counters of allocator.cpp.
// - recordings: per stream index, the batch being recorded into a CUDA graph
//   and the executable graphs kept for replay (Note [Recorded batches] in
//   recording.cpp), owned; made on first use, never freed. recording_ended
//   wakes the threads that wait for a recording to be launched.
//
// Stream indices: BufferStorage::device_stream (-1 before any GPU work) and
// the keys of small_blocks are indices of GPU streams, or kCopyStream for the
// copy stream. stream_locked maps every index without a GPU stream to the
// copy stream.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "tessera/backend/cuda/tiny.h"
#include "tessera/core/device.h"
#include "tessera/memory/allocator.h"

namespace tessera::gpu {

// The stream index that stands for the copy stream in BufferStorage::device_stream.
inline constexpr int kCopyStream = -2;

// A GPU stream's recording (Note [Recorded batches] in recording.cpp).
struct Recording {
  // The private stream that records; the graph is launched on the GPU stream.
  cudaStream_t capture = nullptr;
  bool active = false;
  std::thread::id owner;
  // Threads waiting for the recording to be launched (they need the stream).
  int waiters = 0;
  // Blocks to return to the pool after the launch (Note [Recorded batches]).
  std::vector<void*> frees;
  // Executable graphs by node count, the most recently used last.
  std::vector<std::pair<size_t, cudaGraphExec_t>> execs;
  // The share of recent recordings that needed a new executable graph, and
  // the batches left before recording is tried again after too many did.
  double misses = 0;
  int paused = 0;
  // A recording ended inside a task: launches of that task may still go to
  // the recording stream, outside any recording (Note [Recorded batches]).
  bool stale = false;
};

struct CudaState {
  std::mutex mutex;
  std::vector<cudaStream_t> streams;
  cudaStream_t copy_stream = nullptr;
  cudaMemPool_t pool = nullptr;
  std::vector<cudaEvent_t> free_events;
  // Per stream index, the tiny ops not launched yet (Note [Tiny ops]).
  std::vector<std::unique_ptr<TinyBatch>> tiny;
  std::vector<unsigned*> counters;
  // Pinned slots for small downloads (Note [Downloads through pinned memory]).
  std::vector<void*> staging;
  // Pinned slots for large uploads and the events of their last copies (Note
  // [Uploads through pinned memory]); empty until the first such upload.
  std::vector<std::pair<void*, cudaEvent_t>> upload_slots;
  allocator::BufferStorage* lru_head = nullptr;
  allocator::BufferStorage* lru_tail = nullptr;
  // Free small blocks by (stream index, block size), see Note [Small blocks].
  std::map<std::pair<int, size_t>, std::vector<void*>> small_blocks;
  size_t small_cached = 0;
  // Reserved but unused pool memory that the last trim could not release:
  // the free parts of pool chunks that also hold live buffers.
  uint64_t pool_slack = 0;
  size_t active = 0;
  size_t peak = 0;
  size_t limit = 0;
  std::vector<std::unique_ptr<Recording>> recordings;
  std::condition_variable recording_ended;
  // Set when a recording could not be launched: its work is lost, and
  // synchronisations and downloads report it.
  std::string recording_error;

  CudaState();
};

inline CudaState& state() {
  // Leaked on purpose: buffers may be freed during static destruction.
  static CudaState* s = new CudaState();
  return *s;
}

// device.cpp

// The stream of index `index`, for queueing work on it or waiting for it:
// its pending tiny ops are launched first (Note [Tiny ops]).
cudaStream_t stream_locked(int index);
// Launches the pending tiny ops of stream index `index` on cs: its CUDA
// stream, or the stream that records it (Note [Recorded batches]).
void launch_pending_tiny_locked(int index, cudaStream_t cs);
// An event from the pool (Note [CUDA state]), and giving it back.
cudaEvent_t take_event_locked();
void give_event_locked(cudaEvent_t e);
// Makes `waiter` wait for the work queued on stream index `index` so far.
void order_after_locked(cudaStream_t waiter, int index);
// Throws std::logic_error (a bug) unless s is a GPU stream.
void check_gpu_stream(const Stream& s);

// recording.cpp (Note [Recorded batches])

// The stream to queue kernels of stream `index` on: the recording stream
// while this thread records a batch of it (it starts recording when allowed),
// else stream_locked(index).
cudaStream_t launch_stream_locked(int index);
// Whether stream `index` is being recorded by another thread than the caller.
bool recorded_elsewhere_locked(int index);
// Called by stream_locked while stream `index` is being recorded: its owner
// launches the recording, any other thread waits until it is launched (the
// mutex is let go meanwhile: callers call it before they read what another
// thread may change).
void settle_recording_locked(int index);
// Returns p to the pool after the recording of stream `index` is launched,
// if one is active; false if none is.
bool defer_free_locked(void* p, int index);
// Throws the error of a recording that could not be launched.
void check_recording_locked();
// flush: the calling thread's batch of stream `index` ends (its recording is
// launched).
void end_batch_locked(int index);
// task_done: the calling thread launches its recording if a thread waits for it.
void launch_if_waited_for_locked();

// allocator.cpp

// Device memory for work queued on stream `index`. With `evict` false (the
// prefetcher), returns null instead of evicting or failing.
void* device_alloc_locked(size_t bytes, int index, bool evict = true);
// Frees device memory for reuse after the work queued on stream `index`.
void free_block_locked(void* p, size_t bytes, int index);

// residency.cpp

// Evicts least recently used device copies until `bytes` more fit under the
// limit, or nothing evictable is left (Note [Eviction]).
void evict_locked(size_t bytes);

}  // namespace tessera::gpu
