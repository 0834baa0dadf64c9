// A small timing harness: median wall time of repeated runs, printed as JSON lines
// that scripts/bench joins with the peers' figures.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace bench {

// True when no filter was given on the command line, or one is part of name.
inline bool wanted(int argc, char** argv, const std::string& name) {
  if (argc < 2) return true;
  for (int i = 1; i < argc; ++i) {
    if (name.find(argv[i]) != std::string::npos) return true;
  }
  return false;
}

// Median seconds of `reps` runs of f after `warmup` runs.
inline double time_median(const std::function<void()>& f, int reps = 7, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One result: `seconds` per run; `work` in the unit named by `unit` per run
// (bytes for bandwidth, flops, ops), so the reader can derive a rate.
inline void report(const std::string& name, double seconds, double work, const std::string& unit) {
  std::printf("{\"name\": \"%s\", \"seconds\": %.9g, \"work\": %.9g, \"unit\": \"%s\"}\n",
              name.c_str(), seconds, work, unit.c_str());
  std::fflush(stdout);
}

}  // namespace bench
