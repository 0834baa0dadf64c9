// A fixed pool of worker threads for data-parallel CPU kernels.
//
//   parallel_for(n, 1 << 16, [&](int64_t begin, int64_t end) { ... });
#pragma once

#include <cstdint>
#include <functional>

namespace tessera::cpu {

// Number of threads kernels split work across (TESSERA_NUM_THREADS overrides).
int num_threads();

// Runs f(begin, end) over [0, n) in chunks of at least `grain` items, on the pool
// and the calling thread. Runs inline when n < 2 * grain or when called from a
// pool thread. Rethrows the first exception a chunk threw.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

// The same, but runs f(0, n) inline instead of waiting while another thread's
// parallel region holds the pool: for a caller that holds a lock which a job
// of that region might take (the GPU state's mutex), where waiting could
// deadlock.
void parallel_for_if_idle(int64_t n, int64_t grain,
                          const std::function<void(int64_t, int64_t)>& f);

}  // namespace tessera::cpu
