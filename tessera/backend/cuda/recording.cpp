// Recorded batches: the kernels of a stream worker's batch of tasks recorded
// into a CUDA graph and launched at once.
#include "tessera/backend/cuda/recording.h"

#include "tessera/backend/cuda/device.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tessera/backend/cuda/state.h"
#include "tessera/core/gpu.h"
#include "tessera/core/host_profile.h"

namespace tessera::gpu {

// Note [Recorded batches]
// A kernel launch costs about 2.7 us of host time on an H100, and a decoding
// step of a 1B model launches some 170 kernels from its stream worker, the
// thread that bounds the step. Recording the same launches into a CUDA graph
// costs 0.45 us a kernel, updating an executable graph from a recording of the
// same shape 0.09 and launching it 0.07 (bench/launch_cost_gpu.cu; bench/
// results/2026-12-07-gpu-h100-cudnn-train-decode.md). A stream worker
// therefore records the kernels of each batch of tasks it runs (begin_batch
// to flush) and launches them as one graph. The executable graph of an earlier
// recording with as many nodes is updated from the new one (cudaGraphExecUpdate:
// kernels, launch shapes and arguments may all differ); when none takes the
// update, a new one is instantiated (6.4 us a kernel, once) and kept, up to
// kExecs per stream. Recordings that keep needing new executable graphs (work
// that does not repeat) pause recording for kPause batches.
//
// The recording stream is a private stream of each GPU stream, in relaxed
// capture mode; the graph is launched on the GPU stream, which is never in
// capture mode itself, so that other threads and libraries may queue work on
// it or wait for it at any time. What they queue, though, runs before the
// recorded work that is not launched yet. So:
// - a thread that needs the stream for work that must follow everything
//   queued so far (a download, an event another stream waits for, an upload
//   into a buffer) first waits until the owner launches its recording
//   (settle_recording_locked, which every stream_locked call goes through);
//   the owner launches at the end of a task when someone waits;
// - the owner launches before it blocks (an input another thread makes, a
//   nested evaluation, any wait for an array) and before it queues anything
//   on the stream itself: stream_locked launches for it;
// - blocks freed meanwhile that go back to the pool are returned after the
//   launch (defer_free_locked); blocks of the free lists are taken again only
//   by work of the same stream, recorded or queued after the launch;
// - device copies whose stream another thread records are not evicted.
// - a kernel's code may take the stream (the recording stream) and then end
//   the recording before it launches (an allocation the free lists do not
//   serve, NoRecording): that launch goes to the recording stream outside any
//   recording. A recording that ends inside a task therefore leaves the
//   recording stream ordered after its graph, and the GPU stream waits for
//   the recording stream at the end of the task and before the next graph
//   (join_stale_locked).
// Library calls that synchronise or may not be recorded (cuSOLVER, cuDNN,
// cuFFT, NCCL) run under NoRecording, after a launch. An allocation that the
// free lists do not serve goes to the pool on the GPU stream, after a launch.
// Inline evaluations (a synchronous eval on the calling thread) record
// nothing. TESSERA_GPU_GRAPHS=1 turns recording on. It stays off by default
// until the Python suite passes with it under load on a GPU (bench/results/
// 2026-12-07-gpu-h100-recorded-batches-decode.md: a race, fixed since by
// join_stale_locked, and not yet rerun there).

namespace {

constexpr size_t kExecs = 64;
constexpr int kPause = 256;
// Executable graphs of the same node count tried before a new one is made.
constexpr int kTries = 3;

thread_local int tl_batch = -1;      // the GPU stream whose batch this thread runs
thread_local int tl_recording = -1;  // the stream this thread is recording
thread_local int tl_no_recording = 0;

bool graphs_on() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_GPU_GRAPHS");
    return v && std::string(v) == "1";
  }();
  return on;
}

Recording* find_locked(int index) {
  auto& st = state();
  return index >= 0 && index < static_cast<int>(st.recordings.size())
             ? st.recordings[index].get()
             : nullptr;
}

