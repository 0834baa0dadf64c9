// Device memory: the stream-ordered pool (cudaMallocAsync), the per-stream
// cache of small blocks, the memory limit and the statistics, clear_cache,
// and page-locked host memory.
//
// `active` counts the bytes that device_alloc_locked gave out and
// free_block_locked has not taken back (borrowed device copies are not
// counted); `peak` is its highest value since the last reset. An allocation
// that would take `active` past `limit` first evicts device copies (Note
// [Eviction] in residency.cpp); the prefetcher's gets null instead of
// evicting or failing. `small_cached` is the sum of the sizes of the blocks
// on the small-block lists, at most cache_max() (Note [Small blocks]).
// A freed block, whether it goes to a list or to the pool, is freed on the
// stream of its last use, which orders its reuse after that use.
#include "tessera/backend/cuda/device.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "tessera/backend/cuda/state.h"
#include "tessera/core/gpu.h"

namespace tessera::gpu {

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

// Note [Small blocks]
// An op on a few elements would spend more time in cudaMallocAsync and
// cudaFreeAsync than in its kernel. Blocks of up to 1 MiB therefore go, when
// freed, to a free list of the stream that freed them, and the next
// allocation of that size on the same stream takes one back without a CUDA
// call. Reuse on the same stream is safe without any event: the work that
// used the block was queued on that stream before the free (or ordered
// before it by an event). Other streams get memory from the pool, which
// orders reuse across streams itself. The lists hold at most 256 MiB; a
// block freed into full lists makes room by returning blocks of the list
// that holds the most bytes (trim_lists_locked), so that full lists do not
// send every later free and allocation to the pool. (While the bound read
// 256 bytes by mistake, the lists kept nothing: cudaMallocAsync and
// cudaFreeAsync took 17% of the stream worker's host time in a decoding step
// of a 1B model on an H100, bench/results/2026-12-07-gpu-h100-staged-norms-
// host-profile.md.)
//   A training step allocates some 900 blocks larger than that (activations,
// gradients), at about 2 us of host time for cudaMallocAsync and 1.2 us for
// cudaFreeAsync each on an H100 (bench/results/2026-12-07-gpu-h100-conv-
// wgrad.md). TESSERA_BLOCK_CACHE_MB=M (default 1) caches
// blocks of up to M MiB too, their sizes rounded up to 64 KiB, and
// TESSERA_BLOCK_CACHE_TOTAL_MB=T (default 256) bounds the lists: an A/B
// switch until the gain is measured on a GPU. A full device empties the
// lists before an allocation fails.
constexpr size_t kSmallBlock = size_t{1} << 20;
constexpr size_t kLargeGrain = size_t{64} << 10;

// Bytes: the variable's value in MiB, else fallback_mib MiB.
size_t env_mib(const char* name, size_t fallback_mib) {
  const char* v = std::getenv(name);
  char* end = nullptr;
  const unsigned long long mib = v && *v ? std::strtoull(v, &end, 10) : 0;
  return static_cast<size_t>(end && *end == 0 ? mib : fallback_mib) << 20;
}

// The largest block the lists take, and their total.
size_t cached_block_max() {
  static const size_t max = std::max(env_mib("TESSERA_BLOCK_CACHE_MB", 1), kSmallBlock);
  return max;
}
size_t cache_max() {
  static const size_t max = env_mib("TESSERA_BLOCK_CACHE_TOTAL_MB", 256);
  return max;
}

size_t block_size(size_t bytes) {
  if (bytes <= kSmallBlock) return std::max<size_t>(256, (bytes + 255) & ~size_t{255});
  if (bytes <= cached_block_max()) return (bytes + kLargeGrain - 1) & ~(kLargeGrain - 1);
  return bytes;
}

// Returns block p, last used on stream `index`, to the pool (never throws:
// frees run in destructors).
void pool_free_locked(void* p, int index) {
  // Work still to be launched may use p (Note [Recorded batches]).
  if (defer_free_locked(p, index)) return;
  if (cudaFreeAsync(p, stream_locked(index)) != cudaSuccess) cudaGetLastError();
}

// Returns cached blocks to the pool, from the list that holds the most
// bytes, until `bytes` more fit under cache_max().
void trim_lists_locked(size_t bytes) {
  auto& st = state();
  while (st.small_cached + bytes > cache_max() && !st.small_blocks.empty()) {
    auto most = st.small_blocks.begin();
    for (auto it = st.small_blocks.begin(); it != st.small_blocks.end(); ++it) {
      if (it->first.second * it->second.size() > most->first.second * most->second.size()) {
        most = it;
      }
    }
    if (most->second.empty()) {
      st.small_blocks.erase(most);
      continue;
    }
    void* p = most->second.back();
    most->second.pop_back();
    st.small_cached -= most->first.second;
    pool_free_locked(p, most->first.first);
    if (most->second.empty()) st.small_blocks.erase(most);
  }
}

void release_small_blocks_locked() {
  auto& st = state();
  for (auto& [key, list] : st.small_blocks) {
    for (void* p : list) pool_free_locked(p, key.first);
  }
  st.small_blocks.clear();
  st.small_cached = 0;
}

[[noreturn]] void throw_out_of_memory(size_t bytes, const char* why) {
  auto& st = state();
  std::ostringstream msg;
  msg << "[gpu::malloc] cannot allocate " << bytes << " bytes of device memory: " << st.active
      << " bytes are in use by arrays that the running work needs and the limit is " << st.limit
      << " bytes (" << why << ")";
  throw std::runtime_error(msg.str());
}

}  // namespace

void free_block_locked(void* p, size_t bytes, int index) {
  auto& st = state();
  size_t size = block_size(bytes);
  st.active -= std::min(st.active, bytes);
  if (size <= cached_block_max() && size <= cache_max()) {
    if (st.small_cached + size > cache_max()) trim_lists_locked(size);
    st.small_blocks[{index, size}].push_back(p);
    st.small_cached += size;
    return;
  }
  pool_free_locked(p, index);
}

void* device_alloc_locked(size_t bytes, int index, bool evict) {
  auto& st = state();
  if (st.active + bytes > st.limit) {
    if (!evict) return nullptr;
    evict_locked(bytes);
    if (st.active + bytes > st.limit) throw_out_of_memory(bytes, "memory limit");
  }
  const size_t size = block_size(bytes);
  if (size <= cached_block_max()) {
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

}  // namespace tessera::gpu
