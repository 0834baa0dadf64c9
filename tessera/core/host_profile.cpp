#include "tessera/core/host_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::host_profile {

namespace {

// A uniform sample of up to kKeep run times per primitive (reservoir
// sampling), for the median: a mean mixes a prompt's large products or a first
// call's setup into the per-token cost.
constexpr size_t kKeep = 1 << 14;

struct Stats {
  int64_t tasks = 0, inline_tasks = 0, wait_ns = 0, run_ns = 0;
  std::vector<int64_t> sample;
};

// Leaked on purpose: stream workers may still record while static objects are
// destroyed at exit.
struct Profile {
  std::mutex mutex;
  std::map<std::string, Stats> by_name;
  std::map<int, int64_t> idle_ns;
  int64_t start_ns = now_ns();
  uint64_t random = 0x9E3779B97F4A7C15ull;
};

Profile& profile() {
  static Profile* p = [] {
    auto* q = new Profile;
    std::atexit([] {
      auto& pr = profile();
      std::lock_guard l(pr.mutex);
      std::vector<std::pair<std::string, Stats>> rows(pr.by_name.begin(), pr.by_name.end());
      std::sort(rows.begin(), rows.end(),
                [](auto& a, auto& b) { return a.second.run_ns > b.second.run_ns; });
      int64_t tasks = 0, run = 0, wait = 0;
      for (auto& [n, s] : rows) tasks += s.tasks, run += s.run_ns, wait += s.wait_ns;
      std::fprintf(stderr,
                   "[host profile] %.3f s since the first task; %lld tasks, %.3f s in kernel "
                   "calls, %.3f s waiting for inputs\n",
                   (now_ns() - pr.start_ns) * 1e-9, static_cast<long long>(tasks), run * 1e-9,
                   wait * 1e-9);
      std::fprintf(stderr, "%-28s %10s %8s %10s %10s %10s %10s\n", "primitive", "tasks",
                   "inline", "median us", "mean us", "run ms", "wait us");
      for (auto& [n, s] : rows) {
        auto mid = s.sample.begin() + s.sample.size() / 2;
        std::nth_element(s.sample.begin(), mid, s.sample.end());
        std::fprintf(stderr, "%-28s %10lld %8lld %10.2f %10.2f %10.2f %10.2f\n", n.c_str(),
                     static_cast<long long>(s.tasks), static_cast<long long>(s.inline_tasks),
                     *mid * 1e-3, s.run_ns * 1e-3 / s.tasks, s.run_ns * 1e-6,
                     s.wait_ns * 1e-3 / s.tasks);
      }
      for (auto& [stream, ns] : pr.idle_ns) {
        std::fprintf(stderr, "stream %d worker idle: %.3f s\n", stream, ns * 1e-9);
      }
    });
    return q;
  }();
  return *p;
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_HOST_PROFILE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void record_task(const char* name, bool inline_task, int64_t wait_ns, int64_t run_ns) {
  auto& p = profile();
  std::lock_guard l(p.mutex);
  auto& s = p.by_name[name];
  ++s.tasks;
  s.inline_tasks += inline_task;
  s.wait_ns += wait_ns;
  s.run_ns += run_ns;
  if (s.sample.size() < kKeep) {
    s.sample.push_back(run_ns);
    return;
  }
  p.random = p.random * 6364136223846793005ull + 1442695040888963407ull;
  const uint64_t j = (p.random >> 33) % static_cast<uint64_t>(s.tasks);
  if (j < kKeep) s.sample[j] = run_ns;
}

void record_idle(int stream, int64_t ns) {
  auto& p = profile();
  std::lock_guard l(p.mutex);
  p.idle_ns[stream] += ns;
}

}  // namespace tessera::host_profile