Recording& get_locked(int index) {
  auto& st = state();
  if (static_cast<int>(st.recordings.size()) <= index) st.recordings.resize(index + 1);
  auto& r = st.recordings[index];
  if (!r) r = std::make_unique<Recording>();
  return *r;
}

void fail_locked(cudaError_t err, const char* call) {
  auto& st = state();
  cudaGetLastError();
  if (!st.recording_error.empty()) return;
  st.recording_error = std::string("[gpu] a recorded batch of kernels could not be launched (") +
                       call + ": " + cudaGetErrorString(err) +
                       "): its results are lost, and recording is turned off";
  std::fprintf(stderr, "%s\n", st.recording_error.c_str());
}

// An executable graph updated from `graph` (of `nodes` nodes), taken out of
// r.execs; null when none of the last kTries of that size takes the update.
cudaGraphExec_t updated_exec_locked(Recording& r, cudaGraph_t graph, size_t nodes) {
  int tries = 0;
  for (size_t i = r.execs.size(); i-- > 0 && tries < kTries;) {
    if (r.execs[i].first != nodes) continue;
    ++tries;
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(r.execs[i].second, graph, &info) == cudaSuccess) {
      cudaGraphExec_t exec = r.execs[i].second;
      r.execs.erase(r.execs.begin() + static_cast<std::ptrdiff_t>(i));
      return exec;
    }
    cudaGetLastError();
  }
  return nullptr;
}

// Makes `waiter` wait for the work queued on `producer` so far.
void order_locked(cudaStream_t waiter, cudaStream_t producer) {
  cudaEvent_t e = take_event_locked();
  if (cudaEventRecord(e, producer) != cudaSuccess || cudaStreamWaitEvent(waiter, e, 0) != cudaSuccess) {
    cudaGetLastError();
  }
  give_event_locked(e);
}

// The GPU stream of `index` waits for what went to the recording stream
// outside a recording (Note [Recorded batches]).
void join_stale_locked(int index, Recording& r) {
  if (!r.stale) return;
  order_locked(state().streams[index], r.capture);
}

// The owner ends the recording of stream `index` and launches it; inside a
// task (not at its end), launches of that task may still follow on the
// recording stream.
void end_recording_locked(int index, Recording& r, bool inside_task = true) {
  auto& st = state();
  const bool profiled = host_profile::enabled();
  const int64_t t0 = profiled ? host_profile::now_ns() : 0;
  // Tiny ops queued after the recorded kernels follow them in the graph.
  launch_pending_tiny_locked(index, r.capture);
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(r.capture, &graph);
  r.active = false;
  tl_recording = -1;
  const cudaStream_t stream = st.streams[index];
  const char* kind = nullptr;
  size_t nodes = 0;
  if (err != cudaSuccess || !graph) {
    fail_locked(err != cudaSuccess ? err : cudaErrorUnknown, "cudaStreamEndCapture");
  } else if ((err = cudaGraphGetNodes(graph, nullptr, &nodes)) != cudaSuccess) {
    fail_locked(err, "cudaGraphGetNodes");
  } else if (nodes > 0) {
    cudaGraphExec_t exec = updated_exec_locked(r, graph, nodes);
    const bool fresh = !exec;
    if (fresh && (err = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess) {
      exec = nullptr;
      fail_locked(err, "cudaGraphInstantiate");
    }
    if (exec) {
      join_stale_locked(index, r);
      if ((err = cudaGraphLaunch(exec, stream)) != cudaSuccess) fail_locked(err, "cudaGraphLaunch");
      r.execs.emplace_back(nodes, exec);
      if (r.execs.size() > kExecs) {
        // A launch still in flight keeps its resources until it completes.
        cudaGraphExecDestroy(r.execs.front().second);
        r.execs.erase(r.execs.begin());
      }
      r.misses = r.misses * 0.9 + (fresh ? 0.1 : 0.0);
      if (r.misses > 0.8) {
        r.paused = kPause;
        r.misses = 0;
      }
      kind = fresh ? "[graph: new]" : "[graph: updated]";
    }
  }
  if (graph) cudaGraphDestroy(graph);
  if (inside_task) {
    order_locked(r.capture, stream);
    r.stale = true;
  }
  for (void* p : r.frees) {
    if (cudaFreeAsync(p, stream) != cudaSuccess) cudaGetLastError();
  }
  r.frees.clear();
  st.recording_ended.notify_all();
  if (profiled && kind) host_profile::record_task(kind, false, 0, host_profile::now_ns() - t0);
}

}  // namespace

