// The CUDA device: error checks, the device's count and properties, streams
// and the events that order them, the tiny-op queue, synchronize and flush,
// device_info.
//
// Every cudaStream_t that work is queued on or waited for is obtained through
// stream_locked, which launches the stream's pending tiny ops first, so that
// each stream's work stays in program order (Note [Tiny ops] in tiny.h).
// Events come from a pool and go back to it (Note [CUDA state] in state.h).
#include "tessera/backend/cuda/device.h"

#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tessera/backend/cuda/state.h"
#include "tessera/core/gpu.h"

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

CudaState::CudaState() {
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

cudaStream_t stream_locked(int index) {
  auto& st = state();
  settle_recording_locked(index);
  if (index < 0 || index >= static_cast<int>(st.streams.size()) || !st.streams[index]) {
    return st.copy_stream;
  }
  launch_pending_tiny_locked(index, st.streams[index]);
  return st.streams[index];
}

void launch_pending_tiny_locked(int index, cudaStream_t cs) {
  auto& st = state();
  if (index < static_cast<int>(st.tiny.size()) && st.tiny[index] && st.tiny[index]->count > 0) {
    launch_tiny(*st.tiny[index], cs);
    st.tiny[index]->count = 0;
  }
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

void order_after_locked(cudaStream_t waiter, int index) {
  cudaStream_t producer = stream_locked(index);
  if (producer == waiter) return;
  cudaEvent_t e = take_event_locked();
  TESSERA_CUDA_CHECK(cudaEventRecord(e, producer));
  TESSERA_CUDA_CHECK(cudaStreamWaitEvent(waiter, e, 0));
  give_event_locked(e);
}

void check_gpu_stream(const Stream& s) {
  if (s.device != Device::gpu) {
    throw std::logic_error("[gpu::cuda_stream] stream is not a GPU stream (bug)");
  }
}

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
  check_gpu_stream(s);
  return launch_stream_locked(s.index);
}

void enqueue_tiny(const Stream& s, const TinyOp& op) {
  auto& st = state();
  std::lock_guard l(st.mutex);
  if (static_cast<int>(st.tiny.size()) <= s.index) st.tiny.resize(s.index + 1);
  auto& batch = st.tiny[s.index];
  if (!batch) batch = std::make_unique<TinyBatch>();
  if (batch->count == kTinyBatch) launch_stream_locked(s.index);  // launches the full batch
  if (batch->count == kTinyBatch) {
    throw std::logic_error("[gpu::enqueue_tiny] stream " + std::to_string(s.index) +
                           " has no CUDA stream (bug)");
  }
  batch->ops[batch->count++] = op;
}

unsigned* zeroed_counters(const Stream& s, int64_t n) {
  constexpr int64_t kCounters = 1 << 16;
  if (n > kCounters) return nullptr;
  auto& st = state();
  std::lock_guard l(st.mutex);
  if (static_cast<int>(st.counters.size()) <= s.index) st.counters.resize(s.index + 1, nullptr);
  unsigned*& b = st.counters[s.index];
  if (!b) {
    check_gpu_stream(s);
    cudaStream_t cs = launch_stream_locked(s.index);
    void* p = nullptr;
    TESSERA_CUDA_CHECK(cudaMalloc(&p, kCounters * sizeof(unsigned)));
    TESSERA_CUDA_CHECK(cudaMemsetAsync(p, 0, kCounters * sizeof(unsigned), cs));
    b = static_cast<unsigned*>(p);
  }
  return b;
}

void flush(const Stream& s) {
  if (s.device != Device::gpu) return;
  std::lock_guard l(state().mutex);
  end_batch_locked(s.index);
  stream_locked(s.index);
}

void synchronize(const Stream& s) {
  TESSERA_CUDA_CHECK(cudaStreamSynchronize(cuda_stream(s)));
  std::lock_guard l(state().mutex);
  check_recording_locked();
}

std::uintptr_t stream_handle(const Stream& s) {
  return reinterpret_cast<std::uintptr_t>(cuda_stream(s));
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
