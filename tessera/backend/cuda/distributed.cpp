// The communication primitives on the GPU: device buffers to the group's
// communicator, NCCL's, queued on the stream's CUDA stream (Note
// [Communicators] in distributed/comm.h). The ops put a group of host memory
// (MPI's) on the CPU stream, so a GPU stream always meets one of device memory.
#include <stdexcept>

#include "tessera/backend/cuda/copy.h"
#include "tessera/backend/cuda/device.h"
#include "tessera/backend/cuda/recording.h"
#include "tessera/ops/primitives/distributed.h"

namespace tessera {

using distributed::detail::ReduceOp;

void Distributed::eval_gpu(const std::vector<array>& inputs, array& out) {
  // Collectives are not recorded into graphs (Note [Recorded batches]).
  gpu::NoRecording no_recording;
  auto& comm = *comm_;
  if (!comm.device_memory()) {
    throw std::logic_error(std::string("[") + name() +
                           "] a group of host memory on a GPU stream (bug)");
  }
  const Stream& s = stream();
  if (op_ == Communication::recv) {
    void* o = gpu::allocate_output(out, s);
    comm.recv(o, static_cast<int64_t>(out.nbytes()), peer_, gpu::cuda_stream(s));
    return;
  }
  array in = inputs[0];
  if (!in.flags().row_contiguous) {
    in = array(inputs[0].shape(), inputs[0].dtype(), nullptr, {});
    gpu::copy_gpu_to_row_contiguous(inputs[0], in, s, name());
  }
  const void* x = gpu::device_ptr(in, s);
  if (op_ == Communication::send) {
    comm.send(x, static_cast<int64_t>(in.nbytes()), peer_, gpu::cuda_stream(s));
    out.copy_shared_buffer(in);
    return;
  }
  void* o = gpu::allocate_output(out, s);
  cudaStream_t cs = gpu::cuda_stream(s);
  switch (op_) {
    case Communication::all_sum:
    case Communication::all_max:
    case Communication::all_min: {
      const ReduceOp r = op_ == Communication::all_sum   ? ReduceOp::sum
                         : op_ == Communication::all_max ? ReduceOp::max
                                                         : ReduceOp::min;
      comm.all_reduce(x, o, static_cast<int64_t>(in.size()), in.dtype(), r, cs);
      return;
    }
    case Communication::all_gather:
      comm.all_gather(x, o, static_cast<int64_t>(in.nbytes()), cs);
      return;
    case Communication::sum_scatter:
      comm.sum_scatter(x, o, static_cast<int64_t>(out.size()), in.dtype(), cs);
      return;
    default:
      return;
  }
}

}  // namespace tessera