cudaStream_t launch_stream_locked(int index) {
  if (tl_batch != index || tl_no_recording > 0) return stream_locked(index);
  auto& st = state();
  Recording& r = get_locked(index);
  if (r.active) {
    if (r.owner != std::this_thread::get_id()) return stream_locked(index);
    launch_pending_tiny_locked(index, r.capture);
    return r.capture;
  }
  const cudaStream_t stream = stream_locked(index);  // pending tiny ops go first
  if (r.paused > 0 || r.waiters > 0 || !st.recording_error.empty()) return stream;
  if (!r.capture && cudaStreamCreateWithFlags(&r.capture, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    r.capture = nullptr;
    r.paused = INT_MAX;
    return stream;
  }
  if (cudaStreamBeginCapture(r.capture, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
    cudaGetLastError();
    r.paused = kPause;
    return stream;
  }
  r.active = true;
  r.owner = std::this_thread::get_id();
  tl_recording = index;
  return r.capture;
}

bool recorded_elsewhere_locked(int index) {
  Recording* r = find_locked(index);
  return r && r->active && r->owner != std::this_thread::get_id();
}

void settle_recording_locked(int index) {
  Recording* r = find_locked(index);
  if (r && !r->active && r->stale && r->owner == std::this_thread::get_id()) {
    join_stale_locked(index, *r);
  }
  if (!r || !r->active) return;
  if (r->owner == std::this_thread::get_id()) {
    end_recording_locked(index, *r);
    return;
  }
  auto& st = state();
  std::unique_lock l(st.mutex, std::adopt_lock);
  ++r->waiters;
  st.recording_ended.wait(l, [r] { return !r->active; });
  --r->waiters;
  l.release();
}

bool defer_free_locked(void* p, int index) {
  Recording* r = find_locked(index);
  if (!r || !r->active) return false;
  r->frees.push_back(p);
  return true;
}

void check_recording_locked() {
  auto& st = state();
  if (!st.recording_error.empty()) throw std::runtime_error(st.recording_error);
}

void begin_batch(const Stream& s) {
  if (s.device != Device::gpu || !graphs_on()) return;
  std::lock_guard l(state().mutex);
  Recording& r = get_locked(s.index);
  if (r.paused > 0 && r.paused != INT_MAX) --r.paused;
  tl_batch = s.index;
}

void launch_recorded() {
  if (tl_recording < 0) return;
  std::lock_guard l(state().mutex);
  if (Recording* r = find_locked(tl_recording); r && r->active) {
    end_recording_locked(tl_recording, *r);
  }
}

// The end of a task or batch of the calling thread's batch stream: launches
// that went to the recording stream outside a recording are joined.
void task_boundary_locked() {
  if (tl_batch < 0) return;
  if (Recording* r = find_locked(tl_batch); r && r->stale) {
    join_stale_locked(tl_batch, *r);
    r->stale = false;
  }
}

void end_batch_locked(int index) {
  if (Recording* r = find_locked(index);
      r && r->active && r->owner == std::this_thread::get_id()) {
    end_recording_locked(index, *r, /*inside_task=*/false);
  }
  if (tl_batch != index) return;
  task_boundary_locked();
  tl_batch = -1;
}

void launch_if_waited_for_locked() {
  task_boundary_locked();
  if (tl_recording < 0) return;
  if (Recording* r = find_locked(tl_recording); r && r->active && r->waiters > 0) {
    end_recording_locked(tl_recording, *r, /*inside_task=*/false);
  }
}

NoRecording::NoRecording() {
  ++tl_no_recording;
  launch_recorded();
}

NoRecording::~NoRecording() { --tl_no_recording; }

}  // namespace tessera::gpu
