// The communicators behind distributed::Group (Note [Communicators]).
#pragma once

#include <cstdint>
#include <memory>

#include "tessera/core/dtype.h"

namespace tessera::distributed::detail {

enum class ReduceOp { sum, max, min };

// Note [Communicators]
// A group's processes talk through a Comm. There are two:
// - MPI's (mpi.cpp), over host memory: every call blocks until this process's
//   part is done, and `stream` is ignored (null).
// - NCCL's (nccl.cpp), over GPU memory (device_memory()): buffers are device
//   addresses, and each call is queued on `stream` (a cudaStream_t) and
//   returns at once, as a kernel launch does.
// Each library is loaded at run time (dlopen), so a build and a machine
// without it run as before, as a group of one. Calls are serialised per
// communicator, so the scheduler's threads may issue them. Buffers are
// contiguous. Collectives must be issued in the same order on every process
// of a group (MPI's and NCCL's rule): evaluating the same program's arrays in
// the same order does so.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool device_memory() const { return false; }
  // out = op over the processes of in, elementwise, count elements of dtype t
  // (a dtype the library has: the ops send others through wider ones).
  virtual void all_reduce(const void* in, void* out, int64_t count, Dtype t, ReduceOp op,
                          void* stream) = 0;
  // out = every process's `bytes` bytes of in, in rank order.
  virtual void all_gather(const void* in, void* out, int64_t bytes, void* stream) = 0;
  // out = this rank's block of `count` elements of the sum over the processes
  // of in (size() blocks).
  virtual void sum_scatter(const void* in, void* out, int64_t count, Dtype t, void* stream) = 0;
  virtual void send(const void* data, int64_t bytes, int dst, void* stream) = 0;
  virtual void recv(void* data, int64_t bytes, int src, void* stream) = 0;
  // The processes that pass the same color, ranked by key.
  virtual std::shared_ptr<Comm> split(int color, int key) = 0;
  // Whether the library has arithmetic on t (the ops convert the others).
  virtual bool reduces(Dtype t) const = 0;
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

// Whether NCCL's library (libnccl.so.2, or the one TESSERA_NCCL_LIBRARY
// names) loads here and a GPU is present.
bool nccl_available();
// The NCCL world: with MPI (mpi_world()) every process of that job, one GPU
// each, rank 0's id passed to the others over MPI; without, this process
// alone. Made once; nullptr when NCCL is not available (in a job: on any of
// its processes; every process of a job must call it, as a collective).
std::shared_ptr<Comm> nccl_world();

}  // namespace tessera::distributed::detail
