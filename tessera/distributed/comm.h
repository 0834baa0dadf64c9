// The communicators behind distributed::Group (Note [Communicators]).
#pragma once

#include <cstdint>
#include <memory>

#include "tessera/core/dtype.h"

namespace tessera::distributed::detail {

enum class ReduceOp { sum, max, min };

// Note [Communicators]
// A group's processes talk through a Comm. The only one so far is MPI's
// (mpi.cpp): the MPI library is loaded at run time (dlopen), so a build and a
// machine without MPI run as before, as a group of one. Every call blocks
// until this process's part is done; calls are serialised per process, so the
// scheduler's threads may issue them. Buffers are host memory, contiguous.
// Collectives must be issued in the same order on every process of a group
// (MPI's rule): evaluating the same program's arrays in the same order does so.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // out = op over the processes of in, elementwise, count elements of dtype t
  // (a dtype MPI has: bool and the 16-bit floats go through float32 in the ops).
  virtual void all_reduce(const void* in, void* out, int64_t count, Dtype t, ReduceOp op) = 0;
  // out = every process's `bytes` bytes of in, in rank order.
  virtual void all_gather(const void* in, void* out, int64_t bytes) = 0;
  // out = this rank's block of `count` elements of the sum over the processes
  // of in (size() blocks).
  virtual void sum_scatter(const void* in, void* out, int64_t count, Dtype t) = 0;
  virtual void send(const void* data, int64_t bytes, int dst) = 0;
  virtual void recv(void* data, int64_t bytes, int src) = 0;
  // The processes that pass the same color, ranked by key.
  virtual std::shared_ptr<Comm> split(int color, int key) = 0;
};

// Whether an MPI library can be loaded here.
bool mpi_available();
// The world of the MPI job this process belongs to: started by mpirun (or
// mpiexec), with an MPI library to load; nullptr otherwise. Initialises MPI
// once (it is finalised at exit).
std::shared_ptr<Comm> mpi_world();
// Ends every process of the MPI job with `code` (MPI_Abort) when this process
// joined one; returns otherwise. For a process about to fail: the others
// would wait for it in their next collective forever.
void abort_job(int code);

}  // namespace tessera::distributed::detail
