// The CUDA core: devices, streams, the device allocator and the residency
// protocol (see Note [Residency] in device.h).
#include "tessera/backend/cuda/device.h"

#include <cstdlib>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "tessera/backend/gpu.h"

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

namespace {

// Streams by Tessera stream index, and the device memory pool.
struct CudaState {
  std::mutex mutex;
  std::vector<cudaStream_t> streams;
  cudaMemPool_t pool = nullptr;
  size_t active = 0;
  size_t peak = 0;

  CudaState() {
    TESSERA_CUDA_CHECK(cudaSetDevice(0));
    TESSERA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    // Keep freed memory in the pool (our cache) instead of returning it at
    // every synchronisation.
    uint64_t threshold = std::numeric_limits<uint64_t>::max();
    TESSERA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  }
};

CudaState& state() {
  // Leaked on purpose: buffers may be freed during static destruction.
  static CudaState* s = new CudaState();
  return *s;
}

// Guards the residency fields of every BufferStorage.
std::mutex& residency_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

cudaStream_t stream_by_index(int index) {
  auto& st = state();
  std::lock_guard l(st.mutex);
  if (index < 0 || index >= static_cast<int>(st.streams.size()) || !st.streams[index]) {
    // Work that is not tied to a stream (a buffer never used by a kernel).
    return cudaStreamLegacy;
  }
  return st.streams[index];
}

void* device_alloc(size_t bytes, cudaStream_t s) {
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, s);
  if (err != cudaSuccess) {
    cudaGetLastError();
    // Give cached memory back to the device and try once more.
    TESSERA_CUDA_CHECK(cudaStreamSynchronize(s));
    TESSERA_CUDA_CHECK(cudaMemPoolTrimTo(state().pool, 0));
    err = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, s);
    if (err != cudaSuccess) {
      cudaGetLastError();
      std::ostringstream msg;
      msg << "[gpu::malloc] cannot allocate " << bytes << " bytes of device memory: "
          << cudaGetErrorString(err) << " (" << active_memory() << " bytes in use)";
      throw std::runtime_error(msg.str());
    }
  }
  auto& st = state();
  std::lock_guard l(st.mutex);
  st.active += bytes;
  if (st.active > st.peak) st.peak = st.active;
  return p;
}

// Makes the device copy exist and valid for work on stream s; the caller
// holds the residency mutex.
void ensure_device(allocator::BufferStorage* b, const Stream& s, cudaStream_t cs) {
  if (!b->device) {
    b->device = device_alloc(b->size, cs);
    b->device_valid = false;
  }
  if (!b->device_valid) {
    if (b->size > 0) {
      TESSERA_CUDA_CHECK(
          cudaMemcpyAsync(b->device, b->host, b->size, cudaMemcpyHostToDevice, cs));
    }
    b->device_valid = true;
  } else if (b->device_stream >= 0 && b->device_stream != s.index) {
    // Order after the last GPU work on this copy, on another stream.
    cudaEvent_t ev;
    TESSERA_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    TESSERA_CUDA_CHECK(cudaEventRecord(ev, stream_by_index(b->device_stream)));
    TESSERA_CUDA_CHECK(cudaStreamWaitEvent(cs, ev, 0));
    TESSERA_CUDA_CHECK(cudaEventDestroy(ev));
  }
  b->device_stream = s.index;
}

char* element_ptr(void* base, const array& a) {
  return static_cast<char*>(base) + a.offset() * static_cast<int64_t>(a.itemsize());
}

struct Scratch {
  void* ptr;
  size_t bytes;
  int stream;
};
thread_local std::vector<Scratch> tl_scratch;

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
  if (s.device != Device::gpu) {
    throw std::logic_error("[gpu::cuda_stream] stream is not a GPU stream (bug)");
  }
  return stream_by_index(s.index);
}

void synchronize(const Stream& s) { TESSERA_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(s))); }

