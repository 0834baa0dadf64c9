// The communication primitives on the CPU: host buffers to the group's
// communicator (Note [Communicators] in distributed/comm.h).
#include "tessera/backend/cpu/copy.h"
#include "tessera/ops/primitives/distributed.h"

namespace tessera {

using distributed::detail::ReduceOp;

const char* Distributed::name() const {
  switch (op_) {
    case Communication::all_sum: return "AllSum";
    case Communication::all_max: return "AllMax";
    case Communication::all_min: return "AllMin";
    case Communication::all_gather: return "AllGather";
    case Communication::sum_scatter: return "SumScatter";
    case Communication::send: return "Send";
    case Communication::recv: break;
  }
  return "Recv";
}

void Distributed::eval_cpu(const std::vector<array>& inputs, array& out) {
  auto& comm = *comm_;
  if (op_ == Communication::recv) {
    out.set_data(allocator::malloc(out.nbytes()));
    comm.recv(out.data<void>(), static_cast<int64_t>(out.nbytes()), peer_, nullptr);
    return;
  }
  const array in = cpu::ensure_row_contiguous(inputs[0]);
  if (op_ == Communication::send) {
    comm.send(in.data<void>(), static_cast<int64_t>(in.nbytes()), peer_, nullptr);
    out.copy_shared_buffer(in);
    return;
  }
  out.set_data(allocator::malloc(out.nbytes()));
  switch (op_) {
    case Communication::all_sum:
    case Communication::all_max:
    case Communication::all_min: {
      const ReduceOp r = op_ == Communication::all_sum   ? ReduceOp::sum
                         : op_ == Communication::all_max ? ReduceOp::max
                                                         : ReduceOp::min;
      comm.all_reduce(in.data<void>(), out.data<void>(), static_cast<int64_t>(in.size()),
                      in.dtype(), r, nullptr);
      return;
    }
    case Communication::all_gather:
      comm.all_gather(in.data<void>(), out.data<void>(), static_cast<int64_t>(in.nbytes()),
                      nullptr);
      return;
    case Communication::sum_scatter:
      comm.sum_scatter(in.data<void>(), out.data<void>(), static_cast<int64_t>(out.size()),
                       in.dtype(), nullptr);
      return;
    default:
      return;
  }
}

}  // namespace tessera
