#include "tessera/core/scheduler.h"

#include "tessera/core/streams.h"

#include <algorithm>

#include "tessera/core/array.h"
#include "tessera/core/gpu.h"
#include "tessera/core/host_profile.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tessera {

namespace {

thread_local int tl_stream_index = -1;
// The streams this thread holds inline, innermost last.
thread_local std::vector<int> tl_inline;
// The streams this thread made, and its stream of each thread-local handle
// (indexed by the handle's index; -1 when not resolved yet).
thread_local std::vector<Stream> tl_created;
thread_local std::vector<int> tl_resolved;

class StreamWorker {
 public:
  explicit StreamWorker(int index) : index_(index), thread_([this] { run(); }) {}
  ~StreamWorker() {
    {
      std::lock_guard l(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  uint64_t enqueue(std::function<void()> task) {
    bool notify;
    uint64_t seq;
    {
      std::lock_guard l(mutex_);
      queue_.push_back(std::move(task));
      pending_.fetch_add(1, std::memory_order_release);
      seq = ++submitted_;
      notify = waiting_;
    }
    if (notify) cv_.notify_one();
    return seq;
  }

  uint64_t next_seq() {
    std::lock_guard l(mutex_);
    return submitted_ + 1;
  }

  bool is_done(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }

  // See scheduler::try_run_inline.
  bool begin_inline() {
    std::lock_guard l(mutex_);
    if (inline_ || !queue_.empty() || completed_.load(std::memory_order_acquire) != submitted_) {
      return false;
    }
    inline_ = true;
    return true;
  }
  void end_inline() {
    {
      std::lock_guard l(mutex_);
      inline_ = false;
    }
    cv_.notify_one();
  }

  void wait_for(uint64_t seq) {
    uint64_t c = completed_.load(std::memory_order_acquire);
    while (c < seq) {
      completed_.wait(c, std::memory_order_acquire);
      c = completed_.load(std::memory_order_acquire);
    }
  }

 private:
  void run() {
    tl_stream_index = index_;
    // Each worker has an idle line, also one that found its first task waiting.
    if (host_profile::enabled()) host_profile::record_idle(index_, 0);
    std::unique_lock l(mutex_);
    while (true) {
      const int64_t idle0 = queue_.empty() && host_profile::enabled() ? host_profile::now_ns() : 0;
      if (queue_.empty()) {
        // Tasks often come in quick succession (eval hands over batches as it
        // builds them): poll briefly before sleeping, to save a wake-up.
        l.unlock();
        auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
        while (pending_.load(std::memory_order_acquire) == 0 &&
               std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__)
          __builtin_ia32_pause();
#endif
        }
        l.lock();
      }
      if (queue_.empty()) {
        waiting_ = true;
        cv_.wait(l, [&] { return stop_ || (!queue_.empty() && !inline_); });
        waiting_ = false;
      }
      if (idle0) host_profile::record_idle(index_, host_profile::now_ns() - idle0);
      if (queue_.empty() && stop_) return;
      if (inline_) {
        // The stream's owner is running tasks on its own thread: keep the order.
        waiting_ = true;
        cv_.wait(l, [&] { return stop_ || !inline_; });
        waiting_ = false;
        continue;
      }
      auto task = std::move(queue_.front());
      queue_.pop_front();
      pending_.fetch_sub(1, std::memory_order_relaxed);
      l.unlock();
      // Tasks catch their own errors (eval records them on the outputs).
      task();
      task = nullptr;
      completed_.fetch_add(1, std::memory_order_acq_rel);
      completed_.notify_all();
      l.lock();
    }
  }

  int index_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t submitted_ = 0;
  std::atomic<uint64_t> completed_{0};
  std::atomic<size_t> pending_{0};
  bool waiting_ = false;
  bool inline_ = false;
  bool stop_ = false;
  std::thread thread_;
};

struct StreamRegistry {
  std::mutex mutex;
  std::vector<Stream> streams;
  std::vector<std::unique_ptr<StreamWorker>> workers;  // indexed by stream index
  Device default_device{Device::cpu};
  std::vector<Stream> default_streams;  // indexed by device type (cpu, gpu)
  std::vector<Stream> first_default_streams;
  std::vector<Device> thread_local_devices;  // of each ThreadLocalStream, by index

  StreamRegistry() {
    default_streams.push_back(create(Device::cpu));
    if (gpu::device_count() > 0) {
      default_streams.push_back(create(Device::gpu));
      default_device = Device::gpu;
    }
    first_default_streams = default_streams;
  }

  Stream create(Device d) {
    std::lock_guard l(mutex);
    Stream s(static_cast<int>(streams.size()), d);
    if (d.type == Device::gpu) gpu::stream_created(s);
    streams.push_back(s);
    workers.push_back(std::make_unique<StreamWorker>(s.index));
    return s;
  }

  StreamWorker& worker(int index) {
    std::lock_guard l(mutex);
    if (index < 0 || index >= static_cast<int>(workers.size())) {
      throw std::invalid_argument("[stream] unknown stream index " + std::to_string(index));
    }
    return *workers[index];
  }
};

StreamRegistry& registry() {
  // Leaked on purpose: stream threads may still finish tasks during exit.
  static StreamRegistry* r = new StreamRegistry();
  return *r;
}

void check_device(const char* op, const Device& d) {
  if (!is_available(d)) {
    std::ostringstream msg;
    msg << "[" << op << "] device " << d
        << " is not available: this build of Tessera has no GPU backend or no GPU was found";
    throw std::invalid_argument(msg.str());
  }
}

}  // namespace

namespace scheduler {

uint64_t enqueue(const Stream& s, std::function<void()> task) {
  return registry().worker(s.index).enqueue(std::move(task));
}
uint64_t next_seq(const Stream& s) { return registry().worker(s.index).next_seq(); }
bool is_done(int stream_index, uint64_t seq) {
  return stream_index < 0 || registry().worker(stream_index).is_done(seq);
}
void wait_for(int stream_index, uint64_t seq) {
  if (stream_index < 0) return;
  registry().worker(stream_index).wait_for(seq);
}
int current_stream_index() { return tl_stream_index; }

// A thread waiting for an array sleeps on the array's own status word
// (std::atomic::wait): becoming available wakes only the threads that wait for
// that array, and costs no system call when none does.
void set_available(array& a) {
  a.set_status(ArrayStatus::available);
  a.notify_status();
}

void wait_available(const array& a) {
  // Whoever makes a may wait for work this thread recorded (Note [Recorded
  // batches] in backend/cuda/recording.cpp).
  if (a.status() != ArrayStatus::available) gpu::launch_recorded();
  for (ArrayStatus s = a.status(); s != ArrayStatus::available; s = a.status()) {
    a.wait_status_change(s);
  }
}

bool begin_inline(const Stream& s) {
  if (!registry().worker(s.index).begin_inline()) return false;
  tl_inline.push_back(s.index);
  return true;
}
void end_inline(const Stream& s) {
  tl_inline.pop_back();
  registry().worker(s.index).end_inline();
}
bool runs_here(const Stream& s) {
  return tl_stream_index == s.index ||
         std::find(tl_inline.begin(), tl_inline.end(), s.index) != tl_inline.end();
}

}  // namespace scheduler

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << "Device(" << (d.type == Device::cpu ? "cpu" : "gpu") << ", " << d.index << ")";
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", " << s.index << ")";
}

const Device& default_device() { return registry().default_device; }

void set_default_device(const Device& d) {
  check_device("set_default_device", d);
  registry().default_device = d;
}

bool is_available(const Device& d) {
  if (d.type == Device::cpu) return d.index == 0;
  // One GPU per process for now: the GPU backend drives device 0.
  return d.index == 0 && gpu::device_count() > 0;
}

int device_count(Device::DeviceType type) {
  return type == Device::cpu ? 1 : std::min(gpu::device_count(), 1);
}

Stream default_stream(Device d) {
  check_device("default_stream", d);
  return registry().default_streams[static_cast<int>(d.type)];
}

void set_default_stream(Stream s) {
  check_device("set_default_stream", s.device);
  registry().default_streams[static_cast<int>(s.device.type)] = s;
}

Stream new_stream(Device d) {
  check_device("new_stream", d);
  Stream s = registry().create(d);
  tl_created.push_back(s);
  return s;
}

Stream new_thread_unsafe_stream(Device d) { return new_stream(d); }

ThreadLocalStream new_thread_local_stream(Device d) {
  check_device("new_thread_local_stream", d);
  auto& r = registry();
  std::lock_guard l(r.mutex);
  r.thread_local_devices.push_back(d);
  return ThreadLocalStream{static_cast<int>(r.thread_local_devices.size()) - 1, d};
}

Stream ThreadLocalStream::stream() const {
  if (index >= static_cast<int>(tl_resolved.size())) tl_resolved.resize(index + 1, -1);
  if (tl_resolved[index] < 0) tl_resolved[index] = new_stream(device).index;
  return Stream(tl_resolved[index], device);
}

namespace {
std::mutex hooks_mutex;
std::vector<void (*)()>& clear_streams_hooks() {
  static std::vector<void (*)()> hooks;
  return hooks;
}
}  // namespace

void on_clear_streams(void (*f)()) {
  std::lock_guard l(hooks_mutex);
  clear_streams_hooks().push_back(f);
}

void clear_streams() {
  auto& r = registry();
  for (const Stream& s : tl_created) {
    synchronize(s);
    auto& d = r.default_streams[static_cast<int>(s.device.type)];
    if (d == s) d = r.first_default_streams[static_cast<int>(s.device.type)];
  }
  tl_created.clear();
  tl_resolved.clear();
  std::vector<void (*)()> hooks;
  {
    std::lock_guard l(hooks_mutex);
    hooks = clear_streams_hooks();
  }
  for (auto f : hooks) f();
}

std::vector<Stream> get_streams() {
  auto& r = registry();
  std::lock_guard l(r.mutex);
  return r.streams;
}

Stream to_stream(StreamOrDevice s) { return to_stream(s, default_device()); }

Stream to_stream(StreamOrDevice s, Device default_dev) {
  if (auto* st = std::get_if<Stream>(&s)) return *st;
  if (auto* d = std::get_if<Device>(&s)) return default_stream(*d);
  if (auto* t = std::get_if<Device::DeviceType>(&s)) return default_stream(Device(*t));
  return default_stream(default_dev);
}

void synchronize(Stream s) {
  scheduler::wait_handed();
  auto& w = registry().worker(s.index);
  w.wait_for(w.next_seq() - 1);
  if (s.device == Device::gpu) gpu::synchronize(s);
}

void synchronize() {
  for (auto& s : get_streams()) synchronize(s);
}

StreamContext::StreamContext(StreamOrDevice s)
    : prev_device_(default_device()), prev_stream_(default_stream(default_device())) {
  if (std::holds_alternative<std::monostate>(s)) {
    throw std::invalid_argument("[StreamContext] a stream or device is required");
  }
  Stream st = to_stream(s);
  // What the destructor restores: the default device, and the default stream
  // of the device this context changes (not always the default device's).
  prev_stream_ = default_stream(st.device);
  set_default_device(st.device);
  set_default_stream(st);
}

StreamContext::~StreamContext() {
  set_default_device(prev_device_);
  set_default_stream(prev_stream_);
}

}  // namespace tessera