const void* device_ptr(const array& a, const Stream& s) {
  auto* b = a.buffer().storage();
  cudaStream_t cs = cuda_stream(s);
  std::lock_guard l(residency_mutex());
  ensure_device(b, s, cs);
  return element_ptr(b->device, a);
}

void* writable_device_ptr(array& out, const Stream& s) {
  auto* b = out.buffer().storage();
  cudaStream_t cs = cuda_stream(s);
  std::lock_guard l(residency_mutex());
  ensure_device(b, s, cs);
  b->host_valid = false;
  return element_ptr(b->device, out);
}

void* allocate_output(array& out, const Stream& s, size_t data_size, Strides strides,
                      Flags flags) {
  cudaStream_t cs = cuda_stream(s);
  size_t bytes = data_size * out.itemsize();
  auto* b = new allocator::BufferStorage{nullptr, bytes, bytes};
  b->separate_host = true;
  b->host_valid = false;
  try {
    b->device = device_alloc(bytes, cs);
  } catch (...) {
    delete b;
    throw;
  }
  b->device_valid = true;
  b->device_stream = s.index;
  out.set_data(allocator::Buffer(b), data_size, std::move(strides), flags);
  return b->device;
}

void* allocate_output(array& out, const Stream& s) {
  void* p = allocate_output(out, s, out.size(), row_major_strides(out.shape()),
                            compute_flags(out.shape(), row_major_strides(out.shape())));
  return p;
}

void* scratch(size_t bytes, const Stream& s) {
  cudaStream_t cs = cuda_stream(s);
  void* p = device_alloc(bytes, cs);
  tl_scratch.push_back({p, bytes, s.index});
  return p;
}

void task_done(const Stream&) {
  size_t freed = 0;
  for (auto& sc : tl_scratch) {
    TESSERA_CUDA_CHECK(cudaFreeAsync(sc.ptr, stream_by_index(sc.stream)));
    freed += sc.bytes;
  }
  tl_scratch.clear();
  auto& st = state();
  std::lock_guard l(st.mutex);
  st.active -= std::min(st.active, freed);
}

void make_host_valid(allocator::BufferStorage* b) {
  std::lock_guard l(residency_mutex());
  if (b->host_valid) return;
  if (!b->host) {
    b->host = std::aligned_alloc(64, ((b->size + 63) / 64) * 64 + 64);
    if (!b->host) {
      throw std::runtime_error("[gpu] cannot allocate " + std::to_string(b->size) +
                               " bytes of host memory for a copy from the device");
    }
  }
  cudaStream_t cs = stream_by_index(b->device_stream);
  if (b->size > 0) {
    TESSERA_CUDA_CHECK(cudaMemcpyAsync(b->host, b->device, b->size, cudaMemcpyDeviceToHost, cs));
  }
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(cs));
  b->host_valid = true;
}

void host_written(allocator::BufferStorage* b) {
  std::lock_guard l(residency_mutex());
  b->host_valid = true;
  b->device_valid = false;
}

void release_device(allocator::BufferStorage* b) {
  {
    std::lock_guard l(residency_mutex());
    if (!b->device) return;
    cudaError_t err = cudaFreeAsync(b->device, stream_by_index(b->device_stream));
    if (err != cudaSuccess) cudaGetLastError();  // frees never throw (destructors)
    b->device = nullptr;
    b->device_valid = false;
  }
  auto& st = state();
  std::lock_guard l(st.mutex);
  st.active -= std::min(st.active, b->size);
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

size_t cache_memory() {
  if (device_count() == 0) return 0;
  uint64_t reserved = 0, used = 0;
  TESSERA_CUDA_CHECK(
      cudaMemPoolGetAttribute(state().pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  TESSERA_CUDA_CHECK(cudaMemPoolGetAttribute(state().pool, cudaMemPoolAttrUsedMemCurrent, &used));
  return reserved > used ? reserved - used : 0;
}

void clear_cache() {
  if (device_count() == 0) return;
  TESSERA_CUDA_CHECK(cudaDeviceSynchronize());
  TESSERA_CUDA_CHECK(cudaMemPoolTrimTo(state().pool, 0));
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
