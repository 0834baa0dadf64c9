// The communication primitives of distributed.h: one class, its operation a
// parameter. Evaluating one communicates with the other processes of its group.
#pragma once

#include <memory>

#include "tessera/core/primitive.h"
#include "tessera/distributed/comm.h"

namespace tessera {

enum class Communication { all_sum, all_max, all_min, all_gather, sum_scatter, send, recv };

class Distributed : public UnaryPrimitive {
 public:
  Distributed(Stream s, Communication op, std::shared_ptr<distributed::detail::Comm> comm,
              int peer = -1)
      : UnaryPrimitive(s), op_(op), comm_(std::move(comm)), peer_(peer) {}
  void eval_cpu(const std::vector<array>& inputs, array& out) override;
  TESSERA_EVAL_GPU
  const char* name() const override;
  TESSERA_TRANSFORM_RULES
  // Never merged with another: each communicates, in program order.
  bool is_equivalent(const Primitive&) const override { return false; }

  Communication op() const { return op_; }
  const std::shared_ptr<distributed::detail::Comm>& comm() const { return comm_; }
  int peer() const { return peer_; }

 private:
  Communication op_;
  std::shared_ptr<distributed::detail::Comm> comm_;
  int peer_;  // send's destination, recv's source
};

// The result of op over comm for input x: x's shape, with axis 0 times the
// group's size for all_gather and divided by it for sum_scatter. (recv, which
// has no input, is made by distributed::recv.)
inline array communicate(Stream s, Communication op,
                         std::shared_ptr<distributed::detail::Comm> comm, const array& x,
                         int peer = -1) {
  Shape shape = x.shape();
  if (op == Communication::all_gather) shape[0] *= comm->size();
  if (op == Communication::sum_scatter) shape[0] /= comm->size();
  return array(std::move(shape), x.dtype(),
               std::make_shared<Distributed>(s, op, std::move(comm), peer), {x});
}

}  // namespace tessera
