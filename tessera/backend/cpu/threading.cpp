#include "tessera/backend/cpu/threading.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::cpu {

namespace {

thread_local bool tl_in_pool = false;

class ThreadPool {
 public:
  explicit ThreadPool(int n) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] { run(); });
    }
  }
  ~ThreadPool() {
    {
      std::lock_guard l(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  int size() const { return static_cast<int>(threads_.size()); }

  // Runs job(i) for i in [0, jobs) on the pool and this thread; waits for all.
  // Returns false, running nothing, when `wait` is false and another region
  // holds the pool.
  bool run_jobs(int jobs, const std::function<void(int)>& job, bool wait = true) {
    std::unique_lock submit(submit_mutex_, std::defer_lock);  // one parallel region at a time
    if (!wait && !submit.try_lock()) return false;
    if (wait) submit.lock();
    std::atomic<int> next{0};
    std::atomic<int> done{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
      int i;
      while ((i = next.fetch_add(1)) < jobs) {
        try {
          job(i);
        } catch (...) {
          std::lock_guard l(error_mutex);
          if (!error) error = std::current_exception();
        }
        done.fetch_add(1);
      }
    };
    {
      std::lock_guard l(mutex_);
      work_ = work;
      ++generation_;
    }
    cv_.notify_all();
    tl_in_pool = true;
    work();
    tl_in_pool = false;
    while (done.load() < jobs) std::this_thread::yield();
    {
      // Wait until no pool thread still references `work`.
      std::unique_lock l(mutex_);
      work_ = nullptr;
      idle_cv_.wait(l, [&] { return busy_ == 0; });
    }
    if (error) std::rethrow_exception(error);
    return true;
  }

 private:
  void run() {
    tl_in_pool = true;
    uint64_t seen = 0;
    std::unique_lock l(mutex_);
    while (true) {
      cv_.wait(l, [&] { return stop_ || (generation_ != seen && work_); });
      if (stop_) return;
      seen = generation_;
      auto w = work_;
      ++busy_;
      l.unlock();
      w();
      l.lock();
      if (--busy_ == 0) idle_cv_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::mutex submit_mutex_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::function<void()> work_;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;
};

int configured_threads() {
  if (const char* env = std::getenv("TESSERA_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  // Leaked on purpose: kernels may still run during static destruction.
  static ThreadPool* p = new ThreadPool(configured_threads() - 1);
  return *p;
}

}  // namespace

int num_threads() { return pool().size() + 1; }

namespace {

void split(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f, bool wait) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = num_threads();
  if (tl_in_pool || threads == 1 || n < 2 * grain) {
    f(0, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, n / grain);
  int64_t per = (n + chunks - 1) / chunks;
  bool ran = pool().run_jobs(static_cast<int>(chunks), [&](int i) {
    int64_t b = i * per;
    int64_t e = std::min(n, b + per);
    if (b < e) f(b, e);
  }, wait);
  if (!ran) f(0, n);
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  split(n, grain, f, /*wait=*/true);
}

void parallel_for_if_idle(int64_t n, int64_t grain,
                          const std::function<void(int64_t, int64_t)>& f) {
  split(n, grain, f, /*wait=*/false);
}

}  // namespace tessera::cpu
