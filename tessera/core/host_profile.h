// Host time per primitive, for finding where an evaluation's time goes on the
// CPU side (the work of eval_gpu / eval_cpu, not the kernels themselves):
//
//   TESSERA_HOST_PROFILE=1 python3 program.py
//
// prints, when the process exits, one line per primitive name (tasks; host
// time in the kernel call, median and mean; time waiting for inputs) and each
// stream worker's idle time, to standard error. Off, each hook costs one load
// of a flag.
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera::host_profile {

bool enabled();

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One task of primitive `name`: wait_ns for its inputs, run_ns in its kernel call.
void record_task(const char* name, bool inline_task, int64_t wait_ns, int64_t run_ns);

// A stream worker waited ns for work.
void record_idle(int stream, int64_t ns);

}  // namespace tessera::host_profile
